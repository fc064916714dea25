"""Per-lane choices whose batched form computes only the lanes that need it.

Under ``jax.vmap`` a ``lax.cond`` on a per-lane value runs both branches on every
lane, so "compute this only where needed" (a reset where an episode ended, an exact
re-read where a fast path gave up) costs the full batch. :func:`where_lanes` moves
the choice to the batch: its batching rule (``jax.custom_batching.custom_vmap``)
gathers the lanes that need the computation into chunks of ``ceil(B / share)``
lanes and runs it ``ceil(count / chunk)`` times, so the cost follows the number of
lanes that need it, and one compiled copy of the computation serves every count.
Results never depend on the chunking: lane ``i`` sees exactly its own arguments.

:func:`with_fallback` builds on it for functions with a fast batched path and an
exact per-lane one: its batching rule first runs a cheap check that says which lanes
the fast path cannot vouch for, then finishes the fast path on every lane and re-runs
the exact path on just the hard lanes (when nearly every lane is hard the fast path
is skipped and every lane is exact). The result never depends on which way a lane
went; only the cost does. An unbatched call is the exact path itself.
:func:`in_chunks` runs a batched function a cache-sized number of lanes at a time.

Under nested ``vmap`` the outer levels see an ordinary function (the choice is then
per inner batch). Under a sharded batch axis the gather and scatter cross shards;
the result is the same, the communication is XLA's to arrange.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp

#: Lanes that need the computation (or the exact path of :func:`with_fallback`) are
#: gathered ``ceil(B / DEFAULT_SHARE)`` at a time.
DEFAULT_SHARE = 8
#: :func:`map_chunks`' lanes on a CPU: lanes whose text buffers fit a core's caches.
DEFAULT_CHUNK_LANES = 128


def chunk_lanes_for_backend(lanes: int | Literal["auto"] | None = "auto") -> int | None:
    """``lanes`` resolved: ``"auto"`` is :data:`DEFAULT_CHUNK_LANES` on a CPU and None
    (the whole batch at once) on an accelerator, where a batch is parallelism."""
    if lanes == "auto":
        return DEFAULT_CHUNK_LANES if jax.default_backend() == "cpu" else None
    if lanes is not None and (not isinstance(lanes, int) or lanes < 1):
        raise ValueError(f"chunk lanes must be a positive int, 'auto' or None, got {lanes!r}")
    return lanes


def tree_where(condition: jax.Array, new: Any, old: Any) -> Any:
    """``new`` where ``condition`` (bool[], per lane) else ``old``, leaf by leaf over two
    pytrees of one structure (both computed: the plain per-lane choice)."""
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), new, old)


def replace_lanes(
    mask: jax.Array,
    function: Callable[..., Any],
    args: Sequence[Any],
    otherwise: Any,
    batched: Sequence[Any],
    chunk: int,
) -> Any:
    """Batched: ``function(*args)`` on the lanes where ``mask`` is set, ``otherwise``
    on the rest.

    Args:
        mask: bool[B], the lanes to compute.
        function: the per-lane computation; its result has ``otherwise``'s structure
            with the batch axis dropped.
        args: its arguments; leaves with a leading axis B where ``batched`` is True.
        otherwise: leaves [B, ...], kept on lanes where ``mask`` is clear.
        batched: ``args``' structure with a bool per leaf (shared leaves: False).
        chunk: lanes computed together (``function`` is compiled for this many).

    Returns:
        ``otherwise``'s structure, leaves [B, ...].
    """
    batch = mask.shape[0]
    slots = -(-batch // chunk) * chunk
    count = jnp.sum(mask, dtype=jnp.int32)
    (lanes,) = jnp.nonzero(mask, size=slots, fill_value=batch - 1)
    in_axes = jax.tree.map(lambda flag: 0 if flag else None, tuple(batched))
    chunk_function = jax.vmap(function, in_axes=in_axes)

    def compute_chunk(index: jax.Array, computed: Any) -> Any:
        rows = jax.lax.dynamic_slice_in_dim(lanes, index * chunk, chunk)
        picked = jax.tree.map(
            lambda leaf, flag: leaf[rows] if flag else leaf, tuple(args), tuple(batched)
        )
        return jax.tree.map(
            lambda buffer, new: jax.lax.dynamic_update_slice_in_dim(buffer, new, index * chunk, 0),
            computed,
            chunk_function(*picked),
        )

    def replace(otherwise: Any) -> Any:
        # The computed lanes, packed in order of lane, then read back where each belongs.
        packed = jax.tree.map(
            lambda leaf: jnp.zeros((slots, *leaf.shape[1:]), leaf.dtype), otherwise
        )
        packed = jax.lax.fori_loop(0, -(-count // chunk), compute_chunk, packed)
        slot = jnp.cumsum(mask, dtype=jnp.int32) - 1
        return jax.tree.map(
            lambda new, old: jnp.where(
                mask.reshape((batch,) + (1,) * (old.ndim - 1)), new[slot], old
            ),
            packed,
            otherwise,
        )

    # No lane to compute (the common case of a fast path): not even a pass over the
    # result buffers.
    return jax.lax.cond(count > 0, replace, lambda otherwise: otherwise, otherwise)


def where_lanes(function: Callable[..., Any], share: int = DEFAULT_SHARE) -> Callable[..., Any]:
    """The per-lane function ``g(mask, otherwise, *args)``: ``function(*args)`` if
    ``mask`` (bool[]) else ``otherwise``, computing ``function`` only where needed.

    Unbatched it is a ``lax.cond``; its ``vmap`` is :func:`replace_lanes` (arguments
    that are not batched stay shared). ``function(*args)`` must have ``otherwise``'s
    structure, shapes and dtypes.
    """

    def choose(mask: jax.Array, otherwise: Any, *args: Any) -> Any:
        return jax.lax.cond(mask, lambda: function(*args), lambda: otherwise)

    def rule(
        axis_size: int, in_batched: Sequence[Any], mask: jax.Array, otherwise: Any, *args: Any
    ) -> Any:
        mask_batched, otherwise_batched, *args_batched = in_batched
        mask = mask if mask_batched else jnp.broadcast_to(mask, (axis_size,))
        otherwise = broadcast_unbatched(otherwise, otherwise_batched, axis_size)
        chunk = -(-axis_size // share)
        return replace_lanes(mask, function, args, otherwise, args_batched, chunk)

    return per_lane(choose, rule)


def per_lane(function: Callable[..., Any], batched_rule: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (per lane) whose ``vmap`` is ``batched_rule(axis_size, in_batched,
    *args)``: ``in_batched`` has a bool per leaf of ``args`` (False: the leaf has no
    batch axis), and every leaf of the rule's result carries the batch axis first
    (``jax.custom_batching.custom_vmap``)."""

    @jax.custom_batching.custom_vmap
    def one(*args: Any) -> Any:
        return function(*args)

    @one.def_vmap
    def rule(axis_size: int, in_batched: Sequence[Any], *args: Any) -> tuple[Any, Any]:
        out = batched_rule(axis_size, tuple(in_batched), *args)
        return out, jax.tree.map(lambda _: True, out)

    return one


