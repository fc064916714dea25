"""The factored categorical head over MultiDiscrete action spaces, and training on
the games that have one."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gemjax
from gemjax.spaces import Discrete, MultiDiscrete
from gemjax.train import make_train
from gemjax.train.policy import MAX_COMPONENT, FactoredCategorical

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
    state = trainer.init(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), config.num_episodes)

    @jax.jit
    def update_and_rollout(state):
        return trainer.update(state), trainer.rollout.collect(state.params, keys, state.key)

    (new_state, metrics), traj = update_and_rollout(state)
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
