"""gemjax.bitset: per-lane sets of small integers in uint32 words."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemjax import bitset

SIZE = 70  # three words, the last one partly used


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, SIZE - 1)), st.integers(-5, SIZE + 40))
def test_contains_insert_and_mask_agree_with_a_python_set(members, probe):
    bits = jnp.asarray(bitset.from_indices(members, SIZE))
    assert bool(bitset.contains(bits, probe)) == (probe in members)
    mask = np.asarray(bitset.to_mask(bits, SIZE))
    assert set(np.flatnonzero(mask).tolist()) == members
    added = bitset.insert(bits, probe, True)
    expected = members | ({probe} if 0 <= probe < bitset.num_words(SIZE) * 32 else set())
    assert set(np.flatnonzero(np.asarray(bitset.to_mask(added, 96))).tolist()) == expected
    unchanged = bitset.insert(bits, probe, False)
    np.testing.assert_array_equal(np.asarray(unchanged), np.asarray(bits))


def test_from_mask_is_the_inverse_of_to_mask():
    rng = np.random.default_rng(0)
    masks = rng.random((4, 3, SIZE)) < 0.4
    bits = bitset.from_mask(jnp.asarray(masks))
    assert bits.shape == (4, 3, bitset.num_words(SIZE)) and bits.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(bitset.to_mask(bits, SIZE)), masks)
    for lane, row in np.ndindex(4, 3):
        expected = bitset.from_indices(np.flatnonzero(masks[lane, row]).tolist(), SIZE)
        np.testing.assert_array_equal(np.asarray(bits[lane, row]), expected)


def test_count_and_lowest_agree_with_the_mask():
    rng = np.random.default_rng(1)
    masks = rng.random((64, SIZE)) < rng.random((64, 1)) * 0.2
    masks[0] = False
    bits = bitset.from_mask(jnp.asarray(masks))
    np.testing.assert_array_equal(np.asarray(bitset.count(bits)), masks.sum(axis=1))
    expected = [np.flatnonzero(m)[0] if m.any() else 32 * bitset.num_words(SIZE) for m in masks]
    np.testing.assert_array_equal(np.asarray(jax.vmap(bitset.lowest)(bits)), expected)


def test_vmapped_inserts_are_per_lane():
    bits = jnp.stack([bitset.empty(SIZE)] * 3)
    bits = jax.jit(jax.vmap(bitset.insert))(
        bits, jnp.asarray([0, 33, 69]), jnp.asarray([True, True, False])
    )
    mask = np.asarray(bitset.to_mask(bits, SIZE))
    assert [set(np.flatnonzero(row).tolist()) for row in mask] == [{0}, {33}, set()]


def test_sizes_and_bad_indices():
    assert bitset.num_words(1) == 1 and bitset.num_words(32) == 1 and bitset.num_words(33) == 2
    assert bitset.empty(61).shape == (2,) and bitset.empty(61).dtype == jnp.uint32
    with pytest.raises(ValueError, match="outside"):
        bitset.from_indices([SIZE], SIZE)
