"""The grammar protocol: a host parser with GEM's exact regex semantics, and its
device reader.

Every GEM game parses the LLM's whole response with one regex, ``finditer``, and
keeps the **last well-formed match** (not the last ``\\boxed``). A grammar here
applies the same regex and turns the match into the kernel's action plus the
"echo" text that some messages repeat (GEM prints a guess as ``int()`` read it).

Python's ``\\d`` matches every Unicode decimal digit (Arabic-Indic, fullwidth, ...)
and ``int()`` reads them, so ``\\boxed{٧}`` is the guess 7. Numbers too large for
int32 are clamped to ``2**31 - 1``: still out of every game's range, never wrapped.
``int()`` refuses strings longer than ``sys.get_int_max_str_digits()`` (4300 by
default), which GEM's ``except Exception`` turns into a format error; so do we.

Every grammar also names its device reader (:meth:`Grammar.device_reader`, a
:class:`~gemjax.text.grammar.reader.Reader`): how the token bridge's parser folds the
content of a match into the same action and echoes on device. A grammar class
without one cannot be instantiated, so a game whose grammar lacks it fails at
``make``.
"""

from __future__ import annotations

import abc
import re
import sys
import unicodedata
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from gemjax.text.grammar.reader import INT32_MAX, Reader

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

    @abc.abstractmethod
    def device_reader(self) -> Reader:
        """The reader the token bridge's device parser runs over a match's content
        (it must give what :meth:`parse` gives, on every text)."""


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
