"""GuessTheNumber kernel: JAX contract, reset distribution, and every branch of GEM's
rules checked against hand-written expectations and against ``gem-llm`` itself."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.guess_the_number import GuessTheNumberEnv
from tiers import quick_first

import gemjax
from gemjax import bitset, testing
from gemjax.envs.guess_the_number import (
    MESSAGES,
    GuessTheNumber,
    GuessTheNumberParams,
    GuessTheNumberState,
)
from gemjax.testing import assert_trees_equal, lane

GTN_IDS = tuple(i for i in gemjax.list_envs() if i.startswith("game:GuessTheNumber"))
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
BATCH = 8  # one batch size for every vmapped call of the shared kits: one compile each
OBS_KEYS = {"hints", "turn", "min_number", "max_number", "max_turns"}
HINT_OPTIONS = next(s for s in MESSAGES.templates["hint"].slots if s.name == "hint").options
# Upper 0.001 quantiles of chi-square (scipy.stats.chi2.isf(0.001, dof), hard-coded).
CHI2_CRITICAL_P001 = {
    9: 27.877164871256575,
    20: 45.31474661812587,
    45: 80.07673201081901,
    49: 85.350564608593,
}
Z_P001 = 3.090232306167813  # upper 0.001 quantile of the standard normal


# --- helpers ---------------------------------------------------------------------


def chi2_critical(dof: int) -> float:
    """Upper 0.001 quantile of chi-square(dof): the table, else Wilson-Hilferty
    (relative error below 1e-4 for dof >= 100)."""
    if dof in CHI2_CRITICAL_P001:
        return CHI2_CRITICAL_P001[dof]
    assert dof >= 100, f"no accurate critical value for dof={dof}"
    c = 2.0 / (9.0 * dof)
    return dof * (1.0 - c + Z_P001 * math.sqrt(c)) ** 3


def chi2_statistic(counts: np.ndarray) -> float:
    """Pearson's statistic of ``counts`` against the uniform distribution."""
    counts = np.asarray(counts, np.float64)
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def random_actions(rng: np.random.Generator, capacity: int, shape) -> np.ndarray:
    """Guesses from every branch: format errors (<= 0), in range, out of range, and
    the int32 extremes."""
    actions = rng.integers(-3, capacity + 3, size=shape)
    u = rng.random(shape)
    actions = np.where(u < 0.05, INT32_MAX, actions)
    actions = np.where((u >= 0.05) & (u < 0.08), INT32_MIN, actions)
    return actions.astype(np.int32)


def build_state(
    env: GuessTheNumber, lo, hi, turns, target, turn, guessed=(), example=None
) -> GuessTheNumberState:
    return GuessTheNumberState(
        min_number=jnp.int32(lo),
        max_number=jnp.int32(hi),
        max_turns=jnp.int32(turns),
        target=jnp.int32(target),
        example=jnp.int32(lo if example is None else example),
        turn=jnp.int32(turn),
        guessed_bits=jnp.asarray(bitset.from_indices(guessed, env.capacity)),
    )


def build_states(env: GuessTheNumber, rows) -> GuessTheNumberState:
    """A batch of states, one per ``(lo, hi, turns, target, turn, guessed)`` row."""
    bits = np.stack([bitset.from_indices(row[5], env.capacity) for row in rows])
    column = lambda j: jnp.asarray(np.asarray([row[j] for row in rows], np.int32))  # noqa: E731
    return GuessTheNumberState(
        min_number=column(0),
        max_number=column(1),
        max_turns=column(2),
        target=column(3),
        example=column(0),
        turn=column(4),
        guessed_bits=jnp.asarray(bits),
    )


def gem_text(action: int) -> str:
    """The response GEM reads as ``action`` (negatives cannot match ``\\d+``)."""
    return f"I guess \\boxed{{{action}}}."


def gem_step(gem: GuessTheNumberEnv, lo, hi, turns, target, turn, guessed, action):
    gem.min_number, gem.max_number, gem.max_turns = lo, hi, turns
    gem.game_number, gem.turn_count, gem.previous_guesses = target, turn, set(guessed)
    return gem.step(gem_text(action))


