"""The grammar of one word of a fixed list in a box (:class:`BoxedWord`: the direction
games' ``\\boxed{(up|down|left|right)}``, FifteenPuzzle's case-sensitive, Game2048's
not), with its device reader (:class:`WordReader`)."""

from __future__ import annotations

import functools
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.grammar.base import Grammar, ParsedAction
from gemjax.text.grammar.reader import Feature, Reader, Write, echo_write


@functools.cache
def _non_ascii() -> str:
    """The non-ASCII characters of the Basic Multilingual Plane, as one string."""
    return "".join(map(chr, range(0x80, 0x10000)))


@functools.cache
def case_matches(words: tuple[str, ...], flags: int) -> tuple[str, ...]:
    """The non-ASCII BMP characters that match some letter of ``words`` under
    ``flags`` (``İ`` and ``ı`` for ``i`` under ``re.IGNORECASE``)."""
    letters = "".join(sorted(set("".join(words))))
    return tuple(re.findall("[" + re.escape(letters) + "]", _non_ascii(), flags))


def case_variant(words: tuple[str, ...], flags: int) -> str | None:
    """A response word the pattern ``(w_0|w_1|...)`` matches under ``flags`` but whose
    ``str.lower()`` is none of ``words`` (``rİght`` for ``right`` under
    ``re.IGNORECASE``), or None if there is none in the Basic Multilingual Plane."""
    if not flags & re.IGNORECASE:
        return None
    for word in words:
        for index, letter in enumerate(word):
            for char in case_matches(words, flags):
                if re.fullmatch(re.escape(letter), char, flags) and char.lower() != letter:
                    variant = word[:index] + char + word[index + 1 :]
                    if variant.lower() not in words:
                        return variant
    return None


