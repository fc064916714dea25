"""Lean random words for game kernels.

A vmapped rollout pays for every threefry block each lane draws: on a 2-core CPU,
drawing a game's reset randomness with ``jax.random.bits`` took half the step time of
the cheaper games (Mastermind, Wordle, GuessTheNumber-random). :func:`random_words`
draws one threefry block (64 bits) from the key and expands it with a counter-based
mixer, so a reset costs one block whatever it needs (a Minesweeper board: 69 words).

The mixer is MurmurHash3's 32-bit finaliser applied twice to a Weyl sequence, with
the two seed words entering separately: a bijection of the counter for each seed, so
the words of one call never repeat, and every word depends on all 64 seed bits. That
is plenty for drawing games (codes, targets, words, mine cells); it is not a
cryptographic or a simulation-grade generator, and keys still come from JAX's PRNG.

JAX's CPU lowering of Threefry is a rolled loop (five iterations of four rounds), which
XLA cannot fuse: at batch 4096 the per-lane hashes of a rollout step (splitting the
step key into lane keys, drawing each reset's seed) took half the step time of the
cheaper games. :func:`threefry2x32` is the same hash written out as 20 rounds of
``jnp`` operations, which fuse into one loop over the batch; :func:`bits` and
:func:`split` use it to return exactly what ``jax.random.bits`` and
``jax.random.split`` return for a Threefry key under JAX's default
``jax_threefry_partitionable``, and defer to them otherwise (other PRNG
implementations, the legacy setting).

Unrolled, the hash looks cheap enough to XLA that it fuses a copy into every consumer
that reads it: a Sudoku reset, which compares each of 256 cells with each other,
would re-hash its seed 256 times per lane, and the ``-random`` variants read their
configuration words in many places. So the hashed words are computed once, behind
:func:`materialize` (a loop of one trip). Measurements against ``jax.random`` are in
docs/performance.md (Kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp

_WEYL = 0x9E3779B9  # 2**32 / golden ratio: consecutive counters spread over the ring
# Threefry-2x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011):
# the rotation constants of its even and odd groups of four rounds, and the key
# schedule's parity constant.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
T = TypeVar("T")


def _rotate_left(x: jax.Array, distance: int) -> jax.Array:
    return (x << jnp.uint32(distance)) | (x >> jnp.uint32(32 - distance))


def threefry2x32(
    key: tuple[jax.Array, jax.Array], counter: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 with 20 rounds, unrolled: the uint32 word pair hashed from the
    uint32 ``counter`` pair under the uint32 ``key`` pair (all broadcast together)."""
    schedule = (key[0], key[1], key[0] ^ key[1] ^ jnp.uint32(_PARITY))
    x0, x1 = counter[0] + schedule[0], counter[1] + schedule[1]
    for group in range(5):
        for distance in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, distance) ^ x0
        x0 = x0 + schedule[(group + 1) % 3]
        x1 = x1 + schedule[(group + 2) % 3] + jnp.uint32(group + 1)
    return x0, x1


def _threefry_key_words(key: jax.Array) -> tuple[jax.Array, jax.Array] | None:
    """The two uint32 words of one Threefry ``key`` (typed, or raw ``uint32[2]``), or
    None when :func:`bits` and :func:`split` must defer to ``jax.random``."""
    # jax.config's flags are attributes jax does not declare to type checkers.
    if not jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]
        return None
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != () or str(jax.random.key_impl(key)) != "threefry2x32":
            return None
        key = jax.random.key_data(key)
    elif key.dtype != jnp.uint32 or key.shape != (2,):
        return None
    return key[0], key[1]


def _hash_counters(key: tuple[jax.Array, jax.Array], count: int) -> tuple[jax.Array, jax.Array]:
    """uint32[count] twice: Threefry of the counters ``0..count-1`` under the key
    words (the two halves of the 64-bit counter, as ``jax.random`` lays them out),
    materialised once (see the module docstring)."""
    counter = jnp.arange(count, dtype=jnp.uint32)
    return materialize(lambda: threefry2x32(key, (jnp.zeros_like(counter), counter)))


def materialize(compute: Callable[[], T]) -> T:
    """``compute()`` (a pytree of arrays) evaluated once, as the body of a loop that runs
    one trip on a flag XLA cannot fold, so that consumers read the stored result
    instead of each fusing a copy of the computation. Works under ``jit`` and ``vmap``
    (the flag stays unbatched)."""
    shapes = jax.eval_shape(compute)
    empty = jax.tree.map(lambda shape: jnp.zeros(shape.shape, shape.dtype), shapes)

    def run(carry: tuple[jax.Array, T]) -> tuple[jax.Array, T]:
        return jnp.bool_(False), compute()

    _, value = jax.lax.while_loop(lambda carry: carry[0], run, (jnp.bool_(True), empty))
    return value