@pytest.fixture(scope="module")
def gem() -> GuessTheNumberEnv:
    return GuessTheNumberEnv(min_number=1, max_number=60, max_turns=7)


@pytest.fixture(scope="module", params=quick_first(GTN_IDS))
def kit(request, kits):
    return kits(request.param)


@pytest.fixture(scope="module")
def wide(kits):
    """Capacity 61 (numbers 0..60): room for every hand-built range up to 59 wide."""
    return kits("game:GuessTheNumber-v0-hard", min_number=1, max_number=60, max_turns=7)


def test_registered_ids():
    assert {
        "game:GuessTheNumber-v0-hard",
        "game:GuessTheNumber-v0-easy",
        "game:GuessTheNumber-v0-random",
        "game:GuessTheNumber-v0-hard-no-max-turn",
    } <= set(GTN_IDS)


def test_default_params_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = [i for i in ENV_REGISTRY if i.startswith("game:GuessTheNumber")]
    assert set(gem_ids) <= set(GTN_IDS)  # every GEM id has a kernel
    for env_id in gem_ids:
        env = gemjax.make(env_id)
        gem_kwargs = ENV_REGISTRY[env_id].kwargs
        if gem_kwargs["min_number"] is None:
            assert env.randomize and env.config == ("random",)
            continue
        p = env.default_params
        assert not env.randomize
        assert (int(p.min_number), int(p.max_number), int(p.max_turns)) == (
            gem_kwargs["min_number"],
            gem_kwargs["max_number"],
            gem_kwargs["max_turns"],
        )
    # The paper's extra id: GEM's hard range with 50 turns.
    assert gemjax.make("game:GuessTheNumber-v0-hard-no-max-turn").config == (1, 50, 50)


# --- JAX contract ------------------------------------------------------------------


def test_observation_layout(kit):
    """The observation's keys, dtypes and shapes (tests/test_contract.py runs the
    rest of the kernel contract on every id)."""
    _, ts = kit.reset(jax.random.key(0), kit.params)
    assert set(ts.observation) == OBS_KEYS
    assert ts.observation["hints"].dtype == jnp.int8
    assert ts.observation["hints"].shape == (kit.env.capacity,)
    for name in OBS_KEYS - {"hints"}:
        assert ts.observation[name].dtype == jnp.int32 and ts.observation[name].shape == ()


def test_range_sweep_does_not_retrace(kit):
    """One compiled reset and step serve another range and turn limit, on the game's
    own actions (every branch, int32 extremes included)."""
    env, params = kit.env, kit.params
    extremes = jnp.asarray([INT32_MAX, INT32_MIN, -3, env.capacity + 2], jnp.int32)
    base = testing.adversarial_actions(env)

    def actions(key, state):
        pick, index, rest = jax.random.split(key, 3)
        extreme = extremes[jax.random.randint(index, (), 0, extremes.size)]
        return jnp.where(jax.random.bernoulli(pick, 0.2), extreme, base(rest, state))

    other = params.replace(max_number=params.max_number - 1, max_turns=params.max_turns + 1)
    testing.check_no_retracing(env, params, actions, other=other)
    testing.check_jit_matches_eager(env, params, actions)


def test_equal_envs_share_compilation():
    traces = []

    @functools.partial(jax.jit, static_argnums=0)
    def run(env, key):
        traces.append(env)
        return env.reset(key, env.default_params)[1].reward

    a = gemjax.make("game:GuessTheNumber-v0-hard")
    b = gemjax.make("game:GuessTheNumber-v0-hard")
    assert a is not b and a == b and hash(a) == hash(b)
    run(a, jax.random.key(0))
    run(b, jax.random.key(1))
    assert len(traces) == 1
    assert a != gemjax.make("game:GuessTheNumber-v0-hard-no-max-turn")
    assert a != gemjax.make("game:GuessTheNumber-v0-random")


