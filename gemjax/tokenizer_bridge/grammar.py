"""Host action parsers with GEM's exact regex semantics.

Every GEM game parses the LLM's whole response with one regex, ``finditer``, and
keeps the **last well-formed match** (not the last ``\\boxed``). A grammar here
applies the same regex and turns the match into the kernel's action plus the
"echo" text that some messages repeat (GEM prints a guess as ``int()`` read it).

Python's ``\\d`` matches every Unicode decimal digit (Arabic-Indic, fullwidth, ...)
and ``int()`` reads them, so ``\\boxed{٧}`` is the guess 7. Numbers too large for
int32 are clamped to ``2**31 - 1``: still out of every game's range, never wrapped.
``int()`` refuses strings longer than ``sys.get_int_max_str_digits()`` (4300 by
default), which GEM's ``except Exception`` turns into a format error; so do we.
"""

from __future__ import annotations

import abc
import re
import sys
import unicodedata
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

INT32_MAX = 2**31 - 1
INT32_MAX_DIGITS = len(str(INT32_MAX))


class ParsedAction(NamedTuple):
    """A response read by a grammar.

    Attributes:
        action: the kernel action (an int for scalar actions, else an int32 array
            of the game's action shape); format errors are encoded as the game's
            format-error action.
        ok: a well-formed action was found (it may still be illegal in the game).
        echoes: normalised text of the fields that messages repeat, by slot name.
    """

    action: int | np.ndarray
    ok: bool
    echoes: Mapping[str, str]


class Grammar(abc.ABC):
    """Parses a response string into a :class:`ParsedAction`; never raises on text."""

    pattern: re.Pattern[str]

    def last_groups(self, text: str) -> Any:
        """The groups of the last match of :attr:`pattern` in ``text`` (GEM's rule), as
        ``re.findall`` gives them (a str for one group, a tuple for several), or None."""
        if not isinstance(text, str):
            raise TypeError(f"an action must be a str, got {type(text).__name__}")
        matches = self.pattern.findall(text)
        return matches[-1] if matches else None

    @abc.abstractmethod
    def parse(self, text: str) -> ParsedAction:
        """Read ``text`` as GEM would."""

    @abc.abstractmethod
    def render(self, action: np.ndarray) -> str:
        """A response that parses back to ``action`` (for random play and demos)."""


def normalise_digits(digits: str) -> str | None:
    """ASCII decimal text of ``int(digits)``, or None where ``int()`` would refuse it.

    ``digits`` is a ``\\d+`` match (any Unicode decimal digits). Leading zeros are
    dropped as ``int()`` does; strings over Python's int-conversion digit limit are
    refused, as ``int()`` refuses them.
    """
    limit = sys.get_int_max_str_digits()
    if limit and len(digits) > limit:
        return None
    if not digits.isascii():
        digits = "".join(str(unicodedata.decimal(ch)) for ch in digits)
    return digits.lstrip("0") or "0"


def clamp_decimal(text: str) -> int:
    """``min(int(text), 2**31 - 1)`` for non-negative ASCII ``text``, without big ints."""
    if len(text) > INT32_MAX_DIGITS:
        return INT32_MAX
    return min(int(text), INT32_MAX)


class BoxedInt(Grammar):
    """``\\boxed{(\\d+)}``: a non-negative integer (GuessTheNumber).

    The kernel action is an int32 scalar: the number, clamped to ``2**31 - 1``;
    ``0`` when there is no match (GEM treats a missing number and ``0`` alike).
    """

    pattern = re.compile(r"\\boxed{(\d+)}")

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def parse(self, text: str) -> ParsedAction:
        digits = self.last_groups(text)
        value_text = normalise_digits(digits) if digits is not None else None
        if value_text is None:
            return ParsedAction(0, False, {})
        return ParsedAction(clamp_decimal(value_text), True, {self.slot: value_text})

    def render(self, action: np.ndarray) -> str:
        return "\\boxed{" + str(int(action)) + "}"


class BoxedIntList(Grammar):
    """``\\boxed{(\\d+(?:\\s+\\d+)*)}``: whitespace-separated non-negative integers
    (Mastermind). GEM splits the match with ``str.split()`` and reads each entry with
    ``int()``; ``\\s`` and ``split()`` both mean Unicode whitespace.

    The kernel action is int32[size + 1]: ``[count, e_0, ..., e_{size-1}]`` where
    ``count`` is the number of entries clamped to ``size + 1`` (more entries than
    ``size`` can only be a wrong length), the first ``size`` entries clamped to
    ``2**31 - 1`` and zeros after the last entry. ``count == 0`` is a format error
    (no match, or an entry ``int()`` refuses).

    Echoes: ``slot`` is the list as GEM prints it (``[1, 2, 3]``, every entry in full)
    and ``count_slot`` the exact number of entries.
    """

    pattern = re.compile(r"\\boxed{(\d+(?:\s+\d+)*)}")

    def __init__(self, slot: str, size: int, count_slot: str) -> None:
        if size < 1:
            raise ValueError(f"BoxedIntList needs size >= 1, got {size}")
        self.slot = slot
        self.size = size
        self.count_slot = count_slot

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(self.size + 1, np.int32)

    def parse(self, text: str) -> ParsedAction:
        group = self.last_groups(text)
        if group is None:
            return ParsedAction(self.format_error(), False, {})
        entries = []
        for token in group.split():
            value_text = normalise_digits(token)
            if value_text is None:
                return ParsedAction(self.format_error(), False, {})
            entries.append(value_text)
        action = np.zeros(self.size + 1, np.int32)
        action[0] = min(len(entries), self.size + 1)
        head = entries[: self.size]
        action[1 : 1 + len(head)] = [clamp_decimal(t) for t in head]
        echoes = {self.slot: "[" + ", ".join(entries) + "]", self.count_slot: str(len(entries))}
        return ParsedAction(action, True, echoes)

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{e_0 e_1 ...}``; a count of ``size + 1`` adds an entry ``0`` (so the
        text parses back to the same action); a count <= 0 gives ``\\boxed{}``."""
        action = np.asarray(action)
        count = min(int(action[0]), self.size + 1)
        entries = [str(int(v)) for v in action[1 : 1 + min(count, self.size)]]
        entries += ["0"] * (count - self.size)
        return "\\boxed{" + " ".join(entries) + "}"
