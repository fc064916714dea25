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

:func:`place_words` does the same for a batch lane with fixed shapes, on a
``max_side x max_side`` grid of which the top-left ``side x side`` is the game's. The
grid is kept as bit planes (:class:`StartSearch`): seen along a word's direction, each
position holds the bitset of the lines across it (rows for an across word) that are
occupied, that hold each bit of a letter code, and that are covered by listed words of
the other direction (a bit-sliced count). A word's candidates for every start at once
are then bitwise operations per letter: the starts where it fits, and per letter ``i``
the starts that put letter ``i`` on a covered cell holding it, counted once per
covering word, which is the number of times GEM lists that start. The second word,
which sees only the centred first one, skips the search: :func:`second_start` finds
the same start in closed form.

Two sampled words can be equal once upper-cased (NLTK's ``en`` list has ``Bob`` and
``bob``); GEM keys its placed words by the word, so the later copy's position
replaces the earlier one as a listed word (both stay on the grid), and both copies
take the later copy's direction. :func:`place_words` follows that: a ``live`` word is
one GEM still lists.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax import bitset
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
    # Shifts and masks rather than // and %: XLA recomputes this per-lane value inside
    # every fused consumer, and signed division is a dozen operations.
    low = twice >> 1
    return (low + (twice & low & 1)).astype(jnp.int32)


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


#: A frame's first bit plane: the occupied cells; the letter codes' bits follow.
OCCUPIED = 0


def cover_planes(count: int) -> int:
    """Bit planes of the per-cell count of listed words of one direction that a search
    reads: at most ``count - 1`` words are placed before the last one."""
    return max(1, (count - 1).bit_length())


def add_mask(planes: jax.Array, mask: jax.Array) -> jax.Array:
    """uint32[C, ...] bit-sliced counters (plane ``c`` holds bit ``c`` of every count)
    plus 1 where ``mask`` (uint32[...]) has a bit."""
    out, carry = [], mask
    for plane in planes:
        out.append(plane ^ carry)
        carry = plane & carry
    return jnp.stack(out)


def subtract_mask(planes: jax.Array, mask: jax.Array) -> jax.Array:
    """uint32[C, ...] bit-sliced counters minus 1 where ``mask`` has a bit (those counts
    are at least 1)."""
    out, borrow = [], mask
    for plane in planes:
        out.append(plane ^ borrow)
        borrow = ~plane & borrow
    return jnp.stack(out)


class StartSearch(struct.PyTreeNode):
    """GEM's overlap candidates for a word laid across a frame, as bitsets.

    A frame is the grid seen along a word: index ``j`` is the position along the
    word's direction (a column for an across word), and each cell is a bitset over the
    lines across it (rows for an across word) in ``N = num_words(S)`` uint32 words, so
    testing a start on every line at once is a few bitwise operations.

    The candidate *entries* are indexed by ``(i, c, j)``: line ``l`` is in entry
    ``(i, c, j)`` when the word fits starting at ``(l, j)`` and its letter ``i`` lies
    on a cell holding that letter whose count of covering words (of the other
    direction) has bit ``c``; GEM lists that start ``2**c`` times for that letter.
    ``counts[c, j]`` is the number of lines in the entries ``(i, c, j)`` over ``i``.

    Attributes:
        fits: uint32[S, N] the starts where the word fits.
        frame: uint32[1 + B, S + L, N] the frame's planes (positions beyond it empty).
        covered: uint32[C, S + L, N] its bit-sliced cover counts (same padding).
        letters: uint32[L, B] per letter of the word, all ones where its code has that
            bit (rows beyond the word's length are never read).
        counts: int32[C, S] the lines in the entries of each cover bit and position.
    """

    fits: jax.Array
    frame: jax.Array
    covered: jax.Array
    letters: jax.Array
    counts: jax.Array

    def matching(self, offset: jax.Array, cells: jax.Array) -> jax.Array:
        """uint32[..., N]: the lines whose cell holds letter ``offset`` (int32[]), of
        ``cells`` (uint32[1 + B, ..., N], planes of the frame)."""
        letter = self.letters[offset]
        differs = jnp.zeros(cells.shape[1:], jnp.uint32)
        for bit in range(letter.shape[0]):
            differs = differs | (cells[1 + bit] ^ letter[bit])
        return cells[OCCUPIED] & ~differs

    def entry(self, offset: jax.Array, plane: jax.Array, position: jax.Array) -> jax.Array:
        """uint32[N]: the lines of entry ``(offset, plane, position)`` (int32[] each)."""
        cell = position + offset
        matching = self.matching(offset, self.frame[:, cell])
        return self.fits[position] & matching & self.covered[plane, cell]

    @property
    def weights(self) -> jax.Array:
        """int32[C, S]: how many times GEM lists the starts of the entries of each cover
        bit and position."""
        planes = self.counts.shape[0]
        return self.counts << jnp.arange(planes, dtype=jnp.int32)[:, None]


