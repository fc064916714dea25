"""Kernel wrappers with the same ``reset``/``step`` signatures as any env.

* :class:`AutoReset`: starts a new episode when one ends, GEM's same-step mode
  (the default: the step that ends an episode already returns the new episode's
  observation) or next-step mode (the following step returns it, reward 0, and
  ignores its action). Nothing is lost: ``info["final_observation"]`` and
  ``info["final_event"]`` hold what the ending step produced.
* :class:`EpisodeStatistics`: running return, length and success, reported in
  ``info`` at every step (read them where ``ts.done``). Put it *inside*
  ``AutoReset`` so its counters restart with each episode:
  ``AutoReset(EpisodeStatistics(env))``.

Resets are cheap by construction: a game's reset draws a handful of random words
(GuessTheNumber: two) and fills fixed-size arrays, and when the game's step draws
no randomness (``env.step_uses_key`` is False) the auto-reset spends the step's
key on the reset; when it does (2048's spawn), the step keeps the key and a reset
derives its own (:func:`~gemjax.rng.stream_key`, one hash on the lanes that reset,
instead of splitting every lane's key). Where a reset is costly (Sudoku draws
and transforms a puzzle), the auto-reset computes fresh episodes only for the lanes
that ended (``sparse_resets``); every lane's reset still uses its own key, so the
result is the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import jax
import jax.numpy as jnp
from flax import struct

from gemjax.core import Environment, Event, TimeStep
from gemjax.lanes import tree_where, where_lanes
from gemjax.rng import stream_key

#: The :func:`~gemjax.rng.stream_key` stream an auto-reset draws a new episode from when
#: the game's step uses the step's key.
RESET_STREAM = 1


class Wrapper(Environment):
    """Delegates everything to ``env``; subclasses override what they change."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.messages = env.messages
        self.suffix = env.suffix
        self.grammar = env.grammar
        self.step_uses_key = env.step_uses_key
        self.reset_info_has_suffix = env.reset_info_has_suffix
        self.sparse_resets = env.sparse_resets

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        attribute = getattr(self.env, name)
        if name == "valid_action_mask":
            # The ActionMasking capability, where the wrapped env has it: the mask of
            # the wrapped env's part of this wrapper's state.
            return lambda state: attribute(self.inner_state(state))
        return attribute

    @property
    def unwrapped(self) -> Environment:
        """The innermost game env."""
        return getattr(self.env, "unwrapped", self.env)

    @property
    def name(self) -> str:
        return f"{type(self).__name__}({self.env.name})"

    @property
    def config(self) -> tuple[Any, ...]:
        return (self.env,)

    @property
    def default_params(self) -> Any:
        return self.env.default_params

    def validate_params(self, params: Any) -> None:
        self.env.validate_params(params)

    def action_space(self, params: Any) -> Any:
        return self.env.action_space(params)

    def inner_state(self, state: Any) -> Any:
        """The wrapped env's part of ``state``."""
        return state

    def instructions_event(self, state: Any) -> Event:
        return self.env.instructions_event(self.inner_state(state))

    def suffix_values(self, state: Any) -> Mapping[str, jax.Array]:
        return self.env.suffix_values(self.inner_state(state))

    def random_action(self, key: jax.Array, state: Any) -> jax.Array:
        return self.env.random_action(key, self.inner_state(state))

    def printed_words(self, params: Any) -> tuple[str, ...]:
        return self.env.printed_words(params)

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, TimeStep]:
        return self.env.reset(key, params)

    def step(
        self, key: jax.Array, state: Any, action: jax.Array, params: Any
    ) -> tuple[Any, TimeStep]:
        return self.env.step(key, state, action, params)


class AutoResetState(struct.PyTreeNode):
    """``inner``: the wrapped env's state; ``reset_pending``: bool[], next-step mode's
    flag that the previous step ended an episode (always False in same-step mode)."""

    inner: Any
    reset_pending: jax.Array


