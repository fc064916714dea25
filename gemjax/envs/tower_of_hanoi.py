"""TowerofHanoi (GEM's ``gem/envs/game_env/tower_of_hanoi.py``).

The player moves ``num_disks`` disks from tower A to tower C, one top disk at a time,
never onto a smaller disk. GEM's rules, branch by branch (spec section 14):

1. no ``\\boxed{S D}`` (``S``, ``D`` in ``ABCabc``, an optional comma between): format
   error, "You did not provide a valid action.", -0.1, terminated, truncated only
   when ``turn == max_turns``;
2. tower ``S`` is empty: invalid (0), the game goes on;
3. tower ``D`` holds a smaller top disk than ``S``: invalid (0);
4. otherwise the top disk of ``S`` moves onto ``D`` (``S == D`` is a legal move that
   changes nothing), reward 0; when it leaves every disk on C: success, 1.0,
   terminated, never truncated (even on the last turn);
5. after 2-4 without success, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, and the reward is
   **replaced** by ``len(C) / num_disks`` (after an invalid move too).

GEM keeps stepping after the end; so does the kernel (the turn keeps counting).

The ``-random`` variant draws ``(num_disks, max_turns)`` from GEM's candidates
``(3, 10), (4, 20), (5, 35)`` at every reset; arrays are sized for 5 disks.

Kernel action: int32[2], ``[source, target]`` with ``1, 2, 3`` for towers A, B, C
(:class:`~gemjax.text.grammar.BoxedChoices`); an entry outside ``1..3`` (the host
parser's ``[0, 0]``) is a format error.

Observation (the whole game is public), a dict of:
    ``pegs``: int8[D], the tower (0, 1, 2 for A, B, C) of disk ``d + 1``, -1 for the
        disks beyond ``num_disks`` (``D``: the most disks of the variant);
    ``turn``, ``num_disks``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
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
from gemjax.spaces import MultiDiscrete
from gemjax.text.grammar import BoxedChoices
from gemjax.text.templates import Choice, IntList, MessageTable, Template

# GEM's -random candidates: (num_disks, max_turns).
RANDOM_CONFIGS = ((3, 10), (4, 20), (5, 35))
TOWERS = "ABC"
# The most disks a configuration may have (each tower's list is a slot of this many
# entries; the token bridge compiles one suffix program per combination of lengths).
MAX_DISKS = 9
PATTERN = r"\\boxed{([ABCabc])\s*,?\s*([ABCabc])}"

MESSAGES = MessageTable(
    instructions=Template(
        "You are playing Tower of Hanoi with {num_disks} disks.\n"
        "You have to move the disks from tower A to tower C.\n"
        "To move a disk, type the source tower and the target tower "
        "(e.g., '\\boxed{{A C}}').\n"
        "Note that you can only move the top disk of a tower, and that a bigger disk "
        "cannot be placed on a smaller disk.\n"
        "As you play, the history of your moves will be displayed.\n"
    ),
    format_error=Template("You did not provide a valid action."),
    empty=Template(
        "At turn {turn}, you tried to move from tower {source}, which is empty.",
        source=Choice("source", tuple(TOWERS)),
    ),
    larger=Template(
        "At turn {turn}, you tried to move from tower {source} to tower {target}, but the "
        "top disk on tower {source} is larger than the top disk on tower {target}.",
        source=Choice("source", tuple(TOWERS)),
        target=Choice("target", tuple(TOWERS)),
    ),
    moved=Template(
        "At turn {turn}, you moved disk {disk} from tower {source} to tower {target}.",
        source=Choice("source", tuple(TOWERS)),
        target=Choice("target", tuple(TOWERS)),
    ),
    success=Template("Congratulations! You solved the Tower of Hanoi Puzzle"),
    max_turns=Template("You have reached the maximum number of turns."),
)


@functools.cache
def suffix_for(size: int) -> Template:
    """GEM's suffix (the towers, bottom to top, as Python lists) for ``size`` disks."""
    towers = {
        name.lower(): IntList(name.lower(), size, length=f"{name.lower()}_height")
        for name in TOWERS
    }
    return Template(
        "Here is the current state of the tower of hanoi:\n"
        + "".join(f"{name}: {{{name.lower()}}}\n" for name in TOWERS)
        + "\nEnter your move.",
        **towers,
    )


