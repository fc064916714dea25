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
        if digits is not None and len(digits) < INT32_MAX_DIGITS and digits.isascii():
            value = int(digits)  # the common case: a short ASCII number
            return ParsedAction(
                value, True, {self.slot: digits if digits[0] != "0" else str(value)}
            )
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


def read_numbers(groups: tuple[str, ...]) -> list[str] | None:
    """Normalised ASCII text of each ``\\d+`` group, or None if ``int()`` refuses one."""
    numbers = [normalise_digits(g) for g in groups]
    return None if any(n is None for n in numbers) else numbers  # type: ignore[return-value]


class BoxedInts(Grammar):
    """``\\boxed{(\\d+)\\s(\\d+)...}``: ``len(int_slots)`` non-negative integers, each
    after **exactly one** whitespace character (Sudoku's ``\\boxed{1 2 5}``); GEM reads
    them with ``int()``.

    The kernel action is int32[1 + len(int_slots)]: ``[1, n_0, n_1, ...]`` with numbers
    clamped to ``2**31 - 1``, or all zeros for a format error (no match, or a number
    ``int()`` refuses). Echoes: each of ``int_slots`` its number as ``int()`` read it.
    """

    def __init__(self, int_slots: tuple[str, ...]) -> None:
        if not int_slots:
            raise ValueError("BoxedInts needs at least one number")
        self.int_slots = tuple(int_slots)
        self.pattern = re.compile(r"\\boxed{" + r"\s".join([r"(\d+)"] * len(int_slots)) + "}")

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(1 + len(self.int_slots), np.int32)

    def parse(self, text: str) -> ParsedAction:
        groups = self.last_groups(text)
        if groups is None:
            return ParsedAction(self.format_error(), False, {})
        numbers = read_numbers(groups if isinstance(groups, tuple) else (groups,))
        if numbers is None:
            return ParsedAction(self.format_error(), False, {})
        action = np.asarray([1, *(clamp_decimal(n) for n in numbers)], np.int32)
        return ParsedAction(action, True, dict(zip(self.int_slots, numbers, strict=True)))

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{n_0 n_1 ...}`` (negative numbers written as 0); a format-error
        action (first entry <= 0) gives ``\\boxed{}``."""
        action = np.asarray(action)
        if int(action[0]) <= 0:
            return "\\boxed{}"
        return "\\boxed{" + " ".join(str(max(int(v), 0)) for v in action[1:]) + "}"


class BoxedCommand(Grammar):
    """``\\boxed{([a-zA-Z]+)\\s(\\d+)\\s(\\d+)...}``: an ASCII command word and
    ``len(int_slots)`` non-negative integers, each after **exactly one** whitespace
    character (Minesweeper's ``\\boxed{reveal 3 2}``). GEM lower-cases the word with
    ``str.lower()`` (so ``REVEAL`` is ``reveal``) and reads the numbers with ``int()``.

    The kernel action is int32[1 + len(int_slots)]: ``[command, n_0, n_1, ...]`` where
    ``command`` is ``1 + i`` for ``commands[i]``, ``len(commands) + 1`` for any other
    word, and ``0`` for a format error (no match, or a number ``int()`` refuses,
    which GEM's ``except`` turns into a format error); numbers are clamped to
    ``2**31 - 1``.

    Echoes: ``word_slot`` is the lower-cased word, each of ``int_slots`` its number
    as ``int()`` read it (normalised ASCII digits).
    """

    def __init__(
        self, commands: tuple[str, ...], word_slot: str, int_slots: tuple[str, ...]
    ) -> None:
        if not commands or not int_slots:
            raise ValueError("BoxedCommand needs at least one command and one number")
        if any(not (c.isascii() and c.isalpha() and c.islower()) for c in commands):
            raise ValueError(f"commands must be lower-case ASCII words, got {commands}")
        self.commands = tuple(commands)
        self.word_slot = word_slot
        self.int_slots = tuple(int_slots)
        self.pattern = re.compile(r"\\boxed{([a-zA-Z]+)" + r"\s(\d+)" * len(int_slots) + "}")

    @property
    def unknown(self) -> int:
        """The command code of a word that is none of :attr:`commands`."""
        return len(self.commands) + 1

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(1 + len(self.int_slots), np.int32)

    def parse(self, text: str) -> ParsedAction:
        groups = self.last_groups(text)
        if groups is None:
            return ParsedAction(self.format_error(), False, {})
        word = groups[0].lower()
        numbers = read_numbers(groups[1:])
        if numbers is None:
            return ParsedAction(self.format_error(), False, {})
        code = self.commands.index(word) + 1 if word in self.commands else self.unknown
        action = np.asarray([code, *(clamp_decimal(n) for n in numbers)], np.int32)  # type: ignore[arg-type]
        echoes = {self.word_slot: word, **dict(zip(self.int_slots, numbers, strict=True))}
        return ParsedAction(action, True, echoes)  # type: ignore[arg-type]

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{word n_0 n_1 ...}``; an unknown command is written ``unknown`` and
        a format-error code gives ``\\boxed{}``; negative numbers are written as 0."""
        action = np.asarray(action)
        code = int(action[0])
        if code <= 0:
            return "\\boxed{}"
        word = self.commands[code - 1] if code <= len(self.commands) else "unknown"
        numbers = " ".join(str(max(int(v), 0)) for v in action[1:])
        return "\\boxed{" + word + " " + numbers + "}"


class BoxedLetters(Grammar):
    """A word in a box, read with a game's own letter regex (Wordle, Hangman).

    GEM takes the last match of ``pattern``, upper-cases its first group with
    ``str.upper()`` and removes every ``" "`` (only the ASCII space: a tab or a
    no-break space between letter groups stays part of the guess). ``alphabet`` lists
    every character that can remain, so each gets a code: ``1 + alphabet.index(ch)``.
    The flags matter: ``[a-zA-Z]`` with ``re.IGNORECASE`` also matches ``ı``, ``ſ``
    (upper-cased to ``I``, ``S``), ``İ`` and the Kelvin sign ``K`` (which stay
    themselves), and ``\\s`` matches Unicode whitespace. The alphabet helpers
    :data:`WHITESPACE_BUT_SPACE` and :data:`IGNORECASE_EXTRA_LETTERS` hold those
    sets (tests check them against the whole of Unicode).

    The kernel action is int32[size + 1]: ``[count, c_0, ..., c_{size-1}]`` where
    ``count`` is the number of characters clamped to ``size + 1`` (longer guesses can
    only be of a wrong length), then the codes of the first ``size`` characters and
    zeros. ``count == 0`` is a format error (no match, or nothing left after removing
    spaces).

    Echoes: ``slot`` is the guess as GEM prints it (every character) and
    ``count_slot`` its exact length.
    """

    def __init__(
        self,
        pattern: str,
        alphabet: str,
        size: int,
        slot: str,
        count_slot: str,
        flags: int = 0,
    ) -> None:
        if size < 1:
            raise ValueError(f"BoxedLetters needs size >= 1, got {size}")
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("the alphabet has repeated characters")
        self.pattern = re.compile(pattern, flags)
        if self.pattern.groups != 1:
            raise ValueError(f"pattern {pattern!r} must have exactly one group")
        self.alphabet = alphabet
        self.size = size
        self.slot = slot
        self.count_slot = count_slot
        self._codes = {ch: i + 1 for i, ch in enumerate(alphabet)}

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(self.size + 1, np.int32)

    def parse(self, text: str) -> ParsedAction:
        group = self.last_groups(text)
        guess = group.upper().replace(" ", "") if group is not None else ""
        codes = [self._codes.get(ch) for ch in guess]
        if not guess or None in codes:
            # No match; or a character outside the alphabet, which the alphabet's
            # construction rules out (kept total rather than raising).
            return ParsedAction(self.format_error(), False, {})
        action = np.zeros(self.size + 1, np.int32)
        action[0] = min(len(codes), self.size + 1)
        head = codes[: self.size]
        action[1 : 1 + len(head)] = head
        return ParsedAction(action, True, {self.slot: guess, self.count_slot: str(len(guess))})

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{...}`` with the action's characters; a count of ``size + 1`` adds
        an ``A`` (so the text parses back to the same action); a count <= 0 gives
        ``\\boxed{}``. Codes outside the alphabet are written ``A``."""
        action = np.asarray(action)
        count = min(int(action[0]), self.size + 1)
        letters = [
            self.alphabet[int(c) - 1] if 1 <= int(c) <= len(self.alphabet) else "A"
            for c in action[1 : 1 + min(count, self.size)]
        ]
        letters += ["A"] * (count - self.size)
        return "\\boxed{" + "".join(letters) + "}"


# Characters ``\s`` matches in a ``str`` pattern, the ASCII space excepted (GEM removes
# only ``" "`` from a Wordle guess; these stay in it).
WHITESPACE_BUT_SPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# What ``[a-zA-Z]`` with ``re.IGNORECASE`` matches beyond ASCII letters, upper-cased
# and not ASCII: ``İ`` (U+0130) and the Kelvin sign (U+212A). (``ı`` and ``ſ`` also
# match but upper-case to ``I`` and ``S``.)
IGNORECASE_EXTRA_LETTERS = "\u0130\u212a"
