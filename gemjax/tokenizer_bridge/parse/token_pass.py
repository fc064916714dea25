"""The token pass's tables (host): what each whole token does to the match tracker.

:func:`token_effects` runs the tracker over every token's characters from every
state, so the parser's token pass reads one table entry per token instead of one
per byte; :class:`TokenTables` holds the tokens' bytes for the readings that need
them (the window and the byte scan).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from transformers import PreTrainedTokenizerBase

from gemjax.tokenizer_bridge.parse.program import GrammarProgram
from gemjax.tokenizer_bridge.parse.regex import BLOCK, CLOSED, STATE_MASK
from gemjax.tokenizer_bridge.tokenizers import token_bytes


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
            state ``s`` leaves it in state ``moves[c * states + s] & STATE_MASK``, with the
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
        state[active] = packed & STATE_MASK
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
def tokenizer_effects(program: GrammarProgram, tokenizer: PreTrainedTokenizerBase) -> TokenEffects:
    """:func:`token_effects` of a tokenizer's tokens (cached per program and tokenizer)."""
    return token_effects(program, token_bytes(tokenizer))
