"""Observation features, the masking hook and configuration checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gemjax
from gemjax.train import TrainConfig, make_train
from gemjax.train.policy import feature_size, flatten_observation


def test_flatten_observation_values_then_code_bits_per_leaf():
    spec = {"a": jax.ShapeDtypeStruct((2,), jnp.int8), "b": jax.ShapeDtypeStruct((), jnp.int32)}
    obs = {"a": jnp.array([[1, 2], [3, 0]], jnp.int8), "b": jnp.array([50, 7], jnp.int32)}
    features = flatten_observation(obs, spec, code_bits=2)
    assert features.dtype == jnp.float32
    assert features.shape == (2, feature_size(spec, 2)) == (2, 7)
    # a's values, a's bits (element-major, low bit first), then b (no bits: int32)
    np.testing.assert_array_equal(features[0], [1, 2, 1, 0, 0, 1, 50])
    np.testing.assert_array_equal(features[1], [3, 0, 1, 1, 0, 0, 7])
    assert flatten_observation(obs, spec, code_bits=0).shape == (2, 3)


def test_guess_the_number_valid_action_mask():
    env = gemjax.make("game:GuessTheNumber-v0-easy")
    params = env.default_params
    state, _ = env.reset(jax.random.key(0), params)
    mask = env.valid_action_mask(state)
    assert mask.shape == (env.action_space(params).n,) == (11,)
    np.testing.assert_array_equal(mask, [False] + [True] * 10)
    guess = 3 if int(state.target) != 3 else 4
    state, _ = env.step(jax.random.key(1), state, jnp.int32(guess), params)
    expected = np.array([False] + [True] * 10)
    expected[guess] = False
    np.testing.assert_array_equal(env.valid_action_mask(state), expected)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algo": "dqn"}, "algo must be one of"),
        ({"gamma": 1.5}, "gamma"),
        ({"num_updates": 5, "eval_every": 2}, "multiple of eval_every"),
        ({"algo": "grpo", "num_episodes": 10, "group_size": 4}, "group_size"),
        ({"algo": "ppo"}, "clip_eps"),
        ({"horizon": 0}, "horizon"),
    ],
)
def test_config_rejects_impossible_settings(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


def test_masked_rollout_never_plays_an_invalid_guess(tiny):
    trainer = make_train(tiny(mask_invalid=True, num_episodes=64))
    state = trainer.init(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), 64)
    traj = jax.jit(trainer.rollout.collect)(state.params, keys, jax.random.key(2))
    actions = np.asarray(traj.actions)[np.asarray(traj.valid)]
    assert actions.min() >= 1 and actions.max() <= 10
    # no duplicate within an episode: each valid turn's guess differs from earlier ones
    for lane in range(64):
        guesses = np.asarray(traj.actions[:, lane])[np.asarray(traj.valid[:, lane])]
        assert len(set(guesses.tolist())) == len(guesses)
    assert bool(jnp.all(traj.rewards >= 0.0))
