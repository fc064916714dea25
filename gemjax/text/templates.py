"""Message templates: every game's text, declared once.

A game declares its messages (instructions, per-event feedback, the suffix) as
:class:`Template` objects with typed slots, collected in a :class:`MessageTable`.
The kernel never builds strings: its step reports an :class:`~gemjax.types.Event`
(which template applies and the integer values of its slots) and text is rendered
from that. The host renderer here produces ``str`` exactly as GEM prints it; the
on-device token renderer reads the same declaration (the pieces of each template).

Every slot renders through one signature, ``slot.text(values, echoes)``: ``values``
maps each slot name of the table to its value (an int, or a sequence of ints for a
list or board slot), ``echoes`` maps slot names to text the player typed. A
:class:`Template` and a :class:`MessageTable` render with it, so there is one host
renderer.

Slot kinds:

* :class:`Int`: an integer printed with a Python format spec (GEM's ``f"{r:2}"``).
  With ``echo=True`` the text may come from what the player typed (GEM prints a
  guessed number as ``int()`` read it, so a 40-digit guess shows all 40 digits);
  the parsed action supplies that text, the clamped integer is the fallback.
* :class:`Choice`: one of a fixed tuple of strings, selected by an index.
* :class:`IntList`: the first ``n`` of ``size`` integers, printed as a Python list
  (``[1, 2, 3]``) or with other brackets and separator (``1 2 3``); ``n`` is the
  value of another (``Int``) slot. The slot occupies ``size`` consecutive event
  args. With ``echo=True`` the whole text may come from what the player typed.
* :class:`SymbolList`: an ``IntList`` whose values are codes printed through a fixed
  tuple of strings: a word from letter codes (``APPLE``), Wordle's feedback
  (``['G', 'X', 'Y']``), a row of cells. With ``echo=True`` the text may be the
  player's own.
* :class:`Board`: a grid of cells, each printed as one of a fixed tuple of strings,
  with optional column header and row labels; the printed ``rows x cols`` corner is
  read from other (``Int``) slots, so padded boards print their active part.
* :class:`Echo`: text only the player supplies (Minesweeper's unknown command
  word), taken from the parser's echoes; a fixed fallback without one.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from gemjax.types import Event

SlotValues = Mapping[str, "int | Sequence[int]"]
"""Slot values by name: an int, or a sequence of ints for a list or board slot."""


def _int_value(values: SlotValues, name: str) -> int:
    """The int value of slot ``name``.

    Raises:
        KeyError: no value for ``name``. TypeError: a sequence where an int is due.
    """
    value = values[name]
    if isinstance(value, Sequence):
        raise TypeError(f"slot {name!r} takes an int, got a sequence of {len(value)}")
    return int(value)


def _int_values(values: SlotValues, name: str) -> Sequence[int]:
    """The sequence value of list or board slot ``name``.

    Raises:
        KeyError: no value for ``name``. TypeError: an int where a sequence is due.
    """
    value = values[name]
    if isinstance(value, int):
        raise TypeError(f"slot {name!r} takes a sequence of ints, got {value!r}")
    return value


@dataclass(frozen=True)
class Int:
    """An integer slot.

    Attributes:
        name: the slot's name, shared by every template of a table that uses it.
        format_spec: a Python format spec applied to the value (``""``: plain ``str``).
        echo: the printed text may be the player's own normalised digits.
    """

    name: str
    format_spec: str = ""
    echo: bool = False

    def __post_init__(self) -> None:
        if self.echo and self.format_spec:
            raise ValueError(f"echo slot {self.name!r} cannot have a format spec")

    def text(self, values: SlotValues, echoes: Mapping[str, str]) -> str:
        """Text of this slot (or the echoed text when there is one)."""
        if self.echo and self.name in echoes:
            return echoes[self.name]
        return format(_int_value(values, self.name), self.format_spec)


@dataclass(frozen=True)
class Choice:
    """A slot that prints one of ``options``; its integer value is the index."""

    name: str
    options: tuple[str, ...]

    def text(self, values: SlotValues, echoes: Mapping[str, str]) -> str:
        """Text of the option its value indexes."""
        return self.options[_int_value(values, self.name)]


@dataclass(frozen=True)
class IntList:
    """A slot of ``size`` integers, of which the first ``n`` are printed.

    Attributes:
        name: the slot's name.
        size: how many values (event args) the slot holds.
        length: the name of the :class:`Int` slot whose value is ``n`` (clamped to
            ``0..size``); it need not appear in the same template.
        brackets: the text before and after the values.
        separator: the text between values.
        echo: the printed text may be the player's own (normalised) list.
    """

    name: str
    size: int
    length: str
    brackets: tuple[str, str] = ("[", "]")
    separator: str = ", "
    echo: bool = False

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"list slot {self.name!r} needs size >= 1, got {self.size}")
        if not self.length.isidentifier() or self.length == self.name:
            raise ValueError(f"list slot {self.name!r} has a bad length slot {self.length!r}")

    def format_values(self, values: Sequence[int], length: int) -> str:
        """The text of the first ``length`` of ``values`` (no echo)."""
        count = min(max(int(length), 0), self.size)
        return (
            self.brackets[0]
            + self.separator.join([str(int(v)) for v in values[:count]])
            + self.brackets[1]
        )

    def text(self, values: SlotValues, echoes: Mapping[str, str]) -> str:
        """Text of this slot (or the echoed text when there is one); ``values`` holds
        its length slot's value too."""
        if self.echo and self.name in echoes:
            return echoes[self.name]
        return self.format_values(_int_values(values, self.name), _int_value(values, self.length))


