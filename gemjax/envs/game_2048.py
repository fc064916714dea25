"""Game2048 (GEM's ``gem/envs/game_env/game_2048.py``).

The player slides the tiles of an ``n x n`` board (``n = 4`` in every GEM id) up,
down, left or right; equal neighbours merge once per move, and after every move that
changes the board a tile appears on a uniform empty cell: 2 with probability 0.9,
else 4. GEM's rules, branch by branch (spec section 15):

1. no ``\\boxed{up|down|left|right}`` (any case): format error, -0.1, terminated,
   truncated only when ``turn == max_turns``;
2. a move that leaves the board unchanged (or a word whose ``str.lower()`` is no
   direction, ``\\boxed{rİght}``, echoed): invalid (0), the game goes on;
3. otherwise the move; its reward is the progress measured *before* the spawn:
   with ``cur = min(max tile, target)``, when ``cur`` exceeds the tracked best,
   ``(log2 cur - log2 best) / (log2 target - log2 init)`` (``init`` the best tile
   at reset), and ``cur`` becomes the best (so a spawned 4 is credited at the next
   move); then the spawn; then
   a. the best reached ``target_tile``: success, terminated, not truncated;
   b. no move changes the board (checked only here): "Game over!", terminated;
4. after 2 or 3 without an ending, when ``turn >= max_turns``: "You have reached
   the maximum number of turns ({max_turns}).", terminated and truncated, the
   step's reward unchanged.

The ``-random`` variant draws ``(target_tile, max_turns)`` uniformly from
``(16, 20), (32, 30), (64, 50)`` at every reset.

Kernel action: an int32 scalar (:class:`~gemjax.text.grammar.BoxedWord`): ``0``
format error, ``1..4`` up, down, left, right, ``5`` a word that is no direction.

Tiles are kept as exponents (``k`` for the tile ``2**k``, 0 for an empty cell).
A move reads the board as ``n`` lines towards the move (one gather by a static
permutation per direction), slides every line towards its first cell with a fixed
routine over its ``n`` cells, and puts the lines back (the inverse permutation).

Observation, a dict of:
    ``board``: int8[n, n] tile exponents (0 empty);
    ``turn``, ``target_tile``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
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
from gemjax.rng import below, random_words
from gemjax.spaces import Discrete
from gemjax.text.grammar import BoxedWord
from gemjax.text.templates import Board, Choice, Echo, MessageTable, Template

DIRECTIONS = ("up", "down", "left", "right")
UP, DOWN, LEFT, RIGHT = 1, 2, 3, 4
RANDOM_CONFIGS = ((16, 20), (32, 30), (64, 50))  # GEM: random.choice of (target, turns)
TWO_PROBABILITY = 0.9  # GEM: a spawned tile is 2 if random.random() < 0.9, else 4
MIN_SIDE, MAX_SIDE = 2, 8
MAX_TARGET = 2**30

GRAMMAR = BoxedWord(DIRECTIONS, case_sensitive=False, slot="move")
DIRECTION = Choice("direction", DIRECTIONS)

MESSAGES = MessageTable(
    instructions=Template(
        "You are playing 2048.\n"
        "Your goal is to reach the {target_tile} tile by sliding and merging tiles.\n"
        "You have {max_turns} turns maximum.\n\n"
        "Rules:\n"
        "- When two tiles with the same number touch, they merge into one tile with double "
        "the value.\n"
        "- After each move, a new tile (2 or 4) appears in a random empty spot.\n"
        "- You can move tiles in four directions: 'up', 'down', 'left', 'right'.\n\n"
        "To submit your move, type the direction in \\boxed{{...}}.\n"
        "For example: {example}\n\n",
        example=Choice("example", tuple(f"\\boxed{{{d}}}" for d in DIRECTIONS)),
    ),
    format_error=Template(
        "At turn {turn}, you did not provide a valid move. Please use \\boxed{{direction}} format."
    ),
    unchanged=Template(
        "At turn {turn}, you chose move '{direction}' which doesn't change the board state. "
        "Try a different direction.",
        direction=DIRECTION,
    ),
    unknown_move=Template(
        "At turn {turn}, you chose move '{move}' which doesn't change the board state. "
        "Try a different direction.",
        move=Echo("move", fallback=(GRAMMAR.other_example or "").lower()),
    ),
    success=Template("Congratulations! You reached the {target_tile} tile in {turn} turns!"),
    game_over=Template("Game over! No more moves possible."),
    moved=Template("At turn {turn}, you moved {direction}", direction=DIRECTION),
    max_turns=Template("You have reached the maximum number of turns ({max_turns})."),
)


def cell_texts(side: int) -> tuple[str, ...]:
    """GEM's text of each cell code (an exponent): ``"   ."`` for 0, else
    ``f"{2**k:4d}"``, up to the largest tile an ``side x side`` board can hold."""
    return ("   .", *(f"{2**k:4d}" for k in range(1, side * side + 2)))


def suffix_for(side: int) -> Template:
    """GEM's suffix: the board, rows of cells joined by spaces, and the prompt."""
    board = Board("board", (side, side), cell_texts(side), separator=" ")
    return Template("Current board:\n{board}Enter your move.", board=board)


