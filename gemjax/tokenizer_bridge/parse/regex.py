"""The regex-to-automaton compiler of the device parser (host, numpy).

Every grammar's pattern is ``opener + content + closer`` (``\\boxed{``, a regular
content language, ``}``); :func:`split_pattern` splits it. Unicode is partitioned
into *symbols* (:func:`build_symbols`): code points that every part of the grammar
and its reader treat alike share one; Python's ``re`` decides membership (each
character class of the pattern is run over all of Unicode, so ``\\d``, ``\\s`` and
``re.IGNORECASE`` are exactly Python's). The content regex becomes a Thompson NFA,
then a DFA over symbols; one transition table (:func:`build_tracker`) tracks the
opener, the content and the closer at once. Because no content character can start
an opener or be the closer (checked here), ``findall``'s matches are exactly the
openers whose content up to the next closer is in the language.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, NamedTuple

import numpy as np

from gemjax.text.grammar import Feature, Reader
from gemjax.tokenizer_bridge.parse.utf8 import REPLACEMENT

UNICODE_SIZE = 0x110000
#: Code points per page of the two-level symbol table.
BLOCK = 256
# Bits of a packed tracker transition: next state in the low 16 bits.
STATE_MASK = 0xFFFF
OPENED, CONSUMED, CLOSED = 1 << 16, 1 << 17, 1 << 18


@functools.cache
def _all_code_points() -> str:
    """Every code point, in order, as one string (for running regexes over Unicode)."""
    return "".join(map(chr, range(UNICODE_SIZE)))


@functools.cache
def _members(atom_pattern: str, flags: int) -> np.ndarray:
    """int64[n] sorted code points that the one-character regex ``atom_pattern``
    matches under ``flags``: Python's own answer over all of Unicode."""
    compiled = re.compile(atom_pattern, flags)
    return np.fromiter((m.start() for m in compiled.finditer(_all_code_points())), np.int64)


_CATEGORY_TEXT = {
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}


def _char_text(code: int) -> str:
    return f"\\U{code:08x}"


def _atom_text(op: Any, av: Any) -> str:
    """Regex text of one single-character item of a parsed pattern."""
    if op is sre.LITERAL:
        return _char_text(av)
    if op is sre.NOT_LITERAL:
        return "[^" + _char_text(av) + "]"
    if op is sre.ANY:
        return "."
    if op is sre.IN:
        parts: list[str] = []
        for item_op, item_av in av:
            if item_op is sre.NEGATE:
                parts.insert(0, "^")
            elif item_op is sre.LITERAL:
                parts.append(_char_text(item_av))
            elif item_op is sre.RANGE:
                parts.append(_char_text(item_av[0]) + "-" + _char_text(item_av[1]))
            elif item_op is sre.CATEGORY and item_av in _CATEGORY_TEXT:
                parts.append(_CATEGORY_TEXT[item_av])
            else:
                raise NotImplementedError(f"character set item {item_op} {item_av}")
        return "[" + "".join(parts) + "]"
    raise NotImplementedError(f"no single-character item {op}")


_ATOM_OPS = (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN)


