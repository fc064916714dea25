"""where_lanes: the per-lane choice, computed only on the lanes that need it; with_fallback:
the exact result on every lane, whichever way it goes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gemjax.lanes import (
    DEFAULT_CHUNK_LANES,
    chunk_lanes_for_backend,
    in_chunks,
    where_lanes,
    with_fallback,
)


def fresh(key: jax.Array, scale: jax.Array) -> dict[str, jax.Array]:
    """A per-lane computation with a row, a scalar and a shared argument."""
    bits = jax.random.bits(key, (3,))
    return {"row": (bits % 100).astype(jnp.int32) * scale, "flag": bits[0] % 2 == 0}


def expected(mask: np.ndarray, keys: jax.Array, scale: int, old: dict) -> dict:
    new = jax.device_get(jax.vmap(fresh, in_axes=(0, None))(keys, jnp.int32(scale)))
    return {
        "row": np.where(mask[:, None], new["row"], old["row"]),
        "flag": np.where(mask, new["flag"], old["flag"]),
    }


@pytest.mark.parametrize(("batch", "share"), [(1, 8), (10, 3), (64, 8)])
def test_batched_lanes_match_the_plain_choice(batch: int, share: int) -> None:
    choose = jax.jit(jax.vmap(where_lanes(fresh, share), in_axes=(0, 0, 0, None)))
    keys = jax.random.split(jax.random.key(batch), batch)
    old = {"row": -jnp.ones((batch, 3), jnp.int32), "flag": jnp.zeros(batch, bool)}
    chunk = -(-batch // share)
    rng = np.random.default_rng(share)
    for count in sorted({0, 1, chunk, chunk + 1, batch // 2, batch}):
        mask = np.zeros(batch, bool)
        mask[rng.permutation(batch)[: min(count, batch)]] = True
        got = jax.device_get(choose(jnp.asarray(mask), old, keys, jnp.int32(3)))
        want = expected(mask, keys, 3, jax.device_get(old))
        np.testing.assert_array_equal(got["row"], want["row"], err_msg=f"{count} lanes")
        np.testing.assert_array_equal(got["flag"], want["flag"], err_msg=f"{count} lanes")


def test_unbatched_and_nested_calls() -> None:
    choose = where_lanes(fresh)
    key = jax.random.key(1)
    old = {"row": jnp.full(3, -1, jnp.int32), "flag": jnp.bool_(True)}
    kept = jax.jit(choose)(jnp.bool_(False), old, key, jnp.int32(2))
    np.testing.assert_array_equal(np.asarray(kept["row"]), [-1, -1, -1])
    new = jax.jit(choose)(jnp.bool_(True), old, key, jnp.int32(2))
    np.testing.assert_array_equal(np.asarray(new["row"]), np.asarray(fresh(key, 2)["row"]))
    # Two levels of vmap: seeds outside, lanes inside; the mask and `old` shared.
    keys = jax.random.split(key, 12).reshape(3, 4)
    mask = jnp.asarray([True, False, True, True])
    nested = jax.jit(
        jax.vmap(jax.vmap(choose, in_axes=(0, None, 0, None)), in_axes=(None, None, 0, None))
    )(mask, old, keys, jnp.int32(2))
    for seed in range(3):
        want = expected(
            np.asarray(mask),
            keys[seed],
            2,
            jax.device_get(jax.tree.map(lambda x: jnp.broadcast_to(x, (4, *x.shape)), old)),
        )
        np.testing.assert_array_equal(np.asarray(nested["row"][seed]), want["row"])


@pytest.mark.parametrize("lanes", [None, 4, 10, 64])
def test_in_chunks_equals_the_whole_batch(lanes: int | None) -> None:
    """Chunks of 4 lanes over a batch of 10 (padded to 12), one chunk, no chunking."""
    chunked = jax.jit(jax.vmap(in_chunks(fresh, lanes), in_axes=(0, None)))
    keys = jax.random.split(jax.random.key(3), 10)
    got = jax.device_get(chunked(keys, jnp.int32(5)))
    want = jax.device_get(jax.vmap(fresh, in_axes=(0, None))(keys, jnp.int32(5)))
    np.testing.assert_array_equal(got["row"], want["row"])
    np.testing.assert_array_equal(got["flag"], want["flag"])
    assert got["row"].shape == (10, 3)


def test_chunk_lanes_for_backend() -> None:
    assert chunk_lanes_for_backend(None) is None
    assert chunk_lanes_for_backend(32) == 32
    expected = DEFAULT_CHUNK_LANES if jax.default_backend() == "cpu" else None
    assert chunk_lanes_for_backend("auto") == expected
    for bad in (0, -3, 2.5, "all"):
        with pytest.raises(ValueError, match="chunk lanes"):
            chunk_lanes_for_backend(bad)  # type: ignore[arg-type]


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
