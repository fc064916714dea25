"""Pack pytrees of 32-bit-or-smaller arrays into one ``uint32`` buffer.

A jitted call on the CPU pays a few microseconds per argument and per result
array, so the text API moves each kernel state (and params) across the jit
boundary as a single buffer: unpacking inside the jitted function is free (slices
and bitcasts that XLA fuses away).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.checks import check_structure


@dataclass(frozen=True)
class Layout:
    """Where each leaf of a pytree lives in its packed ``uint32`` buffer.

    Attributes:
        treedef: the pytree structure.
        shapes, dtypes: per leaf.
        offsets: per leaf, the first word; ``size``: total words.
    """

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype, ...]
    offsets: tuple[int, ...]
    size: int

    @classmethod
    def of(cls, tree: Any) -> Layout:
        """The layout of ``tree`` (arrays or ``ShapeDtypeStruct``s)."""
        leaves, treedef = jax.tree.flatten(tree)
        shapes = tuple(tuple(leaf.shape) for leaf in leaves)
        dtypes = tuple(np.dtype(leaf.dtype) for leaf in leaves)
        for dtype in dtypes:
            if dtype.itemsize > 4:
                raise TypeError(f"cannot pack {dtype} leaves (64-bit); gemjax states are 32-bit")
        offsets, total = [], 0
        for shape in shapes:
            offsets.append(total)
            total += math.prod(shape)
        return cls(treedef, shapes, dtypes, tuple(offsets), total)

    def check(self, tree: Any, what: str) -> None:
        """Raise unless ``tree`` has this layout (:func:`gemjax.checks.check_structure`:
        the same pytree, leaf shapes and dtypes).

        Raises:
            TypeError, ValueError: it does not, naming the first leaf that differs.
        """
        leaves = [jax.ShapeDtypeStruct(s, d) for s, d in zip(self.shapes, self.dtypes, strict=True)]
        check_structure(tree, jax.tree.unflatten(self.treedef, leaves), what)


def _to_word(leaf: jax.Array) -> jax.Array:
    if leaf.dtype == jnp.float32:
        return jax.lax.bitcast_convert_type(leaf, jnp.uint32)
    return leaf.astype(jnp.int32).astype(jnp.uint32)


def _from_word(words: jax.Array, dtype: np.dtype) -> jax.Array:
    if dtype == np.float32:
        return jax.lax.bitcast_convert_type(words, jnp.float32)
    if dtype == np.bool_:
        return words != 0
    return words.astype(jnp.int32).astype(dtype)


def pack(tree: Any) -> jax.Array:
    """uint32[size]: every leaf of ``tree`` (unbatched), flattened in order."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return jnp.zeros((0,), jnp.uint32)
    return jnp.concatenate([_to_word(leaf).reshape(-1) for leaf in leaves])


def unpack(buffer: jax.Array, layout: Layout) -> Any:
    """The pytree that :func:`pack` turned into ``buffer`` (uint32[size]; traceable)."""
    leaves = [
        _from_word(buffer[offset : offset + math.prod(shape)], dtype).reshape(shape)
        for shape, dtype, offset in zip(layout.shapes, layout.dtypes, layout.offsets, strict=True)
    ]
    return jax.tree.unflatten(layout.treedef, leaves)