class _Nfa:
    """A Thompson NFA over atom indices (epsilon moves and one-atom edges)."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int]]] = []
        self.atoms: list[str] = []

    def state(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def atom(self, text: str) -> int:
        if text not in self.atoms:
            self.atoms.append(text)
        return self.atoms.index(text)

    def sequence(self, items: Sequence[tuple[Any, Any]]) -> tuple[int, int]:
        """States ``(start, end)`` of a parsed (sub)pattern."""
        start = end = self.state()
        for op, av in items:
            first, last = self.item(op, av)
            self.eps[end].append(first)
            end = last
        return start, end

    def item(self, op: Any, av: Any) -> tuple[int, int]:
        if op in _ATOM_OPS:
            start, end = self.state(), self.state()
            self.edges[start].append((self.atom(_atom_text(op, av)), end))
            return start, end
        if op is sre.SUBPATTERN:
            _, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise NotImplementedError("inline flags inside a group")
            return self.sequence(sub)
        if op is sre.BRANCH:
            start, end = self.state(), self.state()
            for alternative in av[1]:
                first, last = self.sequence(alternative)
                self.eps[start].append(first)
                self.eps[last].append(end)
            return start, end
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            return self.repeat(*av)
        raise NotImplementedError(f"pattern construct {op} is not supported on device")

    def repeat(self, low: int, high: Any, sub: Sequence[tuple[Any, Any]]) -> tuple[int, int]:
        start = end = self.state()
        for _ in range(low):
            first, last = self.sequence(sub)
            self.eps[end].append(first)
            end = last
        if high is sre.MAXREPEAT:
            loop = self.state()
            self.eps[end].append(loop)
            first, last = self.sequence(sub)
            self.eps[loop].append(first)
            self.eps[last].append(loop)
            return start, loop
        exit_ = self.state()
        for _ in range(high - low):
            first, last = self.sequence(sub)
            self.eps[end] += [first, exit_]
            end = last
        self.eps[end].append(exit_)
        return start, exit_

    def closure(self, states: set[int]) -> frozenset[int]:
        todo, seen = list(states), set(states)
        while todo:
            for nxt in self.eps[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return frozenset(seen)


class BoxPattern(NamedTuple):
    """A grammar's regex split as ``opener + content + closer``.

    Attributes:
        opener: one regex atom per opener character (``\\``, ``b``, ... ``{``).
        closer: the closer's atom (``}``).
        content: the parsed content items (``re._parser`` form).
        flags: the pattern's flags (``re.IGNORECASE`` ...).
    """

    opener: tuple[str, ...]
    closer: str
    content: list[tuple[Any, Any]]
    flags: int


def split_pattern(pattern: re.Pattern[str]) -> BoxPattern:
    """Split ``pattern`` into opener literals, content and closing literal.

    Raises:
        NotImplementedError: the pattern does not have that shape.
    """
    items = list(sre_parse.parse(pattern.pattern, pattern.flags))
    count = 0
    while count < len(items) and items[count][0] is sre.LITERAL:
        count += 1
    if count == 0 or count == len(items) or items[-1][0] is not sre.LITERAL:
        raise NotImplementedError(f"{pattern.pattern!r} is not literals + content + literal")
    opener = tuple(_char_text(av) for _, av in items[:count])
    return BoxPattern(opener, _char_text(items[-1][1]), items[count:-1], pattern.flags)


class Tracker(NamedTuple):
    """The match-tracking automaton over symbols (host tables).

    Attributes:
        table: int32[states * symbols] packed transitions: the next state, plus the
            bits :data:`OPENED` (the opener just completed), :data:`CONSUMED` (the
            character is content of a live candidate) and :data:`CLOSED` (a
            well-formed match ends at this character).
        symbols: number of symbols.
    """

    table: np.ndarray
    symbols: int


def _content_dfa(
    content: list[tuple[Any, Any]], symbol_atoms: list[int]
) -> tuple[list[list[int]], list[bool]]:
    """Subset construction of the content regex over symbols.

    Args:
        content: parsed content items.
        symbol_atoms: per symbol, the bit mask of the content atoms it matches
            (atom ``i`` is ``nfa.atoms[i]`` of a fresh NFA over ``content``).

    Returns:
        ``(delta, accepting)``: ``delta[d][s]`` the next DFA state (-1: dead) from
        state ``d`` (0 is the start) on symbol ``s``; ``accepting[d]``.
    """
    nfa = _Nfa()
    start, end = nfa.sequence(content)
    states = [nfa.closure({start})]
    index = {states[0]: 0}
    delta: list[list[int]] = []
    for current in states:  # grows while iterating
        row = []
        for mask in symbol_atoms:
            moved = {t for s in current for atom, t in nfa.edges[s] if mask >> atom & 1}
            if not moved:
                row.append(-1)
                continue
            target = nfa.closure(moved)
            if target not in index:
                index[target] = len(states)
                states.append(target)
            row.append(index[target])
        delta.append(row)
    return delta, [end in s for s in states]


def content_atoms(content: list[tuple[Any, Any]]) -> list[str]:
    """The distinct single-character atoms of the content regex, in NFA order."""
    nfa = _Nfa()
    nfa.sequence(content)
    return nfa.atoms


def build_tracker(
    opener_bits: np.ndarray,
    closer: np.ndarray,
    symbol_atoms: list[int],
    content: list[tuple[Any, Any]],
) -> Tracker:
    """The tracking automaton: idle (0), opener progress ``1..P-1``, then the content
    DFA states from ``P`` (``P`` = opener length).

    Args:
        opener_bits: int64[symbols] bit ``k``: the symbol matches opener character ``k``.
        closer: bool[symbols] the symbol matches the closer.
        symbol_atoms: per symbol, its content-atom bit mask.
        content: parsed content items.
    """
    delta, accepting = _content_dfa(content, symbol_atoms)
    size = int(opener_bits.max()).bit_length() if len(opener_bits) else 0
    size = max(size, 1)
    n_symbols = len(symbol_atoms)
    n_states = size + len(delta)
    table = np.zeros((n_states, n_symbols), np.int64)
    for state in range(n_states):
        for sym in range(n_symbols):
            bits = int(opener_bits[sym])
            nxt, flags = 0, 0
            if bits & 1:
                nxt = 1
            elif 1 <= state < size and bits >> state & 1:
                nxt = state + 1
            elif state >= size:
                d_next = delta[state - size][sym]
                if d_next >= 0:
                    nxt, flags = size + d_next, CONSUMED
                elif closer[sym] and accepting[state - size]:
                    flags = CLOSED
            if nxt == size:  # the last opener character: a candidate starts
                flags |= OPENED
            table[state, sym] = nxt | flags
    return Tracker(table.reshape(-1).astype(np.int32), n_symbols)


class SymbolTables(NamedTuple):
    """Per-code-point symbols and what each symbol means (host arrays).

    Attributes:
        block_index: int32[0x1100] block of each 256-code-point page.
        blocks: int32[blocks * 256] symbol of each code point of each distinct page.
        features: int32[symbols, 5] :class:`Feature` columns per symbol.
        opener_bits: int64[symbols] bit ``k``: matches opener character ``k``.
        closer: bool[symbols] matches the closer.
        atoms: per symbol, the bit mask of the content atoms it matches.
    """

    block_index: np.ndarray
    blocks: np.ndarray
    features: np.ndarray
    opener_bits: np.ndarray
    closer: np.ndarray
    atoms: list[int]


def _check_shape(opener: list[np.ndarray], closer: np.ndarray, alphabet: np.ndarray) -> None:
    """The conditions under which ``findall``'s matches are the openers whose content
    up to the next closer is well formed (no match can start inside another)."""
    later = np.concatenate([*opener[1:], closer, alphabet])
    if np.intersect1d(closer, alphabet).size or np.intersect1d(opener[0], later).size:
        raise NotImplementedError("the closer or the opener's first character can occur inside")
    for members in (*opener, closer, alphabet):
        if REPLACEMENT in members:
            raise NotImplementedError("U+FFFD is part of the pattern")


# Columns of a code point's key in :func:`build_symbols`: its opener bits, closer
# flag and content-atom bits, then its :class:`~gemjax.text.grammar.Feature` columns.
_KEY_OPENER, _KEY_CLOSER, _KEY_ATOMS, _KEY_FEATURES = range(4)
_KEY_WIDTH = _KEY_FEATURES + len(Feature._fields)


def build_symbols(box: BoxPattern, reader: Reader) -> SymbolTables:
    """Partition Unicode into symbols: code points that the tracker and ``reader``
    cannot tell apart share one; symbol 0 is every code point the pattern ignores.

    Raises:
        NotImplementedError: the pattern breaks :func:`_check_shape`, or the
            reader's case map turns a content character into several.
    """
    atoms = content_atoms(box.content)
    opener = [_members(a, box.flags) for a in box.opener]
    closer = _members(box.closer, box.flags)
    atom_sets = [_members(a, box.flags) for a in atoms]
    alphabet = np.unique(np.concatenate([np.zeros(0, np.int64), *atom_sets]))
    _check_shape(opener, closer, alphabet)
    digits, spaces = set(_members(r"\d", 0).tolist()), set(_members(r"\s", 0).tolist())
    keys: dict[int, list[int]] = {}
    for k, members in enumerate(opener):
        for cp in members.tolist():
            keys.setdefault(cp, [0] * _KEY_WIDTH)[_KEY_OPENER] |= 1 << k
    for cp in closer.tolist():
        keys.setdefault(cp, [0] * _KEY_WIDTH)[_KEY_CLOSER] = 1
    for i, members in enumerate(atom_sets):
        for cp in members.tolist():
            keys.setdefault(cp, [0] * _KEY_WIDTH)[_KEY_ATOMS] |= 1 << i
    codes = {ch: i + 1 for i, ch in enumerate(reader.alphabet)}
    for cp in alphabet.tolist():
        mapped = reader.case_map(chr(cp))
        if len(mapped) != 1:
            raise NotImplementedError(f"{chr(cp)!r} maps to {mapped!r}: not one character")
        digit = unicodedata.decimal(chr(cp)) if cp in digits else -1
        # In Feature's order: digit, space, ascii_space, mapped, code.
        features = [digit, cp in spaces, cp == 0x20, ord(mapped), codes.get(mapped, 0)]
        keys[cp][_KEY_FEATURES:] = features
    distinct: dict[tuple[int, ...], int] = {(0,) * _KEY_WIDTH: 0}
    symbol = np.zeros(UNICODE_SIZE, np.int32)
    for cp, key in keys.items():
        symbol[cp] = distinct.setdefault(tuple(key), len(distinct))
    table = np.asarray(list(distinct), np.int64)
    table[0, _KEY_FEATURES + Feature._fields.index("digit")] = -1  # symbol 0 is no digit
    pages, block_index = np.unique(symbol.reshape(-1, BLOCK), axis=0, return_inverse=True)
    return SymbolTables(
        block_index=block_index.reshape(-1).astype(np.int32),
        blocks=pages.reshape(-1).astype(np.int32),
        features=table[:, _KEY_FEATURES:].astype(np.int32),
        opener_bits=table[:, _KEY_OPENER],
        closer=table[:, _KEY_CLOSER].astype(bool),
        atoms=[int(a) for a in table[:, _KEY_ATOMS]],
    )