class BoxedWord(Grammar):
    """``\\boxed{(w_0|w_1|...)}``: one of ``words``, exactly (FifteenPuzzle:
    ``\\boxed{Up}`` is a format error) or ignoring case.

    With ``case_sensitive=False`` the pattern has ``re.IGNORECASE`` and the word is read with
    ``str.lower()``, as GEM's Game2048 does: ``\\boxed{UP}`` is ``up``, and a match
    whose lower-case form is none of the words (Python's ``IGNORECASE`` lets ``İ``
    and ``ı`` match ``i``: ``\\boxed{rİght}`` reads ``ri̇ght``) is an *other* word,
    which GEM echoes. Case-sensitive, the match is one of the words.

    The kernel action is an int32 scalar: ``1 + i`` for ``words[i]``,
    ``len(words) + 1`` for an other word, ``0`` for a format error (no match).
    Echoes (ignoring case only; a case-sensitive match prints through a ``Choice``
    slot indexed by ``action - 1``): ``slot`` is the word lower-cased.
    """

    def __init__(
        self, words: tuple[str, ...], case_sensitive: bool = True, slot: str = "word"
    ) -> None:
        ignore_case = not case_sensitive
        if not words or len(set(words)) != len(words):
            raise ValueError(f"BoxedWord needs distinct words, got {words}")
        if any(not w or re.escape(w) != w for w in words):
            raise ValueError(f"words must be non-empty and free of regex syntax, got {words}")
        if ignore_case and any(w != w.lower() for w in words):
            raise ValueError(f"words read ignoring case must be lower case, got {words}")
        self.words = tuple(words)
        self.slot = slot
        self.ignore_case = ignore_case
        flags = re.IGNORECASE if ignore_case else 0
        self.pattern = re.compile(r"\\boxed\{(" + "|".join(words) + r")\}", flags)
        self.other_example = case_variant(self.words, flags)

    @property
    def other(self) -> int:
        """The action code of an other word."""
        return len(self.words) + 1

    @property
    def codes(self) -> int:
        """How many action codes there are (format error, the words, an other word
        where the flags allow one)."""
        return self.other + (self.other_example is not None)

    def parse(self, text: str) -> ParsedAction:
        group = self.last_groups(text)
        if group is None:
            return ParsedAction(0, False, {})
        word = group.lower() if self.ignore_case else group
        code = self.words.index(word) + 1 if word in self.words else self.other
        return ParsedAction(code, True, {self.slot: word} if self.ignore_case else {})

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{word}``; the other code gives :attr:`other_example`; any other code
        gives ``\\boxed{}`` (a format error)."""
        code = int(action)
        if 1 <= code <= len(self.words):
            return "\\boxed{" + self.words[code - 1] + "}"
        if code == self.other and self.other_example is not None:
            return "\\boxed{" + self.other_example + "}"
        return "\\boxed{}"

    def device_reader(self) -> Reader:
        return WordReader(self)


class WordReader(Reader):
    """The word of a :class:`BoxedWord` match: its characters lower-cased (when the
    grammar ignores case) into the echo, compared with each word as they come.

    A character whose ``str.lower()`` is two characters (``İ``: ``i`` and U+0307) is
    kept as itself in :attr:`Feature.mapped` and given a code in :attr:`alphabet`; the
    reader writes its two lower-case characters from a table.
    """

    reads_one_group = True

    def __init__(self, grammar: BoxedWord) -> None:
        self.ignore_case = grammar.ignore_case
        self.slots = self.scatter_slots = (grammar.slot,) if grammar.ignore_case else ()
        self.other = grammar.other
        width = max(len(w) for w in grammar.words) + 1
        table = np.full((len(grammar.words), width), -1, np.int32)
        for i, word in enumerate(grammar.words):
            table[i, : len(word)] = [ord(c) for c in word]
        self.table = table
        self.lengths = np.asarray([len(w) for w in grammar.words], np.int32)
        # Characters the pattern can match whose lower case is longer (``İ``).
        flags = grammar.pattern.flags
        self._expanding = "".join(
            c for c in case_matches(grammar.words, flags) if len(self.case_lower(c)) > 1
        )
        if any(len(self.case_lower(c)) > 2 for c in self._expanding):
            raise NotImplementedError("a character lower-cases to more than two")
        self._heads = np.asarray([0] + [ord(c.lower()[0]) for c in self._expanding], np.int32)
        self._tails = np.asarray([0] + [ord(c.lower()[1]) for c in self._expanding], np.int32)

    def case_lower(self, char: str) -> str:
        """``char`` as the grammar reads it (``str.lower()`` when it ignores case)."""
        return char.lower() if self.ignore_case else char

    def case_map(self, char: str) -> str:
        lower = self.case_lower(char)
        return lower if len(lower) == 1 else char

    @property
    def alphabet(self) -> str:
        return self._expanding

    def init(self) -> Any:
        """(int32 echo length, bool[W] the echo so far spells word ``w``)."""
        return jnp.int32(0), jnp.ones(self.table.shape[0], jnp.bool_)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        length, spelled = carry
        expands = feat.code > 0
        head = jnp.where(expands, jnp.asarray(self._heads)[feat.code], feat.mapped)
        tail = jnp.asarray(self._tails)[feat.code]
        table = jnp.asarray(self.table)
        width = table.shape[1]
        at = table[:, jnp.clip(length, 0, width - 1)]
        spelled = spelled & (length < width) & (at == head) & ~expands
        writes = (
            echo_write(jnp.int32(0), length, head, jnp.bool_(True)),
            echo_write(jnp.int32(0), length + 1, tail, expands),
        )
        return (length + 1 + expands.astype(jnp.int32), spelled), writes

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        length, spelled = carry
        known = spelled & (jnp.asarray(self.lengths) == length)
        code = jnp.where(jnp.any(known), jnp.argmax(known) + 1, self.other)
        action = jnp.where(found, code, 0).astype(jnp.int32)
        echoes = {slot: (rows[0], length) for slot in self.slots}
        return action, found, echoes