class TowerofHanoiParams(struct.PyTreeNode):
    """Dynamic parameters (ignored by ``-random``, which draws them at every reset).

    Attributes:
        num_disks: int32[] disks in play (at most the env's capacity).
        max_turns: int32[] the turn limit.
        rewards: GEM's reward constants (``step`` for a move, ``invalid`` for an
            illegal one, ``success`` and ``format_error`` as named).
    """

    num_disks: jax.Array
    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class TowerofHanoiState(struct.PyTreeNode):
    """One episode. Every reachable placement is legal, so the top disk of a tower is
    its smallest: its mask's lowest set bit.

    Attributes:
        num_disks, max_turns: int32[] this episode's configuration.
        turn: int32[] turns taken so far (GEM's ``turn_count``; it keeps counting after
            the end).
        towers: int32[3] per tower A, B, C the set of its disks, bit ``d`` for disk
            ``d + 1`` (:meth:`TowerofHanoi.pegs` lists them per disk).
    """

    num_disks: jax.Array
    max_turns: jax.Array
    turn: jax.Array
    towers: jax.Array


def lowest_bit(mask: jax.Array) -> jax.Array:
    """int32: the lowest set bit of ``mask`` (int32, non-negative), 0 for 0."""
    return mask & -mask


def pick(towers: jax.Array, index: jax.Array) -> jax.Array:
    """``towers[index]`` for int32[3] ``towers`` and ``index`` in ``0..2`` (clamped),
    as selects (a gather by a traced index is slow under ``vmap`` on CPU)."""
    return jnp.where(index <= 0, towers[0], jnp.where(index == 1, towers[1], towers[2]))


