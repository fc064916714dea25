"""Per-lane choices whose batched form computes only the lanes that need it.

Under ``jax.vmap`` a ``lax.cond`` on a per-lane value runs both branches on every
lane, so "compute this only where needed" (a reset where an episode ended, an exact
re-read where a fast path gave up) costs the full batch. :func:`where_lanes` moves
the choice to the batch: its batching rule (``jax.custom_batching.custom_vmap``)
gathers the lanes that need the computation into chunks of ``ceil(B / share)``
lanes and runs it ``ceil(count / chunk)`` times, so the cost follows the number of
lanes that need it, and one compiled copy of the computation serves every count.
Results never depend on the chunking: lane ``i`` sees exactly its own arguments.

Under nested ``vmap`` the outer levels see an ordinary function (the choice is then
per inner batch). Under a sharded batch axis the gather and scatter cross shards;
the result is the same, the communication is XLA's to arrange.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp

#: Lanes that need the computation are gathered ``ceil(B / DEFAULT_SHARE)`` at a time.
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
