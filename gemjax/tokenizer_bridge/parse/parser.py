"""The device parser (:class:`TokenParser`): token ids to the action ``grammar.parse``
reads from their decoded text (the reading is described in
:mod:`gemjax.tokenizer_bridge.parse`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from transformers import PreTrainedTokenizerBase

from gemjax.checks import integer_array
from gemjax.lanes import run_with_fallback, with_fallback
from gemjax.text.grammar import Grammar
from gemjax.tokenizer_bridge.device_types import DeviceParsed, EchoText
from gemjax.tokenizer_bridge.parse.program import DEFAULT_ECHO_CAPACITY, compile_grammar
from gemjax.tokenizer_bridge.parse.regex import CLOSED, STATE_MASK
from gemjax.tokenizer_bridge.parse.token_pass import (
    CLOSES_AFTER_START,
    HAS_OPENER_START,
    INFO_CLASS_MASK,
    INFO_SIZE_SHIFT,
    WHOLE,
    token_info,
    token_slots,
    token_tables,
    tokenizer_effects,
)
from gemjax.tokenizer_bridge.parse.utf8 import CharEvent, Utf8, utf8_init, utf8_step, utf8_whole

DEFAULT_MAX_BYTES = 512
# Bytes re-read around the last match: every game's well-formed actions take at most
# 18 (``\boxed{reveal 10 10}``); a longer match is read in full (fallback). A shorter
# window is a shorter read (docs/performance.md, Token bridge: parsing).
DEFAULT_WINDOW_BYTES = 24


def prefix_sum(values: jax.Array) -> jax.Array:
    """Inclusive prefix sum of a short int32[N] by ``log2 N`` shifted adds (XLA on a
    CPU lowers ``cumsum`` to a windowed reduction of ``N`` squared adds; this is
    cheaper for the window's few dozen slots)."""
    shift = 1
    while shift < values.shape[0]:
        values = values + jnp.pad(values[:-shift], (shift, 0))
        shift *= 2
    return values


class TokenParser:
    """Parses generated token ids on device exactly as ``grammar.parse`` parses
    ``tokenizer.decode(ids[:length])`` (the rules: :mod:`gemjax.tokenizer_bridge.parse`).

    Args:
        grammar: a host grammar (read on device by its
            :meth:`~gemjax.text.grammar.Grammar.device_reader`).
        tokenizer: a byte-level tokenizer (``load_tokenizer("qwen3")`` ...).
        max_bytes: byte slots read per response (the last ``max_bytes``).
        echo_capacity: code points per echo text.
        window_bytes: bytes re-read around the last match after the token pass.

    How a batch is read (``jax.vmap`` of :meth:`parse` / :meth:`parse_full` runs this
    batched rule; an unbatched call is a batch of one):

    1. **Token pass**: one scan step per token id, one table lookup each
       (:func:`~.token_pass.token_effects`), marks where matches close; the last one,
       the token where its opener starts and the match's byte span follow at once;
    2. **window**: ``window_bytes`` bytes from that token, gathered and decoded at
       once, give the action and echoes (:meth:`~.program.GrammarProgram.parse_symbols`);
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
        effects = tokenizer_effects(self.program, tokenizer)
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
            return packed & STATE_MASK, packed & CLOSED != 0

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
