"""Per-lane functions with a fast batched path and an exact fallback, chosen per batch.

Under ``jax.vmap`` a ``lax.cond`` on a per-lane value runs both branches for every
lane, so a per-lane "fast unless unusual" choice costs the slow path everywhere.
:func:`with_fallback` moves the choice to the batch: the function it returns is an
ordinary per-lane function whose batching rule (``jax.custom_batching.custom_vmap``)
first runs a cheap check that says which lanes the fast path cannot vouch for, then
finishes the fast path on every lane and re-runs the exact path on just the hard
lanes, gathered ``ceil(B / share)`` at a time (:func:`gemjax.lanes.replace_lanes`,
so one compiled copy of the exact path serves any number of them); when nearly every
lane is hard the fast path is skipped and every lane is exact. The result never
depends on which way a lane went; only the cost does. An unbatched call is
``exact`` itself. Under nested ``vmap`` the outer levels see an ordinary function
(the choice is then per inner batch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from gemjax.lanes import broadcast_unbatched, map_chunks, per_lane, replace_lanes

#: Hard lanes are re-run ``ceil(B / DEFAULT_SHARE)`` at a time.
DEFAULT_SHARE = 8


def run_with_fallback(
    check: Callable[..., tuple[Any, jax.Array]],
    finish: Callable[[Any], Any],
    exact: Callable[..., Any],
    args: Sequence[Any],
    share: int = DEFAULT_SHARE,
    lanes: int | None = None,
) -> Any:
    """The batched rule itself, on batched ``args`` (leaves [B, ...]).

    ``check(*args)`` returns ``(carry, hard)`` with ``hard`` bool[B]; ``finish(carry)``
    the fast result of every lane, right wherever ``hard`` is False; ``exact`` is the
    per-lane function whose result is used on the hard lanes. When fewer than a
    chunk's worth of lanes (``ceil(B / share)``) are easy, ``finish`` is skipped and
    every lane is exact. ``check`` and ``finish`` run ``lanes`` lanes at a time
    (:func:`~gemjax.lanes.map_chunks`; None: all at once), and so does ``exact``
    where ``ceil(B / share)`` is more.
    """
    carry, hard = map_chunks(check, args, lanes)
    batch = hard.shape[0]
    chunk = -(-batch // share)
    skip_finish = jnp.sum(hard, dtype=jnp.int32) > batch - chunk

    def finish_in_chunks(rows: Any) -> Any:
        return map_chunks(finish, (rows,), lanes)

    fast = jax.lax.cond(skip_finish, _zeros_like_result(finish), finish_in_chunks, carry)
    batched = jax.tree.map(lambda _: True, tuple(args))
    return replace_lanes(hard | skip_finish, exact, args, fast, batched, min(chunk, lanes or chunk))


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
    lanes: int | None = None,
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
        lanes: see :func:`run_with_fallback`.
    """

    def rule(axis_size: int, in_batched: Sequence[Any], *args: Any) -> Any:
        args = broadcast_unbatched(args, in_batched, axis_size)
        return run_with_fallback(check, finish, exact, args, share, lanes)

    return per_lane(exact, rule)
