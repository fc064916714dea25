"""The per-batch fallback gives the exact result on every lane, whichever way it goes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gemjax.tokenizer_bridge.fallback import with_fallback


def exact(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The reference per-lane result: a scalar and a row."""
    return 2 * x + 1, jnp.stack([x, -x])


def check(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Lanes divisible by 3 are hard."""
    return x, x % 3 == 0


def finish(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Right on easy lanes, deliberately wrong on hard ones (so any leak shows)."""
    hard = x % 3 == 0
    return jnp.where(hard, -999, 2 * x + 1), jnp.where(hard[:, None], 7, jnp.stack([x, -x], 1))


@pytest.mark.parametrize(("batch", "share"), [(1, 8), (7, 2), (13, 4), (64, 8)])
def test_every_lane_is_exact_whatever_the_number_of_hard_lanes(batch: int, share: int) -> None:
    run = jax.jit(jax.vmap(with_fallback(check, finish, exact, share=share)))
    few = -(-batch // share)
    rng = np.random.default_rng(batch)
    for hard_count in sorted({0, 1, few, few + 1, batch}):
        if hard_count > batch:
            continue
        x = 3 * rng.integers(1, 1000, batch) + 1  # no lane hard
        x[rng.permutation(batch)[:hard_count]] -= 1  # these lanes hard
        got = jax.device_get(run(jnp.asarray(x, jnp.int32)))
        want = jax.device_get(jax.vmap(exact)(jnp.asarray(x, jnp.int32)))
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"{hard_count} hard")
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"{hard_count} hard")


def test_unbatched_call_and_unbatched_arguments() -> None:
    one = with_fallback(lambda x, y: (x + y, (x + y) % 3 == 0), finish, lambda x, y: exact(x + y))
    assert int(jax.jit(one)(2, 1)[0]) == 7
    shifted = jax.jit(jax.vmap(one, in_axes=(0, None)))(jnp.arange(9), 3)
    np.testing.assert_array_equal(np.asarray(shifted[0]), 2 * (np.arange(9) + 3) + 1)