def test_params_sweep_under_vmap(kits):
    """Different ranges per lane from one compiled env (params are dynamic)."""
    kit = kits("game:GuessTheNumber-v0-hard")
    lows = jnp.asarray([1, 10, 30, 50, 7], jnp.int32)
    highs = jnp.asarray([5, 12, 50, 50, 7], jnp.int32)
    turns = jnp.asarray([1, 2, 3, 4, 5], jnp.int32)
    params = kit.params.replace(min_number=lows, max_number=highs, max_turns=turns)
    params = params.replace(rewards=jax.tree.map(lambda r: jnp.full((5,), r), params.rewards))
    keys = jax.random.split(jax.random.key(4), 64)

    @jax.jit
    def sweep(keys, params):
        per_key = jax.vmap(kit.env.reset, in_axes=(0, None))
        return jax.vmap(per_key, in_axes=(None, 0))(keys, params)[0]

    states = sweep(keys, params)
    assert states.target.shape == (5, 64)
    np.testing.assert_array_equal(states.min_number[:, 0], lows)
    np.testing.assert_array_equal(states.max_turns[:, 0], turns)
    assert (states.target >= lows[:, None]).all() and (states.target <= highs[:, None]).all()
    np.testing.assert_array_equal(states.target[3], 50)
    np.testing.assert_array_equal(states.target[4], 7)
    assert len(set(np.asarray(states.target[2]).tolist())) > 10


# --- reset distribution --------------------------------------------------------------


@functools.partial(jax.jit, static_argnums=0)
def reset_summary(env, keys, params):
    states, ts = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    obs = ts.observation
    return {
        "min": states.min_number,
        "max": states.max_number,
        "turns": states.max_turns,
        "target": states.target,
        "example": states.example,
        "turn": states.turn,
        "guessed_any": states.guessed.any(axis=-1),
        "hints_any": (obs["hints"] != 0).any(axis=-1),
        "obs_matches_state": (obs["min_number"] == states.min_number)
        & (obs["max_number"] == states.max_number)
        & (obs["max_turns"] == states.max_turns)
        & (obs["turn"] == 0),
        "event_kind": ts.event.kind,
    }


def test_chi_square_helper_rejects_bias():
    rng = np.random.default_rng(0)
    uniform = np.bincount(rng.integers(0, 50, 20000), minlength=50)
    assert chi2_statistic(uniform) < chi2_critical(49)
    biased = uniform.copy()
    biased[0] += 150  # a 15% excess in one cell of 50
    assert chi2_statistic(biased) > chi2_critical(49)
    assert chi2_critical(1265) == pytest.approx(1426.1517761851626, rel=1e-4)


@pytest.mark.parametrize("env_id", quick_first(i for i in GTN_IDS if not i.endswith("-random")))
def test_fixed_reset_distribution(kits, env_id):
    kit = kits(env_id)
    n = 20000
    s = jax.device_get(reset_summary(kit.env, jax.random.split(jax.random.key(7), n), kit.params))
    lo, hi, turns = (
        int(v) for v in (kit.params.min_number, kit.params.max_number, kit.params.max_turns)
    )
    assert (s["min"] == lo).all() and (s["max"] == hi).all() and (s["turns"] == turns).all()
    assert (s["turn"] == 0).all() and not s["guessed_any"].any() and not s["hints_any"].any()
    assert s["obs_matches_state"].all()
    assert (s["event_kind"] == MESSAGES.kind("instructions")).all()
    for name in ("target", "example"):
        values = s[name]
        assert values.min() >= lo and values.max() <= hi
        counts = np.bincount(values - lo, minlength=hi - lo + 1)
        assert counts.size == hi - lo + 1
        assert chi2_statistic(counts) < chi2_critical(hi - lo), name
    # Target and example are drawn independently.
    assert (s["target"] != s["example"]).mean() == pytest.approx(1 - 1 / (hi - lo + 1), abs=0.02)


