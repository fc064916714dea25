"""FifteenPuzzle (GEM's ``gem/envs/game_env/fifteen_puzzle.py``).

The player slides the tiles ``1..N*N-1`` of an ``N x N`` board into row-major order
with the blank bottom-right. A direction names where the *tile* moves: ``up`` moves
the tile below the blank up (the blank goes down), ``down`` the tile above,
``left`` the tile to the right, ``right`` the tile to the left. GEM's rules, branch
by branch (spec section 6):

1. no ``\\boxed{up|down|left|right}`` (case-sensitive: ``\\boxed{Up}`` does not
   match): "At turn T, you did not provide a valid guess" (no period), -0.1,
   terminated, truncated only when ``turn == max_turns``;
2. the tile to move is outside the board: invalid (0), nothing changes;
3. a valid move that solves the board: success, 1.0, terminated, never truncated;
4. a valid move otherwise: "you made a valid move: d." (with a trailing newline), 0;
5. after 2 or 4, when ``turn >= max_turns``: "You have reached the maximum number of
   turns.", terminated and truncated, reward the step's plus ``matches / N**2``
   (``matches``: cells equal to the goal's, the blank's included).

Start boards are those of GEM's generator (the upstream fix of gem-llm 0.1.0's
uniform shuffle, see docs/gem_differences.md): from the solved board, 100 moves,
each uniform among the directions that keep the tile inside the board and do not
undo the previous move. On 2x2 that leaves exactly two boards, each with
probability 1/2.

The ``-random`` variant (which GEM cannot construct) draws ``(N, max_turns)``
uniformly from GEM's intended ``(2, 10), (3, 20), (4, 50)`` at every reset; arrays
are 4x4 with the smaller boards in the top-left corner.

Kernel action: an int32 scalar, ``1 + i`` for direction ``i`` of :data:`DIRECTIONS`;
``0`` (and anything outside ``1..4``) is a format error.

Observation (what the player sees), a dict of:
    ``board``: int8[S, S] the tiles, 0 for the blank (and outside the active board);
    ``active``: bool[S, S] the cells of this episode's board;
    ``turn``, ``num_rows``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import (
    Environment,
    Event,
    GemMirror,
    Rewards,
    TimeStep,
    Variant,
    check_int_action,
    gem_ending,
)
from gemjax.rng import below, bits, mixed_words
from gemjax.spaces import Discrete
from gemjax.text.grammar import BoxedWord
from gemjax.text.templates import Board, Choice, MessageTable, Template

DIRECTIONS = ("up", "down", "left", "right")
# The blank's (row, col) step for each direction: the tile on that side moves in.
BLANK_STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))
# GEM's -random candidates: (num_rows, max_turns).
RANDOM_CONFIGS = ((2, 10), (3, 20), (4, 50))
WALK_MOVES = 100  # GEM's mc_rand_moves
MAX_ROWS = 10  # tiles up to 99 print in GEM's two-character cells

DIRECTION = Choice("direction", DIRECTIONS)

MESSAGES = MessageTable(
    instructions=Template(
        "You are playing the {greatest}-Puzzle game.\n"
        "You have to arrange the numbered tiles in ascending order from 1 to {greatest}, "
        "with the empty space located in the bottom-right corner.\n"
        "To make a move, you can slide a tile into the empty space (represented by a "
        "double underscore, e.g. __) by using one of the following commands:\n"
        "- 'up': Move the tile below the empty space up.\n"
        "- 'down': Move the tile above the empty space down.\n"
        "- 'left': Move the tile to the right of the empty space left.\n"
        "- 'right': Move the tile to the left of the empty space right.\n"
        "To submit your move, type the direction (e.g., 'up', 'down', 'left', or 'right') "
        "in \\boxed{{...}}.\n"
        "The current board layout is shown below\n"
        "Use logic and planning to solve the puzzle.\n"
    ),
    format_error=Template("At turn {turn}, you did not provide a valid guess"),
    outside=Template(
        "At turn {turn}, you chose a move {direction} that is outside the bounds of the board.",
        direction=DIRECTION,
    ),
    success=Template("Congratulations! You have solved the puzzle!"),
    valid=Template("At turn {turn}, you made a valid move: {direction}.\n", direction=DIRECTION),
    max_turns=Template("You have reached the maximum number of turns."),
)


@functools.cache
def suffix_for(side: int) -> Template:
    """GEM's suffix: the active ``num_rows x num_rows`` board, ``__`` for the blank,
    each tile as ``f"{tile:2}"``, cells joined by a space."""
    cells = ("__", *(f"{tile:2}" for tile in range(1, side * side)))
    board = Board("board", (side, side), cells, rows="num_rows", cols="num_rows", separator=" ")
    return Template("Here is the current board layout: \n{board}\nEnter your move.", board=board)


def goal_board(num_rows: jax.Array, side: int) -> jax.Array:
    """int8[side, side] the solved board of ``num_rows`` (int32[]) rows: ``1..N*N-1``
    row-major in the top-left ``N x N`` corner, 0 for the blank (bottom-right) and
    outside."""
    r = jnp.arange(side, dtype=jnp.int32)[:, None]
    c = jnp.arange(side, dtype=jnp.int32)[None, :]
    inside = (r < num_rows) & (c < num_rows)
    tiles = jnp.where(inside, r * num_rows + c + 1, 0)
    return jnp.where(tiles == num_rows * num_rows, 0, tiles).astype(jnp.int8)


def legal_moves(blank: jax.Array, num_rows: jax.Array) -> jax.Array:
    """bool[4] the directions (:data:`DIRECTIONS` order) whose tile is on the board,
    for the blank at ``blank`` (int32[2] row, col) of an ``num_rows`` board."""
    steps = jnp.asarray(BLANK_STEPS, jnp.int32)
    target = blank[None, :] + steps
    return jnp.all((target >= 0) & (target < num_rows), axis=1)


def slide(board: jax.Array, blank: jax.Array, move: jax.Array) -> jax.Array:
    """The board (int8[S, S]) after the tile on side ``move`` (int32[], a legal
    direction) of the blank (int32[2]) slides into it."""
    target = blank + jnp.asarray(BLANK_STEPS, jnp.int32)[move]
    side = board.shape[0]
    r = jnp.arange(side, dtype=jnp.int32)[:, None]
    c = jnp.arange(side, dtype=jnp.int32)[None, :]
    at_blank = (r == blank[0]) & (c == blank[1])
    at_target = (r == target[0]) & (c == target[1])
    tile = jnp.sum(jnp.where(at_target, board, 0), dtype=jnp.int32).astype(board.dtype)
    return jnp.where(at_blank, tile, jnp.where(at_target, 0, board)).astype(board.dtype)


@dataclass(frozen=True)
class PackedCells:
    """A board of ``cells`` small values packed ``per_word`` to a uint32 word, ``bits``
    bits each, as a tuple of ``words`` uint32[] scalars (the walk's carry: under
    ``vmap`` every operation is one elementwise pass over the lanes, where an array
    of words would make each move a reduction over a tiny minor axis)."""

    cells: int

    @property
    def bits(self) -> int:
        """Bits a cell: enough for the values ``0 .. cells - 1``."""
        return max(1, (self.cells - 1).bit_length())

    @property
    def per_word(self) -> int:
        """Cells a uint32 word holds."""
        return 32 // self.bits

    @property
    def words(self) -> int:
        """uint32 words a board takes."""
        return -(-self.cells // self.per_word)

    def _place(self, cell: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The index (int32[]) of the word holding ``cell`` (int32[]) and its shift
        (uint32[])."""
        return cell // self.per_word, ((cell % self.per_word) * self.bits).astype(jnp.uint32)

    def pack(self, values: jax.Array) -> tuple[jax.Array, ...]:
        """``words`` uint32[] of int[cells] ``values`` in ``0 .. 2**bits - 1``."""
        cells = np.arange(self.cells)
        shifted = values.astype(jnp.uint32) << jnp.asarray(
            (cells % self.per_word) * self.bits, jnp.uint32
        )
        owner = cells // self.per_word
        return tuple(
            jnp.sum(jnp.where(owner == k, shifted, 0), dtype=jnp.uint32) for k in range(self.words)
        )

    def unpack(self, words: tuple[jax.Array, ...]) -> jax.Array:
        """int32[cells] of the packed ``words``."""
        cells = np.arange(self.cells)
        shifts = jnp.asarray((cells % self.per_word) * self.bits, jnp.uint32)
        mask = jnp.uint32((1 << self.bits) - 1)
        stacked = jnp.stack(words)[cells // self.per_word]
        return ((stacked >> shifts) & mask).astype(jnp.int32)

    def move(
        self, words: tuple[jax.Array, ...], source: jax.Array, dest: jax.Array
    ) -> tuple[jax.Array, ...]:
        """``words`` with the value of cell ``source`` moved to cell ``dest`` (which
        holds 0) and ``source`` cleared (int32[] cells)."""
        mask = jnp.uint32((1 << self.bits) - 1)
        from_word, from_shift = self._place(source)
        to_word, to_shift = self._place(dest)
        value = jnp.uint32(0)
        for index, word in enumerate(words):
            value = value | jnp.where(from_word == index, (word >> from_shift) & mask, 0)
        cleared = ~(mask << from_shift)
        placed = value << to_shift
        return tuple(
            jnp.where(from_word == index, word & cleared, word)
            | jnp.where(to_word == index, placed, jnp.uint32(0))
            for index, word in enumerate(words)
        )


@dataclass(frozen=True)
class BitPlanes:
    """A board of at most 16 cells as bit planes: plane ``k`` holds bit ``k`` of every
    cell's value (cell ``i`` at bit ``i``), two planes to a uint32 word (bits 0-15
    and 16-31), as a tuple of uint32[] scalars. Moving a tile into the blank is then
    a shift, a mask, a multiply and an xor per word (the multiply copies the tile's
    bit pair onto both cells, the xor swaps them), about half the operations of
    :class:`PackedCells`, with the same interface."""

    cells: int

    def __post_init__(self) -> None:
        if not 1 < self.cells <= 16:
            raise ValueError(f"bit planes hold 2..16 cells, got {self.cells}")

    @property
    def planes(self) -> int:
        """Planes a board takes: bits of the largest value ``cells - 1``."""
        return (self.cells - 1).bit_length()

    def pack(self, values: jax.Array) -> tuple[jax.Array, ...]:
        """uint32[] words of int[cells] ``values`` in ``0 .. cells - 1``."""
        at = jnp.arange(self.cells, dtype=jnp.uint32)
        bits = [
            jnp.sum(((values.astype(jnp.uint32) >> k) & 1) << at, dtype=jnp.uint32)
            for k in range(self.planes)
        ]
        bits += [jnp.uint32(0)] * (self.planes % 2)
        return tuple(low | (high << 16) for low, high in zip(bits[::2], bits[1::2], strict=True))

    def unpack(self, words: tuple[jax.Array, ...]) -> jax.Array:
        """int32[cells] of the packed ``words``."""
        at = jnp.arange(self.cells, dtype=jnp.uint32)
        values = jnp.zeros((self.cells,), jnp.uint32)
        for k in range(self.planes):
            bit = (words[k // 2] >> (at + 16 * (k % 2))) & 1
            values = values | (bit << k)
        return values.astype(jnp.int32)

    def move(
        self, words: tuple[jax.Array, ...], source: jax.Array, dest: jax.Array
    ) -> tuple[jax.Array, ...]:
        """``words`` with the value of cell ``source`` moved to cell ``dest`` (which
        holds 0) and ``source`` cleared (int32[] cells)."""
        source, dest = source.astype(jnp.uint32), dest.astype(jnp.uint32)
        both = (jnp.uint32(1) << source) | (jnp.uint32(1) << dest)
        pair = jnp.uint32(0x00010001)
        return tuple(word ^ (((word >> source) & pair) * both) for word in words)


def walk_board(
    word: Callable[[jax.Array], jax.Array],
    num_rows: jax.Array,
    side: int,
    moves: int = WALK_MOVES,
) -> jax.Array:
    """int8[side, side] GEM's start board: from the solved board, ``moves`` moves, move
    ``k`` uniform among the legal directions that do not undo the previous move (the
    word ``word(k)``, uint32[] for an int32[] ``k``, picks among them, in
    :data:`DIRECTIONS` order).

    The board travels as a few uint32 scalars (:class:`BitPlanes` up to 4x4,
    :class:`PackedCells` beyond) with the blank's cell index as one scalar, and each
    move draws its word in the loop's body, so under ``vmap`` a move is a few vector
    operations over the lanes (docs/performance.md)."""
    cells = side * side
    packed = BitPlanes(cells) if cells <= 16 else PackedCells(cells)
    last_row = num_rows - 1
    # The blank's step in cells for each direction.
    steps = [d_row * side + d_col for d_row, d_col in BLANK_STEPS]

    def body(k: jax.Array, carry: tuple[Any, ...]) -> tuple[Any, ...]:
        board, blank, last = carry
        # Unsigned, so a power-of-two side divides by a shift.
        row = (blank.astype(jnp.uint32) // side).astype(jnp.int32)
        col = (blank.astype(jnp.uint32) % side).astype(jnp.int32)
        # up, down, left, right; a move undoes the previous one when last == move ^ 1.
        allowed = (
            (row < last_row) & (last != 1),
            (row > 0) & (last != 0),
            (col < last_row) & (last != 3),
            (col > 0) & (last != 2),
        )
        before = [allowed[0].astype(jnp.int32)]
        for a in allowed[1:]:
            before.append(before[-1] + a.astype(jnp.int32))
        # At most 3 moves are allowed after the first move, 2 at a corner.
        drawn = word(k)
        pick = jnp.where(
            before[-1] == 3, below(drawn, 3), jnp.where(before[-1] == 2, below(drawn, 2), 0)
        )
        # The pick-th allowed move is the number of moves whose running count <= pick
        # (added up lane by lane: a reduction over a small axis vectorises badly).
        move = sum((count <= pick).astype(jnp.int32) for count in before[:3])
        step = jnp.where(
            move == 0,
            steps[0],
            jnp.where(move == 1, steps[1], jnp.where(move == 2, steps[2], steps[3])),
        )
        target = blank + step
        return packed.move(board, target, blank), target, move

    goal = packed.pack(goal_board(num_rows, side).reshape(-1))
    start = (goal, last_row * side + last_row, jnp.int32(-1))
    board = jax.lax.fori_loop(0, moves, body, start)[0]
    return packed.unpack(board).reshape(side, side).astype(jnp.int8)


@functools.cache
def two_by_two_starts() -> np.ndarray:
    """int8[2, 2, 2]: :func:`walk_board`'s 2x2 board for each pick of its first move.

    On 2x2 only the first move has a choice (two legal moves from the corner); every
    later move has one legal direction that does not undo the previous one, so the
    blank circles the board and the first word alone fixes the start board."""
    with jax.ensure_compile_time_eval():
        # below(word, 2) is 0 for the word 0 and 1 for 0xFFFFFFFF.
        firsts = jnp.asarray([0, 0xFFFFFFFF], jnp.uint32)
        walk = jax.vmap(lambda first: walk_board(lambda k: first, jnp.int32(2), 2))
        return np.asarray(walk(firsts))


def start_board(
    word: Callable[[jax.Array], jax.Array], num_rows: jax.Array, side: int
) -> jax.Array:
    """int8[side, side]: :func:`walk_board` of ``word``, read from
    :func:`two_by_two_starts` on a 2x2 array (the same board for the same words,
    without the walk)."""
    if side == 2:
        first, second = two_by_two_starts()
        return jnp.where(below(word(jnp.int32(0)), 2) == 0, first, second)
    return walk_board(word, num_rows, side)


class FifteenPuzzleParams(struct.PyTreeNode):
    """Dynamic parameters (sweepable without recompiling).

    Attributes:
        max_turns: int32[] the turn limit (drawn per reset by ``-random``).
        rewards: GEM's reward constants.
    """

    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class FifteenPuzzleState(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said):
        num_rows, max_turns: this episode's configuration.
        turn: turns taken (GEM's ``turn_count``; it keeps counting after the end).
        board: int8[S, S] the tiles, 0 for the blank and outside the active board.
    """

    num_rows: jax.Array
    max_turns: jax.Array
    turn: jax.Array
    board: jax.Array


class FifteenPuzzle(
    Environment[FifteenPuzzleState, FifteenPuzzleParams], GemMirror[FifteenPuzzleState]
):
    """FifteenPuzzle as a kernel. See the module docstring for rules and shapes.

    Args:
        max_turns, num_rows: the registered configuration (GEM's argument order and
            defaults); either None gives the ``-random`` variant. ``num_rows`` is in
            ``2..10``.
    """

    gem_class_name = "FifteenPuzzleEnv"
    step_uses_key = False

    def __init__(self, max_turns: int | None = 20, num_rows: int | None = 2) -> None:
        self.variant = Variant.of(
            {"num_rows": num_rows, "max_turns": max_turns},
            random_values=RANDOM_CONFIGS[-1],
            check=self._check,
        )
        self.randomize = self.variant.randomize
        self.side, self._max_turns = self.variant.values
        # A reset walks 100 moves (but on 2x2, where it reads one of two boards):
        # resetting only the lanes that ended pays.
        self.sparse_resets = self.side > 2
        self.messages = MESSAGES
        self.suffix = suffix_for(self.side)
        self.grammar = BoxedWord(DIRECTIONS)

    @staticmethod
    def _check(num_rows: int, max_turns: int) -> None:
        if not 2 <= num_rows <= MAX_ROWS:
            raise ValueError(f"num_rows must be in 2..{MAX_ROWS}, got {num_rows}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    @property
    def config(self) -> tuple[Any, ...]:
        return self.variant.config

    @property
    def default_params(self) -> FifteenPuzzleParams:
        return FifteenPuzzleParams(max_turns=jnp.int32(self._max_turns))

    def validate_params(self, params: FifteenPuzzleParams) -> None:
        self._check(self.side, int(params.max_turns))

    def action_space(self, params: FifteenPuzzleParams) -> Discrete:
        """``0`` (a format error) and the four directions ``1..4``."""
        return Discrete(len(DIRECTIONS) + 1)

    def _active(self, num_rows: jax.Array) -> jax.Array:
        r = jnp.arange(self.side, dtype=jnp.int32)
        return (r[:, None] < num_rows) & (r[None, :] < num_rows)

    def reset(
        self, key: jax.Array, params: FifteenPuzzleParams
    ) -> tuple[FifteenPuzzleState, TimeStep]:
        # random_words(key, WALK_MOVES + 1), each word drawn where it is used: the
        # walk's in its loop, the configuration's last.
        seed = bits(key, 2)

        def word(k: jax.Array) -> jax.Array:
            return mixed_words(seed, k.astype(jnp.uint32))

        if self.randomize:
            pick = jnp.arange(len(RANDOM_CONFIGS)) == below(
                word(jnp.int32(WALK_MOVES)), jnp.uint32(len(RANDOM_CONFIGS))
            )
            num_rows, turns = (
                jnp.sum(jnp.where(pick, jnp.asarray(column, jnp.int32), 0))
                for column in zip(*RANDOM_CONFIGS, strict=True)
            )
        else:
            num_rows, turns = jnp.int32(self.side), params.max_turns
        state = FifteenPuzzleState(
            num_rows=num_rows,
            max_turns=turns,
            turn=jnp.int32(0),
            board=start_board(word, num_rows, self.side),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: FifteenPuzzleState,
        action: jax.Array,
        params: FifteenPuzzleParams,
    ) -> tuple[FifteenPuzzleState, TimeStep]:
        code = check_int_action(action, ())
        rewards, num_rows = params.rewards, self._num_rows(state)
        turn = state.turn + 1
        format_error = (code < 1) | (code > len(DIRECTIONS))
        move = jnp.clip(code - 1, 0, len(DIRECTIONS) - 1)
        blank = self._blank(state)
        valid = ~format_error & legal_moves(blank, num_rows)[move]
        moved = slide(state.board, blank, move)
        board = jnp.where(valid, moved, state.board)
        goal = goal_board(num_rows, self.side)
        # Cells outside the active board are 0 on both, so every cell matches exactly
        # when every active one does.
        matches = jnp.sum(self._active(num_rows) & (board == goal), dtype=jnp.int32)
        solved = valid & (matches == num_rows * num_rows)
        out_of_turns = turn >= state.max_turns

        soft = matches.astype(jnp.float32) / (num_rows * num_rows).astype(jnp.float32)
        played = jnp.where(valid, rewards.step, rewards.invalid)
        reward = jnp.select(
            [format_error, solved],
            [rewards.format_error, rewards.success],
            played + jnp.where(out_of_turns, soft, 0.0),
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (solved, "success"),
            (out_of_turns, "max_turns"),
            (~valid, "outside"),
            default="valid",
        )
        terminated, truncated = gem_ending(
            format_error, solved, out_of_turns, turn, state.max_turns
        )

        new_state = state.replace(turn=turn, board=board)
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(kind, turn=turn, direction=move),
            info={"success": solved},
        )
        return new_state, ts

    def _blank(self, state: FifteenPuzzleState) -> jax.Array:
        """int32[2] the blank's (row, col): the active cell holding 0."""
        hole = (state.board == 0) & self._active(self._num_rows(state))
        cells = jnp.arange(self.side * self.side, dtype=jnp.int32)
        index = jnp.sum(jnp.where(hole.reshape(-1), cells, 0))  # the only such cell
        return jnp.stack([index // self.side, index % self.side])

    def _num_rows(self, state: FifteenPuzzleState) -> jax.Array:
        """The episode's rows: a constant outside ``-random`` (so the goal board and
        the active cells fold into constants)."""
        return state.num_rows if self.randomize else jnp.int32(self.side)

    def random_action(self, key: jax.Array, state: FifteenPuzzleState) -> jax.Array:
        """A direction uniform among the four (GEM's sampler; GEM returns the bare
        word, which is a format error, the text API boxes it)."""
        return 1 + below(bits(key, 1)[0], jnp.uint32(len(DIRECTIONS)))

    def valid_action_mask(self, state: FifteenPuzzleState) -> jax.Array:
        """bool[5]: the directions whose tile is on the board (0, the format error,
        never)."""
        legal = legal_moves(self._blank(state), self._num_rows(state))
        return jnp.concatenate([jnp.zeros((1,), jnp.bool_), legal])

    def instructions_event(self, state: FifteenPuzzleState) -> Event:
        return MESSAGES.event("instructions", greatest=state.num_rows * state.num_rows - 1)

    def suffix_values(self, state: FifteenPuzzleState) -> Mapping[str, jax.Array]:
        return {"num_rows": state.num_rows, "board": state.board}

    def _observation(self, state: FifteenPuzzleState) -> dict[str, jax.Array]:
        return {
            "board": state.board,
            "active": self._active(self._num_rows(state)),
            "turn": state.turn,
            "num_rows": state.num_rows,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` FifteenPuzzleEnv."""
        if gem_env._is_random:
            return {"max_turns": None, "num_rows": None}
        return {"max_turns": gem_env.max_turns, "num_rows": gem_env.num_rows}

    def state_from_gem(self, gem_env: Any) -> FifteenPuzzleState:
        """The kernel state equal to a live GEM env's (its board and turn)."""
        n = gem_env.num_rows
        board = np.zeros((self.side, self.side), np.int8)
        board[:n, :n] = [[0 if tile is None else tile for tile in row] for row in gem_env.board]
        return FifteenPuzzleState(
            num_rows=jnp.int32(n),
            max_turns=jnp.int32(gem_env.max_turns),
            turn=jnp.int32(gem_env.turn_count),
            board=jnp.asarray(board),
        )
