"""Game text on device: templates compiled to code-point programs.

A :class:`~gemjax.text.templates.MessageTable` is compiled once on the
host into *programs*: one per message kind and *shape* (the printed length of each
list slot, the printed ``rows x cols`` of each board whose size is read from other
slots). A program is a fixed sequence of *parts*; each part prints one string:

* ``TABLE``: entry ``base + clip(value, 0, size - 1)`` of a string table (a literal
  has one entry; a ``Choice`` its options; a list item its symbols; a board cell
  its cells), where ``value`` is an event arg;
* ``DIGIT``: the ``position``-th character of an ``Int`` formatted with its spec
  (empty past the end);
* ``ECHO``: the ``position``-th code point of the parser's echo of a slot.

Echo slots print the parser's text where :class:`EchoText` says it is present and
their own value parts otherwise, as the host renderer does. Board layouts are found
by printing the slot with one marker per cell, so a ``Board`` subclass needs no
code here.

On device, rendering is gathers: program id -> parts -> per-part string spans,
then one ``searchsorted`` over the span ends fills a fixed-capacity int32 buffer
of Unicode code points. :mod:`gemjax.tokenizer_bridge.render.segments` turns that buffer
into token ids.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.templates import (
    Board,
    Choice,
    Echo,
    Int,
    IntList,
    MessageTable,
    SymbolList,
    Template,
)
from gemjax.tokenizer_bridge.device_types import EchoText
from gemjax.tokenizer_bridge.render.segments import sorted_search

TABLE, DIGIT, ECHO = 0, 1, 2
SHOWN, WITHOUT_ECHO, WITH_ECHO = 0, 1, 2  # when a part prints
INT32_DIGITS = 10
MARKER_BASE = 0xF0000  # private-use code points marking board cells while laying out


@dataclass(frozen=True)
class Part:
    """One printed piece of a program (see the module docstring).

    Attributes:
        kind: ``TABLE``, ``DIGIT`` or ``ECHO``.
        base, size: the part's entries in the string table (``TABLE``).
        arg: the event arg it reads (``TABLE``, ``DIGIT``); -1 reads 0.
        position: character index (``DIGIT``, ``ECHO``).
        spec: index of the int format spec (``DIGIT``).
        echo: index of the echo slot it depends on (-1: none).
        when: ``SHOWN``, ``WITHOUT_ECHO`` or ``WITH_ECHO``.
    """

    kind: int
    base: int = 0
    size: int = 1
    arg: int = -1
    position: int = 0
    spec: int = 0
    echo: int = -1
    when: int = SHOWN


class StringTable:
    """Host builder of a flat table of strings as code points (entry -> span)."""

    def __init__(self) -> None:
        self.codepoints: list[int] = []
        self.starts: list[int] = []
        self.lengths: list[int] = []
        self._index: dict[tuple[str, ...], int] = {}

    def add(self, strings: Sequence[str]) -> int:
        """Index of the first of ``strings`` (stored consecutively, deduplicated)."""
        key = tuple(strings)
        if key not in self._index:
            self._index[key] = len(self.starts)
            for text in strings:
                self.starts.append(len(self.codepoints))
                self.lengths.append(len(text))
                self.codepoints.extend(ord(ch) for ch in text)
        return self._index[key]


def parse_int_spec(format_spec: str) -> tuple[str, int]:
    """``(align, width)`` of an ``Int`` format spec the device renderer supports:
    ``""`` or an optional ``<``/``>``/``^`` and a width (``"2"``, ``">3"``).

    Raises:
        NotImplementedError: any other spec (fill characters, signs, grouping, ...).
    """
    match = re.fullmatch(r"([<>^]?)(\d*)d?", format_spec)
    if match is None:
        raise NotImplementedError(
            f"the device renderer does not support format spec {format_spec!r}"
        )
    return match.group(1) or ">", int(match.group(2) or 0)


def format_int_codepoints(value: jax.Array, align: str, width: int, size: int) -> jax.Array:
    """int32[size]: code points of ``format(value, f"{align}{width}")`` (0 past the end).

    ``value`` is an int32 scalar; ``size`` must be at least ``max(11, width)``.
    """
    negative = value < 0
    magnitude = jnp.where(negative, (~value).astype(jnp.uint32) + 1, value.astype(jnp.uint32))
    powers = jnp.asarray([10**k for k in range(INT32_DIGITS - 1, -1, -1)], jnp.uint32)
    digits = ((magnitude // powers) % 10).astype(jnp.int32)  # most significant first
    leading = jnp.argmax(jnp.append(digits[:-1], 1) > 0)  # zeros before the first digit
    num_digits = INT32_DIGITS - leading
    length = num_digits + negative.astype(jnp.int32)
    pad = jnp.maximum(width - length, 0)
    offsets: dict[str, jax.Array | int] = {">": pad, "<": 0, "^": pad // 2}
    left = offsets[align]
    position = jnp.arange(size)
    inner = position - left  # index into sign + digits
    digit = digits[jnp.clip(leading + inner - negative.astype(jnp.int32), 0, INT32_DIGITS - 1)]
    code = jnp.where(negative & (inner == 0), ord("-"), ord("0") + digit)
    code = jnp.where((inner < 0) | (inner >= length), ord(" "), code)
    return jnp.where(position < length + pad, code, 0).astype(jnp.int32)


def board_layout(board: Board, rows: int, cols: int) -> list[str | int]:
    """The printed ``rows x cols`` board as literal strings and cell indices, in order.

    Raises:
        NotImplementedError: the slot does not print each cell once, in order.
    """
    markers = tuple(chr(MARKER_BASE + i) for i in range(board.size))
    text = dataclasses.replace(board, cells=markers).format_values(
        list(range(board.size)), rows, cols
    )
    layout: list[str | int] = []
    for literal, marker in re.findall(
        f"([^{chr(MARKER_BASE)}-{chr(MARKER_BASE + board.size)}]*)(.?)", text
    ):
        if literal:
            layout.append(literal)
        if marker:
            layout.append(ord(marker) - MARKER_BASE)
    cells = [p for p in layout if isinstance(p, int)]
    if cells != sorted(set(cells)):
        raise NotImplementedError(
            f"board slot {board.name!r} does not print each cell once in order"
        )
    return layout


def shape_dims(template: Template, table: MessageTable) -> list[tuple[str, int, int]]:
    """``(name, arg index, largest value)`` of each value that selects a program:
    the printed length of each list slot, the rows/cols of each board that has them
    (once when one slot gives both: a square board's side)."""
    dims: list[tuple[str, int, int]] = []
    for slot in template.slots:
        if isinstance(slot, IntList):
            dims.append((slot.name, table.arg_slices[slot.length].start, slot.size))
        elif isinstance(slot, Board):
            for size_slot, extent in ((slot.rows, slot.shape[0]), (slot.cols, slot.shape[1])):
                name = f"{slot.name}.{size_slot}"
                known = [d for d in dims if d[0] == name]
                if size_slot is None:
                    continue
                if known:  # one slot sizes both: one value, at most the smaller extent
                    dims[dims.index(known[0])] = (name, known[0][1], min(known[0][2], extent))
                else:
                    dims.append((name, table.arg_slices[size_slot].start, extent))
    return dims


class ProgramTable:
    """A message table compiled to device programs (see the module docstring).

    Args:
        table: the messages.
        echo_capacity: code points kept of each echo.
        lead, trail: extra literal texts a render may put before / after a message
            (selected per call by index; entry 0 is always the empty string).

    Attributes:
        echo_slots: names of the slots that print the parser's text.
        num_programs, num_parts: sizes of the compiled tables.
        kind_lengths: per message kind, the most code points its message can print
            (echoes at full capacity, no lead or trail).
        max_length: the most code points any render can take (lead and trail too).
    """

    def __init__(
        self,
        table: MessageTable,
        echo_capacity: int,
        lead: Sequence[str] = (),
        trail: Sequence[str] = (),
    ) -> None:
        self.table = table
        self.echo_capacity = echo_capacity
        self.echo_slots = tuple(
            name
            for name, slot in table.slots.items()
            if isinstance(slot, Echo) or getattr(slot, "echo", False)
        )
        self.strings = StringTable()
        self.specs: list[tuple[str, int]] = [(">", 0)]
        self.lead_base = self.strings.add(("", *lead))
        self.trail_base = self.strings.add(("", *trail))
        self.num_lead, self.num_trail = 1 + len(lead), 1 + len(trail)
        programs: list[list[Part]] = []
        self.kind_base: list[int] = []
        self.kind_dims: list[list[tuple[str, int, int]]] = []
        for template in table.templates.values():
            dims = shape_dims(template, table)
            self.kind_base.append(len(programs))
            self.kind_dims.append(dims)
            for shape in itertools.product(*[range(extent + 1) for _, _, extent in dims]):
                programs.append(
                    self._program(template, dict(zip([d[0] for d in dims], shape, strict=True)))
                )
        self.num_programs = len(programs)
        self.num_parts = 2 + max(len(p) for p in programs)
        self._arrays = self._pack(programs)
        self.int_width = max(INT32_DIGITS + 1, *(width for _, width in self.specs))
        self.programs: list[list[Part]] = programs  # per program its parts (no lead/trail)
        self.kind_lengths = self.longest_per_kind(echo_capacity)
        self.max_length = self._ends_length() + max(self.kind_lengths)

    # --- compile (host) ---------------------------------------------------------------

    def _spec_index(self, format_spec: str) -> int:
        spec = parse_int_spec(format_spec)
        if spec not in self.specs:
            self.specs.append(spec)
        return self.specs.index(spec)

    def _literal(self, text: str, echo: int = -1, when: int = SHOWN) -> list[Part]:
        return [Part(TABLE, base=self.strings.add((text,)), echo=echo, when=when)] if text else []

    def _echo_parts(self, name: str) -> list[Part]:
        index = self.echo_slots.index(name)
        return [
            Part(ECHO, position=i, echo=index, when=WITH_ECHO) for i in range(self.echo_capacity)
        ]

    def _int_parts(self, arg: int, format_spec: str, echo: int, when: int) -> list[Part]:
        spec = self._spec_index(format_spec)
        width = max(INT32_DIGITS + 1, self.specs[spec][1])
        return [
            Part(DIGIT, arg=arg, position=i, spec=spec, echo=echo, when=when) for i in range(width)
        ]

    def _program(self, template: Template, shape: Mapping[str, int]) -> list[Part]:
        parts: list[Part] = []
        for piece in template.pieces:
            if isinstance(piece, str):
                parts += self._literal(piece)
            else:
                parts += self._slot_parts(piece, shape)
        return parts

    def _slot_parts(self, slot: Any, shape: Mapping[str, int]) -> list[Part]:
        echo = self.echo_slots.index(slot.name) if slot.name in self.echo_slots else -1
        when = WITHOUT_ECHO if echo >= 0 else SHOWN
        start = self.table.arg_slices[slot.name].start
        parts: list[Part] = []
        if isinstance(slot, Int):
            parts = self._int_parts(start, slot.format_spec, echo, when)
        elif isinstance(slot, Choice):
            base = self.strings.add(slot.options)
            parts = [
                Part(TABLE, base=base, size=len(slot.options), arg=start, echo=echo, when=when)
            ]
        elif isinstance(slot, Echo):
            parts = self._literal(slot.fallback, echo, when)
        elif isinstance(slot, IntList):
            parts = self._list_parts(slot, shape[slot.name], start, echo, when)
        elif isinstance(slot, Board):
            rows = shape.get(f"{slot.name}.{slot.rows}", slot.shape[0])
            cols = shape.get(f"{slot.name}.{slot.cols}", slot.shape[1])
            base = self.strings.add(slot.cells)
            for item in board_layout(slot, rows, cols):
                if isinstance(item, str):
                    parts += self._literal(item)
                else:
                    parts.append(Part(TABLE, base=base, size=len(slot.cells), arg=start + item))
        if echo >= 0:
            parts += self._echo_parts(slot.name)
        return parts

    def _list_parts(
        self, slot: IntList, count: int, start: int, echo: int, when: int
    ) -> list[Part]:
        parts = self._literal(slot.brackets[0], echo, when)
        symbols = self.strings.add(slot.symbols) if isinstance(slot, SymbolList) else -1
        for k in range(count):
            if k:
                parts += self._literal(slot.separator, echo, when)
            if isinstance(slot, SymbolList):
                parts.append(
                    Part(
                        TABLE,
                        base=symbols,
                        size=len(slot.symbols),
                        arg=start + k,
                        echo=echo,
                        when=when,
                    )
                )
            else:
                parts += self._int_parts(start + k, "", echo, when)
        return parts + self._literal(slot.brackets[1], echo, when)

    def longest_per_kind(self, echo_length: int) -> list[int]:
        """Per message kind, an upper bound of the code points its message can take
        (without lead or trail) when no echo is longer than ``echo_length``."""
        lengths = self.strings.lengths

        def longest(part: Part) -> int:
            if part.kind == ECHO:
                return int(part.position < echo_length)
            if part.kind != TABLE:
                return 1
            return max(lengths[part.base : part.base + part.size])

        programs = self.programs
        per_program = [sum(longest(part) for part in parts) for parts in programs]
        bounds = [*self.kind_base[1:], len(programs)]
        return [max(per_program[a:b]) for a, b in zip(self.kind_base, bounds, strict=True)]

    def _ends_length(self) -> int:
        """The longest lead plus the longest trail (code points)."""
        lengths = self.strings.lengths
        return max(lengths[self.lead_base : self.lead_base + self.num_lead]) + max(
            lengths[self.trail_base : self.trail_base + self.num_trail]
        )

    def _pack(self, programs: list[list[Part]]) -> dict[str, jax.Array]:
        """Per program and part: the fields of :class:`Part` as int32[programs, parts];
        parts 0 and -1 are the lead and trail (empty padding parts fill the rest)."""
        empty = Part(TABLE, base=self.lead_base)
        rows = []
        for parts in programs:
            padding = [empty] * (self.num_parts - 2 - len(parts))
            lead = Part(TABLE, base=self.lead_base, size=self.num_lead)
            trail = Part(TABLE, base=self.trail_base, size=self.num_trail)
            rows.append([lead, *parts, *padding, trail])
        fields = [f.name for f in dataclasses.fields(Part)]
        arrays = {
            name: jnp.asarray(
                np.asarray([[getattr(p, name) for p in row] for row in rows], np.int32)
            )
            for name in fields
        }
        arrays["codepoints"] = jnp.asarray(np.asarray(self.strings.codepoints or [0], np.int32))
        arrays["starts"] = jnp.asarray(np.asarray(self.strings.starts, np.int32))
        arrays["lengths"] = jnp.asarray(np.asarray(self.strings.lengths, np.int32))
        arrays["kind_base"] = jnp.asarray(np.asarray(self.kind_base, np.int32))
        return arrays

    # --- render (device) --------------------------------------------------------------

    def program_index(self, kind: jax.Array, args: jax.Array) -> jax.Array:
        """int32[]: the program of an event (its kind and the shape its args select)."""
        kind = jnp.clip(kind, 0, len(self.kind_base) - 1)
        index = jnp.int32(0)
        for k, dims in enumerate(self.kind_dims):
            offset = jnp.int32(0)
            for _, arg, extent in dims:
                offset = offset * (extent + 1) + jnp.clip(args[arg], 0, extent)
            index = jnp.where(kind == k, self.kind_base[k] + offset, index)
        return index

    def render(
        self,
        kind: jax.Array,
        args: jax.Array,
        echoes: Mapping[str, EchoText] | None,
        capacity: int,
        lead: jax.Array | int = 0,
        trail: jax.Array | int = 0,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Code points of one event's message (unbatched; vmap for batches).

        Args:
            kind: int32[] message kind. args: int32[num_args] event args.
            echoes: the parser's echoes by slot name (missing slots: not present).
            capacity: code points in the output buffer.
            lead, trail: index of the lead / trail text (0: none).
        Returns:
            ``(codepoints int32[capacity] zero padded, length int32[], overflow bool[])``;
            ``overflow``: the codepoints are not the host text, because it needed more
            than ``capacity`` code points or it prints an echo that was cut
            (:attr:`EchoText.truncated`, or longer than :attr:`echo_capacity`).
        """
        a = self._arrays
        program = self.program_index(kind, args)
        row = {
            name: a[name][program]
            for name in ("kind", "base", "size", "arg", "position", "spec", "echo", "when")
        }
        present, echo_chars, echo_lengths, echo_cut = self._echo_arrays(echoes)
        padded = jnp.concatenate([args.astype(jnp.int32), jnp.zeros((1,), jnp.int32)])
        value = padded[jnp.where(row["arg"] >= 0, row["arg"], args.shape[0])]
        value = value.at[0].set(lead).at[-1].set(trail)
        entry = row["base"] + jnp.clip(value, 0, row["size"] - 1)
        digit = self._digits(value, row["spec"], row["position"])
        echo_index = jnp.maximum(row["echo"], 0)
        echo_char = echo_chars[echo_index, jnp.minimum(row["position"], self.echo_capacity - 1)]
        in_echo = row["position"] < echo_lengths[echo_index]
        single = jnp.where(row["kind"] == DIGIT, digit, echo_char)
        single_length = jnp.where(row["kind"] == DIGIT, single > 0, in_echo).astype(jnp.int32)
        length = jnp.where(row["kind"] == TABLE, a["lengths"][entry], single_length)
        has_echo = present[echo_index] & (row["echo"] >= 0)
        shown = (row["when"] == SHOWN) | ((row["when"] == WITH_ECHO) == has_echo)
        length = jnp.where(shown, length, 0)
        cut = jnp.any(shown & has_echo & (row["kind"] == ECHO) & echo_cut[echo_index])
        ends = jnp.cumsum(length)
        total = ends[-1]
        position = jnp.arange(capacity)
        part = jnp.minimum(sorted_search(ends, position, side="right"), ends.shape[0] - 1)
        offset = position - (ends[part] - length[part])
        table_char = a["codepoints"][
            jnp.clip(a["starts"][entry[part]] + offset, 0, a["codepoints"].shape[0] - 1)
        ]
        char = jnp.where(row["kind"][part] == TABLE, table_char, single[part])
        char = jnp.where(position < total, char, 0)
        return char.astype(jnp.int32), jnp.minimum(total, capacity), cut | (total > capacity)

    def _digits(self, value: jax.Array, spec: jax.Array, position: jax.Array) -> jax.Array:
        """int32[parts]: the ``position``-th code point of each part's formatted value."""
        result = jnp.zeros_like(value)
        for index, (align, width) in enumerate(self.specs):
            chars = jax.vmap(
                lambda v, a=align, w=width: format_int_codepoints(v, a, w, self.int_width)
            )(value)
            picked = jnp.take_along_axis(
                chars, jnp.minimum(position, self.int_width - 1)[:, None], axis=1
            )[:, 0]
            result = jnp.where(spec == index, picked, result)
        return result

    def _echo_arrays(
        self, echoes: Mapping[str, EchoText] | None
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """``(present bool[E], chars int32[E, capacity], lengths int32[E], cut bool[E])``
        per echo slot (one row of zeros when the table has no echo slot); ``cut``: the
        echo's text is longer than the ``capacity`` code points kept."""
        rows = max(len(self.echo_slots), 1)
        present = jnp.zeros((rows,), jnp.bool_)
        cut = jnp.zeros((rows,), jnp.bool_)
        chars = jnp.zeros((rows, self.echo_capacity), jnp.int32)
        lengths = jnp.zeros((rows,), jnp.int32)
        for index, name in enumerate(self.echo_slots):
            echo = (echoes or {}).get(name)
            if echo is None:
                continue
            text = echo.chars[: self.echo_capacity].astype(jnp.int32)
            text = jnp.pad(text, (0, self.echo_capacity - text.shape[0]))
            present = present.at[index].set(echo.present)
            chars = chars.at[index].set(text)
            lengths = lengths.at[index].set(jnp.minimum(echo.length, self.echo_capacity))
            cut = cut.at[index].set(echo.truncated | (echo.length > self.echo_capacity))
        return present, chars, lengths, cut

    def args_from_values(self, values: Mapping[str, jax.Array]) -> jax.Array:
        """int32[num_args]: an args vector from slot values by name (missing: 0)."""
        pieces = []
        for name in self.table.slots:
            size = self.table.arg_slices[name].stop - self.table.arg_slices[name].start
            value = jnp.asarray(values.get(name, 0), jnp.int32).reshape(-1)
            pieces.append(jnp.broadcast_to(value, (size,)) if value.size == 1 else value)
        return jnp.concatenate(pieces) if pieces else jnp.zeros((0,), jnp.int32)
