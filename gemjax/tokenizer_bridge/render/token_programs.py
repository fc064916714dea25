"""Game text straight to token ids: programs compiled to token units.

The code-point renderer (:mod:`~gemjax.tokenizer_bridge.render.programs`) prints a
message into a buffer of code points, which :mod:`~gemjax.tokenizer_bridge.render.segments`
then cuts and tokenizes: work per code point and per output token, every lane. This
module compiles the same programs one step further, on the host, so that a lane's
render is a few gathers per *unit* and one per output token.

**Units.** A byte-level BPE tokenizer never merges across a pre-token boundary, and
some character pairs are boundaries whatever the text around them (:func:`cut_between`,
checked against the tokenizer's pre-tokenizer on probe texts). Each part of a program
prints one of a few texts (its *variants*: a literal's one text, a choice's options,
a board cell's cells, a digit position's ``""``, ``" "``, ``"-"``, ``"0"``..``"9"``).
Literals are split at their inner boundaries, and a part whose every variant has an
inner boundary is split in two at its last one. Where two neighbouring pieces meet at
a boundary for every pair of variants (looking through pieces that may print nothing),
the program is cut; the pieces between two cuts form a *unit*. A unit's text, and so
its tokens, is a function of the variants of the few parts it holds: every
combination is tokenized on the host with the real tokenizer (so the ids are
canonical) and stored in one flat table.

**Assumed variants.** Some variants would merge everything around them (an empty
option between two cells, a minus sign). They are *excluded*: their table entries are
marked invalid, and a lane that prints one is reported ``hard``; the bridge renders
such lanes on the code-point path. So are lanes of programs with a unit of more than
:data:`MAX_UNIT_COMBINATIONS` combinations (a word spelled letter by letter) and lanes
that print text the player typed.

On device (unbatched; vmap for batches): program -> units -> per unit its
combination (a mixed-radix number of its parts' variants) -> table entry (token span)
-> a prefix sum of the spans' lengths -> per output token its unit (a search over the
unit ends) and its id (one gather).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.templates import Int, MessageTable, Template
from gemjax.tokenizer_bridge.device_types import EchoText
from gemjax.tokenizer_bridge.render.programs import (
    DIGIT,
    ECHO,
    WITH_ECHO,
    Part,
    ProgramTable,
    format_int_codepoints,
)
from gemjax.tokenizer_bridge.render.segments import SegmentTokenizer, encode_followed, sorted_search

#: The texts a ``DIGIT`` part can print (variant index = position here).
DIGIT_VARIANTS = ("", " ", "-", *"0123456789")
#: Variant indices in :data:`DIGIT_VARIANTS`: nothing printed, a padding space, a
#: minus sign, and the digit ``0`` (digit ``d`` is ``ZERO_VARIANT + d``).
EMPTY_VARIANT, SPACE_VARIANT, MINUS_VARIANT, ZERO_VARIANT = (
    DIGIT_VARIANTS.index(text) for text in ("", " ", "-", "0")
)
#: The unit id of a number (its tokens are its digits, computed on device).
NUMBER_UNIT = -1
#: Table entries every program table starts with: the empty padding unit's one
#: (empty) text, and the invalid entry of a spelled word that is not tabulated.
EMPTY_ENTRY, UNTABULATED_WORD_ENTRY = 0, 1
_NUMBER_STAND_IN = tuple("0123456789")  # a number's first and last characters, for boundaries
_HASH_PRIME = 0x01000193
#: Spelled-word keys are sums modulo this (uint32 arithmetic on device).
_HASH_MODULUS = 2**32
#: Units with more combinations than this are not tabulated (their programs render
#: on the code-point path).
MAX_UNIT_COMBINATIONS = 1 << 12
_LINE_BREAKS = "\r\n"
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_BOUNDARY_PROBES = (
    "a.b c",
    "x. .F",
    " . .  F ",
    "'G', 'X'",
    "R1  . 1 | 2",
    "\n 0  1 \n",
    "it's 'S' ",
    "A\tB\t\tC",
    "é ü\t9",
    "(3, 4).",
    "  _   A ",
    ".\n\nEnter",
    "-5 --7 x",
)


def cut_between(left: str, right: str) -> bool:
    """``left`` then ``right`` (two characters) meet at a pre-token boundary whatever
    the text around them, for Qwen-style pre-tokenizers: either is an ASCII digit; a
    line break before a non-space; an ASCII letter before an ASCII non-letter; or any
    non-space before a space or tab."""
    if "0" <= left <= "9" or "0" <= right <= "9":
        return True
    if left in _LINE_BREAKS and not right.isspace():
        return True
    if left in _ASCII_LETTERS and right.isascii() and right not in _ASCII_LETTERS:
        return True
    return not left.isspace() and right in " \t"


def boundaries_verified(segments: SegmentTokenizer) -> bool:
    """Every position :func:`cut_between` claims is a pre-token start of the
    tokenizer's pre-tokenizer, on probe texts (trivially so without merges)."""
    if not segments.merges:
        return True
    if not segments.cuts_verified:
        return False
    pre = segments.tokenizer.backend_tokenizer.pre_tokenizer
    for probe in _BOUNDARY_PROBES:
        starts = {start for _, (start, _) in pre.pre_tokenize_str(probe)}
        claimed = {i for i in range(1, len(probe)) if cut_between(probe[i - 1], probe[i])}
        if not claimed <= starts:
            return False
    return True


