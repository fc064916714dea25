"""A compact actor-critic over a game's structured observation."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


def is_code_leaf(leaf: Any) -> bool:
    """8-bit integer leaves hold categorical codes (hint grids, boards) by convention."""
    return jnp.issubdtype(leaf.dtype, jnp.integer) and jnp.dtype(leaf.dtype).itemsize == 1


def flatten_observation(observation: Any, spec: Any, code_bits: int) -> jax.Array:
    """Concatenate every observation leaf, flattened and cast to float32.

    8-bit integer leaves (categorical codes) also contribute their low ``code_bits``
    bits as 0/1 features, so a code is a linear feature as well as a magnitude.

    Args:
        observation: the env's observation pytree, each leaf with leading batch
            dimensions ``batch_shape`` before its unbatched shape.
        spec: the unbatched ``jax.ShapeDtypeStruct`` pytree
            (``env.observation_spec(params)``).
        code_bits: bits per code element (0: values only).

    Returns:
        float32[*batch_shape, F] (:func:`feature_size`), leaves in pytree order.
    """
    parts = []
    for leaf, leaf_spec in zip(jax.tree.leaves(observation), jax.tree.leaves(spec), strict=True):
        flat = leaf.reshape((*leaf.shape[: leaf.ndim - len(leaf_spec.shape)], -1))
        parts.append(flat.astype(jnp.float32))
        if code_bits and is_code_leaf(leaf_spec):
            bits = (flat.astype(jnp.int32)[..., None] >> jnp.arange(code_bits)) & 1
            parts.append(bits.reshape((*flat.shape[:-1], -1)).astype(jnp.float32))
    return jnp.concatenate(parts, axis=-1)


def feature_size(spec: Any, code_bits: int) -> int:
    """``F``: the length of :func:`flatten_observation`'s last axis."""
    return sum(
        int(np.prod(leaf.shape)) * (1 + (code_bits if is_code_leaf(leaf) else 0))
        for leaf in jax.tree.leaves(spec)
    )


def symlog(x: jax.Array) -> jax.Array:
    """``sign(x) * log1p(|x|)``: keeps small integer codes apart and squashes large
    counts (a turn limit of 50) to the same order of magnitude; float32 like ``x``."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


class MLP(nn.Module):
    """Dense layers with ReLU; the last layer's output has ``out`` features.

    Attributes:
        hidden: hidden widths; out: output width; out_scale: orthogonal-init gain of
            the last layer (small for a near-uniform initial policy).
    """

    hidden: tuple[int, ...]
    out: int
    out_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
        return nn.Dense(self.out, kernel_init=nn.initializers.orthogonal(self.out_scale))(x)


class ActorCritic(nn.Module):
    """Categorical policy over ``num_actions`` and, with ``critic``, a value head
    (a separate MLP of the same widths).

    Attributes:
        num_actions: the width of the ``Discrete`` action space.
        hidden: hidden widths of each MLP.
        critic: build the value head (PPO).

    Call with features float32[..., F] (squashed by :func:`symlog` first); returns
    ``(logits float32[..., num_actions], value float32[...])`` (value all zeros
    without a critic).
    """

    num_actions: int
    hidden: tuple[int, ...]
    critic: bool

    @nn.compact
    def __call__(self, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        features = symlog(features)
        logits = MLP(self.hidden, self.num_actions, 0.01, name="actor")(features)
        if self.critic:
            value = MLP(self.hidden, 1, 1.0, name="critic")(features)[..., 0]
        else:
            value = jnp.zeros(features.shape[:-1], jnp.float32)
        return logits, value
