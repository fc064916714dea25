"""Packing pytrees into one uint32 buffer (the text API's jit boundary)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gemjax.gem.packing import Layout, pack, unpack


def test_round_trip_preserves_every_dtype_and_shape():
    tree = {
        "flag": jnp.array([True, False, True]),
        "small": jnp.array([-128, -1, 0, 127], jnp.int8),
        "count": jnp.int32(-7),
        "big": jnp.array([[2**31 - 1, -(2**31)]], jnp.int32),
        "reward": jnp.array([-0.1, 1.0, np.inf, -0.0], jnp.float32),
        "unsigned": jnp.array([0, 2**32 - 1], jnp.uint32),
    }
    layout = Layout.of(tree)
    buffer = pack(tree)
    assert buffer.dtype == jnp.uint32 and buffer.shape == (layout.size,)
    back = unpack(buffer, layout)
    for name, leaf in tree.items():
        assert back[name].dtype == leaf.dtype, name
        assert back[name].shape == leaf.shape, name
        np.testing.assert_array_equal(np.asarray(back[name]), np.asarray(leaf), err_msg=name)
    # Bit-exact for floats too (negative zero keeps its sign).
    assert np.signbit(np.asarray(back["reward"])[3])


def test_round_trip_under_jit_and_vmap():
    tree = {"a": jnp.arange(6, dtype=jnp.int32).reshape(2, 3), "b": jnp.float32(2.5)}
    layout = Layout.of(tree)
    batch = jax.tree.map(lambda x: jnp.stack([x, x + 1]), tree)
    buffers = jax.jit(jax.vmap(pack))(batch)
    assert buffers.shape == (2, layout.size)
    back = jax.jit(jax.vmap(lambda b: unpack(b, layout)))(buffers)
    np.testing.assert_array_equal(back["a"], batch["a"])
    np.testing.assert_array_equal(back["b"], batch["b"])


def test_64_bit_leaves_are_refused():
    with pytest.raises(TypeError, match="64-bit"):
        Layout.of({"x": np.zeros(2, np.float64)})


def test_empty_tree_packs_to_empty_buffer():
    assert pack({}).shape == (0,)
