"""The values every layer passes: :class:`Event`, :class:`TimeStep`, :class:`Rewards`.

Nothing in gemjax sits below this module: the text layer (:mod:`gemjax.text`) builds
events, the kernels return timesteps, and everything above reads them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


class Event(struct.PyTreeNode):
    """The message a reset or step produced.

    Attributes:
        kind: int32[] index of the message in the game's ``MessageTable``.
        args: int32[num_args] slot values, laid out as ``messages.arg_names``.
    """

    kind: jax.Array
    args: jax.Array


class TimeStep(struct.PyTreeNode):
    """What a reset or step returns besides the new state.

    Attributes:
        observation: the game's structured observation (a pytree of arrays holding
            what the player can see, never the hidden answer).
        reward: float32[].
        terminated: bool[] the episode ended (success, failure or format error).
        truncated: bool[] the episode hit its turn limit (GEM's rule per game).
        event: the :class:`Event` whose text GEM would show.
        info: a dict of arrays with the same keys on every reset and step.
    """

    observation: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    event: Event
    info: dict[str, Any]

    @property
    def done(self) -> jax.Array:
        """bool[]: ``terminated | truncated``."""
        return jnp.logical_or(self.terminated, self.truncated)

    @classmethod
    def first(cls, observation: Any, event: Event) -> TimeStep:
        """A reset's timestep: reward 0, not done, ``info = {"success": False}`` (the
        info keys every game's step returns too)."""
        return cls(
            observation=observation,
            reward=jnp.float32(0.0),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            event=event,
            info={"success": jnp.bool_(False)},
        )


class Rewards(struct.PyTreeNode):
    """GEM's reward constants (``gem.utils.constants.LanguageGameReward``), as params.

    Attributes (float32[]):
        success: paid when the task is completed.
        step: a neutral, non-terminal step.
        fail: a failure such as a mine (games that have one).
        invalid: a parseable but illegal move.
        format_error: no parseable action (the episode ends).
    """

    success: jax.Array = struct.field(default_factory=lambda: jnp.float32(1.0))
    step: jax.Array = struct.field(default_factory=lambda: jnp.float32(0.0))
    fail: jax.Array = struct.field(default_factory=lambda: jnp.float32(0.0))
    invalid: jax.Array = struct.field(default_factory=lambda: jnp.float32(0.0))
    format_error: jax.Array = struct.field(default_factory=lambda: jnp.float32(-0.1))