class Game2048Params(struct.PyTreeNode):
    """Dynamic parameters (ignored by ``-random``, which draws them at every reset).

    Attributes:
        target_tile: int32[] the tile that wins.
        max_turns: int32[] the turn limit.
        rewards: GEM's reward constants (``format_error``, ``invalid`` for a move
            that changes nothing; a move pays its progress).
    """

    target_tile: jax.Array
    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class Game2048State(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said):
        target_tile, max_turns: this episode's configuration.
        board: int8[n, n] tile exponents (0 empty).
        best: GEM's ``max_tile_achieved``: the largest tile seen at a move's
            progress check, capped at ``target_tile`` (a value, not an exponent).
        initial_best: the best tile at reset (2 or 4).
        turn: turns taken (GEM's ``turn_count``; it keeps counting after the end).
        example: the instructions' example direction (``0..3``).
    """

    target_tile: jax.Array
    max_turns: jax.Array
    board: jax.Array
    best: jax.Array
    initial_best: jax.Array
    turn: jax.Array
    example: jax.Array


def slide_rows(board: jax.Array) -> jax.Array:
    """int32[..., n, n]: every row of exponents slid towards column 0 as GEM does:
    empty cells squeezed out, then equal neighbours merged left to right, each tile
    at most once (``[1, 1, 1, 1] -> [2, 2, 0, 0]``), then zeros appended.

    One pass over the ``n`` cells per row (unrolled): ``pending`` is the tile
    waiting for a partner, ``filled`` how many cells are written.
    """
    n = board.shape[-1]
    columns = jnp.arange(n, dtype=jnp.int32)
    zeros = jnp.zeros(board.shape[:-1], jnp.int32)
    out = jnp.zeros_like(board)
    pending, filled = zeros, zeros
    for i in range(n):
        tile = board[..., i]
        present = tile > 0
        merge = present & (tile == pending)
        flush = present & (pending > 0) & ~merge
        written = jnp.where(merge, tile + 1, pending)
        put = (merge | flush)[..., None] & (columns == filled[..., None])
        out = jnp.where(put, written[..., None], out)
        filled = filled + (merge | flush).astype(jnp.int32)
        pending = jnp.where(merge, 0, jnp.where(present, tile, pending))
    put = (pending > 0)[..., None] & (columns == filled[..., None])
    return jnp.where(put, pending[..., None], out)


@functools.cache
def line_orders(side: int) -> tuple[np.ndarray, np.ndarray]:
    """Per direction (up, down, left, right), int32[4, side * side] each: ``order[d]``
    the row-major cell indices of the board read as ``side`` lines, each from the
    cell the tiles slide towards (``board.reshape(-1)[order[d]]`` turns the board so
    that ``d`` slides towards column 0), and ``inverse[d]`` the permutation that
    puts the turned board back."""
    cells = np.arange(side * side).reshape(side, side)
    turns = (cells.T, cells.T[:, ::-1], cells, cells[:, ::-1])  # up, down, left, right
    order = np.stack([turn.reshape(-1) for turn in turns]).astype(np.int32)
    inverse = np.argsort(order, axis=1).astype(np.int32)
    return order, inverse


def moved(board: jax.Array, direction: jax.Array) -> jax.Array:
    """int32[n, n]: ``board`` (exponents) after the move ``direction`` (``1..4``).

    One gather reads the board as lines towards the move (:func:`line_orders`), one
    :func:`slide_rows` slides them, one gather puts them back."""
    n = board.shape[-1]
    order, inverse = (jnp.asarray(table)[direction - UP] for table in line_orders(n))
    slid = slide_rows(board.reshape(-1)[order].reshape(n, n))
    return slid.reshape(-1)[inverse].reshape(n, n)


def movable(board: jax.Array) -> jax.Array:
    """bool[4]: per direction (up, down, left, right), the move changes ``board``: a
    tile with an empty cell on that side, or two equal neighbours along that axis."""
    filled = board > 0

    def along(cells: jax.Array, used: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(forwards: towards index 0, backwards) along the last axis."""
        first, second = cells[..., :-1], cells[..., 1:]
        pair = jnp.any(used[..., :-1] & (first == second))
        towards_start = jnp.any(~used[..., :-1] & used[..., 1:])
        towards_end = jnp.any(used[..., :-1] & ~used[..., 1:])
        return pair | towards_start, pair | towards_end

    left, right = along(board, filled)
    up, down = along(jnp.swapaxes(board, -1, -2), jnp.swapaxes(filled, -1, -2))
    return jnp.stack([up, down, left, right])


def can_move(board: jax.Array) -> jax.Array:
    """bool[]: some move changes ``board`` (exponents, at least one tile), i.e.
    ``any(movable(board))``: an empty cell (some line then holds a tile next to an
    empty cell) or two equal neighbours in a row or a column."""
    return (
        jnp.any(board == 0)
        | jnp.any(board[:, :-1] == board[:, 1:])
        | jnp.any(board[:-1, :] == board[1:, :])
    )


def exact_log2(value: jax.Array) -> jax.Array:
    """float32 ``log2(value)`` of a positive int32, exact for powers of two."""
    exponent = 31 - jax.lax.clz(value)
    power = value == jnp.left_shift(jnp.int32(1), exponent)
    return jnp.where(power, exponent.astype(jnp.float32), jnp.log2(value.astype(jnp.float32)))


def capped_tile(exponent: jax.Array, target: jax.Array) -> jax.Array:
    """int32 ``min(2**exponent, target)`` without overflow (``target <= 2**30``)."""
    tile = jnp.left_shift(jnp.int32(1), jnp.minimum(exponent, 30).astype(jnp.int32))
    return jnp.where(exponent > 30, target, jnp.minimum(tile, target))


def spawn(board: jax.Array, words: jax.Array) -> jax.Array:
    """``board`` with a tile on a uniform empty cell (``words[0]``: the cell's rank
    among the empty cells in row-major order, as GEM's ``random.choice``), exponent 1
    with probability 0.9, else 2 (``words[1]``); unchanged when the board is full."""
    empty = (board == 0).reshape(-1)
    count = jnp.sum(empty, dtype=jnp.int32)
    rank = below(words[0], jnp.maximum(count, 1))
    # The running count of empty cells as a product with a triangle of ones (exact
    # in float32): a batched cumsum is a slow reduce-window on XLA's CPU backend.
    size = empty.shape[0]
    before = jnp.asarray(np.tril(np.ones((size, size), np.float32), -1).T)
    index = jnp.dot(empty.astype(jnp.float32), before).astype(jnp.int32)
    cell = (empty & (index == rank)).reshape(board.shape)
    two = words[1] < jnp.uint32(round(TWO_PROBABILITY * 2**32))
    return jnp.where(cell, jnp.where(two, 1, 2), board).astype(board.dtype)


class Game2048(Environment[Game2048State, Game2048Params], GemMirror[Game2048State]):
    """Game2048 as a kernel. See the module docstring for rules and shapes.

    Args:
        target_tile, max_turns: the registered configuration; either None gives
            GEM's ``-random`` variant (as in GEM).
        board_size: the board's side (GEM's ``board_size``, 4 in every id).
    """

    gem_class_name = "Game2048Env"
    # A reset (two spawns) costs more than copying the small state of the few lanes
    # that ended: resetting only those pays (docs/performance.md, Game2048).
    sparse_resets = True

    def __init__(
        self,
        target_tile: int | None = 2048,
        max_turns: int | None = 1000,
        board_size: int = 4,
    ) -> None:
        if not MIN_SIDE <= board_size <= MAX_SIDE:
            raise ValueError(f"board_size must be in {MIN_SIDE}..{MAX_SIDE}, got {board_size}")
        self.variant = Variant.of(
            {"target_tile": target_tile, "max_turns": max_turns},
            random_values=max(RANDOM_CONFIGS),
            check=self._check,
        )
        self.randomize, self._defaults = self.variant.randomize, self.variant.values
        self.side = board_size
        self.messages = MESSAGES
        self.suffix = suffix_for(board_size)
        self.grammar = GRAMMAR

    @staticmethod
    def _check(target_tile: int, max_turns: int) -> None:
        if not 1 <= target_tile <= MAX_TARGET:
            raise ValueError(f"target_tile must be in 1..{MAX_TARGET}, got {target_tile}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    @property
    def config(self) -> tuple[Any, ...]:
        return (*self.variant.config, self.side)

    @property
    def default_params(self) -> Game2048Params:
        target, turns = (jnp.int32(v) for v in self._defaults)
        return Game2048Params(target_tile=target, max_turns=turns)

    def validate_params(self, params: Game2048Params) -> None:
        self._check(int(params.target_tile), int(params.max_turns))

    def action_space(self, params: Game2048Params) -> Discrete:
        """``0..5``: 0 a format error, 1..4 up, down, left, right, 5 a word that is no
        direction."""
        return Discrete(GRAMMAR.codes)

    def reset(self, key: jax.Array, params: Game2048Params) -> tuple[Game2048State, TimeStep]:
        words = random_words(key, 6)
        if self.randomize:
            pick = below(words[4], jnp.uint32(len(RANDOM_CONFIGS)))
            configs = jnp.asarray(RANDOM_CONFIGS, jnp.int32)
            target, turns = configs[pick, 0], configs[pick, 1]
        else:
            target, turns = params.target_tile, params.max_turns
        board = jnp.zeros((self.side, self.side), jnp.int8)
        board = spawn(spawn(board, words[0:2]), words[2:4])
        best = jnp.left_shift(jnp.int32(1), jnp.max(board).astype(jnp.int32))
        state = Game2048State(
            target_tile=target,
            max_turns=turns,
            board=board,
            best=best,
            initial_best=best,
            turn=jnp.int32(0),
            example=below(words[5], jnp.uint32(len(DIRECTIONS))),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: Game2048State,
        action: jax.Array,
        params: Game2048Params,
    ) -> tuple[Game2048State, TimeStep]:
        action = check_int_action(action, ())
        rewards = params.rewards
        turn = state.turn + 1
        format_error = action <= 0
        direction = jnp.clip(action, UP, RIGHT)
        is_direction = (action >= UP) & (action <= RIGHT)
        board = state.board.astype(jnp.int32)
        slid = moved(board, direction)
        valid = is_direction & jnp.any(slid != board)

        current = capped_tile(jnp.max(slid), state.target_tile)
        progress = valid & (current > state.best)
        span = exact_log2(state.target_tile) - exact_log2(state.initial_best)
        gain = (exact_log2(current) - exact_log2(state.best)) / jnp.where(span > 0, span, 1.0)
        best = jnp.where(progress, current, state.best)
        spawned = spawn(slid, random_words(key, 2))
        new_board = jnp.where(valid, spawned, board)
        won = valid & (best >= state.target_tile)
        stuck = valid & ~won & ~can_move(new_board)
        out_of_turns = turn >= state.max_turns

        reward = jnp.select(
            [format_error, progress, valid],
            [rewards.format_error, gain, rewards.step],
            rewards.invalid,
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (won, "success"),
            (stuck, "game_over"),
            (out_of_turns, "max_turns"),
            (action > RIGHT, "unknown_move"),
            (~valid, "unchanged"),
            default="moved",
        )
        ended = won | stuck
        terminated, truncated = gem_ending(format_error, ended, out_of_turns, turn, state.max_turns)

        new_state = state.replace(turn=turn, board=new_board.astype(jnp.int8), best=best)
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(
                kind,
                turn=turn,
                direction=direction - 1,
                target_tile=state.target_tile,
                max_turns=state.max_turns,
            ),
            info={"success": won},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: Game2048State) -> jax.Array:
        """GEM's sampler: a uniform direction."""
        return UP + below(random_words(key, 1)[0], jnp.uint32(len(DIRECTIONS)))

    def valid_action_mask(self, state: Game2048State) -> jax.Array:
        """bool[6]: the directions whose move changes the board (the
        :class:`~gemjax.core.ActionMasking` capability)."""
        moves = movable(state.board.astype(jnp.int32))
        return jnp.concatenate([jnp.zeros(1, jnp.bool_), moves, jnp.zeros(1, jnp.bool_)])

    def instructions_event(self, state: Game2048State) -> Event:
        return MESSAGES.event(
            "instructions",
            target_tile=state.target_tile,
            max_turns=state.max_turns,
            example=state.example,
        )

    def suffix_values(self, state: Game2048State) -> Mapping[str, jax.Array]:
        return {"board": state.board}

    def _observation(self, state: Game2048State) -> dict[str, jax.Array]:
        return {
            "board": state.board,
            "turn": state.turn,
            "target_tile": state.target_tile,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` Game2048Env."""
        return cls.gem_kwargs(gem_env, ("target_tile", "max_turns"), board_size=gem_env.board_size)

    def state_from_gem(self, gem_env: Any) -> Game2048State:
        """The kernel state equal to a live GEM env's (the instructions' example,
        which GEM does not keep, is ``up``)."""
        tiles = np.asarray(gem_env.board, np.int64)
        exponents = np.where(tiles > 0, np.log2(np.maximum(tiles, 1)), 0).astype(np.int8)
        return Game2048State(
            target_tile=jnp.int32(gem_env.target_tile),
            max_turns=jnp.int32(gem_env.max_turns),
            board=jnp.asarray(exponents),
            best=jnp.int32(gem_env.max_tile_achieved),
            initial_best=jnp.int32(gem_env.init_max_tile_achieved),
            turn=jnp.int32(gem_env.turn_count),
            example=jnp.int32(0),
        )
