"""GEM's stateful text interface over a gemjax kernel: ``reset(seed)``, ``step(str)``."""

from __future__ import annotations

import secrets
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.core import Environment, GemMirror
from gemjax.envs import GAMES
from gemjax.gem import kernel_ops as ops
from gemjax.registry import make as make_kernel


def fresh_seed() -> int:
    """An unpredictable seed (GEM draws from the process-global RNG instead)."""
    return secrets.randbits(63)


def check_action_text(action: Any) -> str:
    """``action`` if it is a response text (a ``str``).

    Raises:
        TypeError: anything else (bytes, None, a kernel action array).
    """
    if not isinstance(action, str):
        raise TypeError(
            f"an action is the model's response text (a str), got {type(action).__name__}; "
            "kernel actions go to env.kernel.step"
        )
    return action


class TextEnv:
    """One game with GEM's interface and GEM's exact strings.

    ``reset(seed=None) -> (obs, info)``, ``step(action) -> (obs, reward, terminated,
    truncated, info)``, ``sample_random_action() -> str``; ``info`` is
    ``{"suffix": ...}`` as in GEM. Like GEM's games, construction already resets,
    and stepping a finished game keeps counting turns.

    Attributes:
        kernel: the kernel env. params: its params. state: the current kernel state
            (unbatched; assign a state to move the game, e.g. from a kernel rollout:
            anything but a state of this kernel, with its leaves' shapes and dtypes,
            raises ``TypeError`` or ``ValueError``).
        env_id: the registered id, when made from one.
        last_message: the name of the last reset's or step's message
            (``kernel.messages.names``: ``"instructions"``, ``"success"``,
            ``"format_error"``, ...), e.g. to say why an episode ended.

    Randomness is per env (a JAX key seeded by ``seed`` or ``reset(seed)``), not
    GEM's process-global ``random``; see docs/gem_differences.md.
    """

    def __init__(
        self,
        kernel: Environment,
        params: Any = None,
        seed: int | None = None,
        env_id: str | None = None,
    ) -> None:
        self.kernel = kernel
        self.params = kernel.default_params if params is None else params
        kernel.validate_params(self.params)
        self.env_id = env_id
        self._params_buffer = ops.pack_params(kernel, self.params)
        self._key = ops.seed_key(fresh_seed() if seed is None else seed)
        self._state_buffer: jax.Array | None = None
        self.reset()

    @property
    def state(self) -> Any:
        """The current kernel state (unbatched)."""
        return ops.unpack_state(self.kernel, self._state_buffer)

    @state.setter
    def state(self, state: Any) -> None:
        self._state_buffer = ops.pack_state(self.kernel, state)

    @property
    def key(self) -> jax.Array:
        """The raw ``uint32[2]`` PRNG key that the next reset, step or sample splits
        (set it to replay a draw, as the GEM parity harness does)."""
        return self._key

    @key.setter
    def key(self, key: Any) -> None:
        key = jnp.asarray(key)
        if key.shape != (2,) or key.dtype != jnp.uint32:
            raise ValueError(f"a raw uint32[2] key, got {key.dtype}{list(key.shape)}")
        self._key = key

    @property
    def unwrapped(self) -> TextEnv:
        """This env (GEM's wrappers recurse to it)."""
        return self

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode; ``seed`` makes it reproducible."""
        if seed is not None:
            self._key = ops.seed_key(seed)
        self._key, self._state_buffer, view = ops.reset_one(
            self.kernel, self._key, self._params_buffer
        )
        views = ops.HostViews(self.kernel, np.asarray(view)[None])
        self.last_message = views.message_name(0)
        return views.reset_result(0)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play one turn with the model's raw response ``action``."""
        parsed = self.kernel.grammar.parse(check_action_text(action))
        self._key, self._state_buffer, view = ops.step_one(
            self.kernel, self._key, self._state_buffer, parsed.action, self._params_buffer
        )
        views = ops.HostViews(self.kernel, np.asarray(view)[None])
        self.last_message = views.message_name(0)
        return views.step_result(0, parsed.echoes)

    def sample_random_action(self) -> str:
        """A random well-formed response, drawn as GEM's game draws it."""
        self._key, action = ops.random_action_one(self.kernel, self._key, self._state_buffer)
        return self.kernel.grammar.render(np.asarray(action))

    def get_task_suffix(self) -> str:
        """The current suffix (GEM's ``get_task_suffix``)."""
        values = jax.device_get(dict(self.kernel.suffix_values(self.state)))
        # Scalars as ints, arrays as flat row-major lists (as the host views give them).
        return self.kernel.suffix.render(
            {
                name: np.asarray(v).reshape(-1).tolist() if np.ndim(v) else int(v)
                for name, v in values.items()
            }
        )

    def __repr__(self) -> str:
        return f"TextEnv({self.env_id or self.kernel!r})"


def make(env_id: str, seed: int | None = None, **kwargs: Any) -> TextEnv:
    """GEM's ``make``: the text env of ``env_id``; ``kwargs`` override the registered
    configuration (unknown kwargs raise ``TypeError``; GEM swallows them)."""
    return TextEnv(make_kernel(env_id, **kwargs), seed=seed, env_id=env_id)


def kernel_class_of(gem_env: Any) -> type[GemMirror]:
    """The gemjax game class (a :class:`~gemjax.core.GemMirror`) of a live ``gem-llm``
    game env.

    Raises:
        TypeError: no gemjax game mirrors its class.
    """
    gem_env = getattr(gem_env, "unwrapped", gem_env)
    name = type(gem_env).__name__
    mirrors = [game for game in GAMES if issubclass(game, GemMirror)]
    for game in mirrors:
        if game.gem_class_name == name:
            return game
    supported = sorted(g.gem_class_name for g in mirrors)
    raise TypeError(f"no gemjax game mirrors GEM's {name}; supported: {supported}")


def from_gem(gem_env: Any, seed: int | None = None) -> TextEnv:
    """A text env whose state equals that of the live ``gem-llm`` env ``gem_env``,
    so both can be stepped side by side with the same actions."""
    gem_env = getattr(gem_env, "unwrapped", gem_env)
    game = kernel_class_of(gem_env)
    kernel = game(**game.kwargs_from_gem(gem_env))
    if not isinstance(kernel, Environment):
        raise TypeError(f"{game.__name__} mirrors GEM but is not a gemjax Environment")
    env = TextEnv(kernel, seed=seed, env_id=getattr(gem_env, "env_id", None))
    env.state = kernel.state_from_gem(gem_env)
    return env