def bits(key: jax.Array, count: int) -> jax.Array:
    """uint32[count]: ``jax.random.bits(key, (count,), jnp.uint32)`` for one key, with
    the hash unrolled (see the module docstring)."""
    words = _threefry_key_words(key)
    if words is None:
        return jax.random.bits(key, (count,), jnp.uint32)
    high, low = _hash_counters(words, count)
    return high ^ low


def split(key: jax.Array, num: int) -> jax.Array:
    """``jax.random.split(key, num)`` for one key (typed or raw, returned alike), with
    the hash unrolled (see the module docstring)."""
    words = _threefry_key_words(key)
    if words is None:
        return jax.random.split(key, num)
    data = jnp.stack(_hash_counters(words, num), axis=-1)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    return jax.random.wrap_key_data(data) if typed else data


#: :func:`stream_key`'s ``fold_in`` offset where :func:`split` and :func:`bits` defer
#: to ``jax.random``: far past the counters any draw of a kernel reads.
_FALLBACK_STREAM = 0x40000000


def stream_key(key: jax.Array, stream: int) -> jax.Array:
    """A key (typed or raw, as ``key``) independent of every draw of ``key`` itself.

    For a Threefry key it is the hash of the counter ``(stream, 0)`` (``stream >= 1``):
    :func:`bits`, :func:`split` and :func:`random_words` of ``key`` read the counters
    ``(0, i)``, so the derived key shares no block with them, and it costs one hash
    where ``split(key, 2)`` costs two. Otherwise it is ``jax.random.fold_in`` of a
    datum far past the counters a kernel reads.
    """
    if not 1 <= stream < 2**32:
        raise ValueError(f"stream must be in 1..2**32 - 1, got {stream}")
    words = _threefry_key_words(key)
    if words is None:
        return jax.random.fold_in(key, _FALLBACK_STREAM + stream)
    counter = (jnp.uint32(stream), jnp.uint32(0))
    data = jnp.stack(threefry2x32(words, counter), axis=-1)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    return jax.random.wrap_key_data(data) if typed else data


def mix32(x: jax.Array) -> jax.Array:
    """MurmurHash3's ``fmix32`` finaliser (a bijection of uint32)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def random_words(key: jax.Array, count: int) -> jax.Array:
    """uint32[count] random words from ``key`` (typed or raw ``uint32[2]``).

    Up to two words are threefry output itself; more are mixed from one threefry block
    (see the module docstring). Deterministic in ``key``; unbatched (vmap it).
    """
    if count <= 2:
        return bits(key, count)
    return mixed_words(bits(key, 2), jnp.arange(count, dtype=jnp.uint32))


def mixed_words(seed: jax.Array, counter: jax.Array) -> jax.Array:
    """uint32 (``counter``'s shape): the words at positions ``counter`` (uint32) of
    ``random_words(key, count)`` for ``count > 2``, where ``seed`` is ``bits(key, 2)``.
    One word at a time, so a loop can draw its ``k``-th word in its body instead of
    reading it from an array drawn before the loop."""
    return mix32(mix32(seed[0] + counter * jnp.uint32(_WEYL)) ^ seed[1])


#: Below this, a Python-int ``n`` of :func:`below` takes the short form (two products).
_SMALL_N = 2**15


def below(words: jax.Array, n: jax.Array | int) -> jax.Array:
    """int32: ``words`` (uint32) mapped to ``0..n-1`` (``n`` in ``1..2**31``, any integer
    dtype, broadcast) as the high word of ``words * n`` (Lemire's multiply-shift:
    each value has probability within ``1 / 2**32`` of ``1 / n``, as with ``%``).

    Computed in 16-bit halves with 32-bit products: CPUs have no vector integer
    division, so ``words % n`` with a traced ``n`` costs a scalar division per lane.
    A Python int ``n`` below ``2**15`` needs only the high half's product and the
    low half's carry: ``(hi * n + (lo * n >> 16)) >> 16``, the same value.
    """
    low = jnp.uint32(0xFFFF)
    if isinstance(n, int) and 1 <= n < _SMALL_N:
        n_small = jnp.uint32(n)
        return (((words >> 16) * n_small + (((words & low) * n_small) >> 16)) >> 16).astype(
            jnp.int32
        )
    n = jnp.asarray(n, dtype=jnp.uint32)
    a_hi, a_lo = words >> 16, words & low
    n_hi, n_lo = n >> 16, n & low
    cross_a, cross_n = a_hi * n_lo, a_lo * n_hi
    middle = ((a_lo * n_lo) >> 16) + (cross_a & low) + (cross_n & low)
    high = a_hi * n_hi + (cross_a >> 16) + (cross_n >> 16) + (middle >> 16)
    return high.astype(jnp.int32)