@dataclass(frozen=True)
class _Piece:
    """A part's text, or the head / tail of it (split at a boundary).

    Attributes:
        part: index of the part in its program.
        texts: per variant, the piece's text (None: an excluded variant).
    """

    part: int
    texts: tuple[str | None, ...]
    number: bool = False

    @property
    def allowed(self) -> list[str]:
        return _allowed(self.texts)


def _allowed(texts: tuple[str | None, ...]) -> list[str]:
    """The texts of the variants that are not excluded."""
    return [t for t in texts if t is not None]


class UnitTerm(NamedTuple):
    """A part whose variant a unit's combination reads.

    Attributes:
        part: the part's index in its program.
        variants: how many variants it has (its radix in the combination).
    """

    part: int
    variants: int


class CompiledUnit(NamedTuple):
    """One unit of a compiled program.

    Attributes:
        unit: its unit table id (:data:`NUMBER_UNIT` for a number).
        terms: the parts its combination reads, in order.
    """

    unit: int
    terms: tuple[UnitTerm, ...]


@dataclass(frozen=True)
class CompiledProgram:
    """One program as units: per unit its table id and the parts its combination reads.

    Attributes:
        units: the program's units, in order.
        max_tokens: the most tokens the program can print.
    """

    units: tuple[CompiledUnit, ...]
    max_tokens: int


class UnitColumn(enum.IntEnum):
    """Columns of the device unit table (one row per unit, as :class:`_Unit`)."""

    BASE = 0
    SPELLED_LOW = 1
    SPELLED_HIGH = 2


class EntryColumn(enum.IntEnum):
    """Columns of the device entry table (one row per unit combination)."""

    START = 0  # where its tokens start in the flat token table
    LENGTH = 1  # how many tokens it has
    VALID = 2  # 1 unless the combination is excluded


class TermColumn(enum.IntEnum):
    """Columns of a pack's terms table (one row per term of a unit slot)."""

    ARG = 0  # the event arg a value part reads
    DIGIT_SLOT = 1  # its character among the formatted ints, or -1 (not a DIGIT part)
    VARIANTS = 2  # its variant count
    FACTOR = 3  # its radix in the combination, or its hash multiplier (spelled units)


def digit_texts(align: str, width: int, position: int) -> set[str]:
    """The texts a ``DIGIT`` part at ``position`` of a non-negative int formatted with
    ``align`` and ``width`` can print."""
    texts: set[str] = set()
    for digits in range(1, 11):
        text = format(10 ** (digits - 1), f"{align}{width}")
        char = text[position] if position < len(text) else ""
        texts |= set("0123456789") if char.isdigit() else {char}
    return texts


def _part_variants(part: Part, table: ProgramTable) -> tuple[str | None, ...]:
    """The variant texts of ``part``; empty options of a multi-option part and a
    minus sign are excluded (they would join the text around them)."""
    if part.kind == DIGIT:
        align, width = table.specs[part.spec]
        possible = digit_texts(align, width, part.position)
        return tuple(t if t in possible else None for t in DIGIT_VARIANTS)
    strings = table.strings
    texts = [
        "".join(map(chr, strings.codepoints[s : s + n]))
        for s, n in zip(
            strings.starts[part.base : part.base + part.size],
            strings.lengths[part.base : part.base + part.size],
            strict=True,
        )
    ]
    if len(texts) > 1 and any(texts):
        return tuple(t or None for t in texts)
    return tuple(texts)


def _hash_multipliers(count: int) -> np.ndarray:
    """uint32[count]: the key of a spelled word is ``sum(variant * multiplier) mod 2**32``."""
    return np.asarray([pow(_HASH_PRIME, k, _HASH_MODULUS) for k in range(count)], np.uint64).astype(
        np.uint32
    )


def _every_position(text: str) -> list[int]:
    """Every inner position (a tokenizer without merges: every byte is a token)."""
    return list(range(1, len(text)))


def _inner_cuts(text: str) -> list[int]:
    return [i for i in range(1, len(text)) if cut_between(text[i - 1], text[i])]


