"""The grammar of a word in a box read with a game's own letter regex
(:class:`BoxedLetters`: Wordle, Hangman), with its device reader
(:class:`LettersReader`) and the alphabet helpers."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.grammar.base import Grammar, ParsedAction
from gemjax.text.grammar.reader import (
    Feature,
    Reader,
    Write,
    decimal_text,
    echo_write,
    no_write,
)


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
        codes = [self._codes.get(ch, 0) for ch in guess]  # 0: no code
        if not guess or 0 in codes:
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

    def device_reader(self) -> Reader:
        return LettersReader(self)


class LettersReader(Reader):
    """A word in a box (:class:`BoxedLetters`), upper-cased, ``" "`` removed; the
    pattern's one group must be the whole content."""

    reads_one_group = True

    def __init__(self, grammar: BoxedLetters) -> None:
        self.size = grammar.size
        self._alphabet = grammar.alphabet
        self.scatter_slots = (grammar.slot,)
        self.slots = (grammar.slot, grammar.count_slot)

    def case_map(self, char: str) -> str:
        return char.upper()

    @property
    def alphabet(self) -> str:
        return self._alphabet

    def init(self) -> Any:
        """(int32 characters kept, int32[size] their codes, bool[] some had no code)."""
        return jnp.int32(0), jnp.zeros(self.size, jnp.int32), jnp.bool_(False)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        kept, codes, bad = carry
        keep = feat.ascii_space == 0
        codes = jnp.where(keep & (jnp.arange(self.size) == kept), feat.code, codes)
        write = echo_write(jnp.int32(0), kept, feat.mapped, keep)
        carry = (kept + keep.astype(jnp.int32), codes, bad | (keep & (feat.code == 0)))
        return carry, (write, no_write())

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        kept, codes, bad = carry
        ok = found & ~bad & (kept > 0)
        head = jnp.minimum(kept, self.size + 1)[None]
        action = jnp.where(ok, jnp.concatenate([head, codes]), 0).astype(jnp.int32)
        slot, count_slot = self.slots
        return action, ok, {slot: (rows[0], kept), count_slot: decimal_text(kept, rows.shape[1])}


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
