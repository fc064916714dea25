"""GEM's word placement on a square grid, on device (Crosswords and WordSearch).

GEM's ``_generate_board`` (Crosswords) and ``_generate_word_search`` (WordSearch)
place a few words, longest first, each ``across`` or ``down`` as drawn beforehand
(spec sections 11 and 12):

1. the grid's side is ``round(1.5 * longest)`` (Python's round: half to even), every
   cell empty (``.``);
2. the first word is centred: across at ``(n // 2, (n - len) // 2)``, down at
   ``((n - len) // 2, n // 2)``;
3. every later word lists its overlap candidates: for each placed word ``P`` of the
   other direction and each pair ``(i, j)`` with ``word[i] == P[j]``, the start that
   puts letter ``i`` on ``P``'s letter ``j``, kept when that start is inside the
   grid. The list is shuffled and the first candidate where the word fits is taken
   (it fits when it ends inside the grid and every cell it covers is empty or holds
   its letter), so each fitting start is drawn with probability proportional to the
   number of times it is listed;
4. without a fitting candidate, the first start in row-major order where the word
   fits; a word that fits nowhere is dropped.

:func:`place_words` does the same for a batch lane with fixed shapes: a grid of
``max_side x max_side`` codes (0 empty, letters from 1), of which the top-left
``side x side`` is the game's. Candidates are counted for every start at once: a word
laid across in a frame (the grid itself, or its transpose for a down word) counts,
per start ``(r, c)``, the letters ``i`` with ``frame[r, c + i] == word[i]`` on a cell
covered by words of the other direction (one count per such word), which is the
number of times GEM lists that start.

Two sampled words can be equal once upper-cased (NLTK's ``en`` list has ``Bob`` and
``bob``); GEM keys its placed words by the word, so the later copy's position
replaces the earlier one as a listed word (both stay on the grid), and both copies
take the later copy's direction. :func:`place_words` follows that: a ``live`` word is
one GEM still lists.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import Variant
from gemjax.rng import below

#: The most words a WordSearch or Crosswords grid holds (``num_words``).
MAX_NUM_WORDS = 12


class GridWordsConfig:
    """The configuration WordSearch and Crosswords share (a mixin of their env
    classes): GEM's ``(hardcore, max_turns, num_words)``, where None anywhere makes
    the ``-random`` variant (easy or hard words drawn at every reset, with the game's
    fixed ``random_turns`` and ``random_words``), and ``max_turns`` a param up to the
    configured value."""

    variant: Variant
    randomize: bool
    num_words: int
    turn_capacity: int

    def configure(
        self,
        hardcore: bool | None,
        max_turns: int | None,
        num_words: int | None,
        random_turns: int,
        random_words: int,
    ) -> int:
        """Sets :attr:`variant`, :attr:`randomize`, :attr:`num_words` and
        :attr:`turn_capacity` (``ValueError`` for impossible values); returns the
        fixed mode (1 for the hard words; unused by ``-random``)."""
        self.variant = Variant.of(
            {
                "hardcore": None if hardcore is None else int(bool(hardcore)),
                "max_turns": max_turns,
                "num_words": num_words,
            },
            random_values=(1, random_turns, random_words),
            check=self._check,
        )
        self.randomize = self.variant.randomize
        hard, self.turn_capacity, self.num_words = self.variant.values
        return int(hard)

    @staticmethod
    def _check(hardcore: int, max_turns: int, num_words: int) -> None:
        if not 1 <= max_turns <= 10_000:
            raise ValueError(f"max_turns must be in 1..10000, got {max_turns}")
        if not 1 <= num_words <= MAX_NUM_WORDS:
            raise ValueError(f"num_words must be in 1..{MAX_NUM_WORDS}, got {num_words}")

    @property
    def config(self) -> tuple[Any, ...]:
        return self.variant.config

    def check_max_turns(self, max_turns: jax.Array) -> None:
        """``ValueError`` unless the param ``max_turns`` is in ``1..turn_capacity``."""
        turns = int(max_turns)
        if not 1 <= turns <= self.turn_capacity:
            raise ValueError(
                f"max_turns must be in 1..{self.turn_capacity} (this env's capacity; make "
                f"the env with a larger max_turns), got {turns}"
            )


class Placement(struct.PyTreeNode):
    """The words placed on one grid.

    Attributes:
        grid: int8[S, S] letter codes (0 empty), the game's board its top-left
            ``side x side``.
        rows, cols: int32[W] each word's first cell (0 where not placed).
        down: bool[W] each word's direction (the direction GEM uses: for copies of one
            word, the last copy's).
        placed: bool[W] the word is on the grid.
        live: bool[W] the word is placed and GEM lists it (no later copy of the same
            word was placed).
    """

    grid: jax.Array
    rows: jax.Array
    cols: jax.Array
    down: jax.Array
    placed: jax.Array
    live: jax.Array


def sample_distinct(words: jax.Array, population: jax.Array) -> jax.Array:
    """int32[K]: ``K`` distinct indices below ``population`` (int32[]), uniformly in
    order as Python's ``random.sample``: index ``k`` is the ``x``-th (from 0) index not
    drawn yet, ``x = below(words[k], population - k)``."""
    chosen: list[jax.Array] = []
    for k in range(words.shape[0]):
        offset = below(words[k], population - k)
        index = offset
        for _ in range(k):  # the least fixpoint of index = offset + #{c <= index}
            index = offset + sum((c <= index).astype(jnp.int32) for c in chosen)
        chosen.append(index)
    return jnp.stack(chosen)


def longest_first(lengths: jax.Array) -> jax.Array:
    """int32[W]: the stable order of ``lengths`` (int32[W]) from longest to shortest
    (Python's ``sorted(..., key=len, reverse=True)``)."""
    count = lengths.shape[0]
    order = jnp.arange(count)
    earlier = (lengths[None, :] > lengths[:, None]) | (
        (lengths[None, :] == lengths[:, None]) & (order[None, :] < order[:, None])
    )
    rank = jnp.sum(earlier, axis=1)  # words placed before word k
    return jnp.argmax(rank[None, :] == order[:, None], axis=1).astype(jnp.int32)


def grid_side(longest: jax.Array) -> jax.Array:
    """int32: GEM's ``round(1.5 * longest)`` (half to even) for an int32 ``longest``."""
    twice = 3 * longest  # 2 * 1.5 * longest
    low = twice // 2
    half = (twice % 2) == 1
    return jnp.where(half & (low % 2 == 1), low + 1, low).astype(jnp.int32)


def same_words(words: jax.Array, lengths: jax.Array) -> jax.Array:
    """bool[W, W]: words ``a`` and ``b`` are equal (int8[W, L] codes, int32[W]
    lengths)."""
    letters = jnp.all(words[:, None, :] == words[None, :, :], axis=-1)
    return letters & (lengths[:, None] == lengths[None, :])


def shared_directions(down: jax.Array, same: jax.Array) -> jax.Array:
    """bool[W]: each word's direction as GEM keeps it: the direction drawn for the
    last of its copies (``same``: :func:`same_words`)."""
    count = down.shape[0]
    order = jnp.arange(count)
    last = jnp.max(jnp.where(same, order[None, :], -1), axis=1)
    return down[last]


def start_weights(
    frame: jax.Array, crossing: jax.Array, word: jax.Array, length: jax.Array, side: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """For a word laid across ``frame``: (int32[S, S] how many times GEM lists each
    start as an overlap candidate where the word fits, 0 elsewhere; bool[S, S] the
    word fits there).

    Args:
        frame: int8[S, S] the grid, transposed for a down word.
        crossing: int8[S, S] per cell, how many listed words of the other direction
            cover it (in the same frame).
        word: int8[L] letter codes (0 beyond ``length``); length: int32[].
        side: int32[] the game's grid side.
    """
    size = frame.shape[0]
    longest = word.shape[0]
    # Cells beyond the last column read as empty and uncrossed.
    frame_padded = jnp.pad(frame.astype(jnp.int32), ((0, 0), (0, longest)))
    crossing_padded = jnp.pad(crossing.astype(jnp.int32), ((0, 0), (0, longest)))
    listed = jnp.zeros(frame.shape, jnp.int32)
    clash = jnp.zeros(frame.shape, jnp.bool_)
    for offset in range(longest):
        cell = frame_padded[:, offset : offset + size]
        within = offset < length
        letter = word[offset].astype(jnp.int32)
        listed += jnp.where(
            within & (cell == letter), crossing_padded[:, offset : offset + size], 0
        )
        clash |= within & (cell != 0) & (cell != letter)
    index = jnp.arange(size, dtype=jnp.int32)
    inside = (index[:, None] < side) & (index[None, :] < side)
    fits = inside & (index[None, :] + length <= side) & ~clash
    return jnp.where(fits, listed.astype(jnp.int32), 0), fits


def pick_weighted(weights: jax.Array, word: jax.Array) -> jax.Array:
    """int32[2] the (row, col) of the cell of ``weights`` (int32[S, S], total > 0)
    drawn with probability proportional to its weight, by ``word`` (uint32[]): the
    row first (by its row total), then the column within it. Running sums are
    products with a triangle of ones (a batched cumsum is slow on XLA's CPU)."""
    size = weights.shape[0]
    below_or_at = jnp.asarray(np.triu(np.ones((size, size), np.float32)))
    row_totals = jnp.sum(weights, axis=1).astype(jnp.float32)
    target = below(word, jnp.maximum(jnp.sum(weights), 1))
    row_ends = jnp.dot(row_totals, below_or_at).astype(jnp.int32)
    row = jnp.sum(row_ends <= target, dtype=jnp.int32)
    before = jnp.where(row > 0, row_ends[jnp.maximum(row - 1, 0)], 0)
    col_ends = jnp.dot(weights[row].astype(jnp.float32), below_or_at).astype(jnp.int32)
    col = jnp.sum(col_ends <= target - before, dtype=jnp.int32)
    return jnp.stack([row, col])


def first_fit(fits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(int32[2] the first (row, col) in row-major order where ``fits`` (bool[S, S]),
    bool[] there is one). A min over cell indices: a batched ``argmax`` (a two-operand
    reduction) is several times slower on XLA's CPU backend."""
    size = fits.shape[1]
    cells = fits.size
    flat = jnp.min(jnp.where(fits.reshape(-1), jnp.arange(cells, dtype=jnp.int32), cells))
    return jnp.stack([flat // size, flat % size]), flat < cells


def laid(
    word: jax.Array, length: jax.Array, start: jax.Array, size: int
) -> tuple[jax.Array, jax.Array]:
    """(int8[S, S] the word's letters laid across from ``start`` (int32[2]), 0
    elsewhere; bool[S, S] its cells)."""
    index = jnp.arange(size, dtype=jnp.int32)
    offset = index[None, :] - start[1]
    cells = (index[:, None] == start[0]) & (offset >= 0) & (offset < length)
    letters = word[jnp.clip(offset, 0, word.shape[0] - 1)]
    return jnp.where(cells, letters, 0).astype(jnp.int8), cells


def place_words(
    words: jax.Array,
    lengths: jax.Array,
    down: jax.Array,
    picks: jax.Array,
    max_side: int,
) -> Placement:
    """GEM's placement (module docstring) of ``W`` words on one lane.

    Args:
        words: int8[W, L] letter codes (from 1; 0 beyond each length), longest first.
        lengths: int32[W] each at least 1.
        down: bool[W] each word's drawn direction (one draw per word, as GEM draws).
        picks: uint32[W] a random word per placement (the first is unused).
        max_side: the static grid side ``S`` (at least ``round(1.5 * L)``).

    Returns:
        The :class:`Placement`; the game's side is ``grid_side(lengths[0])``.
    """
    count = words.shape[0]
    side = grid_side(lengths[0])
    same = same_words(words, lengths)
    down = shared_directions(down, same)
    grid = jnp.zeros((max_side, max_side), jnp.int8)
    # Per cell, how many listed words cover it: across words, down words.
    across_cover = jnp.zeros((max_side, max_side), jnp.int8)
    down_cover = jnp.zeros((max_side, max_side), jnp.int8)
    rows: list[jax.Array] = []
    cols: list[jax.Array] = []
    placed: list[jax.Array] = []
    live: list[jax.Array] = []
    masks: list[jax.Array] = []
    for k in range(count):
        is_down = down[k]
        frame = jnp.where(is_down, grid.T, grid)
        if k == 0:
            start = jnp.stack([side // 2, (side - lengths[0]) // 2])
            ok = jnp.bool_(True)
        else:
            crossing = jnp.where(is_down, across_cover.T, down_cover)
            weights, fits = start_weights(frame, crossing, words[k], lengths[k], side)
            overlap = jnp.sum(weights) > 0
            # GEM scans rows then columns of the grid itself, whatever the frame.
            fallback, any_fit = first_fit(jnp.where(is_down, fits.T, fits))
            fallback = jnp.where(is_down, fallback[::-1], fallback)
            start = jnp.where(overlap, pick_weighted(weights, picks[k]), fallback)
            ok = overlap | any_fit
        letters, cells = laid(words[k], lengths[k], start, max_side)
        cells = cells & ok
        frame = jnp.where(cells, letters, frame)
        grid = jnp.where(is_down, frame.T, frame)
        mask = jnp.where(is_down, cells.T, cells)
        # A placed copy of an earlier word replaces it as a listed word.
        replaced = [ok & same[k, j] & live[j] for j in range(k)]
        live = [alive & ~gone for alive, gone in zip(live, replaced, strict=True)]
        masks.append(mask)
        unlisted = sum(
            (jnp.where(gone, masks[j], False).astype(jnp.int8) for j, gone in enumerate(replaced)),
            jnp.zeros((max_side, max_side), jnp.int8),
        )
        across_cover = across_cover - jnp.where(~is_down, unlisted, 0) + (mask & ~is_down)
        down_cover = down_cover - jnp.where(is_down, unlisted, 0) + (mask & is_down)
        actual = jnp.where(is_down, start[::-1], start)
        rows.append(jnp.where(ok, actual[0], 0))
        cols.append(jnp.where(ok, actual[1], 0))
        placed.append(ok)
        live.append(ok)
    return Placement(
        grid=grid,
        rows=jnp.stack(rows).astype(jnp.int32),
        cols=jnp.stack(cols).astype(jnp.int32),
        down=down,
        placed=jnp.stack(placed),
        live=jnp.stack(live),
    )
