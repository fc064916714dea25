"""Mastermind kernel: JAX contract, reset distributions, peg properties, and GEM's
rules branch by branch against hand-written expectations and ``gem-llm``."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.mastermind import MastermindEnv
from hypothesis import given, settings
from hypothesis import strategies as st

import gemjax
from gemjax import testing
from gemjax.envs.mastermind import RANDOM_CONFIGS, MastermindState, pegs
from gemjax.testing import lane

EASY, HARD, RANDOM = (f"game:Mastermind-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
BATCH = 8
OBS_KEYS = {
    "guesses",
    "black",
    "white",
    "num_guesses",
    "turn",
    "code_length",
    "num_numbers",
    "max_turns",
}


@pytest.fixture(scope="module", params=IDS)
def kit(request, kits):
    return kits(request.param)


@pytest.fixture(scope="module")
def pegs_fn():
    """Jitted pegs over a batch (K=4, N=8)."""
    return jax.jit(jax.vmap(lambda c, g, n: pegs(c, g, n, 8)))


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Mastermind")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        assert not env.duplicate_numbers and kwargs["duplicate_numbers"] is False
        if kwargs["code_length"] is None:
            assert env.randomize and env.config == ("random", False)
            assert (env.size, env.max_number, env.history) == (4, 8, 30)
            continue
        p = env.default_params
        assert (int(p.code_length), int(p.num_numbers), int(p.max_turns)) == (
            kwargs["code_length"],
            kwargs["num_numbers"],
            kwargs["max_turns"],
        )
    assert gemjax.make(HARD, duplicate_numbers=True).config == (4, 8, 30, True)
    assert gemjax.make(HARD) != gemjax.make(HARD, duplicate_numbers=True)
    for bad in [dict(code_length=0), dict(num_numbers=3), dict(num_numbers=20), dict(max_turns=0)]:
        with pytest.raises(ValueError):
            gemjax.make(HARD, **bad)
    with pytest.raises(ValueError, match="capacity"):
        gemjax.make(EASY).validate_params(gemjax.make(HARD).default_params)


# --- pegs ---------------------------------------------------------------------------------

CODES = st.lists(st.integers(1, 8), min_size=4, max_size=4)
GUESSES = st.lists(st.integers(-1, 10), min_size=4, max_size=4)


@settings(max_examples=150, deadline=None)
@given(CODES, GUESSES, st.integers(1, 4), st.permutations(range(4)))
def test_peg_properties(pegs_fn, code, guess, length, perm):
    """black + white <= L; black == L iff the guess is the code; invariant under one
    permutation applied to code and guess positions; equal to GEM's evaluation."""
    perm = [p for p in perm if p < length] + list(range(length, 4))
    codes = np.asarray([code, [code[p] for p in perm]], np.int32)
    guesses_ = np.asarray([guess, [guess[p] for p in perm]], np.int32)
    black_white = np.asarray(pegs_fn(codes, guesses_, jnp.full((2,), length, jnp.int32)))
    black, white = black_white[0]
    assert black >= 0 and white >= 0 and black + white <= length
    assert (black == length) == (code[:length] == guess[:length])
    np.testing.assert_array_equal(black_white[0], black_white[1])
    gem = MastermindEnv(code_length=length, num_numbers=8)
    gem.game_code = code[:length]
    assert gem._evaluate_guess(guess[:length]) == (black, white)


def test_pegs_exhaustive_small(pegs_fn):
    """Every code and guess of length 3 over 1..3 (with repeats) against GEM."""
    gem = MastermindEnv(code_length=3, num_numbers=3, duplicate_numbers=True)
    words = list(itertools.product(range(1, 4), repeat=3))
    pairs = np.asarray([(c, g) for c in words for g in words], np.int32)
    pad = np.zeros((len(pairs), 1), np.int32)
    got = np.asarray(
        pegs_fn(
            np.concatenate([pairs[:, 0], pad], 1),
            np.concatenate([pairs[:, 1], pad], 1),
            jnp.full((len(pairs),), 3, jnp.int32),
        )
    )
    expected = []
    for code, guess in pairs.tolist():
        gem.game_code = code
        expected.append(gem._evaluate_guess(guess))
    np.testing.assert_array_equal(got, expected)
    assert len({tuple(r) for r in got}) > 5


def test_milestone_reward_is_float32_of_gems():
    for length in range(1, 9):
        for d in range(1, length + 1):
            assert np.float32(d) / np.float32(length) == np.float32(d / length)


# --- JAX contract -------------------------------------------------------------------------