def test_random_reset_distribution(kits):
    kit = kits("game:GuessTheNumber-v0-random")
    n = 20000
    s = jax.device_get(reset_summary(kit.env, jax.random.split(jax.random.key(8), n), kit.params))
    lo, hi, turns, target = s["min"], s["max"], s["turns"], s["target"]
    span = hi - lo
    assert lo.min() >= 1 and lo.max() <= 10
    assert span.min() >= 5 and span.max() <= 50
    assert chi2_statistic(np.bincount(lo - 1, minlength=10)) < chi2_critical(9)
    assert chi2_statistic(np.bincount(span - 5, minlength=46)) < chi2_critical(45)
    # Every (min, span) pair occurs (460 pairs, ~43 samples each).
    assert {(int(a), int(b)) for a, b in zip(lo, span, strict=True)} == {
        (a, b) for a in range(1, 11) for b in range(5, 51)
    }
    expected_turns = np.asarray([math.ceil(math.sqrt(int(d))) + 1 for d in span])
    np.testing.assert_array_equal(turns, expected_turns)
    assert (s["turn"] == 0).all() and not s["hints_any"].any() and s["obs_matches_state"].all()
    # The target is uniform over each episode's own range: one chi-square per span,
    # summed (independent chi-squares add, and so do their degrees of freedom).
    assert (target >= lo).all() and (target <= hi).all()
    statistic, dof = 0.0, 0
    for d in range(5, 51):
        rows = span == d
        statistic += chi2_statistic(np.bincount(target[rows] - lo[rows], minlength=d + 1))
        dof += d
    assert statistic < chi2_critical(dof)


def test_ceil_sqrt_exact():
    from gemjax.envs.guess_the_number import ceil_sqrt

    n = np.arange(0, 100_001, dtype=np.int32)
    got = np.asarray(jax.jit(ceil_sqrt)(jnp.asarray(n)))
    np.testing.assert_array_equal(got, [math.isqrt(int(v) - 1) + 1 if v else 0 for v in n])


def test_random_action_uniform_in_range(wide):
    states = build_states(wide.env, [(5, 25, 7, 9, 0, ()), (60, 60, 1, 60, 0, ())])
    keys = jax.random.split(jax.random.key(13), 20000)

    @jax.jit
    def sample(keys, states):
        per_key = jax.vmap(wide.env.random_action, in_axes=(0, None))
        return jax.vmap(per_key, in_axes=(None, 0))(keys, states)

    actions = np.asarray(sample(keys, states))
    assert actions.dtype == np.int32 and actions.shape == (2, 20000)
    assert actions[0].min() >= 5 and actions[0].max() <= 25 and (actions[1] == 60).all()
    counts = np.bincount(actions[0] - 5, minlength=21)
    assert counts.size == 21 and chi2_statistic(counts) < chi2_critical(20)


# --- every branch of the spec -----------------------------------------------------------

