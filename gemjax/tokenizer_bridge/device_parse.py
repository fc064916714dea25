"""Parse ``\\boxed{...}`` actions from generated token ids on device, as GEM would.

:class:`TokenParser` compiles a host grammar (``grammar.py``) and a byte-level
tokenizer into small tables once, on the host; its ``parse(ids, length)`` is then a
total, jittable, vmappable function that returns what ``grammar.parse`` returns for
``tokenizer.decode(ids[:length])``: the same kernel action, ``ok`` and echo texts.

A batch is read in two passes (:class:`TokenParser`). A **token pass** (one scan
step per token id, carrying the tracker state alone: one lookup in a table of what
each class of whole tokens does to it, :func:`token_effects`) marks the tokens where
a well-formed match closes; the last one, the token where its opener starts and the
match's byte span then follow at once. A **window** of a few bytes from that token
is then read: its bytes gathered and decoded all at once
(:func:`utf8_whole`), the tracker run over its symbols, and the reader over the last
match's content only (:meth:`GrammarProgram.parse_symbols`). Responses the token pass
cannot vouch for (a token that is a piece of a character, a last match longer than
the window, more than ``max_bytes`` bytes) get the **byte reading** below instead
(their last ``max_bytes`` byte slots, see Capacities). Both readings give the same
result.

The byte reading (one ``lax.scan`` over byte positions; under ``vmap`` each step is a
handful of vector operations over the whole batch):

1. **Bytes.** A pointer walks the token ids and reads each token's bytes from one
   flat table (``tokenizers.token_bytes``).
2. **UTF-8.** A decoder state machine reproduces ``bytes.decode("utf-8", "replace")``
   (HF's lossy decode): a broken sequence becomes one U+FFFD for its maximal valid
   prefix and decoding resumes at the offending byte, so an invalid byte never
   swallows the character after it.
3. **Symbols.** A two-level table maps each code point to a *symbol*: code points
   that every part of the grammar treats alike share one (Python's ``re`` decides
   membership: each character class of the pattern is run over all of Unicode on
   the host, so ``\\d``, ``\\s`` and ``re.IGNORECASE`` are exactly Python's).
4. **Matches.** Every grammar's pattern is ``opener + content + closer``
   (``\\boxed{``, a regular content language, ``}``). The content regex is compiled
   to a DFA; one small transition table tracks the opener, the content and the
   closer at once. Because no content character can start an opener or be the
   closer (checked at compile time), ``findall``'s matches are exactly the openers
   whose content up to the next closer is in the language, and GEM's "last
   well-formed match" is the last one the scan sees close.
5. **Reading.** A per-grammar :class:`Reader` folds each content character into its
   fields (numbers as ``int()`` reads them, clamped to ``2**31 - 1``; words through
   ``str.lower``/``str.upper``) and says where it lands in each echo text. The
   reading of the candidate being scanned is committed when its closer arrives.
6. **Echoes.** After the scan one scatter writes the committed candidate's echo
   characters into fixed buffers (:class:`~gemjax.tokenizer_bridge.device_types.EchoText`).

Readers are registered per grammar class (:func:`register_reader`), so a new grammar
plugs in with a reader; the tables, decoder and match tracking are shared.

**Capacities.** A response is read through a window of ``max_bytes`` byte slots:
every token takes as many slots as it has bytes (at least one; ids with no bytes,
including ids outside the vocabulary, take one slot and add no text). When a
response needs more slots, only its **last** ``max_bytes`` slots are read (GEM keeps
the last match, and models put their answer last) and :meth:`TokenParser.overflow`
is True; the parse then equals the host parse of the decoded window, which equals
the host parse of the whole text whenever the last match lies in the window. An
echo longer than ``echo_capacity`` characters is cut and flagged ``truncated``.
"""

from __future__ import annotations

import abc
import functools
import re
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from transformers import PreTrainedTokenizerBase

from gemjax.checks import integer_array
from gemjax.lanes import run_with_fallback, tree_where, with_fallback
from gemjax.text.grammar import (
    INT32_MAX,
    BoxedCommand,
    BoxedInt,
    BoxedIntList,
    BoxedInts,
    BoxedLetters,
    Grammar,
)
from gemjax.tokenizer_bridge.device_types import DeviceParsed, EchoText
from gemjax.tokenizer_bridge.tokenizers import token_bytes

UNICODE_SIZE = 0x110000
BLOCK = 256
REPLACEMENT = 0xFFFD
DEFAULT_MAX_BYTES = 512
DEFAULT_ECHO_CAPACITY = 64
# Bytes re-read around the last match: every game's well-formed actions take at most
# 18 (``\boxed{reveal 10 10}``); a longer match is read in full (fallback). A shorter
# window is a shorter read (docs/performance.md, Token bridge: parsing).
DEFAULT_WINDOW_BYTES = 24

# Feature columns of a symbol (see :func:`_symbol_features`).
F_DIGIT, F_SPACE, F_ASCII_SPACE, F_MAPPED, F_CODE = range(5)
# Bits of a packed tracker transition: next state in the low 16 bits.
OPENED, CONSUMED, CLOSED = 1 << 16, 1 << 17, 1 << 18


# ----------------------------------------------------------------------------- host


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
        parts = []
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


# ---------------------------------------------------------------------------- readers


class Write(NamedTuple):
    """One echo character a content character produces (int32[] each).

    Attributes:
        slot: index into the reader's :attr:`Reader.scatter_slots`, -1 for none.
        pos: position in that echo text.
        char: the code point written (scattered with ``max``: a later leading zero
            never hides a digit at the same place).
    """

    slot: jax.Array
    pos: jax.Array
    char: jax.Array


def no_write() -> Write:
    minus = jnp.int32(-1)
    return Write(minus, minus, jnp.int32(0))


class Feature(NamedTuple):
    """What a reader sees of one character (int32[] each; see :func:`_symbol_features`).

    Attributes:
        digit: its decimal value for a ``\\d`` character, else -1.
        space: 1 for a ``\\s`` character.
        ascii_space: 1 for ``" "``.
        mapped: the character after the reader's case map.
        code: the mapped character's code in the reader's alphabet (0: none).
    """

    digit: jax.Array
    space: jax.Array
    ascii_space: jax.Array
    mapped: jax.Array
    code: jax.Array