def test_observation_layout(kit):
    """The observation's keys, dtypes and shapes; the code is never in it
    (tests/test_contract.py runs the rest of the kernel contract on every id)."""
    env = kit.env
    _, ts = kit.reset(jax.random.key(0), kit.params)
    assert set(ts.observation) == OBS_KEYS
    assert ts.observation["guesses"].shape == (env.history, env.size)
    for name in OBS_KEYS - {"guesses", "black", "white"}:
        assert ts.observation[name].shape == () and ts.observation[name].dtype == jnp.int32
    assert "code" not in ts.observation


def play_code(state: MastermindState) -> jax.Array:
    """The winning guess of ``state``: ``[code_length, *code]``."""
    return jnp.concatenate([state.code_length[None], state.code])


# Slow: the quick tier checks each game's contract in tests/test_contract.py.
@pytest.mark.slow
def test_contract_on_winning_guesses(kit):
    """vmap equals a loop and jit equals eager on streams that also replay the code
    and write a negative count and int32-max entries: successes, the guesses after
    them and values beyond the action space are compared too."""
    env, params = kit.env, kit.params
    odd = jnp.asarray([-1, *[2**31 - 1] * env.size], jnp.int32)  # beyond the action space
    actions = testing.mixed_actions(testing.adversarial_actions(env), lambda _: odd, 0.1)
    actions = testing.mixed_actions(actions, play_code, 0.2)
    history = testing.check_vmap_matches_loop(env, params, actions, batch=BATCH, steps=12)
    assert history.info["success"].any()
    assert (history.observation["num_guesses"][-1] > 0).any()
    timesteps = testing.check_jit_matches_eager(env, params, actions, steps=12)
    assert any(bool(ts.info["success"]) for ts in timesteps)


def test_action_shape_and_dtype_checked(kit):
    env = kit.env
    state, _ = kit.reset(jax.random.key(0), kit.params)
    with pytest.raises(ValueError):
        env.step(jax.random.key(0), state, jnp.zeros((env.size + 2,), jnp.int32), kit.params)
    with pytest.raises(TypeError):
        env.step(jax.random.key(0), state, jnp.zeros((env.size + 1,)), kit.params)


# --- reset distribution -------------------------------------------------------------------


def reset_summary(kits, env_id, n, seed, **kwargs):
    kit = kits(env_id, **kwargs)
    states, ts = kit.vreset(jax.random.split(jax.random.key(seed), n), kit.params)
    return jax.device_get((states, ts))


@pytest.mark.parametrize("env_id", IDS)
def test_reset_distribution(kits, env_id):
    n = 6000
    states, ts = reset_summary(kits, env_id, n, 7)
    length, numbers, turns = states.code_length, states.num_numbers, states.max_turns
    configs = list(zip(length.tolist(), numbers.tolist(), turns.tolist(), strict=True))
    if env_id == RANDOM:
        counts = {c: configs.count(c) for c in RANDOM_CONFIGS}
        assert set(configs) == set(RANDOM_CONFIGS)
        for c in RANDOM_CONFIGS:  # each about 1/3 (5 sigma: ~0.03)
            assert abs(counts[c] / n - 1 / 3) < 0.03, counts
    else:
        kit = kits(env_id)
        p = kit.params
        assert set(configs) == {(int(p.code_length), int(p.num_numbers), int(p.max_turns))}
    assert (states.turn == 0).all() and (states.num_guesses == 0).all()
    assert not states.seen.any() and not ts.observation["guesses"].any()
    positions = np.arange(states.code.shape[1])
    for name in ("code", "example"):
        values = getattr(states, name)
        used = positions < length[:, None]
        assert ((values >= 1) & (values <= numbers[:, None]))[used].all(), name
        assert (values[~used] == 0).all(), name
        for row, L in zip(values, length, strict=True):  # distinct entries
            assert len(set(row[:L].tolist())) == L, (name, row)
    # Every code of the most common configuration appears about equally often.
    L, N = configs[0][:2]
    rows = (length == L) & (numbers == N)
    codes = [tuple(r[:L]) for r in states.code[rows].tolist()]
    if math.perm(N, L) <= 100:  # small code spaces: every code occurs
        assert len(set(codes)) == math.perm(N, L)
    first = np.bincount(states.code[rows, 0], minlength=N + 1)[1:]
    expected = rows.sum() / N
    assert (np.abs(first - expected) < 5 * math.sqrt(expected)).all(), first
    # Code and example are drawn independently: equal with probability 1 / perm(N, L).
    same = (states.code[rows] == states.example[rows]).all(axis=1).mean()
    chance = 1 / math.perm(N, L)
    assert abs(same - chance) < 5 * math.sqrt(chance * (1 - chance) / rows.sum()) + 1e-3


