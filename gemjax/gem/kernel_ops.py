"""Jitted kernel calls shared by the text envs, compiled once per env configuration.

The GEM-compatible layer keeps raw ``uint32[2]`` PRNG keys (one per env) and each
kernel state packed into one ``uint32`` buffer (see :mod:`gemjax.gem.packing`), and
fetches after every call one buffer per env holding what text needs: the event,
reward, flags and the suffix's slot values (a :class:`HostView`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.checks import integer
from gemjax.core import Environment, TimeStep
from gemjax.gem.packing import Layout, pack, unpack
from gemjax.rng import split as rng_split


class HostView(NamedTuple):
    """What the text layer needs from one timestep (traced: the packed view's tree).

    Attributes:
        kind: int32 event kind. args: int32[num_args] event args. reward: float32.
        terminated, truncated: bool. suffix: the suffix template's slot values.
    """

    kind: Any
    args: Any
    reward: Any
    terminated: Any
    truncated: Any
    suffix: dict[str, Any]


class HostViews:
    """Fetched views of ``B`` lanes, as Python lists, and GEM's tuples rendered from them.

    Args:
        env: the kernel env. buffers: uint32[B, V] packed views (see :class:`HostView`).
    """

    def __init__(self, env: Environment, buffers: np.ndarray) -> None:
        offsets = view_offsets(env)
        self.env = env
        self._buffers = buffers
        self._kind = offsets.kind[0]
        args_offset, (num_args,) = offsets.args
        self._args = slice(args_offset, args_offset + num_args)
        self._terminated, self._truncated = offsets.terminated[0], offsets.truncated[0]
        self._reward = offsets.reward[0]
        self._suffix = {name: offset for name, offset in offsets.suffix.items()}
        self._fixed_suffix = None if self._suffix else env.suffix.render({})

    @functools.cached_property
    def _rows(self) -> list[list[int]]:
        """Every lane's view as a list of int32 values (converted on first use)."""
        return self._buffers.view(np.int32).tolist()

    @functools.cached_property
    def reward(self) -> list[float]:
        """Every lane's float32 reward as a Python float."""
        return self._buffers[:, self._reward].view(np.float32).tolist()

    def done(self, lane: int) -> bool:
        """The lane's episode ended."""
        row = self._rows[lane]
        return row[self._terminated] != 0 or row[self._truncated] != 0

    def done_lanes(self) -> np.ndarray:
        """bool[B]: the lanes whose episode ended."""
        return (self._buffers[:, self._terminated] != 0) | (self._buffers[:, self._truncated] != 0)

    def observation(self, lane: int, echoes: Mapping[str, str]) -> str:
        """The lane's observation text."""
        row = self._rows[lane]
        return self.env.messages.render(row[self._kind], row[self._args], echoes)

    def suffix(self, lane: int) -> str:
        """The lane's ``info["suffix"]``: scalar suffix values as ints, array values as
        flat lists of ints (row-major), which list and board slots read."""
        if self._fixed_suffix is not None:
            return self._fixed_suffix
        row = self._rows[lane]
        return self.env.suffix.render(
            {
                name: row[offset] if not shape else row[offset : offset + math.prod(shape)]
                for name, (offset, shape) in self._suffix.items()
            }
        )

    def message_name(self, lane: int) -> str:
        """The name of the lane's message in the game's ``MessageTable``
        (``"instructions"``, ``"success"``, ``"format_error"``, ...)."""
        return self.env.messages.names[self._rows[lane][self._kind]]

    def outcome(self, lane: int) -> tuple[float, bool, bool]:
        """The lane's reward (as GEM's Python float), terminated and truncated."""
        row = self._rows[lane]
        return (
            python_reward(self.reward[lane]),
            row[self._terminated] != 0,
            row[self._truncated] != 0,
        )

    def step_result(
        self, lane: int, echoes: Mapping[str, str]
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """GEM's ``step`` 5-tuple for the lane."""
        return self.step_results([lane], [echoes])[0]

    def step_results(
        self, lanes: Sequence[int], echoes: Sequence[Mapping[str, str]]
    ) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
        """:meth:`step_result` of many lanes (the vector env's hot path)."""
        rows = [self._rows[lane] for lane in lanes]
        texts = self.env.messages.render_rows(rows, self._kind, self._args, echoes)
        terminated, truncated, rewards = self._terminated, self._truncated, self.reward
        return [
            (
                text,
                python_reward(rewards[lane]),
                row[terminated] != 0,
                row[truncated] != 0,
                {"suffix": self.suffix(lane)},
            )
            for text, row, lane in zip(texts, rows, lanes, strict=True)
        ]

    def reset_result(self, lane: int) -> tuple[str, dict[str, Any]]:
        """GEM's ``reset`` pair for the lane (info ``{}`` for games whose GEM reset
        has no suffix: ``env.reset_info_has_suffix``)."""
        info = {"suffix": self.suffix(lane)} if self.env.reset_info_has_suffix else {}
        return self.observation(lane, {}), info


class Layouts(NamedTuple):
    """Packed layouts of one env's state, params and host view."""

    state: Layout
    params: Layout
    view: Layout


def _view_tree(env: Environment, state: Any, ts: TimeStep) -> HostView:
    return HostView(
        ts.event.kind,
        ts.event.args,
        ts.reward,
        ts.terminated,
        ts.truncated,
        dict(env.suffix_values(state)),
    )


@functools.cache
def layouts(env: Environment) -> Layouts:
    """The layouts of ``env`` (computed once, without running anything)."""
    params = env.default_params
    state, ts = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
    view = jax.eval_shape(functools.partial(_view_tree, env), state, ts)
    return Layouts(Layout.of(state), Layout.of(params), Layout.of(view))


@functools.cache
def view_offsets(env: Environment) -> HostView:
    """Per field of the packed view: ``(first word, shape)``."""
    layout = layouts(env).view
    return jax.tree.unflatten(layout.treedef, list(zip(layout.offsets, layout.shapes, strict=True)))


def pack_params(env: Environment, params: Any) -> jax.Array:
    """uint32 buffer of ``params``."""
    return _pack_params(env, params)


@functools.partial(jax.jit, static_argnums=0)
def _pack_params(env: Environment, params: Any) -> jax.Array:
    return pack(params)


def pack_state(env: Environment, state: Any) -> jax.Array:
    """uint32 buffer of an unbatched state of ``env`` (checked on the host first).

    Raises:
        TypeError, ValueError: ``state`` is not a state of ``env`` (its class, leaves,
            shapes or dtypes differ from what ``env.reset`` returns).
    """
    layouts(env).state.check(state, f"a state of {env!r}")
    return _pack_state(env, state)


@functools.partial(jax.jit, static_argnums=0)
def _pack_state(env: Environment, state: Any) -> jax.Array:
    return pack(state)


@functools.partial(jax.jit, static_argnums=0)
def unpack_state(env: Environment, buffer: jax.Array) -> Any:
    """The unbatched state in ``buffer``."""
    return unpack(buffer, layouts(env).state)


def seed_key(seed: int) -> jax.Array:
    """The raw ``uint32[2]`` key of an integer seed (any Python int: reduced mod 2**32).

    Raises:
        TypeError: ``seed`` is not an integer (a float or bool would be truncated).
    """
    return jax.random.PRNGKey(integer("seed", seed) % 2**32)


def _reset(env: Environment, key: jax.Array, params: Any) -> tuple[jax.Array, jax.Array]:
    state, ts = env.reset(key, params)
    return pack(state), pack(_view_tree(env, state, ts))


def _step(
    env: Environment, key: jax.Array, state_buffer: jax.Array, action: jax.Array, params: Any
) -> tuple[jax.Array, jax.Array, jax.Array]:
    state, ts = env.step(key, unpack(state_buffer, layouts(env).state), action, params)
    return pack(state), pack(_view_tree(env, state, ts)), ts.done


@functools.partial(jax.jit, static_argnums=0)
def reset_one(
    env: Environment, key: jax.Array, params_buffer: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Split ``key`` and reset; returns ``(next_key, state_buffer, view_buffer)``."""
    next_key, reset_key = jax.random.split(key)
    params = unpack(params_buffer, layouts(env).params)
    return (next_key, *_reset(env, reset_key, params))


@functools.partial(jax.jit, static_argnums=0)
def step_one(
    env: Environment,
    key: jax.Array,
    state_buffer: jax.Array,
    action: jax.Array,
    params_buffer: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Split ``key`` and step; returns ``(next_key, state_buffer, view_buffer)``."""
    next_key, step_key = jax.random.split(key)
    params = unpack(params_buffer, layouts(env).params)
    state_buffer, view, _ = _step(env, step_key, state_buffer, action, params)
    return next_key, state_buffer, view


@functools.partial(jax.jit, static_argnums=0)
def random_action_one(
    env: Environment, key: jax.Array, state_buffer: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """GEM's ``sample_random_action`` as a kernel action; returns ``(next_key, action)``."""
    next_key, action_key = jax.random.split(key)
    return next_key, env.random_action(action_key, unpack(state_buffer, layouts(env).state))


def _lane_round(
    env: Environment,
    key: jax.Array,
    state_buffer: jax.Array,
    action: jax.Array,
    params: Any,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """One lane of a vector step: both candidates (stepped and fresh) from one key.

    Returns ``(next_key, stepped_state, fresh_state, stepped_view, fresh_view, done)``.
    """
    next_key, step_key, reset_key = jax.random.split(key, 3)
    stepped_state, stepped_view, done = _step(env, step_key, state_buffer, action, params)
    fresh_state, fresh_view = _reset(env, reset_key, params)
    return next_key, stepped_state, fresh_state, stepped_view, fresh_view, done


@functools.partial(jax.jit, static_argnums=0)
def lane_candidates(
    env: Environment,
    key: jax.Array,
    state_buffer: jax.Array,
    action: jax.Array,
    params_buffer: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """For one lane, what :func:`step_batch` computed: ``(next_key, stepped, fresh)``
    state buffers. Used to patch a lane whose wrappers deviated from the plan."""
    params = unpack(params_buffer, layouts(env).params)
    next_key, stepped, fresh, *_ = _lane_round(env, key, state_buffer, action, params)
    return next_key, stepped, fresh


@functools.partial(jax.jit, static_argnums=(0, 7))
def step_batch(
    env: Environment,
    keys: jax.Array,
    states: jax.Array,
    actions: jax.Array,
    active: jax.Array,
    reset_pending: jax.Array,
    params_buffer: jax.Array,
    same_step: bool,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One call for a group of lanes: step and reset every lane, keep per lane what
    GEM's vector env keeps.

    Args:
        keys: uint32[B, 2]. states: uint32[B, S] packed states. actions: int32[B, ...].
        active: bool[B], the lanes stepped now (others keep state and key).
        reset_pending: bool[B], next-step mode's lanes whose episode ended last call.
        same_step: GEM's SAME_STEP auto-reset (else NEXT_STEP).
    Returns:
        ``(keys, states, views)`` with views uint32[B, 2, V]: the stepped and the
        fresh (reset) candidate of every lane.
    """
    params = unpack(params_buffer, layouts(env).params)
    next_keys, stepped, fresh, stepped_view, fresh_view, done = jax.vmap(
        functools.partial(_lane_round, env), in_axes=(0, 0, 0, None)
    )(keys, states, actions, params)
    use_fresh = active & (done if same_step else reset_pending)
    new_states = jnp.where(active[:, None], jnp.where(use_fresh[:, None], fresh, stepped), states)
    new_keys = jnp.where(active[:, None], next_keys, keys)
    return new_keys, new_states, jnp.stack([stepped_view, fresh_view], axis=1)


@functools.partial(jax.jit, static_argnums=0)
def reset_batch(
    env: Environment,
    keys: jax.Array,
    seeds: jax.Array,
    seeded: jax.Array,
    params_buffer: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Reset every lane; lanes with ``seeded`` start from ``PRNGKey(seeds)``.

    Args:
        keys: uint32[B, 2]. seeds: uint32[B]. seeded: bool[B].
    Returns:
        ``(keys, states uint32[B, S], views uint32[B, V])``.
    """
    params = unpack(params_buffer, layouts(env).params)
    keys = jnp.where(seeded[:, None], jax.vmap(jax.random.PRNGKey)(seeds), keys)
    split = jax.vmap(functools.partial(rng_split, num=2))(keys)
    states, views = jax.vmap(functools.partial(_reset, env), in_axes=(0, None))(split[:, 1], params)
    return split[:, 0], states, views


@functools.lru_cache(maxsize=4096)
def python_reward(reward: float) -> float:
    """The Python float GEM would return for a float32 kernel reward.

    GEM's rewards are float64 literals (-0.1, 1.0, ...) or ratios; the shortest
    decimal that round-trips the float32 gives back every literal exactly.
    """
    return float(str(np.float32(reward)))