class TowerofHanoi(
    Environment[TowerofHanoiState, TowerofHanoiParams], GemMirror[TowerofHanoiState]
):
    """TowerofHanoi as a kernel. See the module docstring for rules and shapes.

    Args:
        num_disks, max_turns: the registered configuration; either None for GEM's
            ``-random`` variant.
    """

    gem_class_name = "TowerofHanoiEnv"
    step_uses_key = False

    def __init__(self, num_disks: int | None = 3, max_turns: int | None = 100) -> None:
        self.variant = Variant.of(
            {"num_disks": num_disks, "max_turns": max_turns},
            random_values=tuple(max(column) for column in zip(*RANDOM_CONFIGS, strict=True)),
            check=self._check,
        )
        self.randomize, self._defaults = self.variant.randomize, self.variant.values
        self.size = self._defaults[0]
        self.messages = MESSAGES
        self.suffix = suffix_for(self.size)
        self.grammar = BoxedChoices(PATTERN, TOWERS)

    @staticmethod
    def _check(num_disks: int, max_turns: int) -> None:
        if not 1 <= num_disks <= MAX_DISKS:
            raise ValueError(f"num_disks must be in 1..{MAX_DISKS}, got {num_disks}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    @property
    def default_params(self) -> TowerofHanoiParams:
        disks, turns = (jnp.int32(v) for v in self._defaults)
        return TowerofHanoiParams(num_disks=disks, max_turns=turns)

    def validate_params(self, params: TowerofHanoiParams) -> None:
        disks, turns = int(params.num_disks), int(params.max_turns)
        self._check(disks, turns)
        if disks > self.size:
            raise ValueError(
                f"num_disks {disks} exceeds this env's capacity ({self.size}); "
                f"make the env with num_disks={disks}"
            )

    def action_space(self, params: TowerofHanoiParams) -> MultiDiscrete:
        """``[source, target]`` in ``0..3`` each: 0 is a format error, as an LLM could
        write one."""
        return MultiDiscrete((len(TOWERS) + 1, len(TOWERS) + 1))

    def reset(
        self, key: jax.Array, params: TowerofHanoiParams
    ) -> tuple[TowerofHanoiState, TimeStep]:
        if self.randomize:
            choice = below(random_words(key, 1)[0], jnp.int32(len(RANDOM_CONFIGS)))
            disks, turns = jnp.int32(RANDOM_CONFIGS[-1][0]), jnp.int32(RANDOM_CONFIGS[-1][1])
            for i, (d, t) in enumerate(RANDOM_CONFIGS[:-1]):  # selects, not a gather
                disks, turns = jnp.where(choice == i, d, disks), jnp.where(choice == i, t, turns)
        else:
            disks, turns = params.num_disks, params.max_turns
        all_disks = (jnp.int32(1) << disks) - 1
        state = TowerofHanoiState(
            num_disks=disks,
            max_turns=turns,
            turn=jnp.int32(0),
            towers=jnp.stack([all_disks, jnp.int32(0), jnp.int32(0)]),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: TowerofHanoiState,
        action: jax.Array,
        params: TowerofHanoiParams,
    ) -> tuple[TowerofHanoiState, TimeStep]:
        pair = check_int_action(action, (2,)) - 1  # tower indices 0..2
        rewards = params.rewards
        turn = state.turn + 1
        source, target = pair[0], pair[1]
        # Unsigned, a negative index is out of range too.
        format_error = (source.astype(jnp.uint32) >= len(TOWERS)) | (
            target.astype(jnp.uint32) >= len(TOWERS)
        )
        # The top disk of a tower is its mask's lowest set bit (0 when it is empty);
        # comparing those bits compares the disks.
        source_top = lowest_bit(pick(state.towers, source))
        target_top = lowest_bit(pick(state.towers, target))
        empty = source_top == 0
        larger = ~empty & (target_top != 0) & (source_top > target_top)
        moves = ~format_error & ~empty & ~larger
        moved = jnp.where(moves, source_top, 0)  # the moving disk's bit, or none
        index = jnp.arange(len(TOWERS))
        towers = (state.towers ^ jnp.where(index == source, moved, 0)) | jnp.where(
            index == target, moved, 0
        )
        on_c = towers[2]
        solved = moves & (on_c == (jnp.int32(1) << state.num_disks) - 1)
        out_of_turns = turn >= state.max_turns

        reward = jnp.select(
            [format_error, solved, out_of_turns, moves],
            [
                rewards.format_error,
                rewards.success,
                jax.lax.population_count(on_c).astype(jnp.float32)
                / state.num_disks.astype(jnp.float32),
                rewards.step,
            ],
            rewards.invalid,
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (solved, "success"),
            (out_of_turns, "max_turns"),
            (empty, "empty"),
            (larger, "larger"),
            default="moved",
        )
        terminated, truncated = gem_ending(
            format_error, solved, out_of_turns, turn, state.max_turns
        )
        new_state = state.replace(turn=turn, towers=towers)
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(
                kind,
                turn=turn,
                source=jnp.clip(source, 0, len(TOWERS) - 1),
                target=jnp.clip(target, 0, len(TOWERS) - 1),
                disk=jax.lax.population_count(source_top - 1) + 1,
            ),
            info={"success": solved},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: TowerofHanoiState) -> jax.Array:
        """Source and target uniform over A, B, C (GEM has no sampler; see
        docs/gem_differences.md)."""
        return 1 + below(random_words(key, 2), jnp.int32(len(TOWERS)))

    def pegs(self, state: TowerofHanoiState) -> jax.Array:
        """int8[D]: the tower (0, 1, 2 for A, B, C) of disk ``d + 1``, -1 for the
        disks beyond ``num_disks``."""
        bits = jnp.int32(1) << jnp.arange(self.size, dtype=jnp.int32)
        a, b, c = ((state.towers[i] & bits) != 0 for i in range(len(TOWERS)))
        return jnp.where(a, 0, jnp.where(b, 1, jnp.where(c, 2, -1))).astype(jnp.int8)

    def towers(self, state: TowerofHanoiState) -> tuple[jax.Array, jax.Array]:
        """Each tower's disks, bottom to top, as GEM lists them.

        Returns:
            ``(disks int32[3, D]`` zero padded, ``heights int32[3])``.
        """
        disks = jnp.arange(1, self.size + 1, dtype=jnp.int32)
        on = (state.towers[:, None] >> (disks - 1)) & 1 == 1
        stacked = -jnp.sort(-jnp.where(on, disks, 0), axis=1)
        return stacked, jax.lax.population_count(state.towers)

    def instructions_event(self, state: TowerofHanoiState) -> Event:
        return MESSAGES.event("instructions", num_disks=state.num_disks)

    def suffix_values(self, state: TowerofHanoiState) -> Mapping[str, jax.Array]:
        disks, heights = self.towers(state)
        values: dict[str, jax.Array] = {}
        for i, name in enumerate(TOWERS.lower()):
            values[name] = disks[i]
            values[f"{name}_height"] = heights[i]
        return values

    def _observation(self, state: TowerofHanoiState) -> dict[str, jax.Array]:
        return {
            "pegs": self.pegs(state),
            "turn": state.turn,
            "num_disks": state.num_disks,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` TowerofHanoiEnv."""
        return cls.gem_kwargs(gem_env, ("num_disks", "max_turns"))

    def state_from_gem(self, gem_env: Any) -> TowerofHanoiState:
        """The kernel state equal to a live GEM env's.

        Raises:
            ValueError: GEM's board is not a legal placement of its disks.
        """
        if not 1 <= gem_env.num_disks <= self.size:
            raise ValueError(f"{gem_env.num_disks} disks do not fit this env ({self.size})")
        towers = [list(gem_env.board[name]) for name in TOWERS]
        for name, tower in zip(TOWERS, towers, strict=True):
            if tower != sorted(tower, reverse=True):
                raise ValueError(f"tower {name} is not stacked largest first: {tower}")
        if sorted(d for tower in towers for d in tower) != list(range(1, gem_env.num_disks + 1)):
            raise ValueError(f"the board does not hold disks 1..{gem_env.num_disks} once each")
        return TowerofHanoiState(
            num_disks=jnp.int32(gem_env.num_disks),
            max_turns=jnp.int32(gem_env.max_turns),
            turn=jnp.int32(gem_env.turn_count),
            towers=jnp.asarray([sum(1 << (d - 1) for d in t) for t in towers], jnp.int32),
        )