def test_duplicate_numbers_reset(kits):
    n = 4000
    states, ts = reset_summary(kits, HARD, n, 9, duplicate_numbers=True)
    codes = states.code
    assert ((codes >= 1) & (codes <= 8)).all()
    repeats = np.mean([len(set(c)) < 4 for c in codes.tolist()])
    expected = 1 - math.perm(8, 4) / 8**4  # about 0.59
    assert abs(repeats - expected) < 0.04, repeats
    # The example stays distinct (GEM's sampler), and the instructions say "allowed".
    assert all(len(set(e)) == 4 for e in states.example.tolist())
    env = gemjax.make(HARD, duplicate_numbers=True)
    text = env.messages.render(int(ts.event.kind[0]), ts.event.args[0].tolist())
    assert "Duplicate numbers are allowed." in text


def test_random_action_follows_gems_sampler(kits):
    kit = kits(RANDOM)
    states, _ = kit.vreset(jax.random.split(jax.random.key(3), 64), kit.params)
    env = kit.env
    sample = jax.jit(jax.vmap(env.random_action))
    actions = np.asarray(sample(jax.random.split(jax.random.key(4), 64), states))
    assert actions.shape == (64, 5) and actions.dtype == np.int32
    length, numbers = np.asarray(states.code_length), np.asarray(states.num_numbers)
    np.testing.assert_array_equal(actions[:, 0], length)
    for row, L, N in zip(actions, length, numbers, strict=True):
        assert len(set(row[1 : 1 + L].tolist())) == L
        assert (row[1 : 1 + L] >= 1).all() and (row[1 : 1 + L] <= N).all()
        assert not row[1 + L :].any()
    assert bool(env.action_space(kit.params).contains(actions).all())


# --- every branch ---------------------------------------------------------------------------

# (name, code, turn, max_turns, milestone, previous guesses, action (count, entries),
#  expected message, reward, terminated, truncated)
H = (4, 8, 30)
BRANCHES = [
    ("format_error", (1, 2, 3, 4), 0, 30, 0, (), (0,), "format_error", -0.1, True, False),
    ("format_error_last", (1, 2, 3, 4), 29, 30, 0, (), (0,), "format_error", -0.1, True, True),
    ("format_error_past", (1, 2, 3, 4), 30, 30, 0, (), (0,), "format_error", -0.1, True, False),
    ("short", (1, 2, 3, 4), 0, 30, 0, (), (3, 1, 2, 3), "wrong_length", 0.0, False, False),
    ("long", (1, 2, 3, 4), 3, 30, 0, (), (5, 1, 2, 3, 4), "wrong_length", 0.0, False, False),
    ("one", (1, 2, 3, 4), 0, 30, 0, (), (1, 1234), "wrong_length", 0.0, False, False),
    ("zero", (1, 2, 3, 4), 0, 30, 0, (), (4, 0, 2, 3, 4), "out_of_range", 0.0, False, False),
    ("nine", (1, 2, 3, 4), 0, 30, 0, (), (4, 1, 2, 3, 9), "out_of_range", 0.0, False, False),
    ("huge", (1, 2, 3, 4), 0, 30, 0, (), (4, 2**31 - 1, 2, 3, 4), "out_of_range", 0, 0, 0),
    ("dup", (1, 2, 3, 4), 2, 30, 1, ((1, 5, 6, 7),), (4, 1, 5, 6, 7), "duplicate", 0, 0, 0),
    ("repeats", (1, 2, 3, 4), 0, 30, 0, (), (4, 1, 1, 1, 1), "pegs", 0.25, False, False),
    ("whites", (1, 2, 3, 4), 0, 30, 0, (), (4, 4, 3, 2, 1), "pegs", 0.0, False, False),
    ("gain", (1, 2, 3, 4), 1, 30, 1, (), (4, 1, 2, 3, 5), "pegs", 0.5, False, False),
    ("no_gain", (1, 2, 3, 4), 1, 30, 3, (), (4, 1, 2, 5, 6), "pegs", 0.0, False, False),
    ("success", (1, 2, 3, 4), 0, 30, 0, (), (4, 1, 2, 3, 4), "success", 1.0, True, False),
    ("success_last", (5, 6, 7, 8), 29, 30, 3, (), (4, 5, 6, 7, 8), "success", 0.25, True, False),
    ("last_pegs", (1, 2, 3, 4), 29, 30, 0, (), (4, 1, 2, 5, 6), "max_turns", 0.5, True, True),
    ("last_short", (1, 2, 3, 4), 29, 30, 0, (), (2, 1, 2), "max_turns", 0.0, True, True),
    ("past_dup", (1, 2, 3, 4), 40, 30, 0, ((2, 1, 3, 4),), (4, 2, 1, 3, 4), "max_turns", 0, 1, 1),
]


