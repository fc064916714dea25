"""The grammar of one word from a fixed list in a box (:class:`BoxedWord`: the
direction games' ``\\boxed{(up|down|left|right)}``), with its device reader
(:class:`WordReader`)."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.grammar.base import Grammar, ParsedAction
from gemjax.text.grammar.reader import Feature, Reader, Write, no_write


class BoxedWord(Grammar):
    """``\\boxed{(w_0|w_1|...)}``: one of a fixed tuple of ``words``, matched
    case-sensitively (FifteenPuzzle: ``\\boxed{Up}`` is a format error) or, with
    ``case_sensitive=False``, under ``re.IGNORECASE`` (so with Python's Unicode case
    rules: ``ı`` and ``İ`` match ``i``).

    The kernel action is an int32 scalar: ``1 + i`` for ``words[i]`` (the first word
    the matched text spells, as the regex's alternation picks it), ``0`` for a format
    error (no match). There are no echoes: a game prints the word through a
    ``Choice`` slot indexed by ``action - 1``.
    """

    def __init__(self, words: tuple[str, ...], case_sensitive: bool = True) -> None:
        if not words or len(set(words)) != len(words):
            raise ValueError(f"BoxedWord needs distinct words, got {words}")
        if any(not w or "\\" in w or "}" in w for w in words):
            raise ValueError(f"words must be non-empty, without '\\' or '}}', got {words}")
        self.words = tuple(words)
        self.case_sensitive = case_sensitive
        self.flags = 0 if case_sensitive else re.IGNORECASE
        alternatives = "|".join(re.escape(w) for w in self.words)
        self.pattern = re.compile(r"\\boxed{(" + alternatives + ")}", self.flags)
        self._index = {w: i for i, w in enumerate(self.words)}

    def parse(self, text: str) -> ParsedAction:
        group = self.last_groups(text)
        if group is None:
            return ParsedAction(0, False, {})
        index = self._index.get(group)
        if index is None:  # case-insensitive: the first word the text spells
            index = next(
                i for i, w in enumerate(self.words) if re.fullmatch(re.escape(w), group, self.flags)
            )
        return ParsedAction(index + 1, True, {})

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{word}``; an action outside ``1..len(words)`` gives ``\\boxed{}``
        (a format error)."""
        code = int(action)
        return "\\boxed{" + (self.words[code - 1] if 1 <= code <= len(self.words) else "") + "}"

    def device_reader(self) -> Reader:
        return WordReader(self)


class WordReader(Reader):
    """Which word of a :class:`BoxedWord` the content spells: each character is
    compared, after the case map, with every word's character at its position.

    The case map sends a character to the first of the words' letters it matches
    under the grammar's flags (itself when case-sensitive), so comparing mapped
    characters is the regex's own test; the constructor checks that this holds for
    every character any letter matches.
    """

    reads_one_group = True

    def __init__(self, grammar: BoxedWord) -> None:
        self.flags = grammar.flags
        self._letters = "".join(sorted(set("".join(grammar.words))))
        if self.flags:
            self._check_case_map()
        mapped = ["".join(self.case_map(ch) for ch in w) for w in grammar.words]
        width = max(len(w) for w in mapped)
        codes = {ch: i + 1 for i, ch in enumerate(self.alphabet)}
        table = np.zeros((len(mapped), width), np.int32)
        for row, word in enumerate(mapped):
            table[row, : len(word)] = [codes[ch] for ch in word]
        self.table = table
        self.lengths = np.asarray([len(w) for w in mapped], np.int32)

    def case_map(self, char: str) -> str:
        if not self.flags:
            return char
        for letter in self._letters:
            if re.fullmatch(re.escape(letter), char, self.flags):
                return letter
        return char

    @property
    def alphabet(self) -> str:
        return "".join(dict.fromkeys(self.case_map(ch) for ch in self._letters))

    def _check_case_map(self) -> None:
        """Raise unless, for every character a letter matches, "matches letter L"
        equals "maps to L's image" (case classes of the words' letters)."""
        every = "".join(map(chr, range(0x110000)))
        for letter in self._letters:
            members = {m.group() for m in re.finditer(re.escape(letter), every, self.flags)}
            for other in self._letters:
                for ch in members:
                    if bool(re.fullmatch(re.escape(other), ch, self.flags)) != (
                        self.case_map(ch) == self.case_map(other)
                    ):
                        raise NotImplementedError(
                            f"{ch!r} matches {letter!r} but case classes cannot tell it "
                            f"from {other!r}"
                        )

    def init(self) -> Any:
        """(int32 characters read, bool[W] the content so far is a prefix of word w)."""
        return jnp.int32(0), jnp.ones(self.table.shape[0], jnp.bool_)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        read, prefix = carry
        table = jnp.asarray(self.table)
        expected = table[:, jnp.minimum(read, table.shape[1] - 1)]
        prefix = prefix & (read < table.shape[1]) & (feat.code > 0) & (expected == feat.code)
        return (read + 1, prefix), (no_write(), no_write())

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        read, prefix = carry
        known = prefix & (jnp.asarray(self.lengths) == read)
        ok = found & jnp.any(known)
        action = jnp.where(ok, jnp.argmax(known) + 1, 0).astype(jnp.int32)
        return action, ok, {}
