"""Per-lane functions with a fast batched path and an exact fallback, chosen per batch.

Under ``jax.vmap`` a ``lax.cond`` on a per-lane value runs both branches for every
lane, so a per-lane "fast unless unusual" choice costs the slow path everywhere.
:func:`with_fallback` moves the choice to the batch: the function it returns is an
ordinary per-lane function whose batching rule (``jax.custom_batching.custom_vmap``)
first runs a cheap check that says which lanes the fast path cannot vouch for, then
either finishes the fast path on every lane (none are hard), finishes it and re-runs
the exact path on just the hard lanes (gathered into a batch of ``ceil(B / share)``
lanes), or runs the exact path on every lane, in chunks of that size (more are hard;
one compiled copy of the exact path serves both). The result
never depends on which way a lane went; only the cost does. An unbatched call is a
batch of one. Under nested ``vmap`` the outer levels see an ordinary function (the
choice is then per inner batch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

#: At most one lane in this many is re-run alone; more, and the whole batch is.
DEFAULT_SHARE = 8


def run_with_fallback(
    check: Callable[..., tuple[Any, jax.Array]],
    finish: Callable[[Any], Any],
    exact: Callable[..., Any],
    args: Sequence[Any],
    share: int = DEFAULT_SHARE,
) -> Any:
    """The batched rule itself, on batched ``args`` (leaves [B, ...]).

    ``check(*args)`` returns ``(carry, hard)`` with ``hard`` bool[B]; ``finish(carry)``
    the fast result of every lane, right wherever ``hard`` is False; ``exact`` is the
    per-lane function whose result is used on the hard lanes.

    ``exact`` runs in one place only, on chunks of ``few = ceil(B / share)`` lanes, so
    it is compiled once: no chunk when no lane is hard; one chunk of the gathered hard
    lanes when at most ``few`` are; otherwise ``finish`` is skipped and every lane is
    re-run, ``few`` consecutive lanes a chunk.
    """
    carry, hard = check(*args)
    batch = hard.shape[0]
    few = -(-batch // share)
    count = jnp.sum(hard)
    many = count > few
    fast = jax.lax.cond(many, _zeros_like_result(finish), finish, carry)
    (hard_lanes,) = jnp.nonzero(hard, size=few, fill_value=batch)
    exact_chunk = jax.vmap(exact)

    def rerun_chunk(chunk: jax.Array, out: Any) -> Any:
        lanes = jnp.where(many, chunk * few + jnp.arange(few), hard_lanes)
        picked = jax.tree.map(lambda leaf: leaf[jnp.minimum(lanes, batch - 1)], tuple(args))
        again = exact_chunk(*picked)
        return jax.tree.map(lambda o, a: o.at[lanes].set(a, mode="drop"), out, again)

    chunks = jnp.where(many, -(-batch // few), (count > 0).astype(jnp.int32))
    return jax.lax.fori_loop(0, chunks, rerun_chunk, fast)


def _zeros_like_result(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A stand-in for ``function`` that returns zeros of its result's shapes and dtypes."""

    def zeros(argument: Any) -> Any:
        shapes = jax.eval_shape(function, argument)
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    return zeros


def with_fallback(
    check: Callable[..., tuple[Any, jax.Array]],
    finish: Callable[[Any], Any],
    exact: Callable[..., Any],
    share: int = DEFAULT_SHARE,
) -> Callable[..., Any]:
    """A per-lane function equal to ``exact`` whose ``vmap`` tries a fast path first.

    Args:
        check: batched: takes the arguments with a leading batch axis on every leaf
            and returns ``(carry, hard)``, ``hard`` bool[B] the lanes the fast path
            cannot vouch for.
        finish: batched: the fast result from ``carry``; it must equal
            ``vmap(exact)`` on every lane where ``hard`` is False.
        exact: the per-lane function (any lane, any input).
        share: see :data:`DEFAULT_SHARE`.
    """

    @jax.custom_batching.custom_vmap
    def one(*args: Any) -> Any:
        single = jax.tree.map(lambda leaf: leaf[None], args)
        out = run_with_fallback(check, finish, exact, single, share)
        return jax.tree.map(lambda leaf: leaf[0], out)

    @one.def_vmap
    def rule(axis_size: int, in_batched: Sequence[Any], *args: Any) -> tuple[Any, Any]:
        args = jax.tree.map(
            lambda leaf, batched: (
                leaf if batched else jnp.broadcast_to(leaf, (axis_size, *jnp.shape(leaf)))
            ),
            args,
            tuple(in_batched),
        )
        out = run_with_fallback(check, finish, exact, args, share)
        return out, jax.tree.map(lambda _: True, out)

    return one