# (name, lo, hi, max_turns, target, turn before the step, guessed before, action,
#  expected event, reward, terminated, truncated)
BRANCH_CASES = [
    ("zero", 1, 20, 5, 7, 0, (), 0, "format_error", -0.1, True, False),
    ("negative", 1, 20, 5, 7, 0, (), -3, "format_error", -0.1, True, False),
    ("int32_min", 1, 20, 5, 7, 2, (3,), INT32_MIN, "format_error", -0.1, True, False),
    ("zero_on_last_turn", 1, 20, 5, 7, 4, (3,), 0, "format_error", -0.1, True, True),
    ("negative_on_last_turn", 1, 20, 5, 7, 4, (), -1, "format_error", -0.1, True, True),
    ("zero_past_last_turn", 1, 20, 5, 7, 5, (), 0, "format_error", -0.1, True, False),
    ("zero_before_last_turn", 1, 20, 5, 7, 3, (), 0, "format_error", -0.1, True, False),
    ("zero_one_turn_game", 1, 20, 1, 7, 0, (), 0, "format_error", -0.1, True, True),
    ("above_range", 1, 20, 5, 7, 0, (), 21, "out_of_range", 0.0, False, False),
    ("below_range", 5, 20, 5, 7, 1, (), 4, "out_of_range", 0.0, False, False),
    ("beyond_capacity", 1, 20, 5, 7, 0, (), 61, "out_of_range", 0.0, False, False),
    ("capacity_edge", 1, 20, 5, 7, 0, (), 60, "out_of_range", 0.0, False, False),
    ("int32_max", 1, 20, 5, 7, 0, (), INT32_MAX, "out_of_range", 0.0, False, False),
    ("duplicate", 1, 20, 5, 7, 2, (3, 12), 3, "duplicate", 0.0, False, False),
    ("duplicate_high", 1, 20, 5, 7, 2, (3, 12), 12, "duplicate", 0.0, False, False),
    ("higher", 1, 20, 5, 7, 0, (), 3, "hint", 0.0, False, False),
    ("lower", 1, 20, 5, 7, 1, (3,), 12, "hint", 0.0, False, False),
    ("higher_at_min", 1, 20, 5, 7, 0, (), 1, "hint", 0.0, False, False),
    ("lower_at_max", 1, 20, 5, 7, 0, (), 20, "hint", 0.0, False, False),
    ("adjacent_lower", 1, 20, 5, 7, 3, (1, 2, 3), 8, "hint", 0.0, False, False),
    ("success_first_turn", 1, 20, 5, 7, 0, (), 7, "success", 1.0, True, False),
    ("success_last_turn", 1, 20, 5, 7, 4, (3, 12, 5, 6), 7, "success", 1.0, True, False),
    ("success_one_turn_game", 1, 20, 1, 7, 0, (), 7, "success", 1.0, True, False),
    ("success_single_number", 9, 9, 3, 9, 0, (), 9, "success", 1.0, True, False),
    ("success_at_max", 1, 60, 7, 60, 6, (), 60, "success", 1.0, True, False),
    ("last_turn_hint", 1, 20, 5, 7, 4, (3, 12, 5, 6), 10, "max_turns", 1 - 3 / 19, True, True),
    ("last_turn_below", 1, 20, 5, 7, 4, (), 1, "max_turns", 1 - 6 / 19, True, True),
    ("last_turn_dup", 1, 20, 5, 7, 4, (3, 12, 5, 6), 12, "max_turns", 1 - 5 / 19, True, True),
    ("last_turn_above", 1, 20, 5, 7, 4, (3,), 21, "max_turns", 0.0, True, True),
    ("last_turn_under", 5, 20, 5, 7, 4, (), 2, "max_turns", 0.0, True, True),
    ("last_turn_int32_max", 1, 20, 5, 7, 4, (), INT32_MAX, "max_turns", 0.0, True, True),
    ("past_last_turn_hint", 1, 20, 5, 7, 6, (), 10, "max_turns", 1 - 3 / 19, True, True),
    ("past_last_turn_above", 1, 20, 5, 7, 6, (), 30, "max_turns", 0.0, True, True),
    ("one_turn_game_hint", 1, 20, 1, 7, 0, (), 17, "max_turns", 1 - 10 / 19, True, True),
    ("last_turn_full_range", 1, 60, 2, 1, 1, (), 60, "max_turns", 0.0, True, True),
]


@pytest.fixture(scope="module")
def branch_results(wide):
    env = wide.env
    states = build_states(env, [case[1:7] for case in BRANCH_CASES])
    actions = jnp.asarray([case[7] for case in BRANCH_CASES], jnp.int32)
    keys = jax.random.split(jax.random.key(0), len(BRANCH_CASES))
    new_states, ts = wide.vstep(keys, states, actions, wide.params)
    return jax.device_get((new_states, ts))