def _pieces(index: int, texts: tuple[str | None, ...], merges: bool) -> list[_Piece]:
    """``texts`` (one part's variants) as pieces: a literal split at every inner
    boundary, a multi-variant part in two at each variant's last inner boundary when
    every allowed variant has one."""
    cuts = _inner_cuts if merges else _every_position
    if len(texts) == 1 and texts[0] is not None:
        text = texts[0]
        bounds = [0, *cuts(text), len(text)]
        return [_Piece(index, (text[a:b],)) for a, b in itertools.pairwise(bounds)]
    allowed = [t for t in texts if t is not None]
    if allowed and all(cuts(t) for t in allowed):
        last = {t: cuts(t)[-1] for t in allowed}
        head = tuple(None if t is None else t[: last[t]] for t in texts)
        tail = tuple(None if t is None else t[last[t] :] for t in texts)
        return [_Piece(index, head), _Piece(index, tail)]
    return [_Piece(index, texts)]


@dataclass(frozen=True)
class _Boundary:
    """Where two neighbouring pieces meet.

    Attributes:
        hard: a pre-token boundary for every variant.
        followers: the characters that can come right after it (a digit stands for
            every ASCII digit).
        may_end: the text can end there (every piece after it may print nothing).
    """

    hard: bool
    followers: frozenset[str]
    may_end: bool


_TEXT_END = _Boundary(True, frozenset(), True)


class _Group(NamedTuple):
    """Pieces between two hard boundaries (one unit), and the boundary after them."""

    pieces: list[_Piece]
    end: _Boundary = _TEXT_END

    @property
    def number(self) -> bool:
        return self.pieces[0].number

    @property
    def value_parts(self) -> list[int]:
        """The parts whose variant the group's text depends on, in order."""
        if self.number:
            return []
        return list(dict.fromkeys(p.part for p in self.pieces if len(p.texts) > 1))


def _absorb_literals(groups: list[_Group]) -> list[_Group]:
    """Literal groups (one text) joined to a neighbouring tabulated group, the next
    one first: fewer units, same tables (the boundary between them is hard, so the
    tokens of the joined text are the two token lists end to end)."""

    def literal(group: _Group) -> bool:
        return not group.number and not group.value_parts

    def join(first: _Group, second: _Group) -> _Group:
        return _Group(first.pieces + second.pieces, second.end)

    out: list[_Group] = []
    pending: _Group | None = None
    for group in groups:
        if literal(group):
            pending = group if pending is None else join(pending, group)
            continue
        if pending is not None:
            if not group.number:
                group = join(pending, group)
            elif out and not out[-1].number:
                out[-1] = join(out[-1], pending)
            else:
                out.append(pending)
            pending = None
        out.append(group)
    if pending is not None:
        if out and not out[-1].number:
            out[-1] = join(out[-1], pending)
        else:
            out.append(pending)
    return out


def _boundaries(pieces: Sequence[_Piece], merges: bool) -> list[_Boundary]:
    """Per boundary between neighbouring pieces (``len(pieces) - 1``), looking through
    pieces that may print nothing."""

    def chars(order: Sequence[_Piece], pick: int) -> tuple[set[str], bool]:
        found: set[str] = set()
        for piece in order:
            found |= {t[pick] for t in piece.allowed if t}
            if "" not in piece.allowed:
                return found, False
        return found, True

    boundaries = []
    for k in range(len(pieces) - 1):
        lefts, _ = chars(pieces[k::-1], -1)
        rights, may_end = chars(pieces[k + 1 :], 0)
        hard = not merges or all(cut_between(a, b) for a in lefts for b in rights)
        followers = frozenset("0" if c.isascii() and c.isdigit() else c for c in rights)
        boundaries.append(_Boundary(hard, followers, may_end))
    return boundaries


class IntRead(NamedTuple):
    """A formatted int that ``DIGIT`` parts read: its event arg and format spec index."""

    arg: int
    spec: int


class _Pack(NamedTuple):
    """Device tables of a set of programs (:meth:`TokenPrograms._pack`).

    Attributes:
        unit_ids: int32[programs, units] each unit slot's unit table id.
        terms: int32[programs, units, terms, len(TermColumn)] each slot's terms.
        compiled: bool[programs] the program is tabulated and in the set.
        digit_reads: the ints the set's ``DIGIT`` parts read, in slot order.
    """

    unit_ids: jax.Array
    terms: jax.Array
    compiled: jax.Array
    digit_reads: list[IntRead]


class _Unit(NamedTuple):
    """A tabulated unit (host; the device unit table's row, :class:`UnitColumn`).

    Attributes:
        base: its first table entry.
        spelled_low, spelled_high: its range of spelled words (empty: a dense unit,
            whose entry is ``base`` plus its combination).
    """

    base: int
    spelled_low: int
    spelled_high: int


