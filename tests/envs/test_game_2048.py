"""Game2048 kernel: each branch of GEM's step on hand-built boards (byte for byte,
spawns replayed), slides and move checks against GEM's on random boards, the reset
and spawn distributions against GEM's own runs (chi-square), the tile-sum property
(hypothesis), the observation layout, and the ``BoxedWord`` grammar it introduced."""

from __future__ import annotations

import random
import re

import gem
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.game_2048 import Game2048Env
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import gemjax
from gemjax import testing
from gemjax.envs.game_2048 import DIRECTIONS, RANDOM_CONFIGS, can_move, movable, moved
from gemjax.gem import from_gem
from gemjax.text.grammar import BoxedWord

EASY, HARD, EXTREME, RANDOM = (
    f"game:Game2048-v0-{v}" for v in ("easy", "hard", "extreme-hard", "random")
)
IDS = (EASY, HARD, EXTREME, RANDOM)
GEM_PATTERN = re.compile(r"\\boxed\{(up|down|left|right)\}", re.IGNORECASE)


def exponents(board: list[list[int]]) -> np.ndarray:
    """int32 exponents of a GEM board of tile values."""
    tiles = np.asarray(board, np.int64)
    return np.where(tiles > 0, np.log2(np.maximum(tiles, 1)), 0).astype(np.int32)


def tiles(board: np.ndarray) -> list[list[int]]:
    """GEM's board (tile values) of exponents."""
    board = np.asarray(board, np.int64)
    return np.where(board > 0, 2**board, 0).tolist()


def gem_env(board: list[list[int]], target: int = 64, turns: int = 50, **attrs) -> Game2048Env:
    """GEM's env on a hand-built board (its tracked best the board's largest tile)."""
    env = Game2048Env(target_tile=target, max_turns=turns)
    env.board = [row[:] for row in board]
    env.max_tile_achieved = env.init_max_tile_achieved = max(max(r) for r in board)
    for name, value in attrs.items():
        setattr(env, name, value)
    return env


def play_both(env: Game2048Env, actions: list[str], seed: int = 0) -> list[tuple]:
    """Step GEM's ``env`` and its mirror with ``actions`` (GEM's spawns, from its
    global RNG seeded with ``seed``, replayed); every 5-tuple must be equal. Returns
    GEM's."""
    random.seed(seed)
    ours = from_gem(env, seed=0)
    results = []
    for action in actions:
        theirs = env.step(action)
        testing.replay_draw(ours, env, action)
        mine = ours.step(action)
        assert not testing.check_step(mine, theirs), (action, mine, theirs)
        results.append(theirs)
    return results


# --- registration --------------------------------------------------------------------


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Game2048")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        assert env.side == 4
        if kwargs["target_tile"] is None:
            assert env.randomize and env.config == ("random", 4)
            continue
        p = env.default_params
        assert (int(p.target_tile), int(p.max_turns)) == (
            kwargs["target_tile"],
            kwargs["max_turns"],
        )
    assert gemjax.make(EASY, board_size=5).config == (64, 50, 5)
    for bad in [dict(target_tile=0), dict(target_tile=2**31 - 1), dict(max_turns=0)]:
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)
    for size in (1, 9):
        with pytest.raises(ValueError, match="board_size"):
            gemjax.make(EASY, board_size=size)


# --- moves against GEM ----------------------------------------------------------------