class Reader(abc.ABC):
    """How one grammar reads the content of a well-formed match.

    The scan calls :meth:`step` on every content character of the current candidate
    (a fresh :meth:`init` carry at each opener); the carry of the last closed
    candidate goes to :meth:`finish`. Carries are pytrees of int32/bool arrays.
    """

    #: Echo slots whose text is written by :class:`Write` s, in order.
    scatter_slots: tuple[str, ...] = ()
    #: Every slot :meth:`finish` returns, in order.
    slots: tuple[str, ...] = ()

    def case_map(self, char: str) -> str:
        """The character a content character stands for (``str.lower`` ...)."""
        return char

    @property
    def alphabet(self) -> str:
        """Characters with a code (``1 + index``) in :attr:`Feature.code`."""
        return ""

    @abc.abstractmethod
    def init(self) -> Any:
        """The carry of a fresh candidate."""

    @abc.abstractmethod
    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        """Fold one content character into ``carry``; return up to two echo writes."""

    @abc.abstractmethod
    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        """The action, ``ok`` and echoes of the committed candidate.

        Args:
            carry: the last closed candidate's carry (``init()`` if none).
            found: bool[] some candidate closed.
            rows: int32[len(scatter_slots), capacity] the scattered echo characters.

        Returns:
            ``(action, ok, echoes)``; ``echoes[slot] = (chars int32[capacity], length)``
            with the full (unclamped) length.
        """


_R = TypeVar("_R", bound=Reader)
_READERS: dict[type[Grammar], Callable[[Any], Reader]] = {}


def register_reader(
    grammar_type: type[Grammar],
) -> Callable[[Callable[[Any], _R]], Callable[[Any], _R]]:
    """Register the device reader factory of a grammar class (used as a decorator)."""

    def decorate(factory: Callable[[Any], _R]) -> Callable[[Any], _R]:
        _READERS[grammar_type] = factory
        return factory

    return decorate


def reader_for(grammar: Grammar) -> Reader:
    """The registered device reader of ``grammar``.

    Raises:
        NotImplementedError: no reader is registered for its class.
    """
    for cls in type(grammar).__mro__:
        if cls in _READERS:
            return _READERS[cls](grammar)
    raise NotImplementedError(f"no device reader for {type(grammar).__name__}")


class Numbers(NamedTuple):
    """Carry of a candidate's fields (runs of non-space characters), int32 unless noted.

    Attributes:
        field: index of the current field, -1 before the first.
        in_run: bool[] the previous content character was not a space.
        run_len: characters of the current field so far.
        run_sig: significant digits of the current field (leading zeros dropped).
        too_long: bool[] some number has more digits than ``int()`` accepts.
        values: int32[K] the numbers of fields ``offset .. offset + K - 1``, clamped
            to ``2**31 - 1``.
        sig: int32[K] their significant digit counts.
    """

    field: jax.Array
    in_run: jax.Array
    run_len: jax.Array
    run_sig: jax.Array
    too_long: jax.Array
    values: jax.Array
    sig: jax.Array


def int_digit_limit() -> int:
    """The most digits ``int()`` reads (``sys.get_int_max_str_digits()``; 0: none)."""
    return sys.get_int_max_str_digits() or INT32_MAX


def numbers_init(count: int) -> Numbers:
    """A fresh :class:`Numbers` carry tracking ``count`` numbers."""
    zeros = jnp.zeros(count, jnp.int32)
    false = jnp.bool_(False)
    return Numbers(jnp.int32(-1), false, jnp.int32(0), jnp.int32(0), false, zeros, zeros)


def clamped_append(value: jax.Array, digit: jax.Array) -> jax.Array:
    """``min(value * 10 + digit, 2**31 - 1)`` for ``0 <= value <= 2**31 - 1`` without
    overflow (int32 arrays of one shape)."""
    limit = INT32_MAX // 10
    over = (value > limit) | ((value == limit) & (digit > INT32_MAX % 10))
    return jnp.where(over, jnp.int32(INT32_MAX), value * 10 + digit)


def numbers_step(
    carry: Numbers, feat: Feature, offset: int, limit: int
) -> tuple[Numbers, jax.Array, jax.Array]:
    """Fold one content character into the fields; field ``f`` is number ``f - offset``.

    Returns:
        ``(carry, run_pos, digit_pos)``: the new carry, the character's index in its
        field, and a digit's place in its number as ``int()`` prints it (leading
        zeros all at 0, the k-th significant digit at ``k - 1``).
    """
    is_field = feat.space == 0
    starts = is_field & ~carry.in_run
    field = carry.field + starts.astype(jnp.int32)
    run_pos = jnp.where(starts, 0, carry.run_len)
    is_digit = feat.digit >= 0
    run_sig = jnp.where(starts, 0, carry.run_sig)
    run_sig = run_sig + (is_digit & ((feat.digit > 0) | (run_sig > 0))).astype(jnp.int32)
    update = is_digit & (jnp.arange(carry.values.shape[0]) == field - offset)
    digit = jnp.maximum(feat.digit, 0)
    new = Numbers(
        field=field,
        in_run=is_field,
        run_len=jnp.where(is_field, run_pos + 1, carry.run_len),
        run_sig=run_sig,
        too_long=carry.too_long | (is_digit & (run_pos + 1 > limit)),
        values=jnp.where(update, clamped_append(carry.values, digit), carry.values),
        sig=jnp.where(update, run_sig, carry.sig),
    )
    return new, run_pos, jnp.maximum(run_sig - 1, 0)