@dataclass(frozen=True)
class SymbolList(IntList):
    """An :class:`IntList` whose values are codes, each printed as ``symbols[code]``.

    ``SymbolList("guess", 5, length="letters", symbols=("",) + tuple(ascii_uppercase),
    brackets=("", ""), separator="")`` prints the letter codes ``[1, 16, 16]`` as
    ``APP``; ``symbols=("'X'", "'Y'", "'G'")`` with the default brackets and separator
    prints a Python list of strings (``['X', 'Y', 'G']``). Codes outside ``symbols``
    are clamped to its ends. Everything else is as in :class:`IntList`.

    Attributes:
        symbols: the text of each code (index = code).
    """

    symbols: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.symbols:
            raise ValueError(f"symbol list slot {self.name!r} needs at least one symbol")

    def format_values(self, values: Sequence[int], length: int) -> str:
        """The text of the first ``length`` of ``values`` (no echo)."""
        count = min(max(int(length), 0), self.size)
        top = len(self.symbols) - 1
        return (
            self.brackets[0]
            + self.separator.join([self.symbols[min(max(int(v), 0), top)] for v in values[:count]])
            + self.brackets[1]
        )


@dataclass(frozen=True)
class Echo:
    """Text only the player's response supplies (an unknown command word).

    The parser's echo of ``name`` is printed; rendering without one (a kernel action
    that carries no text) prints ``fallback``. The slot takes one (unused) event arg.
    """

    name: str
    fallback: str = ""

    def text(self, values: SlotValues, echoes: Mapping[str, str]) -> str:
        """The echoed text, or the fallback (``values`` is not read)."""
        return echoes.get(self.name, self.fallback)


