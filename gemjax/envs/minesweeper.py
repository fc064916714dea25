"""Minesweeper (GEM's ``gem/envs/game_env/minesweeper.py``).

The player reveals cells of a ``rows x cols`` board hiding ``num_mines`` mines and
may flag suspected mines. GEM's rules, branch by branch (spec section 7):

1. no ``\\boxed{word row col}`` (exactly one whitespace character between fields)
   or a number ``int()`` refuses: format error, -0.1, terminated, truncated only
   when ``turn == max_turns``;
2. ``row``/``col`` outside the board (whatever the word): invalid (0);
3. ``reveal``: the first reveal places the mines (a uniform subset of the cells
   outside the 3x3 block around it), even when the reveal is then rejected; then
   a. a mine (flagged or not): "Game over!", fail reward, terminated, not truncated
      (no turn-limit check);
   b. a revealed or flagged cell: invalid (0);
   c. otherwise a flood fill from the cell (zero cells expand to their 8
      neighbours, flags and revealed cells stop it); the reward is the fraction of
      safe cells newly revealed; when every mine is flagged and every safe cell
      revealed (checked only here): success, terminated, not truncated;
4. ``flag`` on a revealed cell: invalid (0); otherwise the flag toggles (0);
5. any other word: invalid (0), the word echoed in the message;
6. after 2-5 without an ending, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, the step's reward unchanged.

The ``-random`` variant draws ``n`` uniform in ``5..8`` at every reset: an ``n x n``
board with ``n * n // 5`` mines and ``n * n`` turns; arrays are 8x8 with a mask.

Kernel action: int32[3] ``[command, row, col]`` (see
:class:`~gemjax.text.grammar.BoxedCommand`): command ``0`` is a format
error, ``1`` reveal, ``2`` flag, ``3`` (or more) any other word; coordinates are
clamped to ``2**31 - 1`` by the host parser (negative ones are out of bounds).

Mine placement is drawn on device without a queue: at reset every cell gets a random
priority (kept in the state; it is noise, not a key; distinct by construction, see
:func:`distinct_priorities`), and the first reveal mines the ``num_mines`` allowed
cells of smallest priority. The flood fill is a dilation by shifts of bit words
(several board rows per uint32) repeated until nothing changes, at most
``rows * cols`` times.

Outcome (:class:`~gemjax.core.EpisodeOutcomes`): ``cleared``, every safe cell
revealed, which a trainer reports apart from GEM's flag-based success.

Observation (what the player sees, never the mines), a dict of:
    ``board``: int8[R, C] cell codes as printed: ``0..8`` a revealed cell's number,
        ``9`` hidden, ``10`` flagged, ``11`` a revealed mine (GEM never shows one),
        ``12`` outside the active board (``-random``);
    ``revealed``, ``flags``, ``active``: bool[R, C];
    ``turn``, ``rows``, ``cols``, ``num_mines``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
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
from gemjax.rng import below, random_words
from gemjax.spaces import MultiDiscrete
from gemjax.text.grammar import BoxedCommand
from gemjax.text.templates import Board, Choice, Echo, Int, MessageTable, Template

RANDOM_SIZES = (5, 6, 7, 8)  # GEM: n = randint(5, 8); mines n*n // 5; turns n*n
MAX_SIDE = 32
REVEAL, FLAG, UNKNOWN = 1, 2, 3
HIDDEN, FLAGGED, MINE, OFF_BOARD = 9, 10, 11, 12
CELLS = (*(f" {n} " for n in range(9)), " . ", " F ", " * ", "")

COORDS = {"row": Int("row", echo=True), "col": Int("col", echo=True)}

MESSAGES = MessageTable(
    instructions=Template(
        "You are playing the Minesweeper game.\n"
        "The objective of the game is to reveal all cells that do not contain mines.\n"
        "To make a move, you can either reveal a cell or place a flag on a suspected mine "
        "location using one of the following commands:\n"
        "- 'reveal': Reveal the contents of a specific cell.\n"
        "- 'flag': Place or remove a flag on a specific cell to mark it as a potential mine.\n"
        "To submit your move, type the command followed by the row and column in \\boxed{{}}.\n"
        "For example:\n"
        "- \\boxed{{reveal {reveal_row} {reveal_col}}} to reveal the cell in "
        "Row {reveal_row}, Column {reveal_col}.\n"
        "- \\boxed{{flag {flag_row} {flag_col}}} to place or remove a flag on the cell in "
        "Row {flag_row}, Column {flag_col}.\n"
        "The current board layout is shown below. Cells that are unrevealed are represented "
        "by a dot ('.'), revealed numbers show the count of adjacent mines, and flagged cells "
        "are marked with an 'F'.\n"
        "Use logic and deduction to avoid revealing cells with mines!\n"
        "Be mindful not to choose revealed or flagged cells.\n"
    ),
    format_error=Template("At turn {turn}, you did not provide a valid guess."),
    out_of_bounds=Template(
        "At turn {turn}, you chose cell ({row}, {col}), which is outside the bounds of the grid.",
        **COORDS,
    ),
    mine=Template("Game over! You hit a mine at ({row}, {col})", **COORDS),
    reveal_repeat=Template(
        "At turn {turn}, you chose to reveal cell ({row}, {col}), which has already been revealed.",
        **COORDS,
    ),
    revealed=Template("At turn {turn}, you successfully revealed cell ({row}, {col}).", **COORDS),
    success=Template("Congratulations! You have successfully cleared the Minesweeper board."),
    flag_revealed=Template(
        "At turn {turn}, you chose to flag cell ({row}, {col}), which has already been revealed.",
        **COORDS,
    ),
    flag=Template(
        "At turn {turn}, you {flag_change} a flag on cell ({row}, {col}).",
        flag_change=Choice("flag_change", ("removed", "added")),
        **COORDS,
    ),
    unknown_command=Template(
        "At turn {turn}, you chose an invalid action '{command}'. "
        "Valid actions are 'reveal' or 'flag'.",
        command=Echo("command", fallback="unknown"),
    ),
    max_turns=Template("You have reached the maximum number of turns."),
)


@functools.cache
def suffix_for(shape: tuple[int, int]) -> Template:
    """GEM's suffix: the board (its active ``rows x cols`` part) and the prompt."""
    board = Board(
        "board",
        shape,
        CELLS,
        rows="rows",
        cols="cols",
        header=("   ", "{:>2}", " ", "\n"),
        row_label="{:2} ",
    )
    return Template("Here is the current board layout:\n{board}\nEnter your guess.", board=board)


