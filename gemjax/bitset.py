"""Fixed-size bitsets in ``uint32`` words, for per-lane sets under ``vmap``.

A set of small integers (GuessTheNumber's guessed numbers, Mastermind's guessed
codes) costs one bit per element instead of one byte, and membership and insertion
touch the words through a one-hot over word indices: XLA's CPU backend turns a
gather or scatter by a traced index into a slow per-lane loop, a compare-and-select
over a handful of words into vector code.
"""

from __future__ import annotations

from collections.abc import Iterable

import jax
import jax.numpy as jnp
import numpy as np

WORD_BITS = 32


def num_words(size: int) -> int:
    """Words needed for elements ``0..size-1``."""
    return -(-size // WORD_BITS)


def empty(size: int) -> jax.Array:
    """uint32[num_words(size)]: the empty set."""
    return jnp.zeros((num_words(size),), jnp.uint32)


def _word_and_bit(bits: jax.Array, index: jax.Array) -> tuple[jax.Array, jax.Array]:
    """bool[W] one-hot of the word holding ``index`` and its uint32 bit mask."""
    index = jnp.asarray(index, jnp.int32)
    at_word = jnp.arange(bits.shape[-1], dtype=jnp.int32) == (index >> 5)
    return at_word, jnp.left_shift(jnp.uint32(1), (index & 31).astype(jnp.uint32))


def contains(bits: jax.Array, index: jax.Array) -> jax.Array:
    """bool[]: ``index`` is in the set (False for an index beyond the words)."""
    at_word, mask = _word_and_bit(bits, index)
    return jnp.any(at_word & ((bits & mask) != 0))


def insert(bits: jax.Array, index: jax.Array, when: jax.Array | bool = True) -> jax.Array:
    """uint32[W]: the set with ``index`` added where ``when`` (bool[]) holds."""
    at_word, mask = _word_and_bit(bits, index)
    return bits | jnp.where(at_word & when, mask, jnp.uint32(0))


def toggle(bits: jax.Array, index: jax.Array, when: jax.Array | bool = True) -> jax.Array:
    """uint32[W]: the set with ``index`` added if absent and removed if present, where
    ``when`` (bool[]) holds."""
    at_word, mask = _word_and_bit(bits, index)
    return bits ^ jnp.where(at_word & when, mask, jnp.uint32(0))


def count(bits: jax.Array) -> jax.Array:
    """int32[...]: the number of elements of the set (over ``bits``' last axis)."""
    sizes = jax.lax.population_count(bits).astype(jnp.int32)
    # Summed over a leading axis: a reduction over the tiny last axis is scalar code on
    # XLA's CPU backend.
    return jnp.sum(jnp.moveaxis(sizes, -1, 0), axis=0)


def lowest(bits: jax.Array) -> jax.Array:
    """int32[...]: the smallest element of the set (over ``bits``' last axis);
    ``32 * W`` for the empty set."""
    lowest_bits = bits & (~bits + jnp.uint32(1))
    trailing = jax.lax.population_count(lowest_bits - jnp.uint32(1)).astype(jnp.int32)
    offsets = jnp.arange(bits.shape[-1], dtype=jnp.int32) * WORD_BITS
    return jnp.min(jnp.where(bits != 0, trailing + offsets, bits.shape[-1] * WORD_BITS), axis=-1)


def to_mask(bits: jax.Array, size: int) -> jax.Array:
    """bool[..., size]: element ``n`` is in the set (over ``bits``' last axis)."""
    numbers = np.arange(size)
    words = bits[..., numbers // WORD_BITS]
    return ((words >> jnp.asarray(numbers % WORD_BITS, jnp.uint32)) & 1) == 1


def from_mask(mask: jax.Array) -> jax.Array:
    """uint32[..., num_words(size)]: the set of the ``n`` where ``mask[..., n]``
    (bool[..., size]), the inverse of :func:`to_mask`."""
    size = mask.shape[-1]
    numbers = np.arange(size)
    bits = jnp.where(mask, jnp.asarray(1 << (numbers % WORD_BITS), jnp.uint32), jnp.uint32(0))
    return jnp.stack(
        [
            jnp.sum(bits[..., numbers // WORD_BITS == word], axis=-1, dtype=jnp.uint32)
            for word in range(num_words(size))
        ],
        axis=-1,
    )


def from_indices(indices: Iterable[int], size: int) -> np.ndarray:
    """uint32[num_words(size)] (host NumPy): the set of ``indices`` (each in ``0..size-1``)."""
    bits = np.zeros(num_words(size), np.uint32)
    for index in indices:
        if not 0 <= index < size:
            raise ValueError(f"index {index} outside 0..{size - 1}")
        bits[index // WORD_BITS] |= np.uint32(1 << (index % WORD_BITS))
    return bits
