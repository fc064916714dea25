"""The factored and joint categorical heads over MultiDiscrete action spaces, the
format-error mask, and training on the games that have one."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiers import FIRST_OF_GAME

import gemjax
from gemjax.spaces import Discrete, MultiDiscrete
from gemjax.train import TrainConfig, make_train
from gemjax.train.host import episode_record
from gemjax.train.policy import (
    MAX_COMPONENT,
    MAX_JOINT,
    FactoredCategorical,
    JointCategorical,
    action_head,
    format_error_free,
)

# Two components: values 0..1 with p = (1/4, 3/4), values 1..3 with p = (1/2, 1/4, 1/4);
# logits shifted by a constant per component (the head normalises each on its own).
HEAD = FactoredCategorical.of(MultiDiscrete((2, 3), start=(0, 1)))
LOGITS = jnp.log(jnp.array([0.25, 0.75, 0.5, 0.25, 0.25])) + jnp.array([3.0, 3.0, -1.0, -1, -1])


def test_layout_and_widths():
    assert HEAD.num_logits == 5 and not HEAD.scalar
    padded = HEAD.per_component(jnp.arange(5.0))
    np.testing.assert_array_equal(padded, [[0, 1, -1e9], [2, 3, 4]])
    assert FactoredCategorical.of(Discrete(7)).num_logits == 7


def test_log_prob_sums_the_components():
    actions = jnp.array([[1, 3], [0, 1], [1, 2]], jnp.int32)
    expected = [
        math.log(0.75) + math.log(0.25),
        math.log(0.25) + math.log(0.5),
        math.log(0.75) + math.log(0.25),
    ]
    np.testing.assert_allclose(HEAD.log_prob(jnp.tile(LOGITS, (3, 1)), actions), expected, 1e-6)


def test_entropy_sums_the_components():
    first = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    second = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    np.testing.assert_allclose(HEAD.entropy(LOGITS), first + second, rtol=1e-6)


def test_discrete_is_one_component_with_scalar_actions():
    head = FactoredCategorical.of(Discrete(3, start=2))
    logits = jnp.log(jnp.array([[0.2, 0.3, 0.5]]))
    np.testing.assert_allclose(head.log_prob(logits, jnp.array([3])), [math.log(0.3)], 1e-6)
    expected = -sum(p * math.log(p) for p in (0.2, 0.3, 0.5))
    np.testing.assert_allclose(head.entropy(logits), [expected], rtol=1e-6)
    assert head.mode(logits).shape == (1,) and int(head.mode(logits)[0]) == 4
    sample = head.sample(jax.random.key(0), jnp.zeros((5, 3)))
    assert sample.shape == (5,) and sample.dtype == jnp.int32


def test_sample_and_mode_follow_each_component():
    actions = HEAD.sample(jax.random.key(0), jnp.tile(LOGITS, (20_000, 1)))
    assert actions.shape == (20_000, 2) and actions.dtype == jnp.int32
    first = np.bincount(np.asarray(actions[:, 0]), minlength=2) / 20_000
    second = np.bincount(np.asarray(actions[:, 1]) - 1, minlength=3) / 20_000
    np.testing.assert_allclose(first, [0.25, 0.75], atol=0.015)
    np.testing.assert_allclose(second, [0.5, 0.25, 0.25], atol=0.015)
    np.testing.assert_array_equal(HEAD.mode(LOGITS), [1, 1])


def test_a_component_sized_by_the_parsers_range_is_refused():
    with pytest.raises(ValueError, match="distinct outcomes"):
        FactoredCategorical.of(MultiDiscrete((4, 2**31 - 1)))
    FactoredCategorical.of(MultiDiscrete((4, MAX_COMPONENT)))


# The joint head over the same space: p(a, b) = p(a) p(b) in row-major order.
JOINT = JointCategorical.of(MultiDiscrete((2, 3), start=(0, 1)))
PAIRS = [(a, b) for a in (0, 1) for b in (1, 2, 3)]
PAIR_P = np.array([[0.25, 0.75][a] * [0.5, 0.25, 0.25][b - 1] for a, b in PAIRS])
JOINT_LOGITS = jnp.log(jnp.asarray(PAIR_P, jnp.float32)) + 2.0


def test_joint_layout_is_row_major_over_the_combinations():
    assert JOINT.num_logits == 6 and not JOINT.scalar
    actions = JOINT.mode(jnp.eye(6) * 10.0)
    np.testing.assert_array_equal(actions, PAIRS)
    assert JointCategorical.of(Discrete(7, start=2)).num_logits == 7


def test_joint_log_prob_entropy_and_mode():
    actions = jnp.asarray(PAIRS, jnp.int32)
    log_p = JOINT.log_prob(jnp.tile(JOINT_LOGITS, (6, 1)), actions)
    np.testing.assert_allclose(log_p, np.log(PAIR_P), rtol=1e-6)
    np.testing.assert_allclose(JOINT.entropy(JOINT_LOGITS), -np.sum(PAIR_P * np.log(PAIR_P)), 1e-6)
    # independent components: the joint equals the factored head's numbers
    np.testing.assert_allclose(JOINT.entropy(JOINT_LOGITS), HEAD.entropy(LOGITS), rtol=1e-6)
    np.testing.assert_array_equal(JOINT.mode(JOINT_LOGITS), [1, 1])


def test_joint_sampling_follows_the_combinations():
    actions = np.asarray(JOINT.sample(jax.random.key(3), jnp.tile(JOINT_LOGITS, (30_000, 1))))
    assert actions.shape == (30_000, 2)
    counts = [np.mean((actions[:, 0] == a) & (actions[:, 1] == b)) for a, b in PAIRS]
    np.testing.assert_allclose(counts, PAIR_P, atol=0.012)


def test_joint_head_expresses_dependent_components():
    # Only (0, 1) and (1, 3): a factored head cannot give both 1/2 without the other
    # two combinations; the joint one can.
    logits = jnp.where(jnp.asarray([True, False, False, False, False, True]), 0.0, -30.0)
    actions = np.asarray(JOINT.sample(jax.random.key(0), jnp.tile(logits, (2000, 1))))
    assert {tuple(a) for a in actions.tolist()} == {(0, 1), (1, 3)}
    np.testing.assert_allclose(JOINT.log_prob(logits, jnp.array([0, 1])), np.log(0.5), 1e-5)


def test_joint_mask_from_the_factored_layout():
    allowed = jnp.array([True, False, True, False, True])  # a in {0}, b in {1, 3}
    np.testing.assert_array_equal(JOINT.layout_mask(allowed), [1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(HEAD.layout_mask(allowed), allowed)
    batched = JOINT.layout_mask(jnp.stack([allowed, jnp.ones(5, bool)]))
    assert batched.shape == (2, 6) and bool(jnp.all(batched[1]))


def test_a_mask_of_combinations_is_kept_by_the_joint_head_and_marginalised_by_the_factored():
    combos = jnp.array([[False, True, False], [False, False, True]])  # (0, 2) and (1, 3)
    np.testing.assert_array_equal(JOINT.layout_mask(combos), [0, 1, 0, 0, 0, 1])
    np.testing.assert_array_equal(HEAD.layout_mask(combos), [1, 1, 0, 1, 1])
    batched = jnp.stack([combos, jnp.ones((2, 3), bool)])
    assert JOINT.layout_mask(batched).shape == (2, 6)
    np.testing.assert_array_equal(HEAD.layout_mask(batched)[1], np.ones(5, bool))


def test_a_joint_head_too_wide_is_refused():
    with pytest.raises(ValueError, match="use the factored head"):
        JointCategorical.of(MultiDiscrete((2, MAX_JOINT)))
    assert isinstance(action_head(Discrete(3), "joint"), JointCategorical)
    assert isinstance(action_head(Discrete(3), "factored"), FactoredCategorical)
    with pytest.raises(ValueError, match="head must be one of"):
        TrainConfig(head="autoregressive")


def test_format_error_free_masks_value_zero_of_the_first_component():
    np.testing.assert_array_equal(format_error_free(HEAD), [False, True, True, True, True])
    # a first component starting above 0 has no format-error value to mask
    np.testing.assert_array_equal(
        format_error_free(FactoredCategorical.of(Discrete(3, 1))), [1] * 3
    )
    np.testing.assert_array_equal(format_error_free(FactoredCategorical.of(Discrete(3))), [0, 1, 1])


@pytest.mark.parametrize("env_id", FIRST_OF_GAME)
def test_value_zero_of_the_first_component_is_a_format_error_in_every_game(env_id):
    """The convention :func:`format_error_free` relies on, checked on each game."""
    env = gemjax.make(env_id)
    params = env.default_params
    head = FactoredCategorical.of(env.action_space(params))
    assert head.start[0] <= 0 < head.start[0] + head.nvec[0]
    state, _ = env.reset(jax.random.key(0), params)
    action = env.random_action(jax.random.key(1), state)
    action = jnp.int32(0) if head.scalar else action.at[0].set(0)
    _, ts = env.step(jax.random.key(2), state, action, params)
    assert bool(ts.terminated)
    assert float(ts.reward) == float(params.rewards.format_error)


def update_and_rollout(trainer):
    """A fresh state, the state after one update, its metrics, and a rollout of the
    fresh params (one jitted call)."""
    state = trainer.init(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), trainer.config.num_episodes)

    @jax.jit
    def run(state):
        return trainer.update(state), trainer.rollout.collect(state.params, keys, state.key)

    (new_state, metrics), traj = run(state)
    return state, new_state, metrics, traj


# One (game, algorithm) pair per MultiDiscrete game; Sudoku once it is registered.
GAMES = [
    ("game:Mastermind-v0-easy", "rebn"),
    ("game:Minesweeper-v0-easy", "ppo"),
    ("game:Sudoku-v0-easy", "grpo"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "algo"), GAMES)
def test_training_step_on_a_multidiscrete_game(tiny, env_id, algo):
    if env_id not in gemjax.list_envs():
        pytest.skip(f"{env_id} is not registered yet")
    ppo = algo == "ppo"
    config = tiny(
        env_id=env_id,
        algo=algo,
        horizon=6,
        group_size=4,
        clip_eps=0.2 if ppo else None,
        num_minibatches=2 if ppo else 1,
    )
    trainer = make_train(config)
    space = trainer.env.action_space(trainer.rollout.env_params)
    state, new_state, metrics, traj = update_and_rollout(trainer)
    moved = jax.tree.map(
        lambda a, b: bool(jnp.any(a != b)),
        new_state.params["params"]["actor"],
        state.params["params"]["actor"],
    )
    assert any(jax.tree.leaves(moved))
    for value in (metrics.loss, metrics.entropy, metrics.episodes.episode_return):
        assert np.isfinite(float(value))
    assert float(metrics.entropy) == pytest.approx(sum(map(math.log, space.nvec)), rel=0.02)
    assert traj.actions.shape == (6, config.num_episodes, len(space.nvec))
    assert bool(jnp.all(space.contains(traj.actions)))
    # joint log-probabilities of a near-uniform policy: about -sum(log nvec)
    uniform = -sum(map(math.log, space.nvec))
    np.testing.assert_allclose(traj.log_probs, uniform, atol=0.1)
    # every value of every component is explored, the format-error command 0 included
    for i, n in enumerate(space.nvec):
        assert len(np.unique(np.asarray(traj.actions[..., i]))) == n


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["game:Minesweeper-v0-easy", "game:Sudoku-v0-easy"])
def test_joint_head_without_format_errors_trains(tiny, env_id):
    config = tiny(env_id=env_id, horizon=4, head="joint", mask_format_errors=True)
    trainer = make_train(config)
    space = trainer.env.action_space(trainer.rollout.env_params)
    head = trainer.rollout.head
    assert isinstance(head, JointCategorical) and head.num_logits == math.prod(space.nvec)
    _, new_state, metrics, traj = update_and_rollout(trainer)
    assert np.isfinite(float(metrics.loss))
    assert int(new_state.update) == 1
    valid = np.asarray(traj.valid)
    actions = np.asarray(traj.actions)[valid]
    assert actions.min(axis=0)[0] == 1  # never the format error
    assert bool(jnp.all(space.contains(traj.actions)))
    # a near-uniform policy over the combinations whose first value is not 0
    allowed = math.prod(space.nvec) // space.nvec[0] * (space.nvec[0] - 1)
    np.testing.assert_allclose(np.asarray(traj.log_probs)[valid], -math.log(allowed), atol=0.1)
    assert float(metrics.entropy) == pytest.approx(math.log(allowed), rel=0.02)
    assert not np.any(np.asarray(traj.rewards)[valid] == -0.1)
    evaluation = jax.jit(trainer.evaluate)(new_state)
    if env_id.startswith("game:Minesweeper"):  # its EpisodeOutcomes: the board cleared
        assert set(evaluation.outcomes) == {"cleared"}
        assert 0.0 <= float(evaluation.outcomes["cleared"]) <= 1.0
        record = episode_record("", evaluation)
        assert record["cleared"] == float(evaluation.outcomes["cleared"])
    else:
        assert evaluation.outcomes == {}
