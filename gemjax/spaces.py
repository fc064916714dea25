"""Jittable action spaces.

Sampling is kept lean on purpose: a batch of actions is one
:func:`gemjax.rng.random_words` call (one threefry block, mixed into one 32-bit word
per value) reduced modulo the space size. The modulo bias is
at most ``n / 2**32`` (below 2e-8 for every GEM game), far under anything a test
or a training run can see, and it halves the cost of ``jax.random.randint`` (which
draws two words per value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from gemjax.rng import random_words

INT32 = jnp.dtype(jnp.int32)


class Space:
    """Base class: ``sample(key, batch_shape)`` and ``contains(x)``, both jittable."""

    shape: tuple[int, ...]
    dtype: jnp.dtype

    def sample(self, key: jax.Array, batch_shape: tuple[int, ...] = ()) -> jax.Array:
        """Uniform values of shape ``batch_shape + self.shape``."""
        raise NotImplementedError

    def contains(self, x: jax.Array) -> jax.Array:
        """bool[batch_shape]: ``x`` lies in the space (the trailing ``shape`` reduced)."""
        raise NotImplementedError


def _uniform_below(key: jax.Array, n: jax.Array | int, shape: tuple[int, ...]) -> jax.Array:
    """int32 values uniform in ``[0, n)`` (``n`` >= 1, broadcast to ``shape``)."""
    bits = random_words(key, math.prod(shape)).reshape(shape)
    return (bits % jnp.asarray(n, jnp.uint32)).astype(jnp.int32)


@dataclass(frozen=True)
class Discrete(Space):
    """Integers ``start, start + 1, ..., start + n - 1`` as an int32 scalar.

    Attributes:
        n: number of values (a Python int: it fixes a policy head's width).
        start: the smallest value.
    """

    n: int
    start: int = 0
    shape: tuple[int, ...] = ()
    dtype: jnp.dtype = INT32

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"Discrete space needs n >= 1, got {self.n}")

    def sample(self, key: jax.Array, batch_shape: tuple[int, ...] = ()) -> jax.Array:
        return self.start + _uniform_below(key, self.n, batch_shape)

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        return (x >= self.start) & (x < self.start + self.n)


@dataclass(frozen=True)
class MultiDiscrete(Space):
    """A vector of independent integers: component ``i`` takes ``nvec[i]`` values
    ``start[i], ..., start[i] + nvec[i] - 1``, as an int32[len(nvec)] array.

    Attributes:
        nvec: values per component (Python ints: they fix a policy head's widths).
        start: the smallest value per component (an int applies to every component).
    """

    nvec: tuple[int, ...]
    start: tuple[int, ...] | int = 0
    dtype: jnp.dtype = INT32

    def __post_init__(self) -> None:
        nvec = tuple(int(n) for n in self.nvec)
        if not nvec or min(nvec) < 1:
            raise ValueError(f"MultiDiscrete needs one or more components, each n >= 1: {nvec}")
        start = (
            (int(self.start),) * len(nvec)
            if isinstance(self.start, int)
            else tuple(int(s) for s in self.start)
        )
        if len(start) != len(nvec):
            raise ValueError(f"start has {len(start)} components, nvec {len(nvec)}")
        object.__setattr__(self, "nvec", nvec)
        object.__setattr__(self, "start", start)

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (len(self.nvec),)

    def sample(self, key: jax.Array, batch_shape: tuple[int, ...] = ()) -> jax.Array:
        start = jnp.asarray(self.start, jnp.int32)
        return start + _uniform_below(key, jnp.asarray(self.nvec), (*batch_shape, *self.shape))

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        start = jnp.asarray(self.start, jnp.int32)
        inside = (x >= start) & (x < start + jnp.asarray(self.nvec, jnp.int32))
        return jnp.all(inside, axis=-1)