@dataclass(frozen=True)
class Board:
    """A grid of ``shape`` cells (row-major values), each printed as ``cells[value]``.

    Only the top-left ``rows x cols`` corner is printed; ``rows``/``cols`` name the
    ``Int`` slots holding those counts (None: the full shape). The text is an
    optional header line ``header[0] + header[2].join(header[1].format(c) for each
    printed column c) + header[3]``, then per printed row ``row_label.format(r)``,
    its cells joined by ``separator``, and ``row_end``. GEM's Minesweeper board:
    ``header=("   ", "{:>2}", " ", "\\n"), row_label="{:2} "``. The slot occupies
    ``shape[0] * shape[1]`` consecutive event args.
    """

    name: str
    shape: tuple[int, int]
    cells: tuple[str, ...]
    rows: str | None = None
    cols: str | None = None
    header: tuple[str, str, str, str] | None = None
    row_label: str = ""
    separator: str = ""
    row_end: str = "\n"

    def __post_init__(self) -> None:
        if len(self.shape) != 2 or min(self.shape) < 1:
            raise ValueError(f"board slot {self.name!r} needs a 2-d shape, got {self.shape}")
        for other in (self.rows, self.cols):
            if other is not None and (not other.isidentifier() or other == self.name):
                raise ValueError(f"board slot {self.name!r} has a bad size slot {other!r}")

    @property
    def size(self) -> int:
        """Number of values (event args) the slot holds."""
        return self.shape[0] * self.shape[1]

    def format_values(
        self, values: Sequence[int], rows: int | None = None, cols: int | None = None
    ) -> str:
        """The text of the grid ``values`` (row-major, ``size`` ints)."""
        height, width = self.shape
        rows = height if rows is None else min(max(int(rows), 0), height)
        cols = width if cols is None else min(max(int(cols), 0), width)
        lines = []
        if self.header is not None:
            prefix, label, separator, end = self.header
            lines.append(prefix + separator.join([label.format(c) for c in range(cols)]) + end)
        for r in range(rows):
            row = values[r * width : r * width + cols]
            lines.append(
                self.row_label.format(r)
                + self.separator.join([self.cells[int(v)] for v in row])
                + self.row_end
            )
        return "".join(lines)

    def text(self, values: SlotValues, echoes: Mapping[str, str]) -> str:
        """Text of this slot; ``values`` holds its size slots' values too."""
        rows = None if self.rows is None else _int_value(values, self.rows)
        cols = None if self.cols is None else _int_value(values, self.cols)
        return self.format_values(_int_values(values, self.name), rows, cols)


Slot = Int | Choice | IntList | Echo | Board


@dataclass(frozen=True)
class Template:
    """A message with literal text and named slots, in ``str.format`` syntax.

    ``Template("At turn {turn}, you guessed {guess}.", guess=Int("guess", echo=True))``:
    fields not given a slot explicitly are plain :class:`Int` slots. Doubled braces
    (``{{}}``) are literal braces, as in ``str.format``.

    Attributes:
        text: the format string.
        pieces: the template split into literal strings and slots, in order.
    """

    text: str
    pieces: tuple[str | Slot, ...] = field(init=False)
    _format: str = field(init=False, repr=False, compare=False)

    def __init__(self, text: str, **slots: Slot) -> None:
        pieces: list[str | Slot] = []
        used: set[str] = set()
        for literal, name, spec, conversion in string.Formatter().parse(text):
            if literal:
                pieces.append(literal)
            if name is None:
                continue
            if conversion or spec:
                raise ValueError(
                    f"template field {{{name}}} uses a conversion or spec in the text; "
                    "declare it on the slot instead (Int(name, format_spec=...))"
                )
            if not name.isidentifier():
                raise ValueError(f"template field {{{name}}} is not a plain name")
            pieces.append(slots.get(name, Int(name)))
            used.add(name)
        unused = set(slots) - used
        if unused:
            raise ValueError(f"slots {sorted(unused)} do not appear in {text!r}")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "pieces", tuple(pieces))
        # The literal pieces with one positional field per slot occurrence.
        escaped = (
            piece.replace("{", "{{").replace("}", "}}") if isinstance(piece, str) else "{}"
            for piece in pieces
        )
        object.__setattr__(self, "_format", "".join(escaped))

    @property
    def slots(self) -> tuple[Slot, ...]:
        """The distinct slots of this template, in order of first appearance."""
        seen: dict[str, Slot] = {}
        for piece in self.pieces:
            if not isinstance(piece, str):
                seen.setdefault(piece.name, piece)
        return tuple(seen.values())

    def render(self, values: SlotValues, echoes: Mapping[str, str] | None = None) -> str:
        """The message with every slot filled from ``values`` (and ``echoes``), each
        through :meth:`Int.text` and its kin.

        ``values`` maps slot names to ints, and list slots to sequences of ints (their
        length slot's value must be in ``values`` too, even if not in this template).
        """
        echoes = echoes or {}
        return self._format.format(*[slot.text(values, echoes) for slot in self.slot_occurrences])

    @property
    def slot_occurrences(self) -> tuple[Slot, ...]:
        """Every slot piece in order, repeats included."""
        return tuple(piece for piece in self.pieces if not isinstance(piece, str))


