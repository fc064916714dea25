"""Returns and advantage estimators: pure functions over ``[T, B]`` rollouts.

Axis 0 is the turn ``t < T`` (the rollout horizon), axis 1 the episode ``b < B``.
``valid[t, b]`` is True while episode ``b`` is still running at turn ``t`` (the
turn that ends an episode is valid, every later one is not). Every estimator
returns zeros on invalid turns, so masked sums need no further masking.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NORM_EPS = 1e-9  # GEM/OAT: (x - mean) / (std + 1e-9)


def discounted_returns(
    rewards: jax.Array,
    valid: jax.Array,
    gamma: float,
    episode_end: jax.Array | None = None,
) -> jax.Array:
    """Per-turn returns within each episode, no bootstrap.

    ``G[t] = r[t] + gamma * G[t + 1]`` summed over the valid turns of the episode.
    A lane may hold several episodes one after the other (an auto-reset rollout):
    ``episode_end`` marks each episode's last turn, after which the sum starts
    afresh.

    Args:
        rewards: float32[T, B] per-turn rewards.
        valid: bool[T, B] the turn belongs to an episode.
        gamma: discount, ``0 < gamma <= 1``.
        episode_end: bool[T, B] the turn ends its episode (``None``: one episode a
            lane, ended by its last valid turn).

    Returns:
        float32[T, B], zero on invalid turns.
    """
    masked = jnp.where(valid, rewards, 0.0).astype(jnp.float32)
    ends = jnp.zeros_like(valid) if episode_end is None else episode_end

    def backward(future: jax.Array, turn: tuple[jax.Array, jax.Array, jax.Array]):
        reward, ok, end = turn
        ret = jnp.where(ok, reward + gamma * jnp.where(end, 0.0, future), 0.0)
        return ret, ret

    _, returns = jax.lax.scan(
        backward,
        jnp.zeros(rewards.shape[1:], jnp.float32),
        (masked, valid, ends),
        reverse=True,
    )
    return returns


def masked_mean_std(x: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and population std of ``x`` over the valid entries.

    Args:
        x: float32[...]; valid: bool[...] of the same shape (at least one True).

    Returns:
        Two float32[] scalars.
    """
    count = jnp.maximum(jnp.sum(valid), 1)
    mean = jnp.sum(jnp.where(valid, x, 0.0)) / count
    var = jnp.sum(jnp.where(valid, (x - mean) ** 2, 0.0)) / count
    return mean, jnp.sqrt(var)


def normalize(x: jax.Array, valid: jax.Array) -> jax.Array:
    """``(x - mean) / (std + 1e-9)`` with one mean and one population std over every
    valid entry; float32[...] like ``x``, zero where not valid."""
    mean, std = masked_mean_std(x, valid)
    return jnp.where(valid, (x - mean) / (std + NORM_EPS), 0.0)


def rebn_advantages(returns: jax.Array, valid: jax.Array) -> jax.Array:
    """ReBN (GEM's ``norm_return``): per-transition returns normalised over the batch.

    Args:
        returns: float32[T, B] from :func:`discounted_returns`.
        valid: bool[T, B].

    Returns:
        float32[T, B]: ``(G - mu) / (sigma + 1e-9)``, ``mu`` and ``sigma`` the mean
        and population std of all valid transitions; zero on invalid turns.
    """
    return normalize(returns, valid)


def reinforce_advantages(returns: jax.Array, valid: jax.Array) -> jax.Array:
    """Plain REINFORCE: the raw returns, float32[T, B], zero on invalid turns."""
    return jnp.where(valid, returns, 0.0)


def group_normalized(scores: jax.Array, group_size: int) -> jax.Array:
    """float32[B]: each of float32[B] ``scores`` as ``(R_b - mean) / (std + 1e-9)``
    within its group of ``group_size`` consecutive episodes (population std)."""
    groups = scores.reshape(-1, group_size)
    mean = jnp.mean(groups, axis=1, keepdims=True)
    std = jnp.std(groups, axis=1, keepdims=True)
    return ((groups - mean) / (std + NORM_EPS)).reshape(-1)


def grpo_advantages(returns: jax.Array, valid: jax.Array, group_size: int) -> jax.Array:
    """GRPO: episode-level advantages normalised within groups of episodes.

    Episodes ``b`` with the same ``b // group_size`` start from the same initial
    state. An episode's score is its return from the first turn, ``G[0, b]`` (GEM's
    undiscounted episode return when ``gamma = 1``); its advantage
    ``(R_b - mean_group) / (std_group + 1e-9)`` (population std) is shared by
    every valid turn of the episode.

    Args:
        returns: float32[T, B] from :func:`discounted_returns`, ``B`` a multiple of
            ``group_size``.
        valid: bool[T, B].
        group_size: episodes per group.

    Returns:
        float32[T, B], zero on invalid turns.
    """
    episode_adv = group_normalized(returns[0], group_size)
    return jnp.where(valid, episode_adv[None, :], 0.0)


def gem_grpo_advantages(rewards: jax.Array, valid: jax.Array, group_size: int) -> jax.Array:
    """GEM's GRPO (``train_oat_grpo.py`` with ``critic_type2="grpo"``): each
    episode's score is its *undiscounted* return ``sum_t r[t]``, normalised within
    its group as in :func:`grpo_advantages` and shared by its turns; GEM's learner
    then applies ReBN (``norm_return``) over every valid turn of the batch.

    Args:
        rewards: float32[T, B] per-turn rewards, ``B`` a multiple of ``group_size``.
        valid: bool[T, B].
        group_size: episodes per group.

    Returns:
        float32[T, B], zero on invalid turns.
    """
    scores = jnp.sum(jnp.where(valid, rewards, 0.0), axis=0, dtype=jnp.float32)
    per_turn = jnp.where(valid, group_normalized(scores, group_size)[None, :], 0.0)
    return normalize(per_turn, valid)


def gae(
    rewards: jax.Array,
    values: jax.Array,
    valid: jax.Array,
    bootstrap: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Turn-level generalised advantage estimation.

    ``delta[t] = r[t] + gamma * V_next[t] - V[t]`` and
    ``A[t] = delta[t] + gamma * lam * A[t + 1]``, where ``V_next[t]`` is
    ``V[t + 1]`` while the episode goes on, 0 after its last turn, and
    ``bootstrap[b]`` after turn ``T - 1`` (the critic's value of the state an
    episode cut by the horizon stopped in; pass 0 for finished episodes).

    Args:
        rewards, values: float32[T, B].
        valid: bool[T, B].
        bootstrap: float32[B].
        gamma, lam: discount and GAE lambda.

    Returns:
        ``(advantages, targets)``, float32[T, B] each, ``targets = A + V``; both
        zero on invalid turns.
    """
    next_values = jnp.concatenate([values[1:], bootstrap[None]], axis=0)
    next_valid = jnp.concatenate([valid[1:], jnp.ones_like(valid[:1])], axis=0)
    next_values = jnp.where(next_valid, next_values, 0.0)
    deltas = rewards + gamma * next_values - values

    def backward(future: jax.Array, turn: tuple[jax.Array, jax.Array]):
        delta, ok = turn
        adv = jnp.where(ok, delta + gamma * lam * future, 0.0)
        return adv, adv

    _, advantages = jax.lax.scan(
        backward, jnp.zeros(rewards.shape[1:], jnp.float32), (deltas, valid), reverse=True
    )
    targets = jnp.where(valid, advantages + values, 0.0)
    return advantages, targets