def decimal_text(value: jax.Array, capacity: int) -> tuple[jax.Array, jax.Array]:
    """ASCII decimal text of ``value >= 0`` (int32[]): int32[capacity] code points
    (zero padded, cut at ``capacity``) and the full length (int32[])."""
    powers = jnp.asarray([10**k for k in range(9, -1, -1)], jnp.int32)
    digits = (value // powers) % 10
    length = jnp.maximum(jnp.sum(value >= powers), 1).astype(jnp.int32)
    index = jnp.arange(capacity)
    chars = jnp.where(index < length, 48 + digits[jnp.clip(index + 10 - length, 0, 9)], 0)
    return chars.astype(jnp.int32), length


def _codes(text: str, width: int) -> np.ndarray:
    """int32[width] code points of ``text`` padded with -1."""
    out = np.full(width, -1, np.int32)
    out[: len(text)] = [ord(c) for c in text]
    return out


def _echo(slot: jax.Array, pos: jax.Array, char: jax.Array, keep: jax.Array) -> Write:
    """A :class:`Write` that happens only where ``keep``."""
    return Write(jnp.where(keep, slot, -1).astype(jnp.int32), pos.astype(jnp.int32), char)


class FieldsReader(Reader):
    """An optional command word, then a fixed count of numbers (:class:`BoxedInt`,
    :class:`BoxedInts`, :class:`BoxedCommand`); each field is one echo slot."""

    def __init__(
        self,
        int_slots: tuple[str, ...],
        commands: tuple[str, ...] = (),
        word_slot: str | None = None,
        scalar: bool = False,
    ) -> None:
        self.int_slots = int_slots
        self.commands = commands
        self.word_slot = word_slot
        self.scalar = scalar
        self.offset = int(word_slot is not None)
        self.scatter_slots = ((word_slot,) if word_slot is not None else ()) + int_slots
        self.slots = self.scatter_slots
        width = max((len(c) for c in commands), default=0) + 1
        self.command_table = np.stack([_codes(c, width) for c in commands] or [_codes("", 1)])
        self.limit = int_digit_limit()

    def case_map(self, char: str) -> str:
        return char.lower() if self.word_slot is not None else char

    def init(self) -> Any:
        """(:class:`Numbers`, bool[C] the word still spells command ``c``, int32 word length)."""
        matches = jnp.zeros(len(self.commands), jnp.bool_)
        return numbers_init(len(self.int_slots)), matches, jnp.int32(0)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        numbers, matches, word_len = carry
        numbers, run_pos, digit_pos = numbers_step(numbers, feat, self.offset, self.limit)
        in_word = (numbers.field < self.offset) & (feat.space == 0)
        table = jnp.asarray(self.command_table)
        expected = table[:, jnp.clip(run_pos, 0, table.shape[1] - 1)]
        spelled = ((run_pos == 0) | matches) & (expected == feat.mapped)
        matches = jnp.where(in_word, spelled, matches)
        word_len = jnp.where(in_word, run_pos + 1, word_len)
        is_digit = feat.digit >= 0
        write = _echo(
            numbers.field,
            jnp.where(is_digit, digit_pos, run_pos),
            jnp.where(is_digit, 48 + feat.digit, feat.mapped),
            is_digit | in_word,
        )
        return (numbers, matches, word_len), (write, no_write())

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        numbers, matches, word_len = carry
        ok = found & ~numbers.too_long
        echoes: dict[str, tuple[jax.Array, jax.Array]] = {}
        head: list[jax.Array] = []
        if self.word_slot is not None:
            echoes[self.word_slot] = (rows[0], word_len)
            lengths = jnp.asarray([len(c) for c in self.commands])
            known = matches & (lengths == word_len)
            unknown = len(self.commands) + 1
            head.append(jnp.where(jnp.any(known), jnp.argmax(known) + 1, unknown))
        elif not self.scalar:
            head.append(jnp.int32(1))
        sig = jnp.maximum(numbers.sig, 1)
        for i, slot in enumerate(self.int_slots):
            echoes[slot] = (rows[self.offset + i], sig[i])
        action = (
            jnp.concatenate([jnp.stack(head).astype(jnp.int32), numbers.values])
            if head
            else numbers.values
        )
        action = jnp.where(ok, action, 0).astype(jnp.int32)
        return (action[0] if self.scalar else action), ok, echoes


@register_reader(BoxedInt)
def _boxed_int(grammar: BoxedInt) -> Reader:
    return FieldsReader((grammar.slot,), scalar=True)


@register_reader(BoxedInts)
def _boxed_ints(grammar: BoxedInts) -> Reader:
    return FieldsReader(grammar.int_slots)


@register_reader(BoxedCommand)
def _boxed_command(grammar: BoxedCommand) -> Reader:
    return FieldsReader(grammar.int_slots, grammar.commands, grammar.word_slot)


class ListReader(Reader):
    """Whitespace-separated numbers (:class:`BoxedIntList`): the list echo as GEM
    prints it (``[1, 2, 3]``) and the entry count."""

    def __init__(self, grammar: BoxedIntList) -> None:
        self.size = grammar.size
        self.scatter_slots = (grammar.slot,)
        self.slots = (grammar.slot, grammar.count_slot)
        self.limit = int_digit_limit()

    def init(self) -> Any:
        """(:class:`Numbers`, int32 where the current entry starts in the echo)."""
        return numbers_init(self.size), jnp.int32(1)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        old, base = carry
        numbers, _, digit_pos = numbers_step(old, feat, 0, self.limit)
        ends = (feat.space != 0) & old.in_run  # a space right after an entry: ", "
        comma = base + jnp.maximum(old.run_sig, 1)
        is_digit = feat.digit >= 0
        digit = _echo(jnp.int32(0), base + digit_pos, 48 + feat.digit, is_digit)
        sep = _echo(jnp.int32(0), comma, jnp.int32(ord(",")), ends)
        base = jnp.where(ends, comma + 2, base)
        space = _echo(jnp.int32(0), base - 1, jnp.int32(ord(" ")), ends)
        return (numbers, base), (tree_where(is_digit, digit, sep), space)

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        numbers, base = carry
        ok = found & ~numbers.too_long
        count = numbers.field + 1
        length = base + jnp.maximum(numbers.run_sig, 1) + 1
        index = jnp.arange(rows.shape[1])
        chars = jnp.where(index == 0, ord("["), jnp.where(index == length - 1, ord("]"), rows[0]))
        head = jnp.minimum(count, self.size + 1)[None]
        action = jnp.where(ok, jnp.concatenate([head, numbers.values]), 0).astype(jnp.int32)
        slot, count_slot = self.slots
        echoes = {slot: (chars, length), count_slot: decimal_text(count, rows.shape[1])}
        return action, ok, echoes


@register_reader(BoxedIntList)
def _boxed_int_list(grammar: BoxedIntList) -> Reader:
    return ListReader(grammar)


class LettersReader(Reader):
    """A word in a box (:class:`BoxedLetters`), upper-cased, ``" "`` removed; the
    pattern's one group must be the whole content."""

    def __init__(self, grammar: BoxedLetters) -> None:
        content = split_pattern(grammar.pattern).content
        if len(content) != 1 or content[0][0] is not sre.SUBPATTERN:
            raise NotImplementedError("BoxedLetters on device needs the group to be the content")
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
        write = _echo(jnp.int32(0), kept, feat.mapped, keep)
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


@register_reader(BoxedLetters)
def _boxed_letters(grammar: BoxedLetters) -> Reader:
    return LettersReader(grammar)


# ---------------------------------------------------------------------------- program


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
            keys.setdefault(cp, [0] * 8)[0] |= 1 << k
    for cp in closer.tolist():
        keys.setdefault(cp, [0] * 8)[1] = 1
    for i, members in enumerate(atom_sets):
        for cp in members.tolist():
            keys.setdefault(cp, [0] * 8)[2] |= 1 << i
    codes = {ch: i + 1 for i, ch in enumerate(reader.alphabet)}
    for cp in alphabet.tolist():
        mapped = reader.case_map(chr(cp))
        if len(mapped) != 1:
            raise NotImplementedError(f"{chr(cp)!r} maps to {mapped!r}: not one character")
        digit = unicodedata.decimal(chr(cp)) if cp in digits else -1
        keys[cp][3:] = [digit, cp in spaces, cp == 0x20, ord(mapped), codes.get(mapped, 0)]
    distinct = {(0,) * 8: 0}
    symbol = np.zeros(UNICODE_SIZE, np.int32)
    for cp, key in keys.items():
        symbol[cp] = distinct.setdefault(tuple(key), len(distinct))
    table = np.asarray(list(distinct), np.int64)
    table[0, 3] = -1  # symbol 0 is no digit
    pages, block_index = np.unique(symbol.reshape(-1, BLOCK), axis=0, return_inverse=True)
    return SymbolTables(
        block_index=block_index.reshape(-1).astype(np.int32),
        blocks=pages.reshape(-1).astype(np.int32),
        features=table[:, 3:].astype(np.int32),
        opener_bits=table[:, 0],
        closer=table[:, 1].astype(bool),
        atoms=[int(a) for a in table[:, 2]],
    )


class ScanState(NamedTuple):
    """Carry of the match-tracking scan (int32 unless noted).

    Attributes:
        state: the tracker state.
        candidate: openers seen so far.
        current: the reader carry of the candidate being read.
        last: the reader carry of the last candidate that closed.
        last_candidate: its number (-1: none).
    """

    state: jax.Array
    candidate: jax.Array
    current: Any
    last: Any
    last_candidate: jax.Array


class CharEvent(NamedTuple):
    """What one scan step decoded.

    Attributes:
        broken: bool[] a U+FFFD comes first (a sequence cut short).
        present: bool[] a character follows (its code point in ``code``).
        code: int32[] its code point.
    """

    broken: jax.Array
    present: jax.Array
    code: jax.Array


class GrammarProgram:
    """A grammar compiled for the device: symbol tables, tracker and reader.

    :meth:`parse_events` runs the scan over any source of :class:`CharEvent`;
    :meth:`parse_chars` reads code points directly.
    """

    def __init__(self, grammar: Grammar, echo_capacity: int = DEFAULT_ECHO_CAPACITY) -> None:
        if echo_capacity < 1:
            raise ValueError(f"echo_capacity must be positive, got {echo_capacity}")
        self.grammar = grammar
        self.reader = reader_for(grammar)
        self.echo_capacity = echo_capacity
        box = split_pattern(grammar.pattern)
        symbols = build_symbols(box, self.reader)
        tracker = build_tracker(symbols.opener_bits, symbols.closer, symbols.atoms, box.content)
        self.n_symbols = tracker.symbols
        self.opener_length = len(box.opener)
        self.host_symbols, self.host_tracker = symbols, tracker
        self.block_index = jnp.asarray(symbols.block_index)
        self.blocks = jnp.asarray(symbols.blocks)
        self.features = jnp.asarray(symbols.features)
        self.tracker = jnp.asarray(tracker.table)

    def symbol(self, code: jax.Array) -> jax.Array:
        """int32[] symbol of a code point (int32[])."""
        code = jnp.clip(code, 0, UNICODE_SIZE - 1)
        return self.blocks[self.block_index[code >> 8] * BLOCK + (code & (BLOCK - 1))]

    def init(self) -> ScanState:
        fresh = self.reader.init()
        return ScanState(jnp.int32(0), jnp.int32(0), fresh, fresh, jnp.int32(-1))

    def step(self, scan: ScanState, event: CharEvent) -> tuple[ScanState, Any]:
        """Advance the tracker and the reader by one event; returns the echo writes
        of this step and the candidate they belong to."""
        present, symbol = event.present, self.symbol(event.code)
        state = jnp.where(event.broken, 0, scan.state)  # U+FFFD: nothing matches it
        packed = self.tracker[state * self.n_symbols + symbol]
        opened = present & (packed & OPENED != 0)
        consumed = present & (packed & CONSUMED != 0)
        closed = present & (packed & CLOSED != 0)
        candidate = scan.candidate + opened.astype(jnp.int32)
        current = tree_where(opened, self.reader.init(), scan.current)
        stepped, writes = self.reader.step(current, Feature(*self.features[symbol]))
        current = tree_where(consumed, stepped, current)
        writes = tuple(w._replace(slot=jnp.where(consumed, w.slot, -1)) for w in writes)
        scan = ScanState(
            state=jnp.where(present, packed & 0xFFFF, state),
            candidate=candidate,
            current=current,
            last=tree_where(closed, current, scan.last),
            last_candidate=jnp.where(closed, candidate, scan.last_candidate),
        )
        return scan, (writes, candidate)

    def finish(self, scan: ScanState, writes: tuple[Write, ...], owner: jax.Array) -> DeviceParsed:
        """Scatter the committed candidate's echo characters and read its action.

        Args:
            scan: the final scan state.
            writes: the per-step writes, each leaf int32[steps].
            owner: int32[steps] the candidate each step's writes belong to.
        """
        capacity = self.echo_capacity
        rows = len(self.reader.scatter_slots)
        found = scan.last_candidate >= 0
        flat = jnp.zeros(max(rows, 1) * capacity, jnp.int32)
        for write in writes:
            keep = (write.slot >= 0) & (write.pos < capacity) & (owner == scan.last_candidate)
            index = jnp.where(keep, write.slot * capacity + write.pos, flat.shape[0])
            flat = flat.at[index].max(write.char, mode="drop")
        action, ok, texts = self.reader.finish(scan.last, found, flat.reshape(-1, capacity))
        echoes = {}
        for slot in self.reader.slots:
            chars, length = texts[slot]
            shown = jnp.where(ok, jnp.minimum(length, capacity), 0).astype(jnp.int32)
            chars = jnp.where(jnp.arange(capacity) < shown, chars, 0).astype(jnp.int32)
            echoes[slot] = EchoText(chars, shown, ok, ok & (length > capacity))
        return DeviceParsed(action, ok, echoes)

    def parse_events(
        self, source: Callable[[Any], tuple[Any, CharEvent]], source_init: Any, steps: int
    ) -> DeviceParsed:
        """Run the scan for ``steps`` steps; ``source`` advances its own carry and
        yields one :class:`CharEvent` per step."""

        def body(carry: tuple[Any, ScanState], _: None) -> tuple[Any, Any]:
            src, scan = carry
            src, event = source(src)
            scan, out = self.step(scan, event)
            return (src, scan), out

        (_, scan), (writes, owner) = jax.lax.scan(body, (source_init, self.init()), length=steps)
        return self.finish(scan, writes, owner)

    def parse_symbols(self, present: jax.Array, symbols: jax.Array) -> DeviceParsed:
        """Parse characters already mapped to symbols (bool[N] ``present``: False
        where no character is at that step; int32[N] ``symbols``), as :meth:`step`
        over them would, in two light scans: the tracker alone over all ``N`` steps,
        then the reader alone over the last closed match's content, which takes at
        most ``N`` minus the opener and the closer."""

        def track(carry: tuple[jax.Array, jax.Array], column: Any) -> tuple[Any, Any]:
            state, candidate = carry
            here, symbol = column
            packed = jnp.where(here, self.tracker[state * self.n_symbols + symbol], state)
            candidate = candidate + (packed & OPENED != 0).astype(jnp.int32)
            return (packed & 0xFFFF, candidate), (packed, candidate)

        start = (jnp.int32(0), jnp.int32(0))
        _, (packed, candidate) = jax.lax.scan(track, start, (present, symbols))
        last = jnp.max(jnp.where(packed & CLOSED != 0, candidate, -1))
        content = (packed & CONSUMED != 0) & (candidate == last)
        count = present.shape[0]
        index = jnp.argmax(content) + jnp.arange(max(count - self.opener_length - 1, 1))
        inside = index < count
        index = jnp.minimum(index, count - 1)
        carry, writes = self.read_content(content[index] & inside, symbols[index])
        fresh = self.reader.init()
        found = jnp.where(last >= 0, 0, -1).astype(jnp.int32)
        owner = jnp.zeros(index.shape, jnp.int32)  # the one candidate read owns every write
        return self.finish(ScanState(jnp.int32(0), found, fresh, carry, found), writes, owner)

    def read_content(self, take: jax.Array, symbols: jax.Array) -> tuple[Any, Any]:
        """The reader alone over one candidate's content: bool[M] ``take`` marks its
        characters among int32[M] ``symbols``. Returns the reader carry and the
        per-step writes (leaves int32[M])."""

        def body(carry: Any, column: tuple[jax.Array, jax.Array]) -> tuple[Any, Any]:
            here, symbol = column
            stepped, writes = self.reader.step(carry, Feature(*self.features[symbol]))
            writes = tuple(w._replace(slot=jnp.where(here, w.slot, -1)) for w in writes)
            return tree_where(here, stepped, carry), writes

        return jax.lax.scan(body, self.reader.init(), (take, symbols))

    def parse_chars(self, chars: jax.Array, length: jax.Array) -> DeviceParsed:
        """Parse text given as code points: int32[N] ``chars``, the first ``length``
        (int32[]) of them; equals ``grammar.parse("".join(map(chr, chars[:length])))``."""
        chars = jnp.asarray(chars, jnp.int32)

        def source(i: jax.Array) -> tuple[jax.Array, CharEvent]:
            code = chars[jnp.minimum(i, chars.shape[0] - 1)]
            return i + 1, CharEvent(jnp.bool_(False), i < length, code)

        return self.parse_events(source, jnp.int32(0), chars.shape[0])


@functools.cache
def _program(grammar: Grammar, echo_capacity: int) -> GrammarProgram:
    return GrammarProgram(grammar, echo_capacity)


def compile_grammar(grammar: Grammar, echo_capacity: int = DEFAULT_ECHO_CAPACITY) -> GrammarProgram:
    """The device program of ``grammar`` (cached per grammar object and capacity)."""
    return _program(grammar, echo_capacity)


# ----------------------------------------------------------------------------- tokens


class Utf8(NamedTuple):
    """UTF-8 decoder state (int32[] each): continuation bytes still needed, the code
    point so far, and the range the next continuation byte must lie in."""

    need: jax.Array
    code: jax.Array
    low: jax.Array
    high: jax.Array


def utf8_init() -> Utf8:
    return Utf8(jnp.int32(0), jnp.int32(0), jnp.int32(0x80), jnp.int32(0xBF))


def utf8_step(dec: Utf8, byte: jax.Array, present: jax.Array) -> tuple[Utf8, CharEvent]:
    """Decode one byte (int32[]; ignored where ``present`` is False) as
    ``bytes.decode("utf-8", "replace")`` does: a sequence broken by this byte yields
    one U+FFFD and the byte is then read afresh; an invalid lead byte yields U+FFFD."""
    fits = (dec.need > 0) & (byte >= dec.low) & (byte <= dec.high)
    broken = present & (dec.need > 0) & ~fits
    is_ascii = byte < 0x80
    need = jnp.where(
        (byte >= 0xC2) & (byte <= 0xDF), 1, jnp.where((byte >= 0xE0) & (byte <= 0xEF), 2, 0)
    )
    need = jnp.where((byte >= 0xF0) & (byte <= 0xF4), 3, need)
    lead = jnp.where(need == 1, byte & 0x1F, jnp.where(need == 2, byte & 0x0F, byte & 0x07))
    low = jnp.where(byte == 0xE0, 0xA0, jnp.where(byte == 0xF0, 0x90, 0x80))
    high = jnp.where(byte == 0xED, 0x9F, jnp.where(byte == 0xF4, 0x8F, 0xBF))
    continued = (dec.code << 6) | (byte & 0x3F)
    start = Utf8(need, jnp.where(is_ascii, byte, lead), low, high)
    cont = Utf8(dec.need - 1, continued, jnp.int32(0x80), jnp.int32(0xBF))
    new = tree_where(fits, cont, start)
    done = jnp.where(fits, new.need == 0, need == 0)
    code = jnp.where(fits, continued, jnp.where(is_ascii, byte, REPLACEMENT))
    event = CharEvent(broken, present & done, code.astype(jnp.int32))
    return tree_where(present, new, dec), event


def prefix_sum(values: jax.Array) -> jax.Array:
    """Inclusive prefix sum of a short int32[N] by ``log2 N`` shifted adds (XLA on a
    CPU lowers ``cumsum`` to a windowed reduction of ``N`` squared adds; this is
    cheaper for the window's few dozen slots)."""
    shift = 1
    while shift < values.shape[0]:
        values = values + jnp.pad(values[:-shift], (shift, 0))
        shift *= 2
    return values


def utf8_whole(data: jax.Array, has_byte: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Decode valid UTF-8 all at once: int32[W] bytes, bool[W] which slots hold one.

    Returns ``(present, codes)``: bool[W] a character starts at that slot (its bytes
    all present), int32[W] its code point. Only for bytes that are well-formed UTF-8
    (:func:`utf8_step` decodes anything, one byte at a time).
    """
    width = data.shape[0]
    ahead = [jnp.concatenate([data[k:], jnp.zeros(k, jnp.int32)]) for k in (1, 2, 3)]
    held = [jnp.concatenate([has_byte[k:], jnp.zeros(k, jnp.bool_)]) for k in (1, 2, 3)]
    need = jnp.where(data >= 0xF0, 3, jnp.where(data >= 0xE0, 2, jnp.where(data >= 0xC0, 1, 0)))
    lead = jnp.where(need == 3, data & 0x07, jnp.where(need == 2, data & 0x0F, data & 0x1F))
    codes, complete = jnp.where(need == 0, data, lead), jnp.ones(width, jnp.bool_)
    for k in range(3):
        more = need > k
        codes = jnp.where(more, (codes << 6) | (ahead[k] & 0x3F), codes)
        complete = complete & (~more | held[k])
    is_lead = (data & 0xC0) != 0x80
    return has_byte & is_lead & complete, codes.astype(jnp.int32)


class TokenTables(NamedTuple):
    """Token bytes for the device (int32 arrays).

    Attributes:
        flat: every token's bytes, concatenated.
        offsets: int32[vocab] where each token's bytes start in ``flat``.
        lengths: int32[vocab] each token's byte count.
    """

    flat: jax.Array
    offsets: jax.Array
    lengths: jax.Array


@functools.cache
def _token_tables(tokenizer: PreTrainedTokenizerBase) -> TokenTables:
    pieces = token_bytes(tokenizer)
    lengths = np.asarray([len(p) for p in pieces], np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    flat = np.frombuffer(b"".join(pieces) + b"\0", np.uint8)
    return TokenTables(jnp.asarray(flat), jnp.asarray(offsets), jnp.asarray(lengths))


def token_tables(tokenizer: PreTrainedTokenizerBase) -> TokenTables:
    """The byte tables of a byte-level tokenizer (cached per tokenizer object)."""
    return _token_tables(tokenizer)


def token_slots(
    tables: TokenTables, ids: jax.Array, length: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Per-token byte slots of a response: (int32[T] ids made safe, int32[T] slots).

    A token takes one slot per byte, at least one; ids outside the vocabulary have no
    bytes; tokens at or after ``length`` take none.
    """
    ids = jnp.asarray(ids, jnp.int32)
    known = (ids >= 0) & (ids < tables.lengths.shape[0])
    safe = jnp.where(known, ids, 0)
    size = jnp.where(known, tables.lengths[safe], 0)
    slots = jnp.where(jnp.arange(ids.shape[0]) < length, jnp.maximum(size, 1), 0)
    return jnp.where(known, ids, -1), slots


class TokenEffects(NamedTuple):
    """What each whole token does to the match tracker (host tables of the token pass).

    Tokens that act alike (same moves from every state, same flags) share a *class*;
    a game's grammar sees a few dozen classes among Qwen's 151,646 tokens, so the
    tables the token pass reads at every step stay in the cache.

    Attributes:
        classes: int32[vocab + 1] each token's class. Row ``vocab`` stands for ids
            with no bytes (outside the vocabulary).
        moves: int32[classes * states]: a token of class ``c`` read from tracker
            state ``s`` leaves it in state ``moves[c * states + s] & 0xFFFF``, with the
            bit :data:`CLOSED` when a well-formed match closes inside the token.
        flags: int32[classes]: :data:`WHOLE` (the token's bytes are valid UTF-8 on
            their own), :data:`HAS_OPENER_START` (it contains the opener's first
            character), :data:`CLOSES_AFTER_START` (a match closes inside it after
            that character).
        sizes: int32[vocab + 1] byte counts.
        states: tracker states.
    """

    classes: np.ndarray
    moves: np.ndarray
    flags: np.ndarray
    sizes: np.ndarray
    states: int


WHOLE, HAS_OPENER_START, CLOSES_AFTER_START = 1, 2, 4


def token_effects(program: GrammarProgram, pieces: Sequence[bytes]) -> TokenEffects:
    """Run the tracker over every token's characters from every state (host, numpy:
    one vectorised step per character position over all tokens at once).

    Tokens whose bytes are not valid UTF-8 alone (pieces of a character, stray bytes)
    get no moves of their own: their characters depend on their neighbours, so a
    response holding one is read byte by byte (:class:`TokenParser`).
    """
    symbols, tracker = program.host_symbols, program.host_tracker
    table = tracker.table.reshape(-1, tracker.symbols)
    n_states, vocab = table.shape[0], len(pieces)
    texts, whole = [], np.ones(vocab + 1, bool)
    for index, piece in enumerate(pieces):
        try:
            texts.append(piece.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append("")
            whole[index] = False
    lengths = np.asarray([len(t) for t in texts] + [0], np.int64)
    codes = np.frombuffer("".join(texts).encode("utf-32-le"), np.uint32).astype(np.int64)
    symbol = symbols.blocks[symbols.block_index[codes >> 8] * BLOCK + (codes & (BLOCK - 1))]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    is_start = (symbols.opener_bits & 1).astype(bool)
    state = np.tile(np.arange(n_states, dtype=np.int32), (vocab + 1, 1))
    closed = np.zeros(state.shape, bool)
    seen_start = np.zeros(vocab + 1, bool)
    closes_after = np.zeros(vocab + 1, bool)
    by_length = np.argsort(-lengths, kind="stable")
    for position in range(int(lengths.max(initial=0))):
        active = by_length[: int(np.sum(lengths > position))]
        sym = symbol[starts[active] + position]
        packed = table[state[active], sym[:, None]]
        shut = packed & CLOSED != 0
        closed[active] |= shut
        closes_after[active] |= seen_start[active] & shut[:, 0]  # every state agrees now
        seen_start[active] |= is_start[sym]
        state[active] = packed & 0xFFFF
    flags = (
        whole * WHOLE + seen_start * HAS_OPENER_START + closes_after * CLOSES_AFTER_START
    ).astype(np.int32)
    sizes = np.asarray([len(p) for p in pieces] + [0], np.int32)
    rows = np.concatenate([state | closed * CLOSED, flags[:, None]], axis=1).astype(np.int32)
    kinds, classes = np.unique(rows, axis=0, return_inverse=True)
    moves = np.ascontiguousarray(kinds[:, :-1]).reshape(-1)
    return TokenEffects(classes.reshape(-1).astype(np.int32), moves, kinds[:, -1], sizes, n_states)


#: :func:`token_info` packs a token's class in the low bits and its byte count above.
INFO_SIZE_SHIFT = 16
INFO_CLASS_MASK = (1 << INFO_SIZE_SHIFT) - 1


def token_info(effects: TokenEffects) -> np.ndarray:
    """int32[vocab + 1]: each token's class and byte count in one word (``class |
    size << INFO_SIZE_SHIFT``), so the token pass reads one table per token."""
    if effects.classes.max(initial=0) > INFO_CLASS_MASK or effects.sizes.max(initial=0) >= 1 << 15:
        raise ValueError("token classes or byte counts too large to pack")
    return (effects.classes | effects.sizes << INFO_SIZE_SHIFT).astype(np.int32)


@functools.cache
def _token_effects(program: GrammarProgram, tokenizer: PreTrainedTokenizerBase) -> TokenEffects:
    return token_effects(program, token_bytes(tokenizer))


class TokenParser:
    """Parses generated token ids on device exactly as ``grammar.parse`` parses
    ``tokenizer.decode(ids[:length])`` (see the module docstring for the rules).

    Args:
        grammar: a host grammar with a registered reader (every game's grammar).
        tokenizer: a byte-level tokenizer (``load_tokenizer("qwen3")`` ...).
        max_bytes: byte slots read per response (the last ``max_bytes``).
        echo_capacity: code points per echo text.
        window_bytes: bytes re-read around the last match after the token pass.

    How a batch is read (``jax.vmap`` of :meth:`parse` / :meth:`parse_full` runs this
    batched rule; an unbatched call is a batch of one):

    1. **Token pass**: one scan step per token id, one table lookup each
       (:func:`token_effects`), marks where matches close; the last one, the token
       where its opener starts and the match's byte span follow at once;
    2. **window**: ``window_bytes`` bytes from that token, gathered and decoded at
       once, give the action and echoes (:meth:`GrammarProgram.parse_symbols`);
    3. **lanes read byte by byte**: a response holding a token that is not valid
       UTF-8 alone, one longer than ``max_bytes`` slots, or whose last match does not
       fit the window is read by the full byte scan: only those lanes, an eighth of
       the batch at a time (:func:`~gemjax.lanes.with_fallback`).

    The result never depends on which way a lane was read.

    ``parse``, ``parse_full``, ``parse_chars`` and ``overflow`` take one response
    (``ids`` int32[T], ``length`` int32[]); ``jax.vmap`` them for a batch.
    """

    def __init__(
        self,
        grammar: Grammar,
        tokenizer: PreTrainedTokenizerBase,
        max_bytes: int = DEFAULT_MAX_BYTES,
        echo_capacity: int = DEFAULT_ECHO_CAPACITY,
        window_bytes: int = DEFAULT_WINDOW_BYTES,
    ) -> None:
        if max_bytes < 1 or window_bytes < 1:
            raise ValueError(
                f"max_bytes and window_bytes must be positive, got {max_bytes}, {window_bytes}"
            )
        self.program = compile_grammar(grammar, echo_capacity)
        self.tables = token_tables(tokenizer)
        self.max_bytes = max_bytes
        self.window_bytes = window_bytes
        effects = _token_effects(self.program, tokenizer)
        self.states = effects.states
        self.token_info = jnp.asarray(token_info(effects))
        self.moves = jnp.asarray(effects.moves)
        self.flags = jnp.asarray(effects.flags)
        self._parse_one = with_fallback(self._token_pass, self._read_windows, self._parse_bytes)

    @property
    def grammar(self) -> Grammar:
        return self.program.grammar

    def parse(self, ids: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(action, ok)``: the kernel action (the grammar's shape, int32) and bool[]."""
        parsed = self.parse_full(ids, length)
        return parsed.action, parsed.ok

    def parse_full(self, ids: jax.Array, length: jax.Array) -> DeviceParsed:
        """Action, ``ok`` and echo texts of ``ids[:length]`` (int32[T], int32[]; a
        batch through ``jax.vmap``).

        Raises:
            TypeError: float or bool ids or length. ValueError: ids that are not one
                non-empty row of ids, or a length that is not a scalar.
        """
        hint = " (one response: int32[T] ids and an int32[] length; jax.vmap for a batch)"
        integer_array("ids", ids, 1, hint)
        integer_array("length", length, 0, hint)
        return self._parse_one(jnp.asarray(ids, jnp.int32), jnp.asarray(length, jnp.int32))

    def parse_batch(self, ids: jax.Array, lengths: jax.Array) -> DeviceParsed:
        """:meth:`parse_full` of a batch: int32[B, T] ids and int32[B] lengths."""
        return run_with_fallback(
            self._token_pass, self._read_windows, self._parse_bytes, (ids, lengths)
        )

    def _token_pass(self, ids: jax.Array, lengths: jax.Array) -> tuple[Any, jax.Array]:
        """Step 1 for a batch (int32[B, T] ids, int32[B] lengths): ``((tokens, slots,
        origin), hard)``: ``tokens`` int32[T, B] the ids, with ``vocab`` (no bytes)
        for ids outside the vocabulary and at or after a lane's length; ``slots``
        int32[T, B] the byte slots each token takes; ``origin`` int32[B] the token
        where each lane's window starts; ``hard`` bool[B] the lanes that must be read
        byte by byte instead.

        The scan carries the tracker state alone; where the last match closes and
        where its opener starts are found from its output afterwards, all at once."""
        vocab = self.token_info.shape[0] - 1
        steps = ids.shape[1]
        columns = ids.T
        position = jnp.arange(steps)[:, None]
        live = position < lengths
        tokens = jnp.where(live & (columns >= 0) & (columns < vocab), columns, vocab)
        info = self.token_info[tokens]
        classes = info & INFO_CLASS_MASK
        flags = self.flags[classes]
        slots = jnp.where(live, jnp.maximum(info >> INFO_SIZE_SHIFT, 1), 0)

        def step(state: jax.Array, kind: jax.Array) -> tuple[jax.Array, jax.Array]:
            packed = self.moves[kind * self.states + state]
            return packed & 0xFFFF, packed & CLOSED != 0

        _, closed = jax.lax.scan(step, jnp.zeros(ids.shape[0], jnp.int32), classes)
        last = jnp.max(jnp.where(closed, position, -1), axis=0)  # the last match closes here
        found = last >= 0
        closer_flags = jnp.take_along_axis(flags, jnp.maximum(last, 0)[None], axis=0)[0]
        opens = (flags & HAS_OPENER_START != 0) & (position < last)
        opener = jnp.max(jnp.where(opens, position, 0), axis=0)
        origin = jnp.where(closer_flags & CLOSES_AFTER_START != 0, last, opener)
        origin = jnp.where(found, origin, 0)
        span = jnp.sum(jnp.where((position >= origin) & (position <= last), slots, 0), axis=0)
        hard = (
            jnp.any(live & (flags & WHOLE == 0), axis=0)
            | (jnp.sum(slots, axis=0) > self.max_bytes)
            | (found & (span > self.window_bytes))
        )
        return (tokens, slots, origin), hard

    def _read_windows(self, located: tuple[jax.Array, ...]) -> DeviceParsed:
        """Step 2 for a batch: the byte reading of ``window_bytes`` bytes from each
        lane's origin token (``located``: tokens, their byte slots and origins from
        the token pass; every token of a lane that reaches this step is valid UTF-8
        on its own)."""

        def read(tokens: jax.Array, slots: jax.Array, origin: jax.Array) -> DeviceParsed:
            present, codes = self._window_chars(tokens, slots, origin)
            return self.program.parse_symbols(present, self.program.symbol(codes))

        return jax.vmap(read, in_axes=(1, 1, 0))(*located)

    def _window_chars(
        self, tokens: jax.Array, slots: jax.Array, origin: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """The characters of ``window_bytes`` byte slots from token ``origin`` of one
        response whose tokens are each valid UTF-8 alone, all at once (no scan):
        ``tokens`` int32[T] its ids (``vocab`` where a token has no bytes), ``slots``
        int32[T] the byte slots each takes.

        Returns:
            ``(present, codes)``: bool[W] a character starts at that byte slot, and
            int32[W] its code point. A character cut by the window's end is absent,
            as the byte scan leaves it.
        """
        tables, width, count = self.tables, self.window_bytes, tokens.shape[0]
        vocab = self.token_info.shape[0] - 1
        index = origin + jnp.arange(width)  # a window's tokens take a byte slot at least
        inside = index < count
        index = jnp.minimum(index, count - 1)
        token = jnp.where(inside, tokens[index], vocab)
        taken = jnp.where(inside, slots[index], 0)
        place = prefix_sum(taken) - taken  # where each token starts in the window
        owner = jnp.sum(place[None, :] <= jnp.arange(width)[:, None], axis=1) - 1
        size = self.token_info[token] >> INFO_SIZE_SHIFT
        within = jnp.arange(width) - place[owner]
        has_byte = within < size[owner]
        start = tables.offsets[jnp.minimum(token[owner], vocab - 1)]
        byte = jnp.where(has_byte, tables.flat[start + jnp.minimum(within, size[owner] - 1)], 0)
        return utf8_whole(byte.astype(jnp.int32), has_byte)

    def _parse_bytes(self, ids: jax.Array, length: jax.Array) -> DeviceParsed:
        """The byte scan of the last ``max_bytes`` slots of one response."""
        _, slots = token_slots(self.tables, ids, length)
        ends = jnp.cumsum(slots)
        skip = jnp.maximum(ends[-1] - self.max_bytes, 0)
        first = jnp.minimum(jnp.sum(ends <= skip), ids.shape[0] - 1).astype(jnp.int32)
        offset = skip - (ends[first] - slots[first])
        return self._read(ids, length, first, offset.astype(jnp.int32), self.max_bytes)

    def _read(
        self, ids: jax.Array, length: jax.Array, first: jax.Array, offset: jax.Array, steps: int
    ) -> DeviceParsed:
        """The byte scan of ``steps`` byte slots of one response, from byte ``offset``
        of token ``first``."""
        tables = self.tables
        ids, _ = token_slots(tables, ids, length)
        count = jnp.minimum(jnp.asarray(length, jnp.int32), ids.shape[0])

        def source(carry: tuple[jax.Array, jax.Array, Utf8]) -> tuple[Any, CharEvent]:
            token, within, dec = carry
            live = token < count
            index = ids[jnp.minimum(token, ids.shape[0] - 1)]
            size = jnp.where(index >= 0, tables.lengths[jnp.maximum(index, 0)], 0)
            byte = tables.flat[
                tables.offsets[jnp.maximum(index, 0)] + jnp.minimum(within, size - 1)
            ]
            dec, event = utf8_step(dec, byte.astype(jnp.int32), live & (within < size))
            done = live & (within + 1 >= jnp.maximum(size, 1))
            token = jnp.where(done, token + 1, token)
            within = jnp.where(done, 0, jnp.where(live, within + 1, within))
            return (token, within, dec), event

        return self.program.parse_events(source, (first, offset, utf8_init()), steps)

    def parse_chars(self, chars: jax.Array, length: jax.Array) -> DeviceParsed:
        """Parse code points directly (int32[N], int32[]); no capacity but ``N``."""
        return self.program.parse_chars(chars, length)

    def overflow(self, ids: jax.Array, length: jax.Array) -> jax.Array:
        """bool[] the response needs more than ``max_bytes`` slots (only the last
        ``max_bytes`` were read)."""
        _, slots = token_slots(self.tables, ids, length)
        return jnp.sum(slots) > self.max_bytes


def echo_strings(echoes: Mapping[str, EchoText]) -> dict[str, str]:
    """The present echoes of one parsed response as host strings (for tests and
    debugging; not jittable)."""
    out = {}
    for slot, echo in echoes.items():
        if bool(echo.present):
            out[slot] = "".join(map(chr, np.asarray(echo.chars)[: int(echo.length)]))
    return out
