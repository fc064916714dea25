"""Sokoban kernel: every step branch against gem-llm on hand-built rooms, GEM parity
on streams that push boxes and solve levels, the resets (bank levels under a
symmetry, ``-random``'s two configurations), GEM's crash on ``\\boxed{rİght}``, the
constructor's errors, and the rules along any play (hypothesis)."""

from __future__ import annotations

import random

import gem
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.sokoban import SokobanEnv
from gem.envs.registration import ENV_REGISTRY
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sokoban_solver import MOVES, solve
from tiers import seeded

import gemjax
from gemjax import testing
from gemjax.envs.sokoban import (
    BOX,
    DIRECTIONS,
    PLAYER,
    WALL,
    bank_levels,
    bank_tag,
)
from gemjax.gem import from_gem
from gemjax.testing import lane

EASY, HARD, RANDOM = (f"game:Sokoban-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
CODES = {"#": 0, "_": 1, "O": 2, "√": 3, "X": 4, "P": 5}


def gem_room(picture: str, max_turns: int = 20, turn: int = 0) -> SokobanEnv:
    """GEM's env on a hand-drawn room: GEM's symbols, and ``S`` for the player on a
    target (which GEM draws as ``P``)."""
    rows = [line.split() for line in picture.strip().splitlines()]
    under = {"√": "O", "S": "O", "X": "_", "P": "_"}
    fixed = np.array([[CODES[under.get(s, s)] for s in r] for r in rows])
    state = np.array([[CODES["P" if s == "S" else s] for s in r] for r in rows])
    env = SokobanEnv(dim_room=fixed.shape, num_boxes=int(np.isin(state, (3, 4)).sum()))
    env.room_fixed, env.room_state = fixed, state
    env.player_position = np.argwhere(state == PLAYER)[0]
    env.max_turns, env.turn_count = max_turns, turn
    return env


def play_both(env: SokobanEnv, actions: list[str]) -> list[tuple]:
    """Step GEM's ``env`` and its mirror with ``actions``; every 5-tuple and task
    suffix must be equal. Returns GEM's 5-tuples."""
    ours = from_gem(env, seed=0)
    results = []
    for action in actions:
        theirs, mine = env.step(action), ours.step(action)
        assert not testing.check_step(mine, theirs), (action, mine, theirs)
        assert ours.get_task_suffix() == env.get_task_suffix(), action
        results.append(theirs)
    return results


def boxed(*moves: str) -> list[str]:
    return [f"\\boxed{{{m}}}" for m in moves]


# --- registration and construction ---------------------------------------------------


def test_registered_ids_match_gem_registry():
    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Sokoban")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in (EASY, HARD):
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        assert env.config == (kwargs["dim_room"][0], kwargs["max_turns"], kwargs["num_boxes"])
    assert gemjax.make(RANDOM).config == ("random",) and gemjax.make(RANDOM).side == 8


def test_impossible_configurations_are_refused():
    with pytest.raises(ValueError, match="square"):
        from_gem(SokobanEnv(dim_room=(6, 8), num_boxes=2))
    with pytest.raises(ValueError, match="no 7x7b3 levels"):
        gemjax.make(EASY, dim_room=7, num_boxes=3)
    with pytest.raises(ValueError, match="max_turns"):
        gemjax.make(EASY, max_turns=0)
    with pytest.raises(ValueError, match="num_boxes"):
        gemjax.make(EASY, num_boxes=0)
    assert gemjax.make(EASY, dim_room=8, num_boxes=5).config == (8, 20, 5)


def test_gem_make_ids_build_the_same_kernel():
    for env_id in IDS:
        assert from_gem(gem.make(env_id)).kernel == gemjax.make(env_id)


# --- each branch of GEM's step --------------------------------------------------------

ROOM = """
# # # # # #
# _ O _ _ #
# _ X _ _ #
# _ _ X O #
# _ P _ _ #
# # # # # #
"""


def test_pushes_walks_and_collisions_match_gem():
    # A walk, a push onto the target, the box against the wall, a walk, a push down,
    # the box against the bottom wall, a push left into the other column's box... every
    # collision kind (wall ahead, box against a wall, box against a box).
    results = play_both(
        gem_room(ROOM),
        boxed("up", "up", "up", "right", "down", "down", "left", "up", "right", "down"),
    )
    observations = [obs for obs, *_ in results]
    assert observations[:4] == [
        "At turn 1, you moved up.",
        "At turn 2, you pushed a box while you moved up.",
        "At turn 3, you cannot move up - you would collide with wall or other boxes!",
        "At turn 4, you moved right.",
    ]
    assert observations[4] == "At turn 5, you pushed a box while you moved down."
    assert "collide" in observations[5]
    assert all(reward == 0 and not done for _, reward, done, *_ in results)


def test_a_player_on_a_target_is_drawn_as_p_and_the_target_comes_back():
    room = """
# # # # # #
# _ _ _ _ #
# _ X S _ #
# _ O _ _ #
# _ _ _ X #
# # # # # #
"""
    env = gem_room(room)
    assert "P" in env.get_task_suffix() and env.get_task_suffix().count("O") == 1
    play_both(env, boxed("right", "left", "left", "down", "up"))
    assert env.get_task_suffix().count("O") == 2


def test_a_win_ends_the_game_untruncated_even_on_the_last_turn():
    room = """
# # # # # #
# _ O _ _ #
# _ X _ _ #
# _ P _ _ #
# _ _ √ _ #
# # # # # #
"""
    ((obs, reward, terminated, truncated, _),) = play_both(
        gem_room(room, max_turns=5, turn=4), boxed("up")
    )
    assert obs == "Congratulations! You have solved the Sokoban puzzle!"
    assert (reward, terminated, truncated) == (1.0, True, False)


def test_the_turn_limit_pays_the_share_of_boxes_on_targets():
    room = """
# # # # # #
# _ O _ O #
# _ X _ X #
# _ P _ _ #
# _ _ _ _ #
# # # # # #
"""
    # The last turn pushes one of two boxes home; then collisions past the end.
    results = play_both(gem_room(room, max_turns=3, turn=2), boxed("up", "up", "up"))
    obs, reward, terminated, truncated, _ = results[0]
    assert obs == "You have reached the maximum number of turns."
    assert (reward, terminated, truncated) == (0.5, True, True)
    assert results[1][1] == 0.5 and results[2][1] == 0.5  # a collision past the end


def test_format_errors_end_the_episode_truncated_only_on_the_last_turn():
    for turn, truncated in [(0, False), (19, True), (20, False)]:
        for action in ["", "up", "\\boxed{ up}", "\\boxed{north}", "\\boxed{up"]:
            ((obs, reward, done, cut, _),) = play_both(gem_room(ROOM, turn=turn), [action])
            assert obs.endswith("your submitted action is not valid.")
            assert (reward, done, cut) == (-0.1, True, truncated), (turn, action)
    # Any case, and the last box counts.
    results = play_both(gem_room(ROOM), ["\\boxed{UP}", "\\boxed{up} then \\boxed{Right}"])
    assert results[0][0] == "At turn 1, you moved up." and results[1][0].endswith("moved right.")


def test_a_lookalike_direction_is_a_format_error_where_gem_crashes():
    """GEM's pattern ignores case, so ``\\boxed{rİght}`` matches, and its lower case
    ``ri̇ght`` is no direction: GEM's step raises ValueError; gemjax's is a format
    error (docs/gem_differences.md)."""
    lookalike = "\\boxed{r\u0130ght}"
    with pytest.raises(ValueError):
        gem_room(ROOM).step(lookalike)
    ours = from_gem(gem_room(ROOM), seed=0)
    obs, reward, terminated, truncated, _ = ours.step(lookalike)
    assert obs == "At turn 1, your submitted action is not valid."
    assert (reward, terminated, truncated) == (-0.1, True, False)
    assert ours.kernel.grammar.parse(lookalike).action in type(ours.kernel).gem_step_crashes


# --- parity on streams that push and solve ---------------------------------------------


class ActionStream(testing.ActionStream):
    """Responses for one Sokoban episode: mostly the moves of a solution of GEM's room
    (searched again after any other response; a random move where the search gives
    up), moves into boxes, any case, malformed boxes."""

    def __init__(self, rng: random.Random, gem_env, ours) -> None:
        super().__init__(rng, gem_env, ours)
        self.plan: list[str] | None = None
        self.kinds = [
            (self.solving, 30),
            (self.into_a_box, 6),
            (self.any_case, 4),
            (self.malformed, 1),
            (self.multi_box, 1),
            (self.sampled, 3),
        ]

    def __call__(self) -> str:
        kinds, weights = zip(*self.kinds, strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        if kind != self.solving:
            self.plan = None
        return kind()

    def solving(self) -> str:
        if self.plan is None:
            env = self.gem_env
            self.plan = solve(env.room_fixed, env.room_state, budget=500) or []
        move = self.plan.pop(0) if self.plan else self.rng.choice(DIRECTIONS)
        return self.boxed(move, prose=0.1)

    def into_a_box(self) -> str:
        row, col = self.gem_env.player_position
        state = self.gem_env.room_state
        near = [d for d, (dr, dc) in MOVES.items() if state[row + dr, col + dc] in (3, 4)]
        return self.boxed(self.rng.choice(near or list(DIRECTIONS)))

    def any_case(self) -> str:
        word = self.rng.choice(DIRECTIONS)
        return self.boxed("".join(c.upper() if self.rng.random() < 0.5 else c for c in word))

    def malformed(self) -> str:
        word = self.rng.choice(DIRECTIONS)
        return self.rng.choice([f"\\boxed{{ {word}}}", f"\\boxed{{{word}s}}", word, ""])


EPISODES = {EASY: 100, HARD: 20, RANDOM: 40}


@pytest.mark.parametrize(("env_id", "stream_seed"), seeded(IDS))
def test_parity_on_streams_that_push_and_solve(env_id: str, stream_seed: int) -> None:
    seen = testing.check_gem_parity(
        gem.make(env_id),
        env_id,
        EPISODES[env_id],
        stream_seed,
        stream=ActionStream,
        describe=lambda env: repr(env.room_state),
    )
    names = {name.split("[")[0] for name in seen}
    assert {"moved", "pushed", "collision", "format_error"} <= names, seen
    if env_id == EASY:
        assert {"success", "max_turns"} <= names, seen


# --- resets -------------------------------------------------------------------------


def symmetries(room: np.ndarray) -> list[bytes]:
    """The bytes of the 8 rotations and reflections of a square room."""
    turns = [np.rot90(room, k) for k in range(4)]
    return [r.tobytes() for r in turns + [t.T for t in turns]]


def test_resets_are_bank_levels_under_every_symmetry(kits):
    kit = kits(RANDOM)
    keys = jax.random.split(jax.random.key(1), 600)
    states, _ = jax.jit(jax.vmap(kit.env.reset, in_axes=(0, None)))(keys, kit.params)
    rooms = np.asarray(jax.vmap(kit.env.room)(states))
    known = {
        config: {level.astype(np.int8).tobytes() for level in bank_levels(bank_tag(*config))}
        for config in [(6, 2), (8, 5)]
    }
    seen_forms, sizes = set(), []
    for i, room in enumerate(rooms):
        dim, boxes = int(states.dim[i]), int(states.num_boxes[i])
        sizes.append(dim)
        assert int(states.max_turns[i]) == {6: 20, 8: 50}[dim]
        inner = room[:dim, :dim]
        assert (room[dim:] == WALL).all() and (room[:, dim:] == WALL).all()
        forms = symmetries(inner)
        matches = [k for k, form in enumerate(forms) if form in known[(dim, boxes)]]
        assert matches, inner
        seen_forms.add(matches[0])
        assert (inner == BOX).sum() == boxes and (inner == 2).sum() == boxes
        assert (inner == PLAYER).sum() == 1
    assert seen_forms == set(range(8))
    # GEM's random.choice of the two configurations.
    assert stats.binomtest(sizes.count(6), len(sizes)).pvalue > 1e-3


def test_every_reset_of_the_fixed_ids_is_solvable(kits):
    for env_id in (EASY, HARD):
        kit = kits(env_id)
        keys = jax.random.split(jax.random.key(2), 6)
        states, _ = jax.jit(jax.vmap(kit.env.reset, in_axes=(0, None)))(keys, kit.params)
        for i in range(len(keys)):
            room = np.asarray(kit.env.room(lane(states, i)))
            fixed = np.where(np.isin(room, (BOX, PLAYER)), 1, room)  # every box starts off target
            assert solve(fixed, room) is not None, room


# --- the rules along any play ----------------------------------------------------------


def room_parts(room: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(walls, targets, boxes, player)`` bool[S, S] of a room's GEM codes; a target
    under the player is not visible (GEM draws ``P``)."""
    return room == WALL, np.isin(room, (2, 3)), np.isin(room, (3, BOX)), room == PLAYER


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), moves=st.lists(st.integers(0, 5), max_size=40))
def test_boxes_are_conserved_and_never_enter_walls(kits, seed, moves):
    kit = kits(EASY)
    state, ts = kit.reset(jax.random.key(seed), kit.params)
    walls, targets, boxes, player = room_parts(np.asarray(ts.observation["room"]))
    for move in moves:
        state, ts = kit.step(jax.random.key(0), state, jnp.int32(move), kit.params)
        now_walls, now_targets, now_boxes, now_player = room_parts(
            np.asarray(ts.observation["room"])
        )
        np.testing.assert_array_equal(now_walls, walls)  # nothing moves into a wall
        assert now_boxes.sum() == boxes.sum() and now_player.sum() == 1
        assert (now_targets | now_player)[targets].all()
        travelled = np.abs(np.argwhere(now_player)[0] - np.argwhere(player)[0]).sum()
        assert travelled in (0, 1)
        assert (now_boxes != boxes).sum() in (0, 2)  # a push moves one box one cell
        assert (now_boxes != boxes).sum() == 0 or travelled == 1
        on_targets = (now_boxes & targets).sum()
        assert bool(ts.info["success"]) == (travelled == 1 and on_targets == boxes.sum())
        targets, boxes, player = targets, now_boxes, now_player