@pytest.mark.parametrize("index", range(len(BRANCH_CASES)), ids=[c[0] for c in BRANCH_CASES])
def test_branch(wide, branch_results, gem, index):
    case = BRANCH_CASES[index]
    lo, hi, turns, target, turn, guessed, action, kind, reward, term, trunc = case[1:]
    new_state, ts = lane(branch_results, index)
    args = dict(zip(MESSAGES.arg_names, ts.event.args.tolist(), strict=True))

    # Hand-written expectations.
    assert MESSAGES.names[int(ts.event.kind)] == kind
    assert ts.reward.dtype == np.float32
    assert ts.reward == np.float32(reward)
    assert bool(ts.terminated) is term and bool(ts.truncated) is trunc
    assert bool(ts.info["success"]) is (kind == "success")
    assert args["turn"] == turn + 1 and new_state.turn == turn + 1
    if kind in ("out_of_range", "duplicate", "hint"):
        assert args["guess"] == action
    if kind == "hint":
        assert args["hint"] == HINT_OPTIONS.index("lower" if action > target else "higher")
    if kind == "success":
        assert args["target"] == target
    valid = action > 0 and lo <= action <= hi and action not in guessed
    expected_guessed = set(guessed) | ({action} if valid else set())
    assert set(np.flatnonzero(new_state.guessed).tolist()) == expected_guessed
    expected_hints = np.zeros(wide.env.capacity, np.int8)
    for g in expected_guessed:
        expected_hints[g] = 1 if g < target else 2 if g > target else 3
    np.testing.assert_array_equal(ts.observation["hints"], expected_hints)
    assert ts.observation["turn"] == turn + 1
    for field in ("min_number", "max_number", "max_turns", "target", "example"):
        assert getattr(new_state, field) == getattr(
            build_state(wide.env, lo, hi, turns, target, turn), field
        )

    # GEM agrees: reward (as float32), flags, text and its guess set.
    gem_obs, gem_reward, gem_term, gem_trunc, _ = gem_step(
        gem, lo, hi, turns, target, turn, guessed, action
    )
    assert np.float32(gem_reward) == ts.reward
    assert (gem_term, gem_trunc) == (term, trunc)
    echoes = wide.env.grammar.parse(gem_text(action)).echoes
    assert MESSAGES.render(int(ts.event.kind), ts.event.args.tolist(), echoes) == gem_obs
    assert {g for g in gem.previous_guesses if g < wide.env.capacity} == expected_guessed


def test_hint_choice_order():
    """``hint`` arg 0 is "higher" (target above the guess), 1 is "lower"."""
    assert HINT_OPTIONS == ("higher", "lower")


