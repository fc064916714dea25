"""Estimators against hand-computed values."""

import jax.numpy as jnp
import numpy as np
import pytest

from gemjax.train.estimators import (
    discounted_returns,
    gae,
    gem_grpo_advantages,
    grpo_advantages,
    rebn_advantages,
    reinforce_advantages,
)

# Two episodes over T = 3 turns: episode 0 wins on its last turn, episode 1 ends on
# turn 1 with a format error; its turn 2 is invalid and its reward must be ignored.
REWARDS = jnp.array([[0.0, 0.5], [0.0, -0.1], [1.0, 7.0]])
VALID = jnp.array([[True, True], [True, True], [True, False]])


def test_discounted_returns_gamma_09_by_hand():
    returns = discounted_returns(REWARDS, VALID, 0.9)
    expected = [[0.81, 0.5 + 0.9 * -0.1], [0.9, -0.1], [1.0, 0.0]]
    np.testing.assert_allclose(returns, expected, rtol=1e-6)


def test_discounted_returns_gamma_1_are_sums_of_the_rest():
    returns = discounted_returns(REWARDS, VALID, 1.0)
    np.testing.assert_allclose(returns, [[1.0, 0.4], [1.0, -0.1], [1.0, 0.0]], rtol=1e-6)


def test_rebn_normalises_over_every_valid_transition():
    returns = discounted_returns(REWARDS, VALID, 0.9)
    values = np.array([0.81, 0.9, 1.0, 0.41, -0.1])
    mean, std = values.mean(), values.std()
    expected = [
        [(0.81 - mean) / std, (0.41 - mean) / std],
        [(0.9 - mean) / std, (-0.1 - mean) / std],
        [(1.0 - mean) / std, 0.0],
    ]
    np.testing.assert_allclose(rebn_advantages(returns, VALID), expected, rtol=1e-5)


def test_rebn_with_equal_returns_is_zero_not_nan():
    adv = rebn_advantages(jnp.full((3, 2), 0.7), VALID)
    np.testing.assert_array_equal(adv, np.zeros((3, 2)))


def test_reinforce_keeps_raw_returns_and_masks():
    returns = jnp.array([[2.0, 3.0], [1.0, 5.0], [4.0, 9.0]])
    np.testing.assert_array_equal(
        reinforce_advantages(returns, VALID), [[2.0, 3.0], [1.0, 5.0], [4.0, 0.0]]
    )


def test_grpo_normalises_first_turn_returns_within_groups():
    # Groups {0, 1} and {2, 3}; episode 3 ends after one turn.
    returns = jnp.array([[1.0, 0.0, 0.5, 0.5], [1.0, 0.0, 0.5, 0.0]])
    valid = jnp.array([[True, True, True, True], [True, True, True, False]])
    adv = grpo_advantages(returns, valid, group_size=2)
    # group 0: mean 0.5, population std 0.5; group 1: equal returns give 0
    np.testing.assert_allclose(adv, [[1.0, -1.0, 0.0, 0.0], [1.0, -1.0, 0.0, 0.0]], rtol=1e-6)


def test_grpo_groups_are_consecutive_episodes():
    returns = jnp.array([[1.0, 0.0, 0.0, 1.0]])
    adv = grpo_advantages(returns, jnp.ones((1, 4), bool), group_size=2)
    np.testing.assert_allclose(adv, [[1.0, -1.0, -1.0, 1.0]], rtol=1e-6)


def test_gem_grpo_scores_undiscounted_returns_then_applies_rebn():
    # Groups {0, 1} and {2, 3}. Undiscounted scores: 1.0, 0.0 | 0.5, 0.5 (episode 3's
    # second-turn reward is past its end and must be ignored).
    rewards = jnp.array([[0.2, 0.0, 0.5, 0.5], [0.8, 0.0, 0.0, 9.0]])
    valid = jnp.array([[True, True, True, True], [True, True, True, False]])
    adv = gem_grpo_advantages(rewards, valid, group_size=2)
    # group advantages per turn: +1, -1, 0, 0 on turn 0 and +1, -1, 0 on turn 1; ReBN over
    # those 7 valid turns: mean 0, population std sqrt(4 / 7)
    scale = np.sqrt(7 / 4)
    expected = [[scale, -scale, 0.0, 0.0], [scale, -scale, 0.0, 0.0]]
    np.testing.assert_allclose(adv, expected, rtol=1e-6, atol=1e-7)


def test_gem_grpo_ignores_the_discount_that_grpo_scores():
    # A fast win (reward on turn 0) and a slow one (turn 1): GRPO's discounted score
    # prefers the fast one, GEM's undiscounted one sees a tie.
    rewards = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    valid = jnp.array([[True, True], [False, True]])
    returns = discounted_returns(rewards, valid, 0.9)
    assert float(grpo_advantages(returns, valid, 2)[0, 0]) > 0.0
    np.testing.assert_array_equal(gem_grpo_advantages(rewards, valid, 2), np.zeros((2, 2)))


@pytest.mark.parametrize(
    ("valid", "bootstrap", "expected_adv"),
    [
        # finished on its last turn: no bootstrap
        ([True, True], 0.0, [0.22 + 0.9 * 0.95 * 0.2, 0.2]),
        # cut by the horizon: V(last state) = 2 is bootstrapped
        ([True, True], 2.0, [0.22 + 0.9 * 0.95 * 2.0, 1.0 + 0.9 * 2.0 - 0.8]),
        # ended on turn 0: nothing after it counts, turn 1 is zero
        ([True, False], 0.0, [0.0 - 0.5, 0.0]),
    ],
)
def test_gae_by_hand(valid, bootstrap, expected_adv):
    rewards = jnp.array([[0.0], [1.0]])
    values = jnp.array([[0.5], [0.8]])
    adv, targets = gae(
        rewards, values, jnp.array(valid)[:, None], jnp.array([bootstrap]), 0.9, 0.95
    )
    np.testing.assert_allclose(adv[:, 0], expected_adv, rtol=1e-5, atol=1e-7)
    expected_targets = np.where(valid, np.array(expected_adv) + np.array([0.5, 0.8]), 0.0)
    np.testing.assert_allclose(targets[:, 0], expected_targets, rtol=1e-5, atol=1e-7)


def test_gae_lambda_1_without_critic_is_the_discounted_return():
    adv, _ = gae(REWARDS, jnp.zeros((3, 2)), VALID, jnp.zeros(2), 0.9, 1.0)
    np.testing.assert_allclose(adv, discounted_returns(REWARDS, VALID, 0.9), rtol=1e-6)


def test_discounted_returns_restart_after_each_episode_end():
    """One lane holding two episodes (an auto-reset rollout): the first ends at
    turn 1, so turn 0's return does not see turn 2's reward."""
    rewards = jnp.array([[0.0], [1.0], [0.5], [2.0]])
    valid = jnp.ones((4, 1), bool)
    ends = jnp.array([[False], [True], [False], [True]])
    returns = discounted_returns(rewards, valid, 0.9, ends)
    np.testing.assert_allclose(returns[:, 0], [0.9, 1.0, 0.5 + 0.9 * 2.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(
        discounted_returns(REWARDS, VALID, 0.9, jnp.zeros_like(VALID)),
        discounted_returns(REWARDS, VALID, 0.9),
    )