class MinesweeperParams(struct.PyTreeNode):
    """Dynamic parameters (ignored by ``-random``, which draws them at every reset).

    Attributes:
        rows, cols: int32[] the board (at most the env's capacity).
        num_mines: int32[] mines placed at the first reveal.
        max_turns: int32[] the turn limit.
        rewards: GEM's reward constants (``fail`` for a mine, ``step`` for a flag
            toggle; a reveal pays its fraction of the safe cells).
    """

    rows: jax.Array
    cols: jax.Array
    num_mines: jax.Array
    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class MinesweeperState(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said):
        rows, cols, num_mines, max_turns: this episode's configuration.
        example: int32[4] the instructions' examples (reveal row, col; flag row, col).
        turn: turns taken (GEM's ``turn_count``; it keeps counting after the end).
        placed: bool[] the mines are placed (GEM's ``not first_reveal``).
        mines, revealed, flags: bool[R, C].
        priority: uint32[R, C] random priorities without ties that choose the mines.
    """

    rows: jax.Array
    cols: jax.Array
    num_mines: jax.Array
    max_turns: jax.Array
    example: jax.Array
    turn: jax.Array
    placed: jax.Array
    mines: jax.Array
    revealed: jax.Array
    flags: jax.Array
    priority: jax.Array


def shift(x: jax.Array, dr: int, dc: int) -> jax.Array:
    """``out[r, c] = x[r - dr, c - dc]`` over the last two axes, zero-filled."""
    height, width = x.shape[-2:]
    pad = [(0, 0)] * (x.ndim - 2) + [(1, 1), (1, 1)]
    padded = jnp.pad(x, pad)
    return padded[..., 1 - dr : 1 - dr + height, 1 - dc : 1 - dc + width]


def dilate(x: jax.Array) -> jax.Array:
    """bool: ``x`` grown by its 8 neighbours (separable: 4 shifts)."""
    row = x | shift(x, 0, 1) | shift(x, 0, -1)
    return row | shift(row, 1, 0) | shift(row, -1, 0)


def adjacent_counts(mines: jax.Array) -> jax.Array:
    """int32: per cell, the mines among its 8 neighbours."""
    m = mines.astype(jnp.int32)
    row = m + shift(m, 0, 1) + shift(m, 0, -1)
    return row + shift(row, 1, 0) + shift(row, -1, 0) - m


def flood_fill(start: jax.Array, zero: jax.Array, blocked: jax.Array) -> jax.Array:
    """bool[R, C]: the cells GEM's BFS reveals from ``start`` (one cell or none).

    Cells in the set that are ``zero`` expand to their neighbours that are not
    ``blocked``; repeated until nothing changes (at most ``R * C`` times: the BFS
    depth is below the number of cells), so the closure equals GEM's queue order-free.
    Boards up to 32 columns grow as bit words holding ``32 // C`` board rows each (an
    8x8 board is two uint32 words: 32x fewer values per round than bools); wider
    ones as bool grids.
    """
    if start.shape[-1] <= 32:
        layout = BitLayout(*start.shape)
        grown = layout.grow_until_stable(
            layout.pack(start), layout.pack(zero), layout.pack(~blocked)
        )
        return layout.unpack(grown)
    return _grow_until_stable(
        start, lambda cells: cells | (dilate(cells & zero) & ~blocked), start.shape
    )


class BitLayout:
    """A ``rows x cols`` bool board (``cols <= 32``) as uint32 words of
    ``per_word = 32 // cols`` board rows: cell ``(r, c)`` is bit
    ``(r % per_word) * cols + c`` of word ``r // per_word``."""

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        self.per_word = min(32 // cols, rows)
        self.words = -(-rows // self.per_word)
        self.row_bits = self.per_word * cols
        starts = np.arange(self.per_word) * cols
        valid = (1 << self.row_bits) - 1
        self.left_keep = np.uint32(valid & ~sum(1 << int(s) for s in starts))
        self.right_keep = np.uint32(valid & ~sum(1 << int(s + cols - 1) for s in starts))

    def pack(self, cells: jax.Array) -> jax.Array:
        """uint32[words]: the board bool[rows, cols] as bit words."""
        padded = jnp.pad(cells, ((0, self.words * self.per_word - self.rows), (0, 0)))
        bits = padded.reshape(self.words, self.row_bits)
        weights = jnp.left_shift(jnp.uint32(1), jnp.arange(self.row_bits, dtype=jnp.uint32))
        return jnp.sum(jnp.where(bits, weights, jnp.uint32(0)), axis=-1, dtype=jnp.uint32)

    def unpack(self, words: jax.Array) -> jax.Array:
        """bool[rows, cols]: the inverse of :meth:`pack`."""
        bits = jnp.arange(self.row_bits, dtype=jnp.uint32)
        cells = (jnp.right_shift(words[:, None], bits) & jnp.uint32(1)).astype(jnp.bool_)
        return cells.reshape(self.words * self.per_word, self.cols)[: self.rows]

    def dilate(self, words: jax.Array) -> jax.Array:
        """uint32[words]: the set grown by its 8 neighbours (bits past the last
        board row may be set: mask them)."""
        row = (
            words
            | (jnp.left_shift(words, 1) & self.left_keep)
            | (jnp.right_shift(words, 1) & self.right_keep)
        )
        return row | self._shift_rows(row, 1) | self._shift_rows(row, -1)

    def _shift_rows(self, words: jax.Array, step: int) -> jax.Array:
        """uint32[words]: board row ``r`` moved to row ``r + step`` (``step`` = +-1)."""
        none = jnp.zeros((1,), jnp.uint32)
        carry_bits = np.uint32(self.cols * (self.per_word - 1))
        if step > 0:
            moved = jnp.left_shift(words, np.uint32(self.cols)) if self.per_word > 1 else 0
            previous = jnp.concatenate([none, words[:-1]])
            return moved | jnp.right_shift(previous, carry_bits)
        moved = jnp.right_shift(words, np.uint32(self.cols)) if self.per_word > 1 else 0
        following = jnp.concatenate([words[1:], none])
        return moved | jnp.left_shift(following, carry_bits)

    def grow_until_stable(self, start: jax.Array, zero: jax.Array, free: jax.Array) -> jax.Array:
        """uint32[words]: :func:`flood_fill` on bit words (``free`` = not blocked)."""
        return _grow_until_stable(
            start,
            lambda cells: cells | (self.dilate(cells & zero) & free),
            (self.rows, self.cols),
        )


def _grow_until_stable(cells: jax.Array, grow: Any, shape: tuple[int, ...]) -> jax.Array:
    """Apply ``grow`` to ``cells`` until a fixed point (at most ``R * C`` times)."""
    limit = shape[-2] * shape[-1]

    def step(carry: tuple[jax.Array, jax.Array, jax.Array]) -> tuple:
        cells, _, i = carry
        grown = grow(cells)
        return grown, jnp.any(grown != cells), i + 1

    def more(carry: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
        _, changed, i = carry
        return changed & (i < limit)

    cells, _, _ = jax.lax.while_loop(more, step, (cells, jnp.bool_(True), jnp.int32(0)))
    return cells


def distinct_priorities(words: jax.Array) -> jax.Array:
    """uint32[n]: priorities without ties from random ``words`` (uint32[n]): each
    word's top ``32 - ceil(log2 n)`` bits above its own index, so equal top bits (per
    cell, probability below ``n / 2**(32 - ceil(log2 n))``: 1e-6 for 64 cells, 2.4e-4
    for 1024) order by index."""
    index_bits = max(1, (words.shape[0] - 1).bit_length())
    index = jnp.arange(words.shape[0], dtype=jnp.uint32)
    return (words >> index_bits << index_bits) | index


def place_mines(priority: jax.Array, allowed: jax.Array, num_mines: jax.Array) -> jax.Array:
    """bool[R, C]: the ``num_mines`` ``allowed`` cells of smallest ``priority``
    (uint32[R, C] without ties, :func:`distinct_priorities`; a uniform subset when
    they are random).

    Each cell's rank among the allowed cells is counted one other cell at a time
    (a loop of ``R * C`` rounds over the board, one compare per cell, disallowed
    cells counted as the largest priority): the all-pairs comparison as one
    ``[R*C, R*C]`` array is as much work but, batched, no longer fits in cache.
    """
    p = priority.reshape(-1)
    counted = jnp.where(allowed.reshape(-1), p, jnp.uint32(np.iinfo(np.uint32).max))

    def count(j: jax.Array, rank: jax.Array) -> jax.Array:
        pj = jax.lax.dynamic_index_in_dim(counted, j, keepdims=False)
        return rank + (pj < p).astype(jnp.int32)

    rank = jax.lax.fori_loop(0, p.shape[0], count, jnp.zeros(p.shape, jnp.int32), unroll=8)
    return allowed & (rank < num_mines).reshape(priority.shape)


class Minesweeper(Environment[MinesweeperState, MinesweeperParams], GemMirror[MinesweeperState]):
    """Minesweeper as a kernel. See the module docstring for rules and shapes.

    Args:
        rows, cols, num_mines, max_turns: the registered configuration; any of them
            None gives GEM's ``-random`` variant (as in GEM).
    """

    gem_class_name = "MinesweeperEnv"
    step_uses_key = False

    def __init__(
        self,
        rows: int | None = 8,
        cols: int | None = 8,
        num_mines: int | None = 10,
        max_turns: int | None = 20,
    ) -> None:
        n = max(RANDOM_SIZES)
        self.variant = Variant.of(
            {"rows": rows, "cols": cols, "num_mines": num_mines, "max_turns": max_turns},
            random_values=(n, n, n * n // 5, n * n),
            check=self._check,
        )
        self.randomize, self._defaults = self.variant.randomize, self.variant.values
        self.shape = self._defaults[:2]
        self.messages = MESSAGES
        self.suffix = suffix_for(self.shape)
        self.grammar = BoxedCommand(
            ("reveal", "flag"), word_slot="command", int_slots=("row", "col")
        )

    @staticmethod
    def _check(rows: int, cols: int, num_mines: int, max_turns: int) -> None:
        if not (1 <= rows <= MAX_SIDE and 1 <= cols <= MAX_SIDE):
            raise ValueError(f"rows and cols must be in 1..{MAX_SIDE}, got {rows}x{cols}")
        room = rows * cols - min(rows, 3) * min(cols, 3)
        if not 0 <= num_mines <= room:
            raise ValueError(
                f"num_mines must be in 0..{room} for a {rows}x{cols} board (the mines go "
                f"outside the 3x3 block of the first reveal), got {num_mines}"
            )
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    @property
    def default_params(self) -> MinesweeperParams:
        rows, cols, mines, turns = (jnp.int32(v) for v in self._defaults)
        return MinesweeperParams(rows=rows, cols=cols, num_mines=mines, max_turns=turns)

    def validate_params(self, params: MinesweeperParams) -> None:
        values = tuple(
            int(v) for v in (params.rows, params.cols, params.num_mines, params.max_turns)
        )
        self._check(*values)
        for name, value, cap in zip(("rows", "cols"), values[:2], self.shape, strict=True):
            if value > cap:
                raise ValueError(
                    f"{name} {value} exceeds this env's capacity ({cap}); "
                    f"make the env with {name}={value}"
                )

    def action_space(self, params: MinesweeperParams) -> MultiDiscrete:
        """``[command in 0..3, row in 0..R, col in 0..C]``: command 0 is a format
        error and 3 an unknown word; row ``R`` and col ``C`` are out of bounds."""
        rows, cols = self.shape
        return MultiDiscrete((UNKNOWN + 1, rows + 1, cols + 1))

    def _active(self, rows: jax.Array, cols: jax.Array) -> jax.Array:
        r = jnp.arange(self.shape[0], dtype=jnp.int32)[:, None]
        c = jnp.arange(self.shape[1], dtype=jnp.int32)[None, :]
        return (r < rows) & (c < cols)

    def reset(self, key: jax.Array, params: MinesweeperParams) -> tuple[MinesweeperState, TimeStep]:
        height, width = self.shape
        cells = height * width
        words = random_words(key, cells + 5)
        if self.randomize:
            pick = jnp.asarray(RANDOM_SIZES, jnp.int32)
            n = jnp.sum(jnp.where(jnp.arange(len(pick)) == words[-1] % len(pick), pick, 0))
            rows, cols, mines, turns = n, n, n * n // 5, n * n
        else:
            rows, cols = params.rows, params.cols
            mines, turns = params.num_mines, params.max_turns
        sizes = jnp.stack([rows, cols, rows, cols])
        example = below(words[cells : cells + 4], sizes)
        board = jnp.zeros(self.shape, jnp.bool_)
        state = MinesweeperState(
            rows=rows,
            cols=cols,
            num_mines=mines,
            max_turns=turns,
            example=example,
            turn=jnp.int32(0),
            placed=jnp.bool_(False),
            mines=board,
            revealed=board,
            flags=board,
            priority=distinct_priorities(words[:cells]).reshape(self.shape),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: MinesweeperState,
        action: jax.Array,
        params: MinesweeperParams,
    ) -> tuple[MinesweeperState, TimeStep]:
        action = check_int_action(action, (3,))
        command, row, col = action[0], action[1], action[2]
        rewards = params.rewards
        turn = state.turn + 1
        active = self._active(state.rows, state.cols)

        format_error = command <= 0
        in_bounds = (row >= 0) & (row < state.rows) & (col >= 0) & (col < state.cols)
        legal = ~format_error & in_bounds
        reveal = legal & (command == REVEAL)
        flag = legal & (command == FLAG)

        # One-hot masks instead of gathers/scatters (slow under vmap on CPU).
        r = jnp.arange(self.shape[0], dtype=jnp.int32)[:, None]
        c = jnp.arange(self.shape[1], dtype=jnp.int32)[None, :]
        cell = (r == row) & (c == col)
        near = (jnp.abs(r - row) <= 1) & (jnp.abs(c - col) <= 1)
        place = reveal & ~state.placed
        fresh = place_mines(state.priority, active & ~near, state.num_mines)
        mines = jnp.where(place, fresh, state.mines)
        # The chosen cell's mine, revealed and flag bits in one reduction.
        at = jnp.sum(
            jnp.where(cell, mines * 1 + state.revealed * 2 + state.flags * 4, 0), dtype=jnp.int32
        )
        at_mine, at_revealed, at_flag = (at & 1) == 1, (at & 2) == 2, (at & 4) == 4
        hit = reveal & at_mine
        repeat = reveal & ~at_mine & (at_revealed | at_flag)
        opened = reveal & ~at_mine & ~at_revealed & ~at_flag
        newly = flood_fill(
            cell & opened,
            ~dilate(mines),  # the 0 cells: no mine in the closed 3x3 neighbourhood
            state.revealed | state.flags | ~active,
        )
        revealed = state.revealed | newly
        flag_revealed = flag & at_revealed
        toggle = flag & ~at_revealed
        flags = state.flags ^ (cell & toggle)
        solved = jnp.all(~active | (mines & flags) | (~mines & revealed))
        success = opened & solved
        out_of_turns = turn >= state.max_turns

        safe = (state.rows * state.cols - state.num_mines).astype(jnp.float32)
        fraction = jnp.sum(newly, dtype=jnp.int32).astype(jnp.float32) / safe
        reward = jnp.select(
            [format_error, hit, opened, toggle],
            [rewards.format_error, rewards.fail, fraction, rewards.step],
            rewards.invalid,
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (hit, "mine"),
            (success, "success"),
            (out_of_turns, "max_turns"),
            (~in_bounds, "out_of_bounds"),
            (repeat, "reveal_repeat"),
            (opened, "revealed"),
            (flag_revealed, "flag_revealed"),
            (toggle, "flag"),
            default="unknown_command",
        )
        terminated, truncated = gem_ending(
            format_error, hit | success, out_of_turns, turn, state.max_turns
        )

        new_state = state.replace(
            turn=turn,
            placed=state.placed | place,
            mines=mines,
            revealed=revealed,
            flags=flags,
        )
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(
                kind, turn=turn, row=row, col=col, flag_change=jnp.any(cell & flags)
            ),
            info={"success": success},
        )
        return new_state, ts

    def outcomes(self, state: MinesweeperState) -> Mapping[str, jax.Array]:
        """``cleared``, bool[]: every safe cell of the board is revealed (the puzzle's
        goal; GEM's success also needs every mine flagged, and flags earn nothing)."""
        active = self._active(state.rows, state.cols)
        return {"cleared": state.placed & jnp.all(~active | state.mines | state.revealed)}

    def action_cells(self) -> ActionCells:
        """``[command, row, col]``: rows and columns from 0 (the board's arrays are
        ``R x C``; ``-random``'s smaller boards sit in their top-left corner)."""
        rows, cols = self.shape
        return ActionCells(grid=(rows, cols), axes=(1, 2), first=(0, 0))

    def valid_action_mask(self, state: MinesweeperState) -> jax.Array:
        """bool[4, R + 1, C + 1] (the action space's combinations): ``reveal`` on a
        hidden cell without a flag, ``flag`` (which toggles) on a hidden cell, both
        on the episode's board (an optional env method, used by ``gemjax.train``'s
        masking ablation)."""
        hidden = self._active(state.rows, state.cols) & ~state.revealed
        rows, cols = self.shape
        mask = jnp.zeros((UNKNOWN + 1, rows + 1, cols + 1), jnp.bool_)
        mask = mask.at[REVEAL, :rows, :cols].set(hidden & ~state.flags)
        return mask.at[FLAG, :rows, :cols].set(hidden)

    def random_action(self, key: jax.Array, state: MinesweeperState) -> jax.Array:
        """GEM's sampler: ``reveal`` 9 times in 10, else ``flag``, at a uniform cell."""
        words = random_words(key, 3)
        command = jnp.where(words[0] % 10 < 9, REVEAL, FLAG)
        row = below(words[1], state.rows)
        col = below(words[2], state.cols)
        return jnp.stack([command, row, col]).astype(jnp.int32)

    def instructions_event(self, state: MinesweeperState) -> Event:
        return MESSAGES.event(
            "instructions",
            reveal_row=state.example[0],
            reveal_col=state.example[1],
            flag_row=state.example[2],
            flag_col=state.example[3],
        )

    def board_codes(self, state: MinesweeperState) -> jax.Array:
        """int8[R, C] the cells as printed (see the module docstring's ``board``)."""
        counts = adjacent_counts(state.mines)
        shown = jnp.where(
            state.revealed,
            jnp.where(state.mines, MINE, counts),
            jnp.where(state.flags, FLAGGED, HIDDEN),
        )
        return jnp.where(self._active(state.rows, state.cols), shown, OFF_BOARD).astype(jnp.int8)

    def suffix_values(self, state: MinesweeperState) -> Mapping[str, jax.Array]:
        return {"rows": state.rows, "cols": state.cols, "board": self.board_codes(state)}

    def _observation(self, state: MinesweeperState) -> dict[str, jax.Array]:
        return {
            "board": self.board_codes(state),
            "revealed": state.revealed,
            "flags": state.flags,
            "active": self._active(state.rows, state.cols),
            "turn": state.turn,
            "rows": state.rows,
            "cols": state.cols,
            "num_mines": state.num_mines,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` MinesweeperEnv."""
        return cls.gem_kwargs(gem_env, ("rows", "cols", "num_mines", "max_turns"))

    @classmethod
    def gem_opening(cls, gem_env: Any, rng: random.Random) -> None:
        """GEM places its mines at the first reveal, from its global RNG: reveal a
        random cell on GEM's side first."""
        row, col = rng.randrange(gem_env.rows), rng.randrange(gem_env.cols)
        gem_env.step(f"\\boxed{{reveal {row} {col}}}")

    def state_from_gem(self, gem_env: Any) -> MinesweeperState:
        """The kernel state equal to a live GEM env's, before or after its mines are
        placed. The priorities that will place the mines (if GEM has not yet) are
        drawn from fresh entropy, never from GEM's global RNG; the instructions'
        examples, which GEM does not keep, are cell (0, 0)."""
        rows, cols = gem_env.rows, gem_env.cols
        mines = np.zeros(self.shape, np.bool_)
        revealed = np.zeros(self.shape, np.bool_)
        flags = np.zeros(self.shape, np.bool_)
        mines[:rows, :cols] = np.asarray(gem_env.grid) == -1
        revealed[:rows, :cols] = np.asarray(gem_env.revealed, np.bool_)
        flags[:rows, :cols] = np.asarray(gem_env.flags, np.bool_)
        words = np.random.default_rng().integers(0, 2**32, self.shape, dtype=np.uint32)
        return MinesweeperState(
            rows=jnp.int32(rows),
            cols=jnp.int32(cols),
            num_mines=jnp.int32(gem_env.num_mines),
            max_turns=jnp.int32(gem_env.max_turns),
            example=jnp.zeros((4,), jnp.int32),
            turn=jnp.int32(gem_env.turn_count),
            placed=jnp.bool_(not gem_env.first_reveal),
            mines=jnp.asarray(mines),
            revealed=jnp.asarray(revealed),
            flags=jnp.asarray(flags),
            priority=distinct_priorities(jnp.asarray(words).reshape(-1)).reshape(self.shape),
        )