def _max_turn_lanes():
    """Every (range, distance) pair with range <= 59, both directions, as a fresh and
    as a duplicate last guess, plus out-of-range last guesses."""
    lanes = []  # (lo, hi, turns, target, turn, guessed, action)
    for span in range(1, 60):
        lo = 1 + (7 * span) % (60 - span)
        hi = lo + span
        turns, turn = (3, 2) if span % 2 else (2, 4)  # on, and past, the last turn
        for d in range(span + 1):
            for target, guess in ((lo, lo + d), (hi, hi - d)):
                if d:
                    lanes.append((lo, hi, turns, target, turn, (), guess))
                lanes.append((lo, hi, turns, target, turn, (guess,), guess))
        for guess in {hi + 1, hi + 7, 61, 1000, INT32_MAX} | ({lo - 1} if lo > 1 else set()):
            lanes.append((lo, hi, turns, lo + span // 2, turn, (), guess))
    return lanes


def test_max_turn_reward_exhaustive(wide, gem):
    lanes = _max_turn_lanes()
    env = wide.env
    states = build_states(env, [lane_[:6] for lane_ in lanes])
    actions = jnp.asarray([lane_[6] for lane_ in lanes], jnp.int32)
    keys = jax.random.split(jax.random.key(0), len(lanes))
    _, ts = jax.device_get(wide.vstep(keys, states, actions, wide.params))
    assert ts.reward.dtype == np.float32
    gem_rewards = np.empty(len(lanes), np.float64)
    for i, (lo, hi, turns, target, turn, guessed, action) in enumerate(lanes):
        obs, gem_rewards[i], term, trunc, _ = gem_step(
            gem, lo, hi, turns, target, turn, guessed, action
        )
        assert obs == "You have reached the maximum number of turns." and term and trunc
    expected = gem_rewards.astype(np.float32)
    mismatches = [
        (lanes[i], float(ts.reward[i]), float(expected[i]))
        for i in np.flatnonzero(ts.reward != expected)
    ]
    assert not mismatches, mismatches[:10]
    assert (ts.event.kind == MESSAGES.kind("max_turns")).all()
    assert ts.terminated.all() and ts.truncated.all() and not ts.info["success"].any()
    in_range = np.asarray([lo <= a <= hi for lo, hi, *_, a in lanes])
    assert (ts.reward[~in_range] == 0).all()
    assert in_range.sum() == 2 * sum(2 * s + 1 for s in range(1, 60))


def test_rewards_are_params(wide):
    """The reward constants come from ``params.rewards`` (format error, success)."""
    env = wide.env
    params = wide.params.replace(
        rewards=wide.params.rewards.replace(
            format_error=jnp.float32(-5.0), success=jnp.float32(3.0), invalid=jnp.float32(-1.0)
        )
    )
    state = build_state(env, 1, 20, 5, 7, 0)
    key = jax.random.key(0)
    assert wide.step(key, state, jnp.int32(0), params)[1].reward == -5.0
    assert wide.step(key, state, jnp.int32(7), params)[1].reward == 3.0
    assert wide.step(key, state, jnp.int32(30), params)[1].reward == -1.0
    assert wide.step(key, state, jnp.int32(3), params)[1].reward == 0.0
    last = build_state(env, 1, 20, 5, 7, 4)
    assert wide.step(key, last, jnp.int32(30), params)[1].reward == -1.0


# --- observation ---------------------------------------------------------------------


def test_reset_observation_hides_target(kit):
    keys = jax.random.split(jax.random.key(11), BATCH)
    states, ts = jax.device_get(kit.vreset(keys, kit.params))
    assert set(ts.observation) == OBS_KEYS
    assert (ts.observation["hints"] == 0).all()
    assert len(set(states.target.tolist())) > 1
    if not kit.env.randomize:
        # The observation does not depend on the target at all.
        for i in range(1, BATCH):
            assert_trees_equal(lane(ts.observation, i), lane(ts.observation, 0))


def test_hints_reveal_only_valid_guesses(kit):
    env, params = kit.env, kit.params
    batch, steps = BATCH, 16
    rng = np.random.default_rng(5)
    keys = jax.random.split(jax.random.key(12), batch)
    states, _ = kit.vreset(keys, params)
    targets = np.asarray(states.target)
    lo, hi = np.asarray(states.min_number), np.asarray(states.max_number)
    seen = [set() for _ in range(batch)]
    revealed = 0
    for t in range(steps):
        # Half of the lanes guess near their target, so correct guesses happen too.
        near = targets + rng.integers(-2, 3, size=batch)
        actions = np.where(rng.random(batch) < 0.5, near, random_actions(rng, env.capacity, batch))
        step_keys = jax.random.split(jax.random.key(t), batch)
        states, ts = kit.vstep(step_keys, states, jnp.asarray(actions, jnp.int32), params)
        hints = np.asarray(ts.observation["hints"])
        for i in range(batch):
            a = int(actions[i])
            if a > 0 and lo[i] <= a <= hi[i]:
                seen[i].add(a)
            expected = np.zeros(env.capacity, np.int8)
            for g in seen[i]:
                expected[g] = 1 if g < targets[i] else 2 if g > targets[i] else 3
            np.testing.assert_array_equal(hints[i], expected)
            revealed += int(targets[i] in seen[i])
    assert revealed > 0


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action", [jnp.float32(3.0), 3.0, jnp.bool_(True), np.float64(2.0), jnp.bfloat16(4)]
)
def test_non_integer_action_raises_type_error(wide, action):
    state = build_state(wide.env, 1, 20, 5, 7, 0)
    key = jax.random.key(0)
    with pytest.raises(TypeError, match="integer"):
        wide.env.step(key, state, action, wide.params)
    with pytest.raises(TypeError, match="integer"):
        jax.jit(wide.env.step)(key, state, action, wide.params)


@pytest.mark.parametrize("shape", [(1,), (2,), (2, 3), (0,)])
def test_wrong_action_shape_raises_value_error(wide, shape):
    state = build_state(wide.env, 1, 20, 5, 7, 0)
    key = jax.random.key(0)
    action = jnp.full(shape, 3, jnp.int32)
    with pytest.raises(ValueError, match="shape"):
        wide.env.step(key, state, action, wide.params)
    with pytest.raises(ValueError, match="shape"):
        jax.jit(wide.env.step)(key, state, action, wide.params)


def test_batched_action_to_vmapped_step_raises(wide):
    keys = jax.random.split(jax.random.key(0), 2)
    states = build_states(wide.env, [(1, 20, 5, 7, 0, ()), (1, 20, 5, 9, 1, (3,))])
    with pytest.raises(ValueError, match="shape"):
        wide.vstep(keys, states, jnp.ones((2, 1), jnp.int32), wide.params)


def test_other_integer_dtypes_accepted(wide):
    state = build_state(wide.env, 1, 20, 5, 7, 0)
    key = jax.random.key(0)
    ref = wide.env.step(key, state, jnp.int32(12), wide.params)
    for dtype in (jnp.int8, jnp.int16, jnp.uint8, jnp.uint32):
        assert_trees_equal(wide.env.step(key, state, jnp.asarray(12, dtype), wide.params), ref)


def test_make_unknown_id_suggests_close_match():
    with pytest.raises(ValueError, match="unknown environment id") as err:
        gemjax.make("game:GuessTheNumber-v0-hrad")
    assert "'game:GuessTheNumber-v0-hard'" in str(err.value)
    with pytest.raises(ValueError) as err:
        gemjax.make("game:GuesTheNumber-v0-easy")
    assert "'game:GuessTheNumber-v0-easy'" in str(err.value)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "match"),
    [
        ("game:GuessTheNumber-v0-hard", {"min_number": 10, "max_number": 5}, "exceed"),
        ("game:GuessTheNumber-v0-easy", {"min_number": 11}, "exceed"),
        ("game:GuessTheNumber-v0-hard", {"max_turns": 0}, "max_turns"),
        ("game:GuessTheNumber-v0-hard", {"max_turns": -3}, "max_turns"),
        ("game:GuessTheNumber-v0-hard", {"min_number": 0}, "min_number"),
        ("game:GuessTheNumber-v0-hard", {"max_number": None}, "together"),
        ("game:GuessTheNumber-v0-hard", {"min_number": None, "max_turns": None}, "together"),
        ("game:GuessTheNumber-v0-random", {"min_number": 3}, "together"),
        ("game:GuessTheNumber-v0-random", {"max_number": 30, "max_turns": 5}, "together"),
    ],
)
def test_make_rejects_bad_configuration(env_id, kwargs, match):
    with pytest.raises(ValueError, match=match):
        gemjax.make(env_id, **kwargs)