@pytest.fixture(scope="module")
def branch_results(kits):
    kit = kits(HARD)
    env = kit.env
    rows = []
    for _, code, turn, turns, milestone, previous, *_ in BRANCHES:
        gem = gem_env(code, turn, turns, milestone, previous)
        rows.append(env.state_from_gem(gem))
    states = jax.tree.map(lambda *xs: jnp.stack(xs), *rows)
    actions = np.zeros((len(BRANCHES), 5), np.int32)
    for i, case in enumerate(BRANCHES):
        actions[i, : len(case[6])] = case[6]
    keys = jax.random.split(jax.random.key(0), len(BRANCHES))
    return jax.device_get(kit.vstep(keys, states, jnp.asarray(actions), kit.params))


def gem_env(code, turn, turns, milestone, previous) -> MastermindEnv:
    gem = MastermindEnv(code_length=4, num_numbers=8, max_turns=turns)
    gem.game_code, gem.turn_count, gem.milestone = list(code), turn, milestone
    gem.previous_guesses = set(previous)
    return gem


@pytest.mark.parametrize("index", range(len(BRANCHES)), ids=[c[0] for c in BRANCHES])
def test_branch(kits, branch_results, index):
    env = kits(HARD).env
    _, code, turn, turns, milestone, previous, action, kind, reward, term, trunc = BRANCHES[index]
    new_state, ts = lane(branch_results, index)
    assert env.messages.names[int(ts.event.kind)] == kind
    assert ts.reward == np.float32(reward)
    assert bool(ts.terminated) is bool(term) and bool(ts.truncated) is bool(trunc)
    assert bool(ts.info["success"]) is (kind == "success")
    assert int(new_state.turn) == turn + 1
    valid = kind in ("pegs", "success") or (kind == "max_turns" and action[0] == 4 and not previous)
    assert int(new_state.num_guesses) == len(previous) + valid
    # GEM agrees (text through the host grammar, so echoes are exercised too).
    gem = gem_env(code, turn, turns, milestone, previous)
    text = env.grammar.render(np.asarray(action + (0,) * (5 - len(action))))
    parsed = env.grammar.parse(text)
    g_obs, g_reward, g_term, g_trunc, g_info = gem.step(text)
    assert g_info == {"suffix": "Enter your guess."}
    assert env.messages.render(int(ts.event.kind), ts.event.args.tolist(), parsed.echoes) == g_obs
    assert np.float32(g_reward) == ts.reward and (g_term, g_trunc) == (term, trunc)
    assert int(new_state.milestone) == gem.milestone
    assert int(new_state.num_guesses) == len(gem.previous_guesses)
    rows = [tuple(r) for r in np.asarray(new_state.guesses)[: int(new_state.num_guesses)].tolist()]
    assert set(rows) == gem.previous_guesses
    for row, b, w in zip(rows, new_state.black, new_state.white, strict=False):
        assert gem._evaluate_guess(list(row)) == (b, w)


def test_seen_set_is_exact_past_the_history(kits):
    """Past the turn limit GEM keeps remembering guesses; so does the bitset, after
    the history array is full (easy: 10 rows, 36 possible codes)."""
    kit = kits(EASY)
    env = kit.env
    state, _ = kit.reset(jax.random.key(0), kit.params)
    code = tuple(np.asarray(state.code)[:2].tolist())
    all_codes = [c for c in itertools.product(range(1, 7), repeat=2) if c != code]
    for guess in all_codes:
        state, ts = kit.step(jax.random.key(0), state, jnp.asarray((2, *guess)), kit.params)
    assert int(state.num_guesses) == 35 and int(state.turn) == 35
    assert (np.asarray(state.guesses) != 0).all()  # the 10 stored rows
    for guess in all_codes[::5]:
        state, ts = kit.step(jax.random.key(0), state, jnp.asarray((2, *guess)), kit.params)
        assert int(state.num_guesses) == 35
        assert bool(ts.truncated)
    state, ts = kit.step(jax.random.key(0), state, jnp.asarray((2, *code)), kit.params)
    assert env.messages.names[int(ts.event.kind)] == "success"


def test_state_from_gem_round_trip(kits):
    env = kits(HARD).env
    gem = gem_env((3, 1, 4, 2), 5, 30, 2, ((1, 2, 3, 4), (4, 3, 2, 1), (3, 1, 5, 6)))
    state = env.state_from_gem(gem)
    assert isinstance(state, MastermindState)
    assert state.code.tolist() == [3, 1, 4, 2] and int(state.milestone) == 2
    assert int(state.num_guesses) == 3
    assert [tuple(r) for r in state.guesses[:3].tolist()] == sorted(gem.previous_guesses)
    assert state.black[:3].tolist() == [
        gem._evaluate_guess(list(g))[0] for g in sorted(gem.previous_guesses)
    ]
    assert int(np.unpackbits(np.asarray(state.seen).view(np.uint8)).sum()) == 3