MEMO_SIZE = 1 << 16  # rendered messages kept per table


class MessageTable:
    """A game's messages, numbered in declaration order.

    The event ``kind`` of a message is its position here. The event ``args`` vector
    is one flat int32 vector with the same layout for every event of a game: each
    distinct slot name over the whole table, in order of first appearance, takes one
    arg (``Int``, ``Choice``, ``Echo``) or ``size`` consecutive args (``IntList``,
    ``Board``). A list slot's length slot (a board's size slots) is an ``Int`` arg
    even when no template prints it.

    Attributes:
        names: the message names (index = kind).
        arg_names: one name per arg: the slot name, or ``name[i]`` for the args of a
            list slot.
        arg_slices: per slot name, its ``slice`` of the args vector.
    """

    def __init__(self, **templates: Template) -> None:
        if not templates:
            raise ValueError("a message table needs at least one template")
        self.templates: dict[str, Template] = dict(templates)
        self.names: tuple[str, ...] = tuple(templates)
        slots: dict[str, Slot] = {}
        for name, template in templates.items():
            for slot in template.slots:
                previous = slots.setdefault(slot.name, slot)
                if previous != slot:
                    raise ValueError(
                        f"slot {slot.name!r} of message {name!r} is declared as {slot}, "
                        f"but elsewhere as {previous}"
                    )
        for slot in list(slots.values()):
            if isinstance(slot, IntList):
                length = slots.setdefault(slot.length, Int(slot.length))
                if not isinstance(length, Int):
                    raise ValueError(
                        f"the length of list slot {slot.name!r} must be an Int slot, got {length}"
                    )
            if isinstance(slot, Board):
                for size_name in (slot.rows, slot.cols):
                    if size_name is not None and not isinstance(
                        slots.setdefault(size_name, Int(size_name)), Int
                    ):
                        raise ValueError(f"the size slots of board {slot.name!r} must be Int slots")
        self.slots: dict[str, Slot] = slots
        arg_names: list[str] = []
        self.arg_slices: dict[str, slice] = {}
        for name, slot in slots.items():
            start = len(arg_names)
            if isinstance(slot, IntList | Board):
                arg_names += [f"{name}[{i}]" for i in range(slot.size)]
            else:
                arg_names.append(name)
            self.arg_slices[name] = slice(start, len(arg_names))
        self.arg_names: tuple[str, ...] = tuple(arg_names)
        self._by_kind = tuple(templates.values())
        # Memoisation: a message's text depends only on the args its slots read (and on
        # the echoes, for templates with echo slots).
        self._memo: dict[tuple[Any, ...], str] = {}
        self._memo_keys = [self._memo_key(t) for t in templates.values()]

    def _memo_key(self, template: Template) -> tuple[Callable[[Sequence[int]], Any], bool]:
        """``(args -> the args the template reads, whether it reads echoes)``."""
        names: list[str] = []
        for slot in template.slots:
            names.append(slot.name)
            if isinstance(slot, IntList):
                names.append(slot.length)
            if isinstance(slot, Board):
                names += [n for n in (slot.rows, slot.cols) if n is not None]
        indices = sorted({i for n in names for i in range(*self.arg_slices[n].indices(1 << 30))})
        getter = operator.itemgetter(*indices) if indices else (lambda args: ())
        uses_echoes = any(
            getattr(slot, "echo", False) or isinstance(slot, Echo) for slot in template.slots
        )
        return getter, uses_echoes

    def kind(self, name: str) -> int:
        """The event kind (a Python int) of message ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no message {name!r}; messages: {self.names}") from None

    def select(self, *cases: tuple[Any, str], default: str) -> jax.Array:
        """The event kind of the first case whose condition holds, else ``default``
        (traceable): the declarative form of a step's event choice.

        Args:
            *cases: ``(condition, message name)`` pairs in priority order; each
                condition is a bool array (a scalar in an unbatched step).
            default: the message when no condition holds.
        Returns:
            int32 kinds, of the conditions' shape.
        """
        if not cases:
            return jnp.asarray(self.kind(default), jnp.int32)
        conditions = [jnp.asarray(condition, jnp.bool_) for condition, _ in cases]
        kinds = [self.kind(name) for _, name in cases]
        return jnp.select(conditions, kinds, self.kind(default)).astype(jnp.int32)

    def event(self, kind: jax.Array | int | str, **args: jax.Array | int) -> Event:
        """Build an :class:`Event` (traceable).

        Args:
            kind: a message name, or an int32 scalar (often a ``jnp.select`` of kinds).
            **args: slot values by name (an int32[size] array for a list slot, or a
                scalar broadcast to it); slots not given are 0.
        Returns:
            ``Event(kind=int32[], args=int32[len(arg_names)])``.
        """
        unknown = set(args) - set(self.slots)
        if unknown:
            raise KeyError(f"unknown event args {sorted(unknown)}; known: {tuple(self.slots)}")
        if isinstance(kind, str):
            kind = self.kind(kind)
        values = []
        for name, slot in self.slots.items():
            value = jnp.asarray(args.get(name, 0), jnp.int32)
            if isinstance(slot, Board):
                if value.ndim and value.size != slot.size:
                    raise ValueError(
                        f"board slot {name!r} takes {slot.shape} values, got shape {value.shape}"
                    )
                values.append(jnp.broadcast_to(value.reshape(-1), (slot.size,)))
            elif isinstance(slot, IntList):
                if value.ndim > 1 or (value.ndim == 1 and value.shape[0] != slot.size):
                    raise ValueError(
                        f"list slot {name!r} takes {slot.size} values, got shape {value.shape}"
                    )
                values.append(jnp.broadcast_to(value, (slot.size,)))
            else:
                if value.ndim:
                    raise ValueError(f"slot {name!r} takes a scalar, got shape {value.shape}")
                values.append(value[None])
        stacked = jnp.concatenate(values) if values else jnp.zeros((0,), jnp.int32)
        return Event(kind=jnp.asarray(kind, jnp.int32), args=stacked)

    def render(
        self, kind: int, args: Sequence[int], echoes: Mapping[str, str] | None = None
    ) -> str:
        """Host rendering of one event given as plain integers.

        Rendering is a pure function of ``(kind, args, echoes)``, so recent results
        are memoised (a game's observations repeat a lot: same turn, same guess).
        """
        if len(args) != len(self.arg_names):
            raise ValueError(f"expected {len(self.arg_names)} event args, got {len(args)}")
        return self._memoised(int(kind), args, echoes)

    def render_rows(
        self,
        rows: Sequence[Sequence[int]],
        kind_index: int,
        args_slice: slice,
        echoes: Sequence[Mapping[str, str]],
    ) -> list[str]:
        """:meth:`render` of many events stored in rows of plain integers (the batched
        text API's hot path: no per-row checks).

        Args:
            rows: one list of ints per event; ``row[kind_index]`` is the kind and
                ``row[args_slice]`` the args.
            echoes: one echo mapping per row.
        """
        return [
            self._memoised(row[kind_index], row[args_slice], row_echoes)
            for row, row_echoes in zip(rows, echoes, strict=True)
        ]

    def _memoised(self, kind: int, args: Sequence[int], echoes: Mapping[str, str] | None) -> str:
        """The text of one event from the memo, rendered and stored on a miss."""
        used_args, uses_echoes = self._memo_keys[kind]
        key = (kind, used_args(args), tuple(echoes.items()) if echoes and uses_echoes else ())
        text = self._memo.get(key)
        if text is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            text = self._memo[key] = self._by_kind[kind].render(self.values(args), echoes)
        return text

    def values(self, args: Sequence[int]) -> dict[str, int | Sequence[int]]:
        """Slot values by name (a list of ints for a list or board slot) of an args
        vector, as :meth:`Template.render` takes them."""
        ints = list(map(int, args))
        return {
            name: ints[sl] if isinstance(self.slots[name], IntList | Board) else ints[sl.start]
            for name, sl in self.arg_slices.items()
        }

    def render_event(self, event: Event, echoes: Mapping[str, str] | None = None) -> str:
        """Host rendering of an unbatched :class:`Event` (arrays are fetched)."""
        return self.render(int(event.kind), [int(a) for a in jax.device_get(event.args)], echoes)
