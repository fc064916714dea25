"""The kernel-contract checks every game's tests share.

Each takes a :class:`Kit` (tests/conftest.py) with an env, its params and jitted
functions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def assert_trees_equal(actual, expected) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)


def lane(tree, i: int):
    return jax.tree.map(lambda x: x[i], tree)


def check_reset_step_structure(kit, action: jax.Array, obs_keys: set[str]):
    """Reset and step give the same pytree structure, dtypes, shapes and weak types
    (abstractly and as run); the timestep's fixed fields have their documented dtypes;
    the observation has exactly ``obs_keys``. Returns the concrete ``(state, ts)`` of a
    reset for game-specific checks."""
    env, params = kit.env, kit.params
    key = jax.random.key(0)
    reset_out = jax.eval_shape(env.reset, key, params)
    step_out = jax.eval_shape(env.step, key, reset_out[0], action, params)
    assert jax.tree.structure(reset_out) == jax.tree.structure(step_out)
    for r, s in zip(jax.tree.leaves(reset_out), jax.tree.leaves(step_out), strict=True):
        assert (r.dtype, r.shape, r.weak_type) == (s.dtype, s.shape, s.weak_type)
    state, ts = kit.reset(key, params)
    for leaf, abstract in zip(
        jax.tree.leaves((state, ts)), jax.tree.leaves(reset_out), strict=True
    ):
        assert (leaf.dtype, leaf.shape, leaf.weak_type) == (
            abstract.dtype,
            abstract.shape,
            abstract.weak_type,
        )
    assert ts.reward.dtype == jnp.float32 and ts.terminated.dtype == jnp.bool_
    assert ts.event.args.shape == (len(env.messages.arg_names),)
    assert set(ts.observation) == obs_keys and set(ts.info) == {"success"}
    assert env.action_space(params).shape == action.shape
    return state, ts
