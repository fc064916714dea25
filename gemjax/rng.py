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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_WEYL = 0x9E3779B9  # 2**32 / golden ratio: consecutive counters spread over the ring


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
        return jax.random.bits(key, (count,), jnp.uint32)
    seed = jax.random.bits(key, (2,), jnp.uint32)
    counter = jnp.arange(count, dtype=jnp.uint32)
    return mix32(mix32(seed[0] + counter * jnp.uint32(_WEYL)) ^ seed[1])


def below(words: jax.Array, n: jax.Array) -> jax.Array:
    """int32: ``words`` (uint32) mapped to ``0..n-1`` (``n`` in ``1..2**31``, any integer
    dtype, broadcast) as the high word of ``words * n`` (Lemire's multiply-shift:
    each value has probability within ``1 / 2**32`` of ``1 / n``, as with ``%``).

    Computed in 16-bit halves with 32-bit products: CPUs have no vector integer
    division, so ``words % n`` with a traced ``n`` costs a scalar division per lane.
    """
    n = jnp.asarray(n, dtype=jnp.uint32)
    low = jnp.uint32(0xFFFF)
    a_hi, a_lo = words >> 16, words & low
    n_hi, n_lo = n >> 16, n & low
    cross_a, cross_n = a_hi * n_lo, a_lo * n_hi
    middle = ((a_lo * n_lo) >> 16) + (cross_a & low) + (cross_n & low)
    high = a_hi * n_hi + (cross_a >> 16) + (cross_n >> 16) + (middle >> 16)
    return high.astype(jnp.int32)