class _SpelledWord(NamedTuple):
    """A known word a spelled unit can print (sorted by key for the device search).

    Attributes:
        key: the hash of its variants (:func:`_hash_multipliers`).
        variants: its letters' variant indices.
        entry: its table entry.
    """

    key: int
    variants: tuple[int, ...]
    entry: int


class _UnitKey(NamedTuple):
    """What makes two units the same table (they are tokenized once).

    Attributes:
        pieces: per piece, its value part's position in the unit (-1: a literal) and
            its texts.
        followers, may_end: the boundary after the unit (:class:`_Boundary`).
        spelled: the unit is tabulated for known words only.
    """

    pieces: tuple[tuple[int, tuple[str | None, ...]], ...]
    followers: frozenset[str]
    may_end: bool
    spelled: bool


class _SharedTables(NamedTuple):
    """Device tables every program of a :class:`TokenPrograms` shares.

    Attributes:
        units: int32[units, len(UnitColumn)] the units (:class:`_Unit` rows).
        spelled_keys: uint32[words] the spelled words' keys, sorted within each unit.
        spelled_entries: int32[words] their table entries.
        spelled_variants: int32[words, letters] their variants.
        digit_ids: int32[10] the token of each ASCII digit.
        entries: int32[entries, len(EntryColumn)] each entry's token span.
        tokens: int32[tokens] every entry's tokens, end to end.
    """

    units: jax.Array
    spelled_keys: jax.Array
    spelled_entries: jax.Array
    spelled_variants: jax.Array
    digit_ids: jax.Array
    entries: jax.Array
    tokens: jax.Array


class _OwnText:
    """The text an echo slot prints from its own value (no echo), to compare with an
    echo: an ``Int`` formatted directly, other slots through a one-slot program table."""

    def __init__(self, table: ProgramTable, name: str) -> None:
        slot = table.table.slots[name]
        self.plain_int = isinstance(slot, Int)
        self.start = table.table.arg_slices[name].start
        if self.plain_int:
            self.width = table.int_width
            return
        own = MessageTable(own=Template("{" + name + "}", **{name: slot}))
        self.table = ProgramTable(own, echo_capacity=1)
        self.args = np.concatenate(
            [
                np.arange(table.table.arg_slices[n].start, table.table.arg_slices[n].stop)
                for n in own.slots
            ]
        ).astype(np.int32)
        self.width = max(self.table.kind_lengths)

    def equals(self, args: jax.Array, echo: EchoText) -> jax.Array:
        """bool[]: ``echo`` is exactly the slot's own text for ``args`` (unbatched)."""
        if self.plain_int:
            chars = format_int_codepoints(args[self.start], ">", 0, self.width)
            length = jnp.sum(chars > 0)
        else:
            chars, length, _ = self.table.render(
                jnp.int32(0), args[jnp.asarray(self.args)], None, self.width
            )
        size = min(self.width, echo.chars.shape[0])
        fits = (echo.length <= size) & ~echo.truncated
        return fits & (echo.length == length) & jnp.all(echo.chars[:size] == chars[:size])