def test_moves_and_move_checks_match_gems_on_random_boards():
    rng = random.Random(0)
    env = Game2048Env()
    move, check = jax.jit(jax.vmap(moved)), jax.jit(jax.vmap(movable))
    any_move = jax.jit(jax.vmap(can_move))
    boards = [
        [[rng.choice([0, 0, 0, 2, 2, 4, 4, 8, 16, 2048]) for _ in range(4)] for _ in range(4)]
        for _ in range(1500)
    ]
    stuck = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2]]
    boards += [stuck, [*stuck[:3], [4, 2, 4, 4]], [*stuck[:3], [2, 2, 4, 2]]]  # full boards
    boards += [[[2, 2, 2, 2], [2, 2, 4, 8], [4, 0, 4, 4], [0, 0, 0, 2]]]
    ex = jnp.asarray(np.stack([exponents(b) for b in boards]))
    mask = np.asarray(check(ex))
    tiled = np.asarray(ex).reshape(len(boards), -1).any(axis=1)  # can_move needs a tile
    np.testing.assert_array_equal(np.asarray(any_move(ex))[tiled], mask.any(axis=1)[tiled])
    assert not mask[-4].any() and mask[-3].any() and mask[-2].any()
    for d, name in enumerate(DIRECTIONS):
        got = np.asarray(move(ex, jnp.full(len(boards), d + 1, jnp.int32)))
        for i, board in enumerate(boards):
            env.board = [row[:] for row in board]
            assert tiles(got[i]) == getattr(env, f"_move_{name}")(), (name, board)
            assert mask[i, d] == env._is_valid_move(name), (name, board)
    # GEM's examples: [2,2,2,2] -> [4,4,0,0], [2,2,4,8] -> [4,4,8,0].
    assert tiles(got[-1])[:2] == [[0, 0, 4, 4], [0, 4, 4, 8]]  # the last direction: right


# --- each branch of GEM's step --------------------------------------------------------

BOARD = [[2, 0, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0], [4, 0, 0, 0]]  # left changes nothing


def test_format_errors_end_the_episode_truncated_only_on_the_last_turn():
    for action in ("", "up", "\\boxed{}", "\\boxed{ up}", "\\boxed{upp}", "\\boxed{north}"):
        (obs, reward, term, trunc, _), *_ = play_both(gem_env(BOARD), [action])
        assert obs.startswith("At turn 1, you did not provide a valid move.") and reward == -0.1
        assert term and not trunc
    last = play_both(gem_env(BOARD, turns=2), ["\\boxed{left}", "nothing"])[-1]
    assert last[2:4] == (True, True)
    past = play_both(gem_env(BOARD, turns=1), ["\\boxed{left}", "nothing"])[-1]
    assert past[2:4] == (True, False)  # turn 2 > max_turns: T == M is False


def test_unchanged_moves_and_unknown_words_are_invalid():
    results = play_both(
        gem_env(BOARD), ["\\boxed{left}", "\\boxed{LEFT}", "\\boxed{rİght}", "\\boxed{rıght}"]
    )
    assert [r[1:4] for r in results] == [(0.0, False, False)] * 4
    assert "chose move 'left' which doesn't change" in results[1][0]
    assert "chose move 'ri\u0307ght'" in results[2][0] and "'rıght'" in results[3][0]
    # The last match wins, whatever comes after it.
    (obs, *_), *_ = play_both(gem_env(BOARD), ["\\boxed{up} then \\boxed{left} \\boxed{x}"])
    assert obs == (
        "At turn 1, you chose move 'left' which doesn't change the board state. "
        "Try a different direction."
    )


def test_progress_is_measured_before_the_spawn():
    """Merging 2+2 into 4 next to the initial 4 earns nothing (the best is already 4);
    from a best of 4 (2 at reset), an 8 pays log2(8/4) / log2(64/2) = 0.2."""
    board = [[2, 2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 4]]
    results = play_both(gem_env(board), ["\\boxed{left}", "\\boxed{down}", "\\boxed{left}"])
    assert results[0][:2] == ("At turn 1, you moved left", 0.0)
    env = gem_env([[4, 4, 0, 0], [0] * 4, [0] * 4, [0] * 4])
    env.init_max_tile_achieved = 2
    (_obs, reward, *_), *_ = play_both(env, ["\\boxed{left}"])
    assert reward == pytest.approx(1 / 5)  # (log2 8 - log2 4) / (log2 64 - log2 2)