def broadcast_unbatched(tree: Any, batched: Any, axis_size: int) -> Any:
    """``tree`` with every leaf whose ``batched`` flag is clear given a leading axis
    of ``axis_size`` (the form a ``custom_vmap`` rule receives: one flag per leaf)."""
    return jax.tree.map(
        lambda leaf, flag: leaf if flag else jnp.broadcast_to(leaf, (axis_size, *jnp.shape(leaf))),
        tree,
        batched,
    )


def map_chunks(batched_function: Callable[..., Any], args: Sequence[Any], lanes: int | None) -> Any:
    """``batched_function(*args)`` (every leaf of ``args`` and of the result [B, ...],
    lanes independent) computed ``lanes`` lanes at a time, in sequence (all at once
    when ``lanes`` is None).

    Functions with large per-lane intermediates (the bridge's text buffers: thousands
    of bytes a lane) run faster on a batch that fits the CPU's caches than on one that
    streams every intermediate through memory. The batch is padded to a whole number
    of chunks with copies of its first lane, so one chunk shape is compiled.
    """
    batch = jax.tree.leaves(args)[0].shape[0]
    if lanes is None or batch <= lanes:
        return batched_function(*args)
    chunks = -(-batch // lanes)
    padding = chunks * lanes - batch

    def split(leaf: jax.Array) -> jax.Array:
        padded = jnp.concatenate([leaf, jnp.repeat(leaf[:1], padding, axis=0)])
        return padded.reshape(chunks, lanes, *leaf.shape[1:])

    out = jax.lax.map(lambda chunk: batched_function(*chunk), jax.tree.map(split, tuple(args)))
    return jax.tree.map(lambda leaf: leaf.reshape(chunks * lanes, *leaf.shape[2:])[:batch], out)


def in_chunks(function: Callable[..., Any], lanes: int | None) -> Callable[..., Any]:
    """A per-lane function equal to ``function`` whose ``vmap`` is :func:`map_chunks`
    over ``lanes`` lanes at a time (arguments that are not batched are broadcast);
    ``function`` itself when ``lanes`` is None."""
    if lanes is None:
        return function

    def rule(axis_size: int, in_batched: Sequence[Any], *args: Any) -> Any:
        args = broadcast_unbatched(args, in_batched, axis_size)
        return map_chunks(jax.vmap(function), args, lanes)

    return per_lane(function, rule)


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
    (:func:`map_chunks`; None: all at once), and so does ``exact``
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