class AutoReset(Wrapper):
    """Start a new episode whenever one ends.

    Args:
        env: the env to wrap.
        mode: ``"same_step"`` (GEM's default) or ``"next_step"``.
        sparse_resets: under ``vmap``, compute fresh episodes only for the lanes that
            need one, gathered ``ceil(B / 8)`` at a time (:func:`gemjax.lanes.
            where_lanes`), instead of for every lane with a select. The results are
            identical; which is faster depends on the game (a costly reset against
            the cost of moving its state). None: the game's ``sparse_resets``.

    Extra ``info`` keys (same on every reset and step):
        ``final_observation``, ``final_event``: the observation and event the
            stepped env produced (before any reset replaced them);
        ``reset``: bool[], the returned observation starts a new episode.
    """

    def __init__(
        self,
        env: Environment,
        mode: Literal["same_step", "next_step"] = "same_step",
        sparse_resets: bool | None = None,
    ) -> None:
        if mode not in ("same_step", "next_step"):
            raise ValueError(f"mode must be 'same_step' or 'next_step', got {mode!r}")
        super().__init__(env)
        self.mode = mode
        self.sparse_resets = env.sparse_resets if sparse_resets is None else bool(sparse_resets)
        self._reset_where = where_lanes(self._fresh) if self.sparse_resets else self._fresh_where

    def _fresh_where(self, reset: jax.Array, kept: Any, key: jax.Array, params: Any) -> Any:
        """``_fresh(key, params)`` where ``reset`` else ``kept``, both computed."""
        return tree_where(reset, self._fresh(key, params), kept)

    def _fresh(self, key: jax.Array, params: Any) -> tuple[Any, ...]:
        """What a reset replaces: the state, and the observation and event (same-step
        mode) or the whole timestep (next-step mode)."""
        if self.env.step_uses_key:
            key = stream_key(key, RESET_STREAM)
        state, ts = self.env.reset(key, params)
        if self.mode == "same_step":
            return state, ts.observation, ts.event
        return state, ts

    @property
    def config(self) -> tuple[Any, ...]:
        return (self.env, self.mode, self.sparse_resets)

    def inner_state(self, state: AutoResetState) -> Any:
        return state.inner

    @staticmethod
    def _with_final(ts: TimeStep, final: TimeStep, reset: jax.Array) -> TimeStep:
        info = {
            **ts.info,
            "final_observation": final.observation,
            "final_event": final.event,
            "reset": reset,
        }
        return ts.replace(info=info)

    def reset(self, key: jax.Array, params: Any) -> tuple[AutoResetState, TimeStep]:
        state, ts = self.env.reset(key, params)
        return AutoResetState(state, jnp.bool_(False)), self._with_final(ts, ts, jnp.bool_(True))

    def step(
        self, key: jax.Array, state: AutoResetState, action: jax.Array, params: Any
    ) -> tuple[AutoResetState, TimeStep]:
        # The step draws from the key itself; a reset derives its own key from it (in
        # _fresh, so sparse resets hash it only on the lanes that reset).
        stepped_state, stepped = self.env.step(key, state.inner, action, params)
        if self.mode == "same_step":
            reset = stepped.done
            kept = (stepped_state, stepped.observation, stepped.event)
            inner, observation, event = self._reset_where(reset, kept, key, params)
            ts = stepped.replace(observation=observation, event=event)
            final = stepped  # what the ending step produced, before the reset replaced it
            pending = jnp.bool_(False)
        else:
            reset = state.reset_pending
            # A reset step ignores its action: nothing was "stepped".
            inner, ts = self._reset_where(reset, (stepped_state, stepped), key, params)
            final = ts
            pending = ~reset & stepped.done
        return AutoResetState(inner, pending), self._with_final(ts, final, reset)


class EpisodeStatisticsState(struct.PyTreeNode):
    """``inner`` state plus the running ``episode_return`` (float32[]) and
    ``episode_length`` (int32[]) of the current episode."""

    inner: Any
    episode_return: jax.Array
    episode_length: jax.Array


class EpisodeStatistics(Wrapper):
    """Adds ``info["episode_return"]`` (float32[]), ``info["episode_length"]`` (int32[])
    and ``info["episode_success"]`` (bool[]) for the episode so far; at a step where
    ``ts.done`` they describe the finished episode. Success is the game's own
    ``info["success"]`` (the task was completed at that step)."""

    def inner_state(self, state: EpisodeStatisticsState) -> Any:
        return state.inner

    @staticmethod
    def _with_stats(ts: TimeStep, state: EpisodeStatisticsState) -> TimeStep:
        info = {
            **ts.info,
            "episode_return": state.episode_return,
            "episode_length": state.episode_length,
            "episode_success": ts.info["success"],
        }
        return ts.replace(info=info)

    def reset(self, key: jax.Array, params: Any) -> tuple[EpisodeStatisticsState, TimeStep]:
        inner, ts = self.env.reset(key, params)
        state = EpisodeStatisticsState(inner, jnp.float32(0.0), jnp.int32(0))
        return state, self._with_stats(ts, state)

    def step(
        self, key: jax.Array, state: EpisodeStatisticsState, action: jax.Array, params: Any
    ) -> tuple[EpisodeStatisticsState, TimeStep]:
        inner, ts = self.env.step(key, state.inner, action, params)
        state = EpisodeStatisticsState(
            inner, state.episode_return + ts.reward, state.episode_length + 1
        )
        return state, self._with_stats(ts, state)