def test_a_spawned_four_is_credited_at_the_next_move():
    env = gem_env([[2, 0, 0, 0], [0] * 4, [0] * 4, [0] * 4])
    ours = from_gem(env, seed=0)
    kernel = ours.kernel
    state = kernel.state_from_gem(env)
    # Spawn a 4 on the right move: try keys until one does.
    step = jax.jit(kernel.step)
    action = jnp.int32(4)
    for seed in range(500):
        new, ts = step(jax.random.key(seed), state, action, ours.params)
        if int(jnp.max(new.board)) == 2:
            break
    assert float(ts.reward) == 0.0 and int(new.best) == 2
    _, ts = step(jax.random.key(0), new, jnp.int32(2), ours.params)  # down: the 4 stays
    assert float(ts.reward) == pytest.approx(1 / 5)  # log2(4/2) / log2(64/2)


def test_success_pays_the_last_increment_and_is_never_truncated():
    board = [[32, 32, 0, 0], [0] * 4, [0] * 4, [0] * 4]
    env = gem_env(board, turns=1)
    env.init_max_tile_achieved = 2
    (obs, reward, term, trunc, _), after = play_both(env, ["\\boxed{left}", "\\boxed{right}"])
    assert obs == "Congratulations! You reached the 64 tile in 1 turns!"
    assert reward == pytest.approx(1 / 5) and (term, trunc) == (True, False)
    # GEM does not freeze a finished game: the next valid move "wins" again.
    assert after[0].startswith("Congratulations!") and after[1] == 0.0


def test_rewards_telescope_to_one_at_the_target():
    board = [[2, 2, 4, 8], [0] * 4, [0] * 4, [0] * 4]
    env = gem_env(board, target=16)
    env.init_max_tile_achieved = env.max_tile_achieved = 2
    results = play_both(env, ["\\boxed{left}"] * 3)
    assert results[-1][0].startswith("Congratulations! You reached the 16 tile in 3 turns")
    assert sum(r[1] for r in results) == pytest.approx(1.0)


def test_game_over_only_after_a_valid_move():
    # Left slides the bottom row into its gap; the spawn fills it.
    board = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [0, 8, 16, 8]]
    results = play_both(gem_env(board, turns=1), ["\\boxed{left}"])
    obs, _reward, term, trunc, _info = results[0]
    # After the slide the spawn fills the one empty cell: 2 or 4 decides the end.
    assert (term, trunc) in {(True, False), (True, True)}
    assert obs in {
        "Game over! No more moves possible.",
        "You have reached the maximum number of turns (1).",
    }
    # A full board with no move: invalid moves only, never "game over".
    full = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2]]
    results = play_both(gem_env(full, turns=3), ["\\boxed{up}", "\\boxed{left}", "\\boxed{down}"])
    assert [r[0].split(",")[0] for r in results[:2]] == ["At turn 1", "At turn 2"]
    assert results[-1][0] == "You have reached the maximum number of turns (3)."
    assert results[-1][1:4] == (0.0, True, True)


def test_game_over_reaches_both_spawn_values():
    """The board before the spawn has one empty cell; a 2 there leaves no move, a 4
    leaves a merge: GEM's global RNG decides, and the kernel agrees either way."""
    board = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [0, 8, 16, 32]]
    seen = set()
    for seed in range(60):
        env = gem_env(board)
        results = play_both(env, ["\\boxed{left}"], seed)
        seen.add(results[0][0])
    assert seen == {"Game over! No more moves possible.", "At turn 1, you moved left"}


def test_max_turns_message_carries_the_limit_and_the_step_reward():
    env = gem_env([[4, 4, 0, 0], [0] * 4, [0] * 4, [0] * 4], turns=1)
    env.init_max_tile_achieved = 2
    (obs, reward, term, trunc, _), *_ = play_both(env, ["\\boxed{left}"])
    assert obs == "You have reached the maximum number of turns (1)."
    assert reward == pytest.approx(1 / 5) and (term, trunc) == (True, True)


# --- reset and spawn distributions against GEM ---------------------------------------