def test_make_accepts_edge_configuration():
    env = gemjax.make("game:GuessTheNumber-v0-hard", min_number=4, max_number=4, max_turns=1)
    assert env.config == (4, 4, 1) and env.capacity == 5
    env = gemjax.make("game:GuessTheNumber-v0-random", min_number=None)
    assert env.randomize


def test_validate_params_rejects_beyond_capacity():
    env = gemjax.make("game:GuessTheNumber-v0-easy")
    p = env.default_params
    env.validate_params(p)
    with pytest.raises(ValueError, match="capacity"):
        env.validate_params(p.replace(max_number=jnp.int32(11)))
    with pytest.raises(ValueError, match="exceed"):
        env.validate_params(p.replace(min_number=jnp.int32(8), max_number=jnp.int32(7)))
    with pytest.raises(ValueError, match="max_turns"):
        env.validate_params(p.replace(max_turns=jnp.int32(0)))
    assert isinstance(p, GuessTheNumberParams)


def test_wide_unsigned_action_saturates_instead_of_wrapping(wide):
    """A uint32 guess above 2**31 - 1 is out of range (as GEM reads a huge number),
    not wrapped to a negative format error."""
    state = build_state(wide.env, 1, 20, 5, 7, 0)
    _, ts = wide.env.step(jax.random.key(0), state, jnp.uint32(3_000_000_000), wide.params)
    assert MESSAGES.names[int(ts.event.kind)] == "out_of_range"
    assert float(ts.reward) == 0.0 and not bool(ts.terminated)
    assert int(ts.event.args[MESSAGES.arg_names.index("guess")]) == 2**31 - 1