def search_starts(
    frame: jax.Array,
    cover: jax.Array,
    word: jax.Array,
    length: jax.Array,
    side: jax.Array,
) -> StartSearch:
    """The :class:`StartSearch` of a word in a frame.

    Two loops over the word's letters, each reading the frame from the letter's offset:
    the first gathers the clashes (an occupied cell with another letter), hence where
    the word fits; the second adds up the letters' entries. Loops rather than
    per-letter arrays: XLA then keeps the frame and ``fits`` computed once, where
    unrolled chains of elementwise operations are fused into, and recomputed by, every
    consumer.

    Args:
        frame: uint32[1 + B, S, N] occupied cells, then the ``B`` bits of their letter
            codes.
        cover: uint32[C, S, N] per cell, bit-sliced, how many listed words of the other
            direction cover it.
        word: int8[L] letter codes (0 beyond ``length``); length: int32[].
        side: int32[] the game's grid side.
    """
    code_bits, size = frame.shape[0] - 1, frame.shape[1]
    longest = word.shape[0]
    codes = word.astype(jnp.uint32)
    letters = jnp.where(
        ((codes[:, None] >> jnp.arange(code_bits, dtype=jnp.uint32)) & 1) == 1,
        jnp.uint32(0xFFFFFFFF),
        jnp.uint32(0),
    )
    # Positions beyond the frame read as empty and uncovered.
    pad = ((0, 0), (0, longest), (0, 0))
    search = StartSearch(
        fits=jnp.zeros(frame.shape[1:], jnp.uint32),
        frame=jnp.pad(frame, pad),
        covered=jnp.pad(cover, pad),
        letters=letters,
        counts=jnp.zeros((cover.shape[0], size), jnp.int32),
    )

    def from_offset(cells: jax.Array, offset: jax.Array) -> jax.Array:
        """``cells`` (uint32[..., S + L, N]) at positions ``offset .. offset + S - 1``."""
        return jax.lax.dynamic_slice_in_dim(cells, offset, size, axis=-2)

    def add_clash(offset: jax.Array, clash: jax.Array) -> jax.Array:
        cells = from_offset(search.frame, offset)
        clashing = cells[OCCUPIED] & ~search.matching(offset, cells)
        return clash | jnp.where(offset < length, clashing, jnp.uint32(0))

    clash = jax.lax.fori_loop(0, longest, add_clash, jnp.zeros(frame.shape[1:], jnp.uint32))
    index = jnp.arange(size, dtype=jnp.int32)
    lines = bitset.from_mask(index < side)
    fits = jnp.where((index + length <= side)[:, None], lines[None, :] & ~clash, jnp.uint32(0))
    search = search.replace(fits=fits)

    def count(offset: jax.Array, counts: jax.Array) -> jax.Array:
        matching = search.matching(offset, from_offset(search.frame, offset))
        entries = fits[None] & matching[None] & from_offset(search.covered, offset)
        return counts + jnp.where(offset < length, bitset.count(entries), 0)

    return search.replace(counts=jax.lax.fori_loop(0, longest, count, search.counts))


