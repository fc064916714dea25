"""The grammar of a few one-character choices in a box (:class:`BoxedChoices`: Tower
of Hanoi's ``\\boxed{A C}``), with its device reader (:class:`ChoicesReader`)."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.grammar.base import Grammar, ParsedAction
from gemjax.text.grammar.reader import Feature, Reader, Write, no_write


class BoxedChoices(Grammar):
    """A box holding one character per group of ``pattern``, each upper-cased with
    ``str.upper()`` and read as one of ``alphabet`` (Tower of Hanoi's
    ``\\boxed{([ABCabc])\\s*,?\\s*([ABCabc])}``: ``\\boxed{a,c}`` is ``A``, ``C``).

    The pattern's groups must each match one character that upper-cases into
    ``alphabet``, and the characters between them (separators) none that does: the
    device reader takes the content's alphabet characters, in order, as the groups.

    The kernel action is int32[groups]: per group its code ``1 + alphabet.index(ch)``,
    or all zeros for a format error (no match). No echoes: the messages print the
    choices from their codes.
    """

    def __init__(self, pattern: str, alphabet: str, separator: str = " ") -> None:
        if not alphabet or len(set(alphabet)) != len(alphabet) or alphabet != alphabet.upper():
            raise ValueError(f"the alphabet must be distinct upper-case characters: {alphabet!r}")
        self.pattern = re.compile(pattern)
        self.size = self.pattern.groups
        if self.size < 1:
            raise ValueError(f"pattern {pattern!r} has no group")
        self.alphabet = alphabet
        self.separator = separator
        self._codes = {ch: i + 1 for i, ch in enumerate(alphabet)}

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(self.size, np.int32)

    def parse(self, text: str) -> ParsedAction:
        groups = self.last_groups(text)
        if groups is None:
            return ParsedAction(self.format_error(), False, {})
        chosen = (groups,) if isinstance(groups, str) else groups
        codes = [self._codes.get(ch.upper(), 0) for ch in chosen]
        if 0 in codes:  # a group outside the alphabet: ruled out by the declaration
            return ParsedAction(self.format_error(), False, {})
        return ParsedAction(np.asarray(codes, np.int32), True, {})

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{`` + the choices joined by ``separator`` + ``}``; an action with a
        code outside ``1..len(alphabet)`` gives ``\\boxed{}`` (a format error)."""
        codes = [int(c) for c in np.asarray(action).reshape(-1)]
        if not all(1 <= c <= len(self.alphabet) for c in codes):
            return "\\boxed{}"
        return "\\boxed{" + self.separator.join(self.alphabet[c - 1] for c in codes) + "}"

    def device_reader(self) -> Reader:
        return ChoicesReader(self)


class ChoicesReader(Reader):
    """The choices of a :class:`BoxedChoices` match: its content characters with a code
    in the alphabet (after ``str.upper``), in order."""

    def __init__(self, grammar: BoxedChoices) -> None:
        self.size = grammar.size
        self._alphabet = grammar.alphabet

    def case_map(self, char: str) -> str:
        return char.upper()

    @property
    def alphabet(self) -> str:
        return self._alphabet

    def init(self) -> Any:
        """(int32[] choices read, int32[size] their codes)."""
        return jnp.int32(0), jnp.zeros(self.size, jnp.int32)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        count, codes = carry
        chosen = feat.code > 0
        codes = jnp.where(chosen & (jnp.arange(self.size) == count), feat.code, codes)
        return (count + chosen.astype(jnp.int32), codes), (no_write(), no_write())

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        count, codes = carry
        ok = found & (count == self.size)
        return jnp.where(ok, codes, 0).astype(jnp.int32), ok, {}
