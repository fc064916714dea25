"""Sudoku (GEM's ``gem/envs/game_env/sudoku.py``).

The player fills the empty cells of a ``scale x scale`` puzzle (4 or 9) with one
unique solution. GEM's rules, branch by branch (spec section 13):

1. no ``\\boxed{row col num}`` (exactly one whitespace character between fields) or
   a number ``int()`` refuses: "You did not provide a valid guess.", -0.1,
   terminated, truncated only when ``turn == max_turns``;
2. ``row``, ``col`` or ``num`` outside ``1..scale``: out of bounds (0);
3. a non-empty cell (a given or an earlier fill): already filled (0);
4. ``num`` equal to the stored solution's: the cell is filled, reward
   ``1 / init_num_empty``; when no empty cell is left: success ("Congratulations!
   ..."), terminated, never truncated;
5. otherwise "violates Sudoku rules" (0), nothing changes;
6. after 2-5 without success, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, the step's reward unchanged.

Puzzles are GEM's: a full grid by randomised row-major backtracking (each cell takes
its values in uniformly shuffled order, the first that extends to a full grid), then
``clues`` removal *attempts* on uniformly shuffled cells, a removal kept only if the
puzzle still has exactly one solution (so ``clues`` bounds the *empty* cells).

* 4x4, on device and exact: the 288 grids are enumerated at import with the
  probability GEM's backtracking gives each (1/384 or 1/192: a value is uniform
  among those that extend, so some grids are twice as likely); a reset draws one
  from that distribution, then runs the ``clues`` attempts on a random permutation of
  the cells, deciding uniqueness exactly with the grid's minimal *unavoidable sets*
  (the cell sets where another grid differs from it): a puzzle is unique iff every
  such set keeps a given.
* 9x9: a bank made by ``scripts/make_sudoku_bank.py`` with GEM's own process (its
  RNG calls reproduce GEM's ``reset(seed)`` puzzles exactly), which records all 81
  removal attempts, so any ``clues`` is exact. A reset draws an entry uniformly and
  applies a uniform random validity-preserving symmetry: digit relabelling, row
  permutations inside bands, band permutation, the same for columns, transpose
  (about 1.2e12 puzzles per entry). Uniqueness and the number of empty cells are
  invariant under these maps, so the empty-cell distribution is GEM's.

The ``-random`` variant draws ``(scale, clues, max_turns)`` uniformly from GEM's
``(4, 10, 15), (9, 50, 50)`` at every reset; arrays are 9x9 with the 4x4 puzzles in
the top-left corner.

Kernel action: int32[4] ``[ok, row, col, num]`` (see
:class:`~gemjax.text.grammar.BoxedInts`): ``ok <= 0`` is a format error;
``row``, ``col``, ``num`` are 1-based as the player writes them (clamped to
``2**31 - 1`` by the host parser).

Observation (what the player sees), a dict of:
    ``board``: int8[S, S] the digits shown, 0 for an empty cell (and outside the
        active board of ``-random``);
    ``active``: bool[S, S] the cells of this episode's board;
    ``rejected``: bool[S, S, S] digit ``d + 1`` was placed in the cell and judged to
        violate the rules (GEM's history shows those messages);
    ``turn``, ``scale``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import (
    ActionCells,
    Environment,
    Event,
    GemMirror,
    Rewards,
    TimeStep,
    Variant,
    check_int_action,
    gem_ending,
)
from gemjax.rng import below, bits, random_words
from gemjax.spaces import MultiDiscrete
from gemjax.text.grammar import BoxedInts
from gemjax.text.templates import Board, Choice, Int, MessageTable, Template

# GEM's -random candidates: (scale, clues, max_turns).
RANDOM_CONFIGS = ((4, 10, 15), (9, 50, 50))
SCALES = (4, 9)
WORDS4, WORDS9 = 17, 35  # random words a 4x4 and a 9x9 draw use
BANK_FILE = ("data", "sudoku", "bank9.npz")

MOVE = {"row": Int("row", echo=True), "col": Int("col", echo=True), "num": Int("num", echo=True)}

MESSAGES = MessageTable(
    instructions=Template(
        "You are playing {version} Sudoku.\n"
        "Each row is numbered from 1 to {scale}, and each column is also numbered from 1 "
        "to {scale}.\n"
        "Empty cells are represented by '.', and pre-filled cells contain digits from 1 to "
        "{scale}.\n\n"
        "Your objective is to fill the empty cells in the {scale}x{scale} grid with digits "
        "from 1 to {scale} such that:\n"
        "1. Each row contains all digits from 1 to {scale} without repetition.\n"
        "2. Each column contains all digits from 1 to {scale} without repetition.\n"
        "3. Each of the nine {scale}x{scale} subgrids contains all digits from 1 to {scale} "
        "without repetition.\n\n"
        "Rules and Instructions:\n"
        "1. **Do not overwrite** the initial numbers provided in the grid.\n"
        "2. **Only fill** empty cells represented by '.'.\n"
        "3. You may respond in any manner you prefer, but ensure that your response "
        "includes the format of '\\boxed{{row column number}}', e.g. \\boxed{{1 1 5}}.\n"
        "4. **Ensure** that your move does not violate Sudoku rules. Invalid moves, "
        "including overwriting pre-filled cells and placing two numbers in one "
        "row/col/sub-grid will result in penalties.\n"
        "The history of your moves will be appended as you play more rounds. Use the "
        "history of your move to improve your decision making by avoiding the moves you "
        "have tried. Good luck!\n\n",
        version=Choice("version", ("", "A simple version of")),
    ),
    format_error=Template("You did not provide a valid guess."),
    out_of_bounds=Template(
        "At turn {turn}, you tried to place {num} at R{row} C{col}, which is out of bounds.",
        **MOVE,
    ),
    filled=Template(
        "At turn {turn}, you tried to place {num} at R{row} C{col}, which is already filled. "
        "You cannot overwrite pre-filled cells.",
        **MOVE,
    ),
    correct=Template(
        "At turn {turn}, you placed {num} at R{row} C{col}, which is correct.", **MOVE
    ),
    success=Template("Congratulations! You have completed the Sudoku puzzle!"),
    violation=Template(
        "At turn {turn}, you tried to place {num} at R{row} C{col}, which violates Sudoku rules.",
        **MOVE,
    ),
    max_turns=Template("You have reached the maximum number of turns."),
)


@dataclass(frozen=True)
class BlockBoard(Board):
    """A :class:`Board` drawn in square blocks (Sudoku's boxes).

    Inside a row, cells are joined by ``separator`` and, at a block boundary, by
    ``block_separator``; between bands of ``block`` rows a rule line
    ``rule[0] + rule[1] * (cols - 1) + row_end`` is drawn. Column labels get
    ``header_block_end`` appended at the end of every block (the last one too), and
    labels and row labels are numbered from ``base``. ``block`` None is the integer
    square root of the printed rows (a ``-random`` board of 4 or 9 rows has blocks of
    2 or 3). GEM's Sudoku: ``header=("   ", "C{}", " ", "\\n")``,
    ``header_block_end="  "``, ``row_label="R{} "``, cells ``" ."``, ``" 1"``, ...,
    ``separator=" "``, ``block_separator=" | "``, ``rule=("   ", "- - ")``, ``base=1``.
    """

    block: int | None = None
    block_separator: str = ""
    header_block_end: str = ""
    rule: tuple[str, str] | None = None
    base: int = 0

    def format_values(
        self, values: Sequence[int], rows: int | None = None, cols: int | None = None
    ) -> str:
        height, width = self.shape
        rows = height if rows is None else min(max(int(rows), 0), height)
        cols = width if cols is None else min(max(int(cols), 0), width)
        block = self.block or max(math.isqrt(rows), 1)
        lines = []
        if self.header is not None:
            prefix, label, separator, end = self.header
            ends = [self.header_block_end if (c + 1) % block == 0 else "" for c in range(cols)]
            labels = [label.format(c + self.base) + ends[c] for c in range(cols)]
            lines.append(prefix + separator.join(labels) + end)
        for r in range(rows):
            row = values[r * width : r * width + cols]
            parts = [self.row_label.format(r + self.base)]
            for c, v in enumerate(row):
                if c:
                    parts.append(self.block_separator if c % block == 0 else self.separator)
                parts.append(self.cells[int(v)])
            lines.append("".join(parts) + self.row_end)
            if self.rule is not None and (r + 1) % block == 0 and r + 1 < rows:
                lines.append(self.rule[0] + self.rule[1] * (cols - 1) + self.row_end)
        return "".join(lines)


@functools.cache
def suffix_for(side: int) -> Template:
    """GEM's suffix: the board (its active ``scale x scale`` part) and the prompt."""
    board = BlockBoard(
        "board",
        (side, side),
        (" .", *(f" {d}" for d in range(1, 10))),
        rows="scale",
        cols="scale",
        header=("   ", "C{}", " ", "\n"),
        row_label="R{} ",
        separator=" ",
        block_separator=" | ",
        header_block_end="  ",
        rule=("   ", "- - "),
        base=1,
    )
    return Template("Here is the current board layout:\n{board}Enter your move.", board=board)


# --- 4x4: every grid, with GEM's probability ------------------------------------------


def _peers(side: int) -> np.ndarray:
    """bool[C, C]: cells sharing a row, column or box (a cell is not its own peer)."""
    box = math.isqrt(side)
    r, c = np.divmod(np.arange(side * side), side)
    b = box * (r // box) + c // box
    same = (r[:, None] == r) | (c[:, None] == c) | (b[:, None] == b)
    return same & ~np.eye(side * side, dtype=bool)


@functools.cache
def grids4() -> tuple[np.ndarray, np.ndarray]:
    """All 288 valid 4x4 grids (int8[288, 16], lexicographic order) and the weight of
    each (int32[288]) in units of 1/384: GEM's backtracking fills the cells in
    row-major order, each uniformly among the values that some full grid extends."""
    peers = _peers(4)
    found: list[tuple[int, ...]] = []

    def extend(grid: list[int], i: int) -> None:
        if i == 16:
            found.append(tuple(grid))
            return
        used = {grid[j] for j in range(i) if peers[i, j]}
        for v in range(1, 5):
            if v not in used:
                grid[i] = v
                extend(grid, i + 1)
        grid[i] = 0

    extend([0] * 16, 0)
    grids = np.asarray(found, np.int8)
    # P(grid) = prod over cells of 1 / (distinct values among grids sharing the prefix).
    probability = np.ones(len(grids))
    for i in range(16):
        for _, group in itertools.groupby(range(len(grids)), key=lambda g: found[g][:i]):
            members = list(group)
            choices = len({found[g][i] for g in members})
            probability[members] /= choices
    weights = np.rint(probability * 384).astype(np.int32)
    assert weights.sum() == 384 and np.allclose(weights / 384, probability)
    return grids, weights


@functools.cache
def unavoidable4() -> np.ndarray:
    """int32[288, K]: per grid, its minimal unavoidable sets as 16-bit cell masks (the
    cells where another grid differs, minimal under inclusion), padded with
    ``0xFFFF``. A puzzle of the grid whose empty cells are ``E`` has one solution iff
    every mask keeps a given: ``mask & ~E != 0``."""
    grids, _ = grids4()
    bits = 1 << np.arange(16)
    rows = []
    for g in grids:
        masks = sorted(
            {int(m) for m in ((grids != g) * bits).sum(axis=1) if m},
            key=lambda m: m.bit_count(),
        )
        minimal: list[int] = []
        for m in masks:
            if not any(x & m == x for x in minimal):
                minimal.append(m)
        rows.append(minimal)
    width = max(len(r) for r in rows)
    table = np.full((len(rows), width), 0xFFFF, np.int32)
    for i, r in enumerate(rows):
        table[i, : len(r)] = r
    return table


# --- 9x9: the bank ---------------------------------------------------------------------


@functools.cache
def bank9_arrays() -> dict[str, np.ndarray]:
    """The shipped 9x9 bank (see ``scripts/make_sudoku_bank.py``): ``solution`` uint8[N,
    81], ``attempt`` uint8[N, 81] (each cell's removal attempt index), ``removed``
    bool[N, 81] (that removal kept the puzzle unique)."""
    path = importlib.resources.files("gemjax.envs").joinpath("/".join(BANK_FILE))
    with path.open("rb") as f, np.load(f) as data:
        solution = data["solution"]
        return {
            "solution": solution,
            "attempt": data["attempt"],
            "removed": np.unpackbits(data["removed"], axis=1, count=81).astype(bool),
        }


def pack_bank9(
    solution: np.ndarray, attempt: np.ndarray, removed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The bank as the device reads it: ``(lines uint32[2N, 9, 2], removal uint8[2N,
    9, 9])``, entry ``n`` at ``2n`` and its transpose at ``2n + 1``.

    ``lines[i, r]``: row ``r``'s digits minus 1, columns 0-7 in 4-bit fields of word
    0, column 8 in word 1. ``removal``: each cell's attempt index where its removal
    stuck, 255 where it did not (the cell is empty iff ``removal < clues``).
    """
    grids = solution.reshape(-1, 9, 9)
    keys = np.where(removed, attempt, 255).astype(np.uint8).reshape(-1, 9, 9)
    both = np.stack([grids, grids.transpose(0, 2, 1)], axis=1).reshape(-1, 9, 9)
    fields = both.astype(np.uint32) - 1
    low = (fields[..., :8] << (4 * np.arange(8, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32)
    removals = np.stack([keys, keys.transpose(0, 2, 1)], axis=1).reshape(-1, 9, 9)
    return np.stack([low, fields[..., 8]], axis=-1), removals


class SudokuTables(struct.PyTreeNode):
    """The puzzle sources (arrays, so they travel in params, not as constants).

    Attributes:
        grids4: int32[G] the 4x4 grids, cell ``i``'s digit minus 1 in bits ``2i, 2i+1``.
        cumulative4: int32[G] running sums of the grids' weights (units of 1/384).
        unavoidable4: int32[G, K] per grid its minimal unavoidable cell masks.
        lines9: uint32[2N, 9, 2] the 9x9 bank's solutions, each entry and its
            transpose (:func:`pack_bank9`).
        removal9: uint8[2N, 9, 9] the 9x9 bank's removals, the same way.
    An env that never draws a size holds one-row placeholders for its tables.
    """

    grids4: jax.Array
    cumulative4: jax.Array
    unavoidable4: jax.Array
    lines9: jax.Array
    removal9: jax.Array


@functools.cache
def tables_for(scales: tuple[int, ...]) -> SudokuTables:
    """The tables an env drawing puzzles of ``scales`` needs (others: placeholders)."""
    if 4 in scales:
        grids, weights = grids4()
        shifts = 2 * np.arange(16, dtype=np.uint32)
        packed = ((grids.astype(np.uint32) - 1) << shifts).sum(axis=1, dtype=np.uint32)
        g4, c4, u4 = packed.view(np.int32), np.cumsum(weights, dtype=np.int32), unavoidable4()
    else:
        g4, c4, u4 = (np.zeros(1, np.int32), np.full(1, 384, np.int32), np.zeros((1, 1), np.int32))
    if 9 in scales:
        packed, removal = pack_bank9(**bank9_arrays())
    else:
        packed, removal = np.zeros((2, 9, 2), np.uint32), np.zeros((2, 9, 9), np.uint8)
    return SudokuTables(
        grids4=jnp.asarray(g4),
        cumulative4=jnp.asarray(c4),
        unavoidable4=jnp.asarray(u4),
        lines9=jnp.asarray(packed),
        removal9=jnp.asarray(removal),
    )


def one_hot_bits(rank: jax.Array) -> jax.Array:
    """int32[n]: ``1 << i`` at position ``rank[i]`` (``rank``: int32[n], a permutation)."""
    n = rank.shape[-1]
    hit = rank[None, :] == jnp.arange(n, dtype=jnp.int32)[:, None]
    return jnp.sum(jnp.where(hit, 1 << jnp.arange(n, dtype=jnp.int32), 0), axis=1, dtype=jnp.int32)


def draw4(
    tables: SudokuTables, bits: jax.Array, clues: jax.Array, side: int = 4
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A 4x4 puzzle as GEM makes one, in the top-left corner of a ``side x side``
    board (zeros around it): ``(solution int32[side * side], empty bool[side * side],
    number of empty cells int32[])``.

    ``bits``: uint32[17] random words (one picks the grid, 16 order the cells).
    """
    u = (bits[0] % jnp.uint32(384)).astype(jnp.int32)
    index = jnp.sum(tables.cumulative4 <= u, dtype=jnp.int32)
    word = tables.grids4[index]
    masks = tables.unavoidable4[index]
    # Cell i is attempted ``rank[i]``-th; attempt t's cell as a one-bit mask.
    attempt_bits = one_hot_bits(random_permutation(bits[1:17]))
    empty = jnp.int32(0)
    for t in range(16):  # GEM's attempts, in order; only the first ``clues`` count
        candidate = empty | attempt_bits[t]
        unique = jnp.all((masks & ~candidate) != 0)
        empty = jnp.where((t < clues) & unique, candidate, empty)
    # Board cell (r, c) is 4x4 cell 4r + c (static maps: a pad is slow batched on CPU).
    r, c = np.divmod(np.arange(side * side), side)
    inside = (r < 4) & (c < 4)
    cell = np.where(inside, 4 * r + c, 0)
    solution = jnp.where(inside, ((word >> (2 * cell)) & 3) + 1, 0)
    count = jax.lax.population_count(empty)
    return solution, inside & (((empty >> cell) & 1) == 1), count


def random_permutation(bits: jax.Array) -> jax.Array:
    """int32[..., n]: a uniform permutation of ``0..n-1`` per row of random words
    (uint32[..., n]): the rank of each word (pairwise compares, cheaper than a sort
    under ``vmap``; ties, probability below ``n**2 / 2**33``, rank the earlier word
    first: an earlier word counts when ``<=``, a later one when ``<``)."""
    n = bits.shape[-1]
    index = jnp.arange(n)
    earlier = index[None, :] < index[:, None]
    other, this = bits[..., None, :], bits[..., :, None]
    before = jnp.where(earlier, other <= this, other < this)
    return jnp.sum(before, axis=-1, dtype=jnp.int32)


def field(low: jax.Array, high: jax.Array, index: jax.Array) -> jax.Array:
    """uint32: 4-bit field ``index`` (int32 0..8, broadcast) of nine fields packed as
    ``low`` (fields 0-7) and ``high`` (field 8)."""
    shift = (4 * jnp.minimum(index, 7)).astype(jnp.uint32)
    return jnp.where(index == 8, high & 15, (low >> shift) & 15)


def lines(words: jax.Array) -> jax.Array:
    """int32[9]: a uniform band-preserving order of 9 lines (the bands permuted, then
    the lines inside each): line ``i`` of the result is source line ``lines[i]``.
    ``words``: uint32[12] (3 order the bands, 3 x 3 the lines in each)."""
    order = random_permutation(words[:3])
    inside = random_permutation(words[3:12].reshape(3, 3))
    return 3 * jnp.repeat(order, 3) + inside.reshape(9)


def draw9(
    tables: SudokuTables, bits: jax.Array, clues: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A 9x9 puzzle: a bank entry under a random symmetry, ``(solution int32[81],
    empty bool[81], number of empty cells int32[])``. ``bits``: uint32[35] random words.

    Cell ``(r, c)`` is the entry's cell ``(rows[r], cols[c])`` (of its transpose when
    transposed), its digit relabelled. Gathers and transposes are slow batched on
    CPU, so the entry is read already transposed or not, its rows are picked one-hot
    as packed words, and digits and relabelling are read as 4-bit fields.
    """
    size = tables.lines9.shape[0] // 2
    entry = 2 * (bits[0] % jnp.uint32(size)).astype(jnp.int32) + (bits[34] & 1).astype(jnp.int32)
    packed, removal = tables.lines9[entry], tables.removal9[entry]
    column = jnp.arange(9, dtype=jnp.uint32)
    empty = jnp.where(removal.astype(jnp.int32) < clues, 1 << column, 0)
    empty = jnp.sum(empty, axis=1, dtype=jnp.uint32)
    count = jnp.sum(jax.lax.population_count(empty), dtype=jnp.int32)
    low, high = packed[:, 0], packed[:, 1] | (empty << 4)
    relabel = random_permutation(bits[1:10]).astype(jnp.uint32)  # new digit minus 1
    rows, cols = lines(bits[10:22]), lines(bits[22:34])
    pick = rows[:, None] == jnp.arange(9, dtype=jnp.int32)
    low = jnp.sum(jnp.where(pick, low, 0), axis=1, dtype=jnp.uint32)[:, None]
    high = jnp.sum(jnp.where(pick, high, 0), axis=1, dtype=jnp.uint32)[:, None]
    digit = field(low, high, cols[None, :]).astype(jnp.int32)
    gap = (high >> (4 + cols[None, :]).astype(jnp.uint32)) & 1
    relabel_low = jnp.sum(relabel[:8] << (4 * column[:8]), dtype=jnp.uint32)
    solution = field(relabel_low, relabel[8], digit).astype(jnp.int32) + 1
    return solution.reshape(-1), gap.reshape(-1) == 1, count


# --- the game --------------------------------------------------------------------------


class SudokuParams(struct.PyTreeNode):
    """Dynamic parameters (``clues`` and ``max_turns`` are ignored by ``-random``,
    which draws them at every reset).

    Attributes:
        clues: int32[] removal attempts (GEM's ``clues``: at most this many empty cells).
        max_turns: int32[] the turn limit.
        tables: the puzzle sources.
        rewards: GEM's reward constants (``invalid`` and ``format_error`` as named; a
            correct placement pays ``1 / init_num_empty``, as in GEM).
    """

    clues: jax.Array
    max_turns: jax.Array
    tables: SudokuTables
    rewards: Rewards = struct.field(default_factory=Rewards)


class SudokuState(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said):
        scale, max_turns: this episode's configuration.
        num_empty: the empty cells at reset (GEM's ``init_num_empty``).
        turn: turns taken (GEM's ``turn_count``; it keeps counting after the end).
        board: int8[S, S] the digits shown, 0 empty (and outside the active board).
        solution: int8[S, S] the unique solution (0 outside the active board).
        rejected: bool[S, S, S] digit ``d + 1`` was placed in the cell and judged
            wrong ("violates Sudoku rules").
    """

    scale: jax.Array
    max_turns: jax.Array
    num_empty: jax.Array
    turn: jax.Array
    board: jax.Array
    solution: jax.Array
    rejected: jax.Array


class Sudoku(Environment[SudokuState, SudokuParams], GemMirror[SudokuState]):
    """Sudoku as a kernel. See the module docstring for rules and shapes.

    Args:
        clues, max_turns, scale: the registered configuration (GEM's defaults); any
            of them None gives GEM's ``-random`` variant. ``scale`` is 4 or 9.
    """

    gem_class_name = "SudokuEnv"
    step_uses_key = False
    # A reset draws a bank puzzle and transforms it (digits, rows, columns): resetting
    # only the lanes that ended pays here (docs/performance.md, Kernels).
    sparse_resets = True

    def __init__(
        self, clues: int | None = 30, max_turns: int | None = 100, scale: int | None = 9
    ) -> None:
        self.variant = Variant.of(
            {"scale": scale, "clues": clues, "max_turns": max_turns},
            random_values=RANDOM_CONFIGS[-1],
            check=self._check,
        )
        self.randomize = self.variant.randomize
        self.scales = SCALES if self.randomize else self.variant.values[:1]
        self._defaults = self.variant.values[1:]
        self.side = max(self.scales)
        # Random words per reset: the 4x4 draw's, the 9x9 draw's, the config's.
        sizes = {4: WORDS4, 9: WORDS9}
        self.num_words = sum(sizes[s] for s in self.scales) + int(self.randomize)
        self.messages = MESSAGES
        self.suffix = suffix_for(self.side)
        self.grammar = BoxedInts(("row", "col", "num"))

    @staticmethod
    def _check(side: int, clues: int, max_turns: int) -> None:
        if side not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {side}")
        if not 0 <= clues <= side * side:
            raise ValueError(f"clues (removal attempts) must be in 0..{side * side}, got {clues}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    @property
    def default_params(self) -> SudokuParams:
        clues, turns = (jnp.int32(v) for v in self._defaults)
        return SudokuParams(clues=clues, max_turns=turns, tables=tables_for(self.scales))

    def validate_params(self, params: SudokuParams) -> None:
        self._check(self.side, int(params.clues), int(params.max_turns))
        expected = jax.tree.map(lambda a: (a.shape[1:], a.dtype), tables_for(self.scales))
        got = jax.tree.map(lambda a: (a.shape[1:], a.dtype), params.tables)
        if got != expected:
            raise ValueError(f"params.tables has shapes {got}, this env needs {expected}")

    def action_space(self, params: SudokuParams) -> MultiDiscrete:
        """``[ok in 0..1, row, col, num in 0..S+1]``: ``ok == 0`` is a format error; 0
        and ``S + 1`` are out of bounds (``S``: the largest scale)."""
        return MultiDiscrete((2,) + (self.side + 2,) * 3)

    def _active(self, scale: jax.Array) -> jax.Array:
        r = jnp.arange(self.side, dtype=jnp.int32)
        return (r[:, None] < scale) & (r[None, :] < scale)

    def reset(self, key: jax.Array, params: SudokuParams) -> tuple[SudokuState, TimeStep]:
        words = random_words(key, self.num_words)
        if self.randomize:
            pick = jnp.arange(len(RANDOM_CONFIGS)) == (words[-1] % len(RANDOM_CONFIGS))
            scale, clues, turns = (
                jnp.sum(jnp.where(pick, jnp.asarray(column, jnp.int32), 0))
                for column in zip(*RANDOM_CONFIGS, strict=True)
            )
        else:
            scale, clues, turns = jnp.int32(self.side), params.clues, params.max_turns
        side = self.side
        candidates = []
        if 4 in self.scales:
            candidates.append(draw4(params.tables, words[:WORDS4], clues, side))
        if 9 in self.scales:
            start = WORDS4 if 4 in self.scales else 0
            candidates.append(draw9(params.tables, words[start : start + WORDS9], clues))
        solution, empty, num_empty = candidates[0]
        if len(candidates) > 1:
            solution, empty, num_empty = (
                jnp.where(scale == 4, a, b) for a, b in zip(*candidates, strict=True)
            )
        solution, empty = solution.reshape(side, side), empty.reshape(side, side)
        state = SudokuState(
            scale=scale,
            max_turns=turns,
            num_empty=num_empty,
            turn=jnp.int32(0),
            board=jnp.where(empty, 0, solution).astype(jnp.int8),
            solution=solution.astype(jnp.int8),
            rejected=jnp.zeros((side, side, side), jnp.bool_),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: SudokuState,
        action: jax.Array,
        params: SudokuParams,
    ) -> tuple[SudokuState, TimeStep]:
        action = check_int_action(action, (4,))
        ok, row, col, num = action[0], action[1], action[2], action[3]
        rewards, scale = params.rewards, state.scale
        turn = state.turn + 1

        format_error = ok <= 0

        def inside(v: jax.Array) -> jax.Array:
            return (v >= 1) & (v <= scale)

        out_of_bounds = ~format_error & ~(inside(row) & inside(col) & inside(num))
        legal = ~format_error & ~out_of_bounds
        # One-hot masks instead of gathers/scatters (slow under vmap on CPU).
        r = jnp.arange(self.side, dtype=jnp.int32)
        cell = (r[:, None] == row - 1) & (r[None, :] == col - 1)
        filled = legal & jnp.any(cell & (state.board != 0))
        correct = legal & ~filled & jnp.any(cell & (state.solution == num))
        board = jnp.where(cell & correct, num, state.board).astype(jnp.int8)
        wrong = legal & ~filled & ~correct
        digit = jnp.arange(1, self.side + 1, dtype=jnp.int32) == num
        rejected = state.rejected | (wrong & cell[..., None] & digit)
        success = correct & jnp.all(board == state.solution)
        out_of_turns = turn >= state.max_turns

        share = jnp.float32(1.0) / jnp.maximum(state.num_empty, 1).astype(jnp.float32)
        reward = jnp.select(
            [format_error, correct], [rewards.format_error, share], rewards.invalid
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (success, "success"),
            (out_of_turns, "max_turns"),
            (out_of_bounds, "out_of_bounds"),
            (filled, "filled"),
            (correct, "correct"),
            default="violation",
        )
        terminated, truncated = gem_ending(
            format_error, success, out_of_turns, turn, state.max_turns
        )

        new_state = state.replace(turn=turn, board=board, rejected=rejected)
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(kind, turn=turn, row=row, col=col, num=num, scale=scale),
            info={"success": success},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: SudokuState) -> jax.Array:
        """int32[4] ``[1, row, col, num]``, each of ``row``, ``col``, ``num`` uniform in
        ``1..scale`` of the episode: a well-formed, in-bounds move (GEM's SudokuEnv has
        no ``sample_random_action``; this one never writes a format error)."""
        move = 1 + below(bits(key, 3), state.scale.astype(jnp.uint32))
        return jnp.concatenate([jnp.ones((1,), jnp.int32), move.astype(jnp.int32)])

    def action_cells(self) -> ActionCells:
        """``[ok, row, col, num]``: rows and columns from 1, as GEM numbers them (the
        board's arrays are ``S x S``; smaller ``-random`` grids sit top-left)."""
        return ActionCells(grid=(self.side, self.side), axes=(1, 2), first=(1, 1))

    def valid_action_mask(self, state: SudokuState) -> jax.Array:
        """bool[2, S + 2, S + 2, S + 2] (the action space's combinations; ``S`` the
        largest scale): the well-formed, in-bounds moves that fill an empty cell with a
        digit no cell of its row, column or box holds and that was not placed there
        and rejected before. A correct move is always one; where a cell has several
        candidates, the wrong ones are too until tried (an optional env method, used
        by ``gemjax.train``'s masking ablation)."""
        side = self.side
        board = state.board.astype(jnp.int32)
        digits = jnp.arange(1, side + 1, dtype=jnp.int32)
        holds = board[..., None] == digits  # [S, S, D]: cell (i, j) holds digit d
        # Boxes are sqrt(scale) wide: 2 on a 4x4 board, 3 on a 9x9 one.
        box = jnp.where(state.scale == 4, 2, 3)
        r = jnp.arange(side, dtype=jnp.int32)
        same_band = ((r[:, None] // box) == (r[None, :] // box)).astype(jnp.int32)  # [S, S]
        in_box = jnp.einsum("ik,jl,kld->ijd", same_band, same_band, holds.astype(jnp.int32)) > 0
        candidates = (
            ((board == 0) & self._active(state.scale))[..., None]
            & ~jnp.any(holds, axis=1)[:, None, :]  # the row holds it
            & ~jnp.any(holds, axis=0)[None, :, :]  # the column holds it
            & ~in_box
            & (digits <= state.scale)
            & ~state.rejected
        )
        mask = jnp.zeros((2, side + 2, side + 2, side + 2), jnp.bool_)
        return mask.at[1, 1 : side + 1, 1 : side + 1, 1 : side + 1].set(candidates)

    def instructions_event(self, state: SudokuState) -> Event:
        return MESSAGES.event("instructions", scale=state.scale, version=state.scale == 4)

    def suffix_values(self, state: SudokuState) -> Mapping[str, jax.Array]:
        return {"scale": state.scale, "board": state.board}

    def _observation(self, state: SudokuState) -> dict[str, jax.Array]:
        return {
            "board": state.board,
            "active": self._active(state.scale),
            "rejected": state.rejected,
            "turn": state.turn,
            "scale": state.scale,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` SudokuEnv."""
        return cls.gem_kwargs(gem_env, ("clues", "max_turns", "scale"))

    def state_from_gem(self, gem_env: Any) -> SudokuState:
        """The kernel state equal to a live GEM env's (its board, solution and turn;
        GEM's env keeps no record of the digits it judged wrong, so none is
        rejected: exact at a reset, which is where the parity tests mirror)."""
        scale = gem_env.scale
        board = np.zeros((self.side, self.side), np.int8)
        solution = np.zeros((self.side, self.side), np.int8)
        board[:scale, :scale] = gem_env.board
        solution[:scale, :scale] = gem_env.full_grid
        return SudokuState(
            scale=jnp.int32(scale),
            max_turns=jnp.int32(gem_env.max_turns),
            num_empty=jnp.int32(gem_env.init_num_empty),
            turn=jnp.int32(gem_env.turn_count),
            board=jnp.asarray(board),
            solution=jnp.asarray(solution),
            rejected=jnp.zeros((self.side,) * 3, jnp.bool_),
        )