def draw_weighted(weights: jax.Array, word: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The (row, col) of a cell of ``weights`` (int32[R, K], total > 0) drawn with
    probability proportional to its weight, by ``word`` (uint32[]): the row first (by
    its row total), then the column within it; with the draw's rank inside the cell
    (int32[], ``0 .. weight - 1``)."""
    target = below(word, jnp.maximum(jnp.sum(weights), 1))
    row_ends = running_ends(jnp.sum(weights, axis=1))
    row = jnp.sum(row_ends <= target, dtype=jnp.int32)
    rest = target - jnp.where(row > 0, row_ends[jnp.maximum(row - 1, 0)], 0)
    col_ends = running_ends(weights[row])
    col = jnp.sum(col_ends <= rest, dtype=jnp.int32)
    rank = rest - jnp.where(col > 0, col_ends[jnp.maximum(col - 1, 0)], 0)
    return row, col, rank


def pick_weighted(weights: jax.Array, word: jax.Array) -> jax.Array:
    """int32[2] the (row, col) of :func:`draw_weighted`."""
    row, col, _ = draw_weighted(weights, word)
    return jnp.stack([row, col])


def running_ends(values: jax.Array) -> jax.Array:
    """int32[M]: the running sums of ``values`` (int32[M], totals below 2**24), as a
    product with a triangle of ones (a batched cumsum is slow on XLA's CPU)."""
    count = values.shape[0]
    upper = jnp.asarray(np.triu(np.ones((count, count), np.float32)))
    return jnp.dot(values.astype(jnp.float32), upper).astype(jnp.int32)


def nth_bit(words: jax.Array, rank: jax.Array) -> jax.Array:
    """int32[]: the index of the ``rank``-th (from 0) set bit of the bitset ``words``
    (uint32[M]): the word holding it by the words' running sizes, then the bit."""
    sizes = jax.lax.population_count(words).astype(jnp.int32)
    ends = running_ends(sizes)
    before = ends <= rank
    word = jnp.sum(before, dtype=jnp.int32)
    rest = rank - jnp.sum(jnp.where(before, sizes, 0))
    chosen = words[jnp.minimum(word, words.shape[0] - 1)]
    below_or_at = np.asarray([(2 << bit) - 1 for bit in range(32)], np.uint64).astype(np.uint32)
    within = jax.lax.population_count(chosen & jnp.asarray(below_or_at)).astype(jnp.int32)
    return word * bitset.WORD_BITS + jnp.sum(within <= rest, dtype=jnp.int32)


def draw_start(search: StartSearch, word: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(int32[] line, int32[] position): a start drawn with probability proportional to
    GEM's listing count, by ``word`` (uint32[]): a cover bit and position by their
    weight, then one of their entries' lines (the letters' entries in order)."""
    longest = search.letters.shape[0]
    plane, position, rank = draw_weighted(search.weights, word)
    offsets = jnp.arange(longest, dtype=jnp.int32)
    entries = jax.vmap(search.entry, in_axes=(0, None, None))(offsets, plane, position)
    bit = nth_bit(entries.reshape(-1), rank >> plane)  # over the letters' entries
    return bit % (entries.shape[1] * bitset.WORD_BITS), position


def first_fit(fits: jax.Array, down: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(int32[] line, int32[] position, bool[] any): the first start where the word
    fits (``fits``: uint32[S, N], :attr:`StartSearch.fits`) in the grid's row-major
    order: for an across word (lines are rows) the lowest line, then position; for a
    down word (positions are rows) the lowest position, then line."""
    size, words = fits.shape
    index = jnp.arange(size, dtype=jnp.int32)
    # Across: the lowest line with a fit, then the first position fitting on it.
    across_line = bitset.lowest(jnp.bitwise_or.reduce(fits, axis=0))
    word_of_line = jnp.arange(words) == across_line // bitset.WORD_BITS
    on_line = jnp.sum(jnp.where(word_of_line[None, :], fits, 0), axis=1, dtype=jnp.uint32)
    on_line = (on_line >> (across_line % bitset.WORD_BITS).astype(jnp.uint32)) & 1
    across_position = jnp.min(jnp.where(on_line == 1, index, size))
    # Down: the first position with a fit, then its lowest line.
    down_position = jnp.min(jnp.where(jnp.any(fits != 0, axis=1), index, size))
    down_line = bitset.lowest(
        jnp.sum(jnp.where((index == down_position)[:, None], fits, 0), axis=0)
    )
    line = jnp.where(down, down_line, across_line)
    position = jnp.where(down, down_position, across_position)
    return line, position, jnp.any(fits != 0)


def letter_masks(words: jax.Array, lengths: jax.Array, code_bits: int) -> jax.Array:
    """uint32[W, 1 + B]: per word (int8[W, L] codes, int32[W] lengths, ``L`` below
    32), a bitset over its letters per frame plane: the letters it has, then those
    whose code has each of the ``B = code_bits`` bits."""
    letter = jnp.arange(words.shape[1], dtype=jnp.int32)
    codes = words.astype(jnp.int32)[:, None, :]
    flags = jnp.concatenate(
        [
            (letter[None, :] < lengths[:, None])[:, None, :],
            ((codes >> jnp.arange(code_bits)[None, :, None]) & 1) == 1,
        ],
        axis=1,
    )
    weights = jnp.left_shift(jnp.uint32(1), letter.astype(jnp.uint32))
    return jnp.sum(jnp.where(flags, weights, jnp.uint32(0)), axis=-1, dtype=jnp.uint32)


def laid_planes(
    masks: jax.Array, line: jax.Array, start: jax.Array, size: int
) -> tuple[jax.Array, jax.Array]:
    """A word laid on ``line`` from ``start`` (int32[]) in both frames: (uint32[P, S, N]
    in its own direction's frame: its positions hold the line's bit; uint32[P, S, N]
    in the other frame: the line's index holds the positions' bits), from its
    :func:`letter_masks` (uint32[P]; zeros lay nothing). Shifts of the masks rather
    than a gather of the word's letters by position, which XLA's CPU backend would
    redo for every plane."""
    index = jnp.arange(size, dtype=jnp.int32)
    offset = index - start
    shift = jnp.clip(offset, 0, bitset.WORD_BITS - 1).astype(jnp.uint32)
    flags = (offset >= 0)[None, :] & (((masks[:, None] >> shift[None, :]) & 1) == 1)
    line_bit = bitset.from_mask(index == line)
    along = jnp.where(flags[..., None], line_bit[None, None, :], jnp.uint32(0))
    across = jnp.where((index == line)[None, :, None], bitset.from_mask(flags)[:, None, :], 0)
    return along, across.astype(jnp.uint32)


def frame_codes(frame: jax.Array, size: int) -> jax.Array:
    """int8[S, S]: the letter codes of a frame (uint32[P, S, N]), cell ``[j, l]`` at
    position ``j`` and line ``l``."""
    codes = jnp.zeros((size, size), jnp.int32)
    for bit in range(frame.shape[0] - 1):
        codes = codes | (bitset.to_mask(frame[1 + bit], size).astype(jnp.int32) << bit)
    return codes.astype(jnp.int8)


def centred_start(side: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(int32[] line, int32[] position): where GEM centres the first word (int32[]
    ``length``) on a grid of ``side``: line ``side // 2``, from ``(side - length) // 2``
    along it."""
    return side >> 1, (side - length) >> 1


def second_start(
    words: jax.Array, lengths: jax.Array, down: jax.Array, side: jax.Array, pick: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(int32[] line, int32[] position, bool[] placed): where GEM puts the second word,
    with only the centred first word on the grid, in closed form rather than by a
    search over the grid: the start :func:`place_words`' search would draw with
    ``pick`` (uint32[]).

    Across the first word, the candidates are the pairs ``(i, j)`` of equal letters
    (the second word's ``i``-th on the first's ``j``-th) whose start is inside the
    grid: each crosses one cell, which holds its letter, so each fits and is listed
    once. They are drawn in the search's order: by position (``i`` from the last
    letter), then by line (``j`` from the first). Without a candidate, the first fit
    in row-major order (:func:`second_fallback`).

    Args:
        words: int8[W, L] letter codes (``W`` at least 2); lengths: int32[W];
            down: bool[W] directions; side: int32[] the game's grid side.
    """
    first, second = words[0].astype(jnp.int32), words[1].astype(jnp.int32)
    longest = words.shape[1]
    # The first word in the second's frame: at position `centre` (its line in its own
    # frame), over the lines from `lo` (its start).
    centre, lo = centred_start(side, lengths[0])
    letter = jnp.arange(longest, dtype=jnp.int32)
    position = centre - letter  # the start that puts letter i on the first word
    inside = (letter < lengths[1]) & (position >= 0) & (position + lengths[1] <= side)
    pairs = (
        (down[0] != down[1])
        & inside[:, None]
        & (letter < lengths[0])[None, :]
        & (second[:, None] == first[None, :])
    )
    row, line_offset, _ = draw_weighted(pairs[::-1].astype(jnp.int32), pick)
    overlap = jnp.any(pairs)
    line = jnp.where(overlap, lo + line_offset, second_fallback(lengths, down, side))
    start = jnp.where(overlap, centre - (longest - 1 - row), 0)
    return line, start, jnp.bool_(True)


def second_fallback(lengths: jax.Array, down: jax.Array, side: jax.Array) -> jax.Array:
    """int32[]: the line of the second word's first fit in row-major order beside the
    centred first word when it has no overlap candidate; its position is 0.

    Along the first word it is the top-left start: the first word lies on line
    ``c = side // 2``, at least 1. Across it, every start that crosses it holds another
    letter there (else it would be a candidate), so the first fit is the first start
    that does not cross it. That is the top-left start unless the first word begins at
    the grid's edge (``(side - first) // 2 == 0``) and the word is longer than ``c``:
    then a down word from the top row crosses it in each of its columns, and an across
    word on one of its rows fits neither left of it (columns below ``c``) nor right of
    it (``side <= 2 * c + 1``), so the first fit is at line ``first``, just past it.
    """
    centre, lo = centred_start(side, lengths[0])
    blocked = (down[0] != down[1]) & (lo == 0) & (centre < lengths[1])
    return jnp.where(blocked, lengths[0], 0).astype(jnp.int32)


class Layout(NamedTuple):
    """The words placed so far (:func:`place_words`' loop carry): both frames
    (uint32[P, S, N]), per frame the bit-sliced count of listed words of the other
    direction per cell (uint32[C, S, N]), each word's cells in the other direction's
    frame (uint32[W, S, N]), and the :class:`Placement` fields (int32[W], bool[W])."""

    across_frame: jax.Array
    down_frame: jax.Array
    across_cover: jax.Array
    down_cover: jax.Array
    spans: jax.Array
    rows: jax.Array
    cols: jax.Array
    placed: jax.Array
    live: jax.Array


def place_words(
    words: jax.Array,
    lengths: jax.Array,
    down: jax.Array,
    picks: jax.Array,
    max_side: int,
    code_bits: int,
) -> Placement:
    """GEM's placement (module docstring) of ``W`` words on one lane.

    The grid is kept as bit planes in two frames (:class:`StartSearch`): the across
    frame (position = column, lines = rows), where across words are searched, and the
    down frame (position = row, lines = columns); and per frame the bit-sliced count
    of listed words of the other direction per cell.

    Args:
        words: int8[W, L] letter codes (from 1; 0 beyond each length), longest first;
            ``L`` below 32.
        lengths: int32[W] each at least 1.
        down: bool[W] each word's drawn direction (one draw per word, as GEM draws).
        picks: uint32[W] a random word per placement (the first is unused).
        max_side: the static grid side ``S`` (at least ``round(1.5 * L)``).
        code_bits: the bits of the largest letter code.

    Returns:
        The :class:`Placement`; the game's side is ``grid_side(lengths[0])``.
    """
    count, longest = words.shape
    if longest >= bitset.WORD_BITS:
        raise ValueError(f"words of fewer than {bitset.WORD_BITS} letters, got {longest}")
    size, nwords = max_side, bitset.num_words(max_side)
    masks = letter_masks(words, lengths, code_bits)
    side = grid_side(lengths[0])
    same = same_words(words, lengths)
    down = shared_directions(down, same)
    frame = jnp.zeros((1 + code_bits, size, nwords), jnp.uint32)
    cover = jnp.zeros((cover_planes(count), size, nwords), jnp.uint32)
    slots = jnp.zeros((count,), jnp.int32)
    empty = Layout(
        across_frame=frame,
        down_frame=frame,
        across_cover=cover,
        down_cover=cover,
        spans=jnp.zeros((count, size, nwords), jnp.uint32),
        rows=slots,
        cols=slots,
        placed=slots.astype(jnp.bool_),
        live=slots.astype(jnp.bool_),
    )

    def lay(k: jax.Array, layout: Layout, line: jax.Array, start: jax.Array, ok: jax.Array):
        """``layout`` with word ``k`` on ``line`` from ``start`` where ``ok``."""
        is_down = down[k]
        along, across = laid_planes(jnp.where(ok, masks[k], jnp.uint32(0)), line, start, size)
        # A placed copy of an earlier word replaces it as a listed word.
        replaced = ok & same[k] & layout.live & (jnp.arange(count) < k)
        unlisted = jnp.bitwise_or.reduce(
            jnp.where(replaced[:, None, None], layout.spans, jnp.uint32(0)), axis=0
        )
        span = across[OCCUPIED]
        own_cover = jnp.where(is_down, layout.across_cover, layout.down_cover)
        recounted = add_mask(subtract_mask(own_cover, unlisted), span)
        return Layout(
            across_frame=layout.across_frame | jnp.where(is_down, across, along),
            down_frame=layout.down_frame | jnp.where(is_down, along, across),
            across_cover=jnp.where(is_down, recounted, layout.across_cover),
            down_cover=jnp.where(is_down, layout.down_cover, recounted),
            spans=layout.spans.at[k].set(span),
            rows=layout.rows.at[k].set(jnp.where(ok, jnp.where(is_down, start, line), 0)),
            cols=layout.cols.at[k].set(jnp.where(ok, jnp.where(is_down, line, start), 0)),
            placed=layout.placed.at[k].set(ok),
            live=(layout.live & ~replaced).at[k].set(ok),
        )

    def place(k: jax.Array, layout: Layout) -> Layout:
        """``layout`` with word ``k`` placed as GEM places a later word."""
        is_down = down[k]
        frame = jnp.where(is_down, layout.down_frame, layout.across_frame)
        cover = jnp.where(is_down, layout.down_cover, layout.across_cover)
        search = search_starts(frame, cover, words[k], lengths[k], side)
        overlap = jnp.any(search.counts > 0)
        drawn_line, drawn_start = draw_start(search, picks[k])
        first_line, first_start, any_fit = first_fit(search.fits, is_down)
        line = jnp.where(overlap, drawn_line, first_line)
        start = jnp.where(overlap, drawn_start, first_start)
        return lay(k, layout, line, start, overlap | any_fit)

    # The first word centred, the second in closed form: laid by one loop, so that
    # XLA compiles `lay` once for both.
    starts = [(*centred_start(side, lengths[0]), jnp.bool_(True))]
    if count > 1:
        starts.append(second_start(words, lengths, down, side, picks[1]))
    lines, positions, laid = (jnp.stack(column) for column in zip(*starts, strict=True))
    layout = jax.lax.fori_loop(
        0, len(starts), lambda k, layout: lay(k, layout, lines[k], positions[k], laid[k]), empty
    )
    layout = jax.lax.fori_loop(len(starts), count, place, layout)
    return Placement(
        grid=frame_codes(layout.down_frame, size),
        rows=layout.rows,
        cols=layout.cols,
        down=down,
        placed=layout.placed,
        live=layout.live,
    )
