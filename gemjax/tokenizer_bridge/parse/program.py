"""A grammar compiled for the device (:class:`GrammarProgram`): the symbol tables and
tracker of :mod:`~gemjax.tokenizer_bridge.parse.regex` and the grammar's own reader
(:meth:`~gemjax.text.grammar.Grammar.device_reader`), run as one scan over
characters.

Each scan step maps a character to its symbol, advances the tracker and folds the
character into the reader carry of the candidate being read; the carry of the last
candidate that closed is committed (GEM's "last well-formed match"). After the scan
one scatter writes that candidate's echo characters into fixed buffers
(:class:`~gemjax.tokenizer_bridge.device_types.EchoText`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from re import _constants as sre  # type: ignore[attr-defined]
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gemjax.lanes import tree_where
from gemjax.text.grammar import Feature, Grammar, Write
from gemjax.tokenizer_bridge.device_types import DeviceParsed, EchoText
from gemjax.tokenizer_bridge.parse.regex import (
    BLOCK,
    CLOSED,
    CONSUMED,
    OPENED,
    STATE_MASK,
    UNICODE_SIZE,
    build_symbols,
    build_tracker,
    split_pattern,
)
from gemjax.tokenizer_bridge.parse.utf8 import CharEvent

DEFAULT_ECHO_CAPACITY = 64


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


class GrammarProgram:
    """A grammar compiled for the device: symbol tables, tracker and reader.

    :meth:`parse_events` runs the scan over any source of :class:`CharEvent`;
    :meth:`parse_chars` reads code points directly.
    """

    def __init__(self, grammar: Grammar, echo_capacity: int = DEFAULT_ECHO_CAPACITY) -> None:
        if echo_capacity < 1:
            raise ValueError(f"echo_capacity must be positive, got {echo_capacity}")
        self.grammar = grammar
        self.reader = grammar.device_reader()
        self.echo_capacity = echo_capacity
        box = split_pattern(grammar.pattern)
        if self.reader.reads_one_group and not (
            len(box.content) == 1 and box.content[0][0] is sre.SUBPATTERN
        ):
            raise NotImplementedError(
                f"{type(grammar).__name__} on device needs the group to be the content"
            )
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
        stepped, step_writes = self.reader.step(current, Feature(*self.features[symbol]))
        current = tree_where(consumed, stepped, current)
        writes = tuple(w._replace(slot=jnp.where(consumed, w.slot, -1)) for w in step_writes)
        scan = ScanState(
            state=jnp.where(present, packed & STATE_MASK, state),
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
            return (packed & STATE_MASK, candidate), (packed, candidate)

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
            stepped, step_writes = self.reader.step(carry, Feature(*self.features[symbol]))
            writes = tuple(w._replace(slot=jnp.where(here, w.slot, -1)) for w in step_writes)
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
