"""Sokoban (GEM's ``gem/envs/game_env/sokoban/``).

The player walks a walled room and pushes boxes (never pulls them, one at a time)
onto the targets. GEM's rules, branch by branch (spec section 10):

1. no ``\\boxed{up|down|left|right}`` (any case; the last box counts), or a match
   whose ``str.lower()`` is no direction (``\\boxed{rİght}``, on which GEM crashes:
   docs/gem_differences.md): "At turn T, your submitted action is not valid.",
   -0.1, terminated, truncated only when ``turn == max_turns``;
2. the cell ahead is a wall (or off the board), or holds a box whose next cell is
   a wall, another box or off the board: "you cannot move d - you would collide
   with wall or other boxes!", 0, the game goes on;
3. otherwise the player steps ahead, pushing the box there if there is one: "At
   turn T, you {pushed a box while you }moved d.", 0; if then every box is on a
   target, "Congratulations! You have solved the Sokoban puzzle!", 1.0,
   terminated, never truncated;
4. after 2 or 3 without a win, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, and the reward is
   *replaced* by ``boxes on targets / num_boxes``.

GEM draws each level with a reverse-play search (seconds per 8x8 level in
Python: docs/gem_differences.md). gemjax draws it from a bank made by exactly that search
(``scripts/make_sokoban_bank.py``, which reproduces GEM's ``reset(seed=s)`` level
for the recorded seed ``s``) under a uniform rotation or reflection of the board,
which keeps a level solvable (docs/gem_differences.md). Every box and the player
start off target. The ids: ``-easy`` 6x6 with 2 boxes and 20 turns, ``-hard`` 8x8
with 4 boxes and 50 turns, ``-random`` either GEM's ``(6x6, 2 boxes, 20 turns)``
or ``(8x8, 5 boxes, 50 turns)`` at every reset, on 8x8 arrays with the 6x6 room in
the top-left corner and walls around it.

GEM draws a player standing on a target as ``P`` (hiding the target) and never
uses its code 6; so does gemjax.

Kernel action: an int32 scalar (:class:`~gemjax.text.grammar.BoxedWord`): ``0``
format error, ``1..4`` up, down, left, right, ``5`` a word that is no direction
(a format error too).

Observation, a dict of:
    ``room``: int8[S, S] GEM's ``room_state`` codes (0 wall, 1 floor, 2 target,
    3 box on target, 4 box, 5 player), walls outside the room;
    ``turn``, ``dim``, ``num_boxes``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax import bitset
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
from gemjax.text.templates import Board, Choice, MessageTable, Template

DIRECTIONS = ("up", "down", "left", "right")
STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))  # (row, col) per direction
WALL, FLOOR, TARGET, BOX_ON_TARGET, BOX, PLAYER = range(6)
SYMBOLS = ("#", "_", "O", "√", "X", "P")
# GEM's -random candidates: (room side, boxes, max_turns).
RANDOM_CONFIGS = ((6, 2, 20), (8, 5, 50))
# What -random's arrays are sized for, in the constructor's order (dim_room,
# max_turns, num_boxes).
RANDOM_CAPACITY = (8, 50, 5)
BANK_FILE = ("data", "sokoban", "bank.npz")
# The rotations and reflections of a square (a level's symmetries).
SYMMETRIES = 8

GRAMMAR = BoxedWord(DIRECTIONS, case_sensitive=False, slot="move")
DIRECTION = Choice("direction", DIRECTIONS)

MESSAGES = MessageTable(
    instructions=Template(
        "You are solving the Sokoban puzzle. You are the player and you need to push all "
        "boxes to targets.\n"
        "When you are right next to a box, you can push it by moving in the same direction.\n"
        "You cannot push a box through a wall or another box, and you cannot pull a box.\n"
        "you have to complete the puzzle within {max_turns} turns.\n"
        "On the board, objects are represented as:\n"
        "- The player (you) appears as 'P'\n"
        "- Walls are represented with '#'\n"
        "- Boxes are marked as 'X'\n"
        "- Empty goals are shown with 'O'\n"
        "- Boxes on goals are visualized with '√'\n"
        "- Empty floor is shown as '_'\n\n"
        "To submit your move, type the command in \\boxed{{}}.\n"
        "For example: \\boxed{{{example}}} to move {example}.\n"
        "Use logic and deduction to push all boxes onto the target positions!",
        example=Choice("example", DIRECTIONS),
    ),
    format_error=Template("At turn {turn}, your submitted action is not valid."),
    collision=Template(
        "At turn {turn}, you cannot move {direction} - you would collide with wall or other boxes!",
        direction=DIRECTION,
    ),
    pushed=Template(
        "At turn {turn}, you pushed a box while you moved {direction}.", direction=DIRECTION
    ),
    moved=Template("At turn {turn}, you moved {direction}.", direction=DIRECTION),
    success=Template("Congratulations! You have solved the Sokoban puzzle!"),
    max_turns=Template("You have reached the maximum number of turns."),
)


def suffix_for(side: int) -> Template:
    """GEM's suffix: the ``dim x dim`` room, a row per line with its symbols joined by
    spaces (each row ends with a newline, then the template's own)."""
    board = Board("board", (side, side), SYMBOLS, rows="dim", cols="dim", separator=" ")
    return Template("Here is the current board layout:\n{board}\nEnter your move.", board=board)


def bank_tag(side: int, boxes: int) -> str:
    """The bank's name of a configuration: ``"8x8b4"``."""
    return f"{side}x{side}b{boxes}"


@functools.cache
def bank_levels(tag: str) -> np.ndarray:
    """uint8[N, d, d] the shipped levels of a configuration (:func:`bank_tag`): GEM's
    initial ``room_state`` codes (walls, floor, targets, boxes 4, the player 5).

    Raises:
        ValueError: the bank holds no levels of that configuration.
    """
    path = importlib.resources.files("gemjax.envs").joinpath("/".join(BANK_FILE))
    with path.open("rb") as handle, np.load(handle) as bank:
        tags = sorted(name.removesuffix("_state") for name in bank.files if name.endswith("_state"))
        if tag not in tags:
            raise ValueError(
                f"the Sokoban level bank has no {tag} levels (it has {', '.join(tags)}); "
                "make them with scripts/make_sokoban_bank.py"
            )
        return np.asarray(bank[f"{tag}_state"], np.uint8)


def padded_levels(configs: tuple[tuple[int, int], ...], side: int) -> np.ndarray:
    """uint8[sum N, side, side]: the banks of ``configs`` (``(room side, boxes)``) in
    order, each room in the top-left corner with walls around it."""
    parts = []
    for room, boxes in configs:
        levels = bank_levels(bank_tag(room, boxes))
        padded = np.zeros((len(levels), side, side), np.uint8)
        padded[:, :room, :room] = levels
        parts.append(padded)
    return np.concatenate(parts)


def symmetric_rooms(rooms: np.ndarray, dims: np.ndarray) -> np.ndarray:
    """uint8[8, N, S, S]: every room of ``rooms`` (uint8[N, S, S], each ``dims[i] x
    dims[i]`` room in the top-left corner, walls around it) under the 8 rotations
    and reflections of its room, the room kept in the top-left corner."""
    out = np.zeros((SYMMETRIES, *rooms.shape), np.uint8)
    for i, (room, dim) in enumerate(zip(rooms, dims, strict=True)):
        inner = room[:dim, :dim]
        turns = [np.rot90(inner, k) for k in range(4)]
        for k, form in enumerate(turns + [t.T for t in turns]):
            out[k, i, :dim, :dim] = form
    return out


@dataclass(frozen=True)
class Boards:
    """Levels as the device reads them: per level (all symmetries of every bank
    level), bitboards over the ``S x S`` cells (row-major, bit ``r * S + c``) and the
    player's cell.

    Attributes:
        walls, targets, boxes: uint32[L, W] (``W`` words of 32 cells; walls include
            every cell outside the room).
        player: int32[L] the player's cell.
        count: levels per configuration, in ``configs`` order (each
            configuration's levels in one block).
    """

    walls: np.ndarray
    targets: np.ndarray
    boxes: np.ndarray
    player: np.ndarray
    count: tuple[int, ...]


def bitboards(masks: np.ndarray) -> np.ndarray:
    """uint32[..., W] (host NumPy): bit ``i`` of the words set where ``masks`` (bool[...,
    C], ``C`` cells) holds at cell ``i`` (the layout of :mod:`gemjax.bitset`)."""
    cells = masks.shape[-1]
    words = bitset.num_words(cells)
    padded = np.zeros((*masks.shape[:-1], words * bitset.WORD_BITS), np.uint64)
    padded[..., :cells] = masks
    weights = np.uint64(1) << np.arange(bitset.WORD_BITS, dtype=np.uint64)
    grouped = padded.reshape(*masks.shape[:-1], words, bitset.WORD_BITS)
    return (grouped * weights).sum(-1).astype(np.uint32)


@functools.cache
def bank_boards(configs: tuple[tuple[int, int], ...], side: int) -> Boards:
    """The :class:`Boards` of the banks of ``configs`` (``(room side, boxes)``) under
    every symmetry, on ``side x side`` arrays."""
    counts = [len(bank_levels(bank_tag(*config))) for config in configs]
    dims = np.repeat([room for room, _ in configs], counts)
    forms = symmetric_rooms(padded_levels(configs, side), dims)  # [8, N, S, S]
    # Levels ordered by configuration, each configuration's symmetries together.
    blocks = np.split(forms, np.cumsum(counts)[:-1], axis=1)
    cells = np.concatenate([block.reshape(-1, side * side) for block in blocks])
    return Boards(
        walls=bitboards(cells == WALL),
        targets=bitboards(cells == TARGET),
        boxes=bitboards(cells == BOX),
        player=np.argmax(cells == PLAYER, axis=1).astype(np.int32),
        count=tuple(SYMMETRIES * c for c in counts),
    )


def room_codes(
    walls: jax.Array, targets: jax.Array, boxes: jax.Array, player: jax.Array, side: int
) -> jax.Array:
    """int8[side, side] GEM's ``room_state`` of bitboards (uint32[W] each) and the
    player's cell (int32[]): walls 0, floor 1, targets 2, boxes 3 on a target and 4
    off, the player 5 even on a target."""
    cells = side * side
    is_target, has_box = bitset.to_mask(targets, cells), bitset.to_mask(boxes, cells)
    fixed = jnp.where(bitset.to_mask(walls, cells), WALL, jnp.where(is_target, TARGET, FLOOR))
    codes = jnp.where(has_box, jnp.where(is_target, BOX_ON_TARGET, BOX), fixed)
    codes = jnp.where(jnp.arange(cells) == player, PLAYER, codes)
    return codes.reshape(side, side).astype(jnp.int8)


class SokobanParams(struct.PyTreeNode):
    """Dynamic parameters (``max_turns`` is ignored by ``-random``, which draws it).

    Attributes:
        max_turns: int32[] the turn limit.
        rewards: GEM's reward constants (``format_error``; collisions pay
            ``invalid``, moves ``step``).
    """

    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class SokobanState(struct.PyTreeNode):
    """One episode, the room as bitboards over the ``S x S`` cells (bit ``r * S + c``
    of ``W`` uint32 words).

    Attributes (int32[] unless said):
        dim, num_boxes, max_turns: this episode's configuration.
        walls: uint32[W] the walls (every cell outside the ``dim x dim`` room too).
        targets: uint32[W] the targets.
        boxes: uint32[W] the cells holding a box.
        player: the player's cell ``r * S + c``.
        turn: turns taken (GEM's ``turn_count``; it keeps counting after the end).
        example: the instructions' example direction (``0..3``).
    """

    dim: jax.Array
    num_boxes: jax.Array
    max_turns: jax.Array
    walls: jax.Array
    targets: jax.Array
    boxes: jax.Array
    player: jax.Array
    turn: jax.Array
    example: jax.Array


class Sokoban(Environment[SokobanState, SokobanParams], GemMirror[SokobanState]):
    """Sokoban as a kernel. See the module docstring for rules and shapes.

    Args:
        dim_room: the side ``d`` of GEM's square ``dim_room=(d, d)``; None, or None
            for ``num_boxes`` or ``max_turns``, gives GEM's ``-random`` variant.
        max_turns: the turn limit.
        num_boxes: the boxes (and targets) of a level.

    Raises:
        ValueError: a limit below 1, or a configuration the shipped level bank has
            no levels of (the bank holds GEM's ids' rooms: 6x6 with 2 boxes, 8x8
            with 4 or 5).
    """

    gem_class_name = "SokobanEnv"
    # GEM reads \\boxed{rİght} as "ri̇ght" and crashes looking it up.
    gem_step_crashes = frozenset({GRAMMAR.other})
    step_uses_key = False

    def __init__(
        self,
        dim_room: int | None = 6,
        max_turns: int | None = 100,
        num_boxes: int | None = 3,
    ) -> None:
        self.variant = Variant.of(
            {"dim_room": dim_room, "max_turns": max_turns, "num_boxes": num_boxes},
            random_values=RANDOM_CAPACITY,
            check=self._check,
        )
        self.randomize = self.variant.randomize
        self.side, self._max_turns, self._num_boxes = self.variant.values
        self._configs = (
            tuple((room, boxes) for room, boxes, _ in RANDOM_CONFIGS)
            if self.randomize
            else ((self.side, self._num_boxes),)
        )
        self.messages = MESSAGES
        self.suffix = suffix_for(self.side)
        self.grammar = GRAMMAR

    @staticmethod
    def _check(side: int, max_turns: int, num_boxes: int) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if num_boxes < 1:
            raise ValueError(f"num_boxes must be >= 1, got {num_boxes}")
        bank_levels(bank_tag(side, num_boxes))  # raises for a configuration not shipped

    @property
    def default_params(self) -> SokobanParams:
        return SokobanParams(max_turns=jnp.int32(self._max_turns))

    def validate_params(self, params: SokobanParams) -> None:
        if int(params.max_turns) < 1:
            raise ValueError(f"max_turns must be >= 1, got {int(params.max_turns)}")

    def action_space(self, params: SokobanParams) -> Discrete:
        """``0..5``: 0 a format error, 1..4 up, down, left, right, 5 a word that is no
        direction (a format error)."""
        return Discrete(GRAMMAR.codes)

    def reset(self, key: jax.Array, params: SokobanParams) -> tuple[SokobanState, TimeStep]:
        boards = bank_boards(self._configs, self.side)
        words = random_words(key, 3)
        if self.randomize:
            pick = below(words[0], len(RANDOM_CONFIGS))
            configs = jnp.asarray(RANDOM_CONFIGS, jnp.int32)
            dim, num_boxes, turns = configs[pick, 0], configs[pick, 1], configs[pick, 2]
            first = jnp.where(pick > 0, boards.count[0], 0)
            level = first + below(words[1], jnp.asarray(boards.count, jnp.int32)[pick])
        else:
            dim, num_boxes = jnp.int32(self.side), jnp.int32(self._num_boxes)
            turns = params.max_turns
            level = below(words[1], boards.count[0])
        state = SokobanState(
            dim=dim,
            num_boxes=num_boxes,
            max_turns=turns,
            walls=jnp.asarray(boards.walls)[level],
            targets=jnp.asarray(boards.targets)[level],
            boxes=jnp.asarray(boards.boxes)[level],
            player=jnp.asarray(boards.player)[level],
            turn=jnp.int32(0),
            example=below(words[2], len(DIRECTIONS)),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def _cells_ahead(
        self, player: jax.Array, direction: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """For a move ``direction`` (int32[] ``0..3``) from the cell ``player``: the
        cells one and two steps ahead (int32[], clipped to the board) and whether
        each is on the board (bool[])."""
        side = self.side
        steps = jnp.asarray(STEPS, jnp.int32)[direction]
        row, col = player // side, player % side
        cells, inside = [], []
        for distance in (1, 2):
            r, c = row + distance * steps[0], col + distance * steps[1]
            inside.append((r >= 0) & (r < side) & (c >= 0) & (c < side))
            cells.append(jnp.clip(r * side + c, 0, side * side - 1))
        return cells[0], cells[1], inside[0], inside[1]

    def _move(self, state: SokobanState, direction: jax.Array) -> tuple[jax.Array, ...]:
        """``(collision, box ahead, cell ahead, cell beyond)`` of a move ``direction``:
        GEM's collision is a wall (or the edge) ahead, or a box ahead whose next cell
        is a wall, a box or the edge."""
        ahead, beyond, ahead_inside, beyond_inside = self._cells_ahead(state.player, direction)
        blocked = ~ahead_inside | bitset.contains(state.walls, ahead)
        box_ahead = ahead_inside & bitset.contains(state.boxes, ahead)
        beyond_free = (
            beyond_inside
            & ~bitset.contains(state.walls, beyond)
            & ~bitset.contains(state.boxes, beyond)
        )
        collision = blocked | (box_ahead & ~beyond_free)
        return collision, box_ahead, ahead, beyond

    def step(
        self,
        key: jax.Array,
        state: SokobanState,
        action: jax.Array,
        params: SokobanParams,
    ) -> tuple[SokobanState, TimeStep]:
        code = check_int_action(action, ())
        rewards = params.rewards
        turn = state.turn + 1
        format_error = (code < 1) | (code > len(DIRECTIONS))
        direction = jnp.clip(code - 1, 0, len(DIRECTIONS) - 1)
        collision, box_ahead, ahead, beyond = self._move(state, direction)
        moved = ~format_error & ~collision
        pushed = moved & box_ahead
        boxes = bitset.toggle(bitset.toggle(state.boxes, ahead, pushed), beyond, pushed)
        player = jnp.where(moved, ahead, state.player)
        on_targets = bitset.count(boxes & state.targets)
        solved = moved & (on_targets == state.num_boxes)
        out_of_turns = turn >= state.max_turns

        soft = rewards.success * on_targets.astype(jnp.float32) / state.num_boxes
        played = jnp.where(moved, rewards.step, rewards.invalid)
        reward = jnp.select(
            [format_error, solved, out_of_turns],
            [rewards.format_error, rewards.success, soft],
            played,
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (solved, "success"),
            (out_of_turns, "max_turns"),
            (collision, "collision"),
            (pushed, "pushed"),
            default="moved",
        )
        terminated, truncated = gem_ending(
            format_error, solved, out_of_turns, turn, state.max_turns
        )
        new_state = state.replace(turn=turn, boxes=boxes, player=player)
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(kind, turn=turn, direction=direction),
            info={"success": solved},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: SokobanState) -> jax.Array:
        """GEM's sampler: a uniform direction."""
        return 1 + below(random_words(key, 1)[0], len(DIRECTIONS))

    def valid_action_mask(self, state: SokobanState) -> jax.Array:
        """bool[6]: the directions that do not collide (the
        :class:`~gemjax.core.ActionMasking` capability)."""
        free = [~self._move(state, jnp.int32(d))[0] for d in range(len(DIRECTIONS))]
        return jnp.stack([jnp.bool_(False), *free, jnp.bool_(False)])

    def room(self, state: SokobanState) -> jax.Array:
        """int8[S, S] GEM's ``room_state`` codes of ``state`` (:func:`room_codes`)."""
        return room_codes(state.walls, state.targets, state.boxes, state.player, self.side)

    def instructions_event(self, state: SokobanState) -> Event:
        return MESSAGES.event("instructions", max_turns=state.max_turns, example=state.example)

    def suffix_values(self, state: SokobanState) -> Mapping[str, jax.Array]:
        return {"dim": state.dim, "board": self.room(state)}

    def _observation(self, state: SokobanState) -> dict[str, jax.Array]:
        return {
            "room": self.room(state),
            "turn": state.turn,
            "dim": state.dim,
            "num_boxes": state.num_boxes,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` SokobanEnv.

        Raises:
            ValueError: GEM's room is not square.
        """
        if gem_env._is_random:
            return {"dim_room": None, "max_turns": None, "num_boxes": None}
        rows, cols = gem_env.dim_room
        if rows != cols:
            raise ValueError(f"gemjax's Sokoban rooms are square, got dim_room={gem_env.dim_room}")
        return {"dim_room": rows, "max_turns": gem_env.max_turns, "num_boxes": gem_env.num_boxes}

    def state_from_gem(self, gem_env: Any) -> SokobanState:
        """The kernel state equal to a live GEM env's (the instructions' example,
        which GEM does not keep, is ``up``)."""
        fixed = np.zeros((self.side, self.side), np.int64)  # walls outside GEM's room
        boxes = np.zeros((self.side, self.side), np.bool_)
        rows, cols = gem_env.room_fixed.shape
        fixed[:rows, :cols] = gem_env.room_fixed
        boxes[:rows, :cols] = np.isin(gem_env.room_state, (BOX_ON_TARGET, BOX))
        row, col = (int(v) for v in gem_env.player_position)
        return SokobanState(
            dim=jnp.int32(rows),
            num_boxes=jnp.int32(gem_env.num_boxes),
            max_turns=jnp.int32(gem_env.max_turns),
            walls=jnp.asarray(bitboards((fixed == WALL).reshape(-1))),
            targets=jnp.asarray(bitboards((fixed == TARGET).reshape(-1))),
            boxes=jnp.asarray(bitboards(boxes.reshape(-1))),
            player=jnp.int32(row * self.side + col),
            turn=jnp.int32(gem_env.turn_count),
            example=jnp.int32(0),
        )