def gem_resets(count: int, **kwargs) -> list[Game2048Env]:
    random.seed(7)
    out = []
    for _ in range(count):
        env = Game2048Env(**kwargs)
        out.append((env.board, env.target_tile, env.max_turns))
    return out


def test_reset_distribution_matches_gems(kits):
    """Cells and values of the two opening tiles, and ``-random``'s configurations:
    ours and GEM's agree (chi-square contingency), and with the exact law."""
    n = 6000
    kit = kits(RANDOM)
    states, _ts = kit.vreset(jax.random.split(jax.random.key(1), n), kit.params)
    ours = np.asarray(states.board).reshape(n, -1)
    theirs = np.stack([exponents(b).reshape(-1) for b, *_ in gem_resets(n, target_tile=None)])
    for boards in (ours, theirs):
        assert ((boards > 0).sum(axis=1) == 2).all()
    cells = np.stack([(ours > 0).sum(axis=0), (theirs > 0).sum(axis=0)])
    assert stats.chi2_contingency(cells).pvalue > 1e-4
    assert stats.chisquare(cells[0]).pvalue > 1e-4
    values = np.stack([[(b == 1).sum(), (b == 2).sum()] for b in (ours, theirs)])
    assert stats.chi2_contingency(values).pvalue > 1e-4
    assert stats.chisquare(values[0], 2 * n * np.array([0.9, 0.1])).pvalue > 1e-4
    configs = np.asarray(states.target_tile)
    counts = [np.sum(configs == t) for t, _ in RANDOM_CONFIGS]
    assert stats.chisquare(counts).pvalue > 1e-4
    pairs = {(int(t), int(m)) for t, m in zip(configs, np.asarray(states.max_turns), strict=True)}
    assert pairs == set(RANDOM_CONFIGS)
    best = np.asarray(states.best)
    np.testing.assert_array_equal(best, 2 ** ours.max(axis=1))
    np.testing.assert_array_equal(np.asarray(states.initial_best), best)
    examples = np.bincount(np.asarray(states.example), minlength=4)
    assert stats.chisquare(examples).pvalue > 1e-4


def test_spawn_distribution_matches_gems(kits):
    """From one board, the cell and value of the spawned tile after ``left``: ours
    against GEM's own runs (two-sample chi-square) and the exact law (uniform over
    the 12 empty cells, 2 w.p. 0.9)."""
    board = [[2, 0, 0, 0], [4, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 8]]
    n = 6000
    kit = kits(EASY)
    env = gem_env(board)
    state = kit.env.state_from_gem(env)
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *x.shape)), state)
    new, _ = kit.vstep(
        jax.random.split(jax.random.key(2), n), states, jnp.full(n, 3, jnp.int32), kit.params
    )
    slid = exponents(env._move_left()).reshape(-1)
    ours = np.asarray(new.board).reshape(n, -1) - slid
    random.seed(5)
    theirs = []
    for _ in range(n):
        env.board = [row[:] for row in board]
        env.step("\\boxed{left}")
        theirs.append(exponents(env.board).reshape(-1) - slid)
    theirs = np.stack(theirs)
    empty = slid == 0
    for spawned in (ours, theirs):
        assert ((spawned > 0).sum(axis=1) == 1).all() and (spawned[:, ~empty] == 0).all()
    cells = np.stack([(s > 0).sum(axis=0)[empty] for s in (ours, theirs)])
    assert stats.chi2_contingency(cells).pvalue > 1e-4
    assert stats.chisquare(cells[0]).pvalue > 1e-4
    values = np.stack([[(s == 1).sum(), (s == 2).sum()] for s in (ours, theirs)])
    assert stats.chi2_contingency(values).pvalue > 1e-4
    assert stats.chisquare(values[0], n * np.array([0.9, 0.1])).pvalue > 1e-4


# --- properties ----------------------------------------------------------------------

exponent_boards = st.lists(st.integers(0, 6), min_size=16, max_size=16).map(
    lambda cells: np.asarray(cells, np.int8).reshape(4, 4)
)