class TokenPrograms:
    """A :class:`ProgramTable`'s programs compiled to token units (module docstring).

    Args:
        table: the compiled message table (its programs and string table).
        segments: the bridge's segment tokenizer (the tokenizer and its boundary check).

    Attributes:
        enabled: the tokenizer passed the boundary probes (else every lane is hard).
        compiled: bool[num_programs] which programs were tabulated.
        max_tokens: int[num_programs] the most tokens each program prints.
        num_entries: tabulated unit combinations.
    """

    def __init__(
        self, table: ProgramTable, segments: SegmentTokenizer, words: Sequence[str] = ()
    ) -> None:
        self.table = table
        self.segments = segments
        self._words: dict[int, list[str]] = {}
        for word in sorted(set(words)):
            self._words.setdefault(len(word), []).append(word)
        self.enabled = boundaries_verified(segments)
        encode = segments.tokenizer.encode
        digit_ids = [encode(d, add_special_tokens=False) for d in "0123456789"]
        self.digits_are_tokens = segments.cuts_verified and all(len(i) == 1 for i in digit_ids)
        self._digit_ids = [i[0] for i in digit_ids] if self.digits_are_tokens else [0] * 10
        self._unit_ids: dict[_UnitKey, int] = {}
        # Per entry its tokens (None: invalid); the first two are EMPTY_ENTRY and
        # UNTABULATED_WORD_ENTRY. Unit 0 is the empty padding unit.
        self._entries: list[list[int] | None] = [[], None]
        self._units: list[_Unit] = [_Unit(EMPTY_ENTRY, 0, 0)]
        self._spelled: list[_SpelledWord] = []
        programs = [self._compile(parts) for parts in table.programs] if self.enabled else []
        self.compiled = np.asarray(
            [p is not None for p in programs] or [False] * table.num_programs, bool
        )
        self.max_tokens = np.asarray(
            [p.max_tokens if p is not None else 0 for p in programs] or [0] * table.num_programs,
            np.int32,
        )
        self.num_entries = len(self._entries)
        self._longest_spelled = max(u.spelled_high - u.spelled_low for u in self._units)
        self._programs = programs
        lengths = np.asarray([len(e) if e is not None else 0 for e in self._entries], np.int32)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
        valid = np.asarray([e is not None for e in self._entries], np.int32)
        with jax.ensure_compile_time_eval():
            self._shared = self._shared_tables(starts, lengths, valid)
        self._packs: dict[tuple[int, ...], _Pack] = {}
        echo_slots = table.echo_slots
        self._echo_printed = np.asarray(
            [
                [
                    any(p.echo == e and p.when == WITH_ECHO for p in parts)
                    for e in range(len(echo_slots))
                ]
                for parts in table.programs
            ],
            bool,
        ).reshape(table.num_programs, len(echo_slots))
        self._own_texts = {name: _OwnText(table, name) for name in echo_slots}

    def _shared_tables(
        self, starts: np.ndarray, lengths: np.ndarray, valid: np.ndarray
    ) -> _SharedTables:
        width = max([1] + [len(word.variants) for word in self._spelled])
        spelled_variants = np.zeros((max(1, len(self._spelled)), width), np.int32)
        for row, word in enumerate(self._spelled):
            spelled_variants[row, : len(word.variants)] = word.variants
        entries = np.zeros((len(starts), len(EntryColumn)), np.int32)
        entries[:, EntryColumn.START] = starts
        entries[:, EntryColumn.LENGTH] = lengths
        entries[:, EntryColumn.VALID] = valid
        return _SharedTables(
            units=jnp.asarray(np.asarray(self._units, np.int32)),
            spelled_keys=jnp.asarray(
                np.asarray([word.key for word in self._spelled] or [0], np.uint32)
            ),
            spelled_entries=jnp.asarray(
                np.asarray(
                    [word.entry for word in self._spelled] or [UNTABULATED_WORD_ENTRY], np.int32
                )
            ),
            spelled_variants=jnp.asarray(spelled_variants),
            digit_ids=jnp.asarray(np.asarray(self._digit_ids, np.int32)),
            entries=jnp.asarray(entries),
            tokens=jnp.asarray(
                np.asarray([i for e in self._entries if e is not None for i in e] or [0], np.int32)
            ),
        )

    # --- compile (host) ---------------------------------------------------------------

    def _compile(self, parts: Sequence[Part]) -> CompiledProgram | None:
        """The units of one program, or None when a unit has too many combinations."""
        merges = self.segments.merges
        shown = [(i, p) for i, p in enumerate(parts) if p.when != WITH_ECHO and p.kind != ECHO]
        variants = {i: _part_variants(p, self.table) for i, p in shown}
        pieces = []
        for i, numbered in self._number_runs(shown, variants):
            pieces += (
                [_Piece(i, _NUMBER_STAND_IN, True)] if numbered else _pieces(i, variants[i], merges)
            )
        if not pieces:
            return CompiledProgram((), 0)
        groups = [_Group([pieces[0]])]
        for piece, boundary in zip(pieces[1:], _boundaries(pieces, merges), strict=True):
            if boundary.hard:
                groups[-1] = groups[-1]._replace(end=boundary)
                groups.append(_Group([piece]))
            else:
                groups[-1].pieces.append(piece)
        groups[-1] = groups[-1]._replace(end=_TEXT_END)
        groups = _absorb_literals(groups)
        value_parts = [group.value_parts for group in groups]
        # Python ints: 24 letters of 28 variants overflow int64 (and wrap to a small count).
        counts = [math.prod(len(variants[i]) for i in v) for v in value_parts]
        spelled = [c > MAX_UNIT_COMBINATIONS for c in counts]
        if any(
            s and not self._spells_words(v, variants)
            for s, v in zip(spelled, value_parts, strict=True)
        ):
            return None
        units = []
        max_tokens = 0
        for group, value, sparse in zip(groups, value_parts, spelled, strict=True):
            if group.number:
                units.append(CompiledUnit(NUMBER_UNIT, (UnitTerm(group.pieces[0].part, 0),)))
                max_tokens += self.table.int_width
                continue
            unit, longest = self._unit(group, value, variants, sparse)
            max_tokens += longest
            units.append(CompiledUnit(unit, tuple(UnitTerm(i, len(variants[i])) for i in value)))
        return CompiledProgram(tuple(units), max_tokens)

    def _spells_words(
        self, value_parts: Sequence[int], variants: dict[int, tuple[str | None, ...]]
    ) -> bool:
        """A unit too large to tabulate whole can be tabulated for the known words:
        each of its parts prints one character (a letter of a word spelled out)."""
        single = all(all(len(t) == 1 for t in _allowed(variants[i])) for i in value_parts)
        return single and bool(self._words.get(len(value_parts)))

    def _number_runs(
        self, shown: Sequence[tuple[int, Part]], variants: dict[int, tuple[str | None, ...]]
    ) -> list[tuple[int, bool]]:
        """``(part index, starts a number)`` for each part that is not inside a number:
        a number is the run of ``DIGIT`` parts of one formatted int that prints only
        digits (no padding), each digit one token: one unit whose tokens are computed
        on device, not tabulated."""
        out: list[tuple[int, bool]] = []
        width = self.table.int_width
        digit_only = set("0123456789") | {""}
        k = 0
        while k < len(shown):
            i, part = shown[k]
            run = shown[k : k + width]
            numbered = (
                self.digits_are_tokens
                and part.kind == DIGIT
                and len(run) == width
                and all(
                    p.kind == DIGIT
                    and (p.arg, p.spec, p.when, p.position) == (part.arg, part.spec, part.when, n)
                    and set(_allowed(variants[j])) <= digit_only
                    for n, (j, p) in enumerate(run)
                )
                and "" not in _allowed(variants[i])
            )
            out.append((i, numbered))
            k += width if numbered else 1
        return out

    @staticmethod
    def _combination_texts(
        group: Sequence[_Piece],
        value_parts: Sequence[int],
        combinations: Iterable[tuple[int, ...]],
    ) -> list[str | None]:
        """The text of each combination (a variant per value part) (None: excluded)."""
        texts = []
        for combination in combinations:
            chosen = dict(zip(value_parts, combination, strict=True))
            pieces = [p.texts[chosen.get(p.part, 0)] for p in group]
            texts.append(None if any(t is None for t in pieces) else "".join(pieces))  # type: ignore[arg-type]
        return texts

    def _unit(
        self,
        group: _Group,
        value_parts: Sequence[int],
        variants: dict[int, tuple[str | None, ...]],
        spelled: bool,
    ) -> tuple[int, int]:
        """``(unit table id, most tokens)`` of a group (tokenized once per distinct
        unit): every combination of its parts, or (``spelled``) every known word."""
        order = {part: index for index, part in enumerate(value_parts)}
        end = group.end
        key = _UnitKey(
            tuple((order.get(p.part, -1), p.texts) for p in group.pieces),
            end.followers,
            end.may_end,
            spelled,
        )
        if key not in self._unit_ids:
            if spelled:
                combinations = self._word_combinations(value_parts, variants)
            else:
                combinations = list(
                    itertools.product(*[range(len(variants[i])) for i in value_parts])
                )
            texts = self._combination_texts(group.pieces, value_parts, combinations)
            base = len(self._entries)
            self._entries += self._tokens(texts, end)
            spelled_start = len(self._spelled)
            if spelled:
                multipliers = _hash_multipliers(len(value_parts))
                self._spelled += sorted(
                    _SpelledWord(int(np.dot(c, multipliers) % _HASH_MODULUS), c, base + row)
                    for row, c in enumerate(combinations)
                )
            self._unit_ids[key] = len(self._units)
            self._units.append(_Unit(base, spelled_start, len(self._spelled)))
        unit = self._unit_ids[key]
        base, low, high = self._units[unit]
        count = high - low if high > low else math.prod(len(variants[i]) for i in value_parts)
        longest = max((len(e) for e in self._entries[base : base + count] if e), default=0)
        return unit, longest

    def _word_combinations(
        self, value_parts: Sequence[int], variants: dict[int, tuple[str | None, ...]]
    ) -> list[tuple[int, ...]]:
        """The variants that spell each known word of the unit's length."""
        combinations = []
        for word in self._words.get(len(value_parts), []):
            indices = [
                variants[part].index(ch) if ch in variants[part] else -1
                for part, ch in zip(value_parts, word, strict=True)
            ]
            if min(indices) >= 0:
                combinations.append(tuple(indices))
        return combinations

    def _tokens(self, texts: Sequence[str | None], end: _Boundary) -> list[list[int] | None]:
        """Canonical ids of each text before whatever ``end`` allows (None: an
        excluded variant, or ids that depend on what follows); one batched call of
        the tokenizer per follower."""
        tokenizer = self.segments.tokenizer
        present = [t for t in texts if t]
        candidates = [encode_followed(tokenizer, present, f) for f in sorted(end.followers)]
        if end.may_end:
            candidates.append(encode_followed(tokenizer, present, ""))
        found = iter(
            [c[0] if all(x == c[0] for x in c) else None for c in zip(*candidates, strict=True)]
            if candidates
            else [None] * len(present)
        )
        return [None if t is None else [] if not t else next(found) for t in texts]

    def _pack(self, selected: Sequence[int]) -> _Pack:
        """Device tables of the ``selected`` programs (the others are not compiled
        there): per program and unit slot, the unit id and the terms of its
        combination (:class:`TermColumn`)."""
        key = tuple(sorted(set(selected)))
        if key in self._packs:
            return self._packs[key]
        num_programs = self.table.num_programs
        rows = [
            p.units if p is not None and index in key else ()
            for index, p in enumerate(self._programs or [None] * num_programs)
        ]
        num_units = max(1, *(len(r) for r in rows))
        num_terms = max([1] + [len(terms) for r in rows for _, terms in r])
        unit_ids = np.zeros((num_programs, num_units), np.int32)
        terms_table = np.zeros((num_programs, num_units, num_terms, len(TermColumn)), np.int32)
        terms_table[..., TermColumn.DIGIT_SLOT] = -1
        digit_reads: list[IntRead] = []
        for p, units in enumerate(rows):
            for u, (unit, terms) in enumerate(units):
                unit_ids[p, u] = unit
                radix = 1
                # The uint32 multipliers stored as int32 of the same bits.
                multipliers = _hash_multipliers(len(terms)).view(np.int32)
                for t in reversed(range(len(terms))):
                    part = self.table.programs[p][terms[t].part]
                    slot = -1
                    if part.kind == DIGIT:
                        read = IntRead(part.arg, part.spec)
                        if read not in digit_reads:
                            digit_reads.append(read)
                        slot = digit_reads.index(read) * self.table.int_width + part.position
                    number = unit == NUMBER_UNIT  # reads its int, combines nothing
                    spelled = not number and (
                        self._units[unit].spelled_high > self._units[unit].spelled_low
                    )
                    factor = int(multipliers[t]) if spelled else 0 if number else radix
                    row = terms_table[p, u, t]
                    row[TermColumn.ARG], row[TermColumn.DIGIT_SLOT] = part.arg, slot
                    row[TermColumn.VARIANTS], row[TermColumn.FACTOR] = terms[t].variants, factor
                    radix *= terms[t].variants
        compiled = np.asarray([self.compiled[p] and p in key for p in range(num_programs)])
        with jax.ensure_compile_time_eval():  # constants, even when first used under jit
            pack = _Pack(
                jnp.asarray(unit_ids), jnp.asarray(terms_table), jnp.asarray(compiled), digit_reads
            )
        self._packs[key] = pack
        return pack

    # --- render (device) --------------------------------------------------------------

    def longest(self, programs: Sequence[int]) -> int:
        """The most tokens any compiled program among ``programs`` prints."""
        chosen = [int(self.max_tokens[p]) for p in programs if self.compiled[p]]
        return max(chosen, default=0)

    def units(self, programs: Sequence[int]) -> int:
        """Unit slots per lane when rendering ``programs`` (the most any of them has)."""
        return int(self._pack(programs).unit_ids.shape[1])

    def kind_programs(self, kinds: Sequence[int]) -> list[int]:
        """The program indices of message ``kinds``."""
        bounds = [*self.table.kind_base[1:], self.table.num_programs]
        return [p for k in kinds for p in range(self.table.kind_base[k], bounds[k])]

    def _entry(
        self, units: jax.Array, variant: jax.Array, size: jax.Array, factor: jax.Array
    ) -> jax.Array:
        """int32[U]: each unit's table entry: its first entry plus its combination
        (a mixed-radix number of its variants), or for a spelled unit the entry of the
        known word its variants spell (found by a binary search of the unit's sorted
        keys, then checked variant by variant; :data:`UNTABULATED_WORD_ENTRY`,
        invalid, when none)."""
        shared = self._shared
        rows = shared.units[jnp.maximum(units, 0)]
        base, low, high = (rows[:, column] for column in UnitColumn)
        code = jnp.sum(
            variant.astype(jnp.uint32) * jax.lax.bitcast_convert_type(factor, jnp.uint32), axis=-1
        )
        dense = base + code.astype(jnp.int32)
        if not self._spelled:
            return dense
        keys = shared.spelled_keys
        found, top = low, high
        for _ in range(max(1, int(np.ceil(np.log2(self._longest_spelled + 1))))):
            middle = (found + top) // 2
            active = found < top
            right = active & (keys[jnp.minimum(middle, keys.shape[0] - 1)] < code)
            found = jnp.where(right, middle + 1, found)
            top = jnp.where(active & ~right, middle, top)
        row = jnp.minimum(found, keys.shape[0] - 1)
        stored = shared.spelled_variants[row][:, : variant.shape[1]]
        same = jnp.all((stored == variant) | (size == 0), axis=1)
        hit = (found < high) & (keys[row] == code) & same
        spelled = jnp.where(hit, shared.spelled_entries[row], UNTABULATED_WORD_ENTRY)
        return jnp.where(high > low, spelled, dense)

    def _echoes_match(
        self, program: jax.Array, args: jax.Array, echoes: Mapping[str, EchoText] | None
    ) -> jax.Array:
        """bool[]: every echo the program prints is absent or the slot's own text."""
        match = jnp.bool_(True)
        printed = jnp.asarray(self._echo_printed)[program]
        for index, name in enumerate(self.table.echo_slots):
            echo = (echoes or {}).get(name)
            if echo is None:
                continue
            same = self._own_texts[name].equals(args, echo)
            match = match & (~printed[index] | ~echo.present | same)
        return match

    def _digit_variants(self, args: jax.Array, reads: Sequence[IntRead]) -> jax.Array:
        """int32[reads * int_width]: the variant index (in :data:`DIGIT_VARIANTS`) of
        every character of every formatted int ``reads`` lists."""
        width = self.table.int_width
        if not reads:
            return jnp.zeros((width,), jnp.int32)
        chars = jnp.stack(
            [
                format_int_codepoints(args[arg], *self.table.specs[spec], width)
                for arg, spec in reads
            ]
        ).reshape(-1)
        digit = (chars >= ord("0")) & (chars <= ord("9"))
        return jnp.where(
            digit,
            chars - ord("0") + ZERO_VARIANT,
            jnp.where(
                chars == ord(" "),
                SPACE_VARIANT,
                jnp.where(chars == ord("-"), MINUS_VARIANT, EMPTY_VARIANT),
            ),
        ).astype(jnp.int32)

    def render(
        self,
        kind: jax.Array,
        args: jax.Array,
        capacity: int,
        programs: Sequence[int] | None = None,
        echoes: Mapping[str, EchoText] | None = None,
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """Token ids of one event's message (unbatched; vmap for batches).

        Args:
            kind: int32[] message kind. args: int32[num_args] event args.
            capacity: token ids in the output buffer.
            programs: render only these programs (the others are not ``valid``); the
                tables are padded to the most units among them (default: all).
            echoes: the parser's echoes: a lane whose message prints a present echo
                that differs from the slot's own text is not ``valid``.
        Returns:
            ``(ids int32[capacity] zero padded, length int32[] (at most capacity),
            total int32[] (tokens the whole text takes), valid bool[])``; where
            ``valid`` is False (a program not compiled, an excluded variant) the ids
            mean nothing.
        """
        pack = self._pack(range(self.table.num_programs) if programs is None else programs)
        shared = self._shared
        program = self.table.program_index(kind, args)
        units, terms = pack.unit_ids[program], pack.terms[program]
        arg, digit, size, radix = (terms[..., column] for column in TermColumn)
        padded = jnp.concatenate([args.astype(jnp.int32), jnp.zeros((1,), jnp.int32)])
        table_variant = jnp.clip(padded[jnp.where(arg >= 0, arg, args.shape[0])], 0, size - 1)
        digits = self._digit_variants(args, pack.digit_reads)
        digit_variant = digits[jnp.maximum(digit, 0)]
        variant = jnp.where(digit >= 0, digit_variant, table_variant)
        entry = self._entry(units, variant, size, radix)
        start, length, entry_valid = (shared.entries[entry][:, column] for column in EntryColumn)
        # A number: its digits' tokens, read from the lane's own formatted ints.
        number = units == NUMBER_UNIT
        first = jnp.maximum(digit[:, 0], 0)  # the slot of the number's first character
        width = self.table.int_width
        num_digits = jnp.sum((digits >= ZERO_VARIANT).reshape(-1, width), axis=1)[first // width]
        start = jnp.where(number, first, start)
        length = jnp.where(number, num_digits, length)
        entry_valid = jnp.where(number, digit_variant[:, 0] != MINUS_VARIANT, entry_valid > 0)
        valid = pack.compiled[program] & jnp.all(entry_valid)
        valid = valid & self._echoes_match(program, args, echoes)
        ends = jnp.cumsum(length)
        total = ends[-1]
        position = jnp.arange(capacity)
        unit = jnp.minimum(sorted_search(ends, position, side="right"), ends.shape[0] - 1)
        index = start[unit] + position - (ends[unit] - length[unit])
        tokens = shared.tokens
        digit_tokens = shared.digit_ids[jnp.clip(digits - ZERO_VARIANT, 0, 9)]
        token = jnp.where(
            number[unit],
            digit_tokens[jnp.clip(index, 0, digit_tokens.shape[0] - 1)],
            tokens[jnp.clip(index, 0, tokens.shape[0] - 1)],
        )
        ids = jnp.where(position < total, token, 0).astype(jnp.int32)
        return ids, jnp.minimum(total, capacity).astype(jnp.int32), total, valid
