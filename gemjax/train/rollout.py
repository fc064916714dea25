"""Batched episodes: ``lax.scan`` over turns of a vmapped env, no auto-reset.

Every episode of the batch runs for ``horizon`` turns; turns after an episode
ended are stepped but masked out (``valid`` False), so shapes stay static.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from gemjax.core import ActionMasking, Environment, EpisodeOutcomes
from gemjax.rng import split
from gemjax.train.policy import MASKED_LOGIT, ActionHead, flatten_observation, format_error_free

Constrain = Callable[[Any], Any]


class Trajectory(struct.PyTreeNode):
    """One rollout of ``B`` episodes over ``T`` turns.

    Attributes:
        features: float32[T, B, F] flattened observations the actions were taken in.
        actions: int32[T, B] (``Discrete``) or int32[T, B, K] (``MultiDiscrete``).
        log_probs: float32[T, B] log-probabilities of the (joint) actions when sampled.
        values: float32[T, B] critic values (zeros without a critic).
        rewards: float32[T, B], zero on invalid turns.
        valid: bool[T, B] the episode was running at that turn.
        success: bool[T, B] the env's ``info["success"]`` on valid turns.
        action_mask: bool[T, B, L] allowed logits (all True unless masking).
        bootstrap: float32[B] critic value after turn ``T - 1`` of episodes the
            horizon cut (zero for finished episodes).
    """

    features: jax.Array
    actions: jax.Array
    log_probs: jax.Array
    values: jax.Array
    rewards: jax.Array
    valid: jax.Array
    success: jax.Array
    action_mask: jax.Array
    bootstrap: jax.Array


class EpisodeMetrics(struct.PyTreeNode):
    """Per-batch episode statistics (float32[] each).

    Attributes:
        episode_return: mean undiscounted episode return (cut episodes: up to ``T``).
        success: fraction of episodes where ``info["success"]`` was set at any turn.
        mean_turns: mean turns over all episodes (cut episodes count ``T``).
        mean_turns_success: mean turns over successful episodes (NaN if none).
        outcomes: per name of the env's :class:`~gemjax.core.EpisodeOutcomes`, the
            fraction of episodes in which it held after some turn (greedy evaluation
            only; empty for other envs and for training batches).
    """

    episode_return: jax.Array
    success: jax.Array
    mean_turns: jax.Array
    mean_turns_success: jax.Array
    outcomes: dict[str, jax.Array] = struct.field(default_factory=dict)


def episode_metrics(valid: jax.Array, success: jax.Array, rewards: jax.Array) -> EpisodeMetrics:
    """:class:`EpisodeMetrics` from bool[T, B] ``valid`` and ``success`` masks and
    float32[T, B] ``rewards`` (zero on invalid turns)."""
    turns = jnp.sum(valid, axis=0, dtype=jnp.float32)
    won = jnp.any(success & valid, axis=0)
    return episode_metrics_from_totals(turns, won, jnp.sum(rewards, axis=0))


def episode_metrics_from_totals(
    turns: jax.Array,
    won: jax.Array,
    returns: jax.Array,
    achieved: Mapping[str, jax.Array] | None = None,
) -> EpisodeMetrics:
    """:class:`EpisodeMetrics` from float32[B] episode lengths, bool[B] success,
    float32[B] undiscounted returns and bool[B] per outcome in ``achieved``."""
    wins = jnp.sum(won)
    return EpisodeMetrics(
        episode_return=jnp.mean(returns),
        success=jnp.mean(won.astype(jnp.float32)),
        mean_turns=jnp.mean(turns),
        mean_turns_success=jnp.sum(jnp.where(won, turns, 0.0)) / wins,
        outcomes={k: jnp.mean(v.astype(jnp.float32)) for k, v in (achieved or {}).items()},
    )


def masked_logits(logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    """float32[..., L] logits with disallowed values (bool[..., L] False) at -1e9."""
    return jnp.where(action_mask, logits, MASKED_LOGIT)


@dataclass(frozen=True)
class Rollout:
    """Runs a policy in a vmapped env.

    Attributes:
        env, env_params: the game and its params.
        model: the :class:`~gemjax.train.policy.ActorCritic`.
        head: the distribution its logits define over the env's action space.
        horizon: turns per rollout (``T``).
        mask_invalid: mask logits with ``env.valid_action_mask`` (the env's
            :class:`~gemjax.core.ActionMasking` capability).
        mask_format_errors: mask the format-error value
            (:func:`~gemjax.train.policy.format_error_free`).
        code_bits: see :func:`~gemjax.train.policy.flatten_observation`.
        constrain: applied to every batch-leading pytree (a sharding constraint, or
            the identity).
    """

    env: Environment
    env_params: Any
    model: nn.Module
    head: ActionHead
    horizon: int
    mask_invalid: bool
    mask_format_errors: bool
    code_bits: int
    constrain: Constrain

    def _reset(self, reset_keys: jax.Array) -> tuple[Any, Any]:
        state, ts = jax.vmap(self.env.reset, in_axes=(0, None))(reset_keys, self.env_params)
        return self.constrain(state), ts

    def _step(self, key: jax.Array, state: Any, actions: jax.Array) -> tuple[Any, Any]:
        if self.env.step_uses_key:
            keys = split(key, actions.shape[0])
            step = jax.vmap(self.env.step, in_axes=(0, 0, 0, None))
        else:
            keys = key
            step = jax.vmap(self.env.step, in_axes=(None, 0, 0, None))
        state, ts = step(keys, state, actions, self.env_params)
        return self.constrain(state), ts

    def policy(self, params: Any, state: Any, observation: Any):
        """Features float32[B, F], action mask bool[B, L], logits float32[B, L]
        (masked when masking; ``env.valid_action_mask`` gives bool[L] per state) and
        values float32[B]."""
        spec = self.env.observation_spec(self.env_params)
        features = flatten_observation(observation, spec, self.code_bits)
        logits, values = self.model.apply(params, features)
        action_mask = jnp.ones(logits.shape, jnp.bool_)
        if self.mask_format_errors:
            action_mask &= self.head.layout_mask(jnp.asarray(format_error_free(self.head)))
        if self.mask_invalid:
            if not isinstance(self.env, ActionMasking):
                raise ValueError(f"{self.env.name} has no valid_action_mask: cannot mask")
            action_mask &= self.head.layout_mask(jax.vmap(self.env.valid_action_mask)(state))
        if self.masks_logits:
            logits = masked_logits(logits, action_mask)
        return features, action_mask, logits, values

    @property
    def masks_logits(self) -> bool:
        """Whether :meth:`policy` masks any logit (the learner masks them alike)."""
        return self.mask_invalid or self.mask_format_errors

    def collect(self, params: Any, reset_keys: jax.Array, key: jax.Array) -> Trajectory:
        """Sample ``B = len(reset_keys)`` episodes (key array[B]) for ``T`` turns."""
        state, ts = self._reset(reset_keys)
        running = jnp.ones(reset_keys.shape, jnp.bool_)

        def turn(carry, turn_key):
            state, observation, running = carry
            action_key, step_key = split(turn_key, 2)
            features, action_mask, logits, values = self.policy(params, state, observation)
            actions = self.head.sample(action_key, logits)
            log_probs = self.head.log_prob(logits, actions)
            state, ts = self._step(step_key, state, actions)
            record = Trajectory(
                features=features,
                actions=actions,
                log_probs=log_probs,
                values=values,
                rewards=jnp.where(running, ts.reward, 0.0),
                valid=running,
                success=running & ts.info["success"],
                action_mask=action_mask,
                bootstrap=values,
            )
            return (state, ts.observation, running & ~ts.done), record

        keys = jax.random.split(key, self.horizon)
        (state, observation, running), traj = jax.lax.scan(
            turn, (state, ts.observation, running), keys
        )
        _, _, _, last_values = self.policy(params, state, observation)
        return traj.replace(bootstrap=jnp.where(running, last_values, 0.0))

    def evaluate(self, params: Any, reset_keys: jax.Array, key: jax.Array) -> EpisodeMetrics:
        """Greedy (argmax) episodes from key array[B] ``reset_keys`` (``key`` feeds
        the env's step); stops as soon as every episode ended or after ``T`` turns.
        Reports the env's :class:`~gemjax.core.EpisodeOutcomes` too."""
        state, ts = self._reset(reset_keys)
        batch = reset_keys.shape[0]
        falses = jnp.zeros((batch,), jnp.bool_)
        init = (
            state,
            ts.observation,
            jnp.ones((batch,), jnp.bool_),
            falses,
            jnp.zeros((batch,), jnp.float32),
            jnp.zeros((batch,), jnp.float32),
            {name: falses for name in self._outcomes(state)},
            jnp.int32(0),
        )

        def cond(carry) -> jax.Array:
            running, t = carry[2], carry[-1]
            return (t < self.horizon) & jnp.any(running)

        def body(carry):
            state, observation, running, won, turns, returns, achieved, t = carry
            _, _, logits, _ = self.policy(params, state, observation)
            state, ts = self._step(jax.random.fold_in(key, t), state, self.head.mode(logits))
            won = won | (running & ts.info["success"])
            turns = turns + running
            returns = returns + jnp.where(running, ts.reward, 0.0)
            now = self._outcomes(state)
            achieved = {name: held | (running & now[name]) for name, held in achieved.items()}
            return state, ts.observation, running & ~ts.done, won, turns, returns, achieved, t + 1

        _, _, _, won, turns, returns, achieved, _ = jax.lax.while_loop(cond, body, init)
        return episode_metrics_from_totals(turns, won, returns, achieved)

    def _outcomes(self, state: Any) -> Mapping[str, jax.Array]:
        """The env's named bool[B] outcomes of batched ``state`` (none without
        :class:`~gemjax.core.EpisodeOutcomes`)."""
        if not isinstance(self.env, EpisodeOutcomes):
            return {}
        return jax.vmap(self.env.outcomes)(state)