@settings(max_examples=60, deadline=None)
@given(board=exponent_boards, action=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_tile_sum_grows_by_the_spawned_tile(kits, board, action, seed):
    """A valid move keeps the tile sum and adds the spawned 2 or 4; a move that
    changes nothing leaves the board (and its sum) as it was."""
    kit = kits(EASY)
    state, _ = kit.reset(jax.random.key(0), kit.params)
    state = state.replace(board=jnp.asarray(board))
    new, ts = kit.step(jax.random.key(seed), state, jnp.int32(action), kit.params)
    before = np.where(board > 0, 2 ** board.astype(np.int64), 0)
    after_board = np.asarray(new.board).astype(np.int64)
    after = np.where(after_board > 0, 2**after_board, 0)
    valid = bool(np.asarray(movable(jnp.asarray(board, jnp.int32)))[action - 1])
    if valid:
        assert after.sum() - before.sum() in (2, 4)
    else:
        np.testing.assert_array_equal(after_board, board)
        assert kit.env.messages.names[int(ts.event.kind)] == "unchanged"


def test_observation_layout_and_action_mask(kits):
    kit = kits(EASY)
    state, ts = kit.reset(jax.random.key(0), kit.params)
    obs = ts.observation
    assert set(obs) == {"board", "turn", "target_tile", "max_turns"}
    assert obs["board"].shape == (4, 4) and obs["board"].dtype == jnp.int8
    assert int(obs["target_tile"]) == 64 and int(obs["max_turns"]) == 50
    mask = np.asarray(kit.env.valid_action_mask(state))
    assert mask.shape == (kit.env.action_space(kit.params).n,) and not mask[0] and not mask[-1]
    np.testing.assert_array_equal(mask[1:5], np.asarray(movable(state.board.astype(jnp.int32))))


def test_other_board_sizes_match_gem():
    for size in (3, 5):
        env = Game2048Env(target_tile=32, max_turns=12, board_size=size)
        seen = testing.check_gem_parity(env, f"board_size={size}", episodes=3, stream_seed=4)
        assert any(name.startswith("moved") for name in seen), seen


# --- the BoxedWord grammar ------------------------------------------------------------

WORD_TEXT = st.lists(
    st.sampled_from(
        ["\\boxed{", "}", "up", "Down", "LEFT", "riGht", "r\u0130ght", "r\u0131ght", "x", " ", "\\"]
    ),
    max_size=8,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=WORD_TEXT | st.text(max_size=30))
def test_boxed_word_agrees_with_gems_regex(text):
    grammar = gemjax.make(EASY).grammar
    parsed = grammar.parse(text)
    matches = GEM_PATTERN.findall(text)
    if not matches:
        assert (parsed.action, parsed.ok, parsed.echoes) == (0, False, {})
        return
    word = matches[-1].lower()
    code = DIRECTIONS.index(word) + 1 if word in DIRECTIONS else len(DIRECTIONS) + 1
    assert (parsed.action, parsed.ok, parsed.echoes) == (code, True, {"move": word})


def test_boxed_word_case_sensitive_and_declarations():
    exact = BoxedWord(DIRECTIONS)
    assert exact.parse("\\boxed{Up}").ok is False and exact.parse("\\boxed{up}").action == 1
    assert exact.codes == 5 and exact.render(5) == "\\boxed{}"  # no other word
    loose = gemjax.make(EASY).grammar
    assert loose.codes == 6 and loose.parse(loose.render(5)).action == 5
    for words, case_sensitive in [
        ((), True),
        (("a", "a"), True),
        (("a+",), True),
        (("Up",), False),
    ]:
        with pytest.raises(ValueError):
            BoxedWord(words, case_sensitive=case_sensitive)
    assert loose.pattern.pattern == GEM_PATTERN.pattern
    assert loose.pattern.flags == GEM_PATTERN.flags


def test_gem_make_ids_build_the_same_kernel():
    for env_id in IDS:
        ours = from_gem(gem.make(env_id))
        assert ours.kernel == gemjax.make(env_id)
