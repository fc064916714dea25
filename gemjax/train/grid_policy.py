"""A convolutional actor-critic for games whose actions name a cell of a board
(Minesweeper's ``reveal 2 3``, Sudoku's ``2 3 4``): every cell is scored by the same
3x3 convolutions over its neighbourhood, so what the policy learns about one cell
(a hidden cell next to a revealed 1) holds on every other.

The model reads the flat features the trainer stores
(:func:`~gemjax.train.policy.flatten_observation`) and takes them apart again by a
static :class:`CellLayout`: the observation leaves whose shapes start with the
board's ``(R, C)`` (:class:`~gemjax.core.ActionCells`) become per-cell channels
(8-bit codes one-hot, as they are printed), the other leaves (turn, limits) a
vector added to every cell. Its output is the logits of a
:class:`~gemjax.train.policy.JointCategorical`: a combination that names an
on-board cell takes that cell's logit for the combination's other components (the
command, the digit); one that names a row or column off the board (a move the game
rejects) takes a logit read from the whole board's pooled features.

It is an NNX module, seen by the linen trainer through ``flax.nnx.bridge.to_linen``
(:func:`conv_actor_critic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import nnx

from gemjax.core import ActionCells
from gemjax.train.policy import JointCategorical, is_code_leaf, leaf_width, symlog

# One-hot width of a cell's 8-bit code (Minesweeper's codes are 0..12, Sudoku's 0..9);
# a code outside it is still seen through its value channel.
CODE_CLASSES = 16


@dataclass(frozen=True)
class LeafSlot:
    """Where one observation leaf lies in the flat features.

    Attributes:
        offset: index of its first value; shape: its unbatched shape; code: an 8-bit
            code leaf (its values are followed by ``code_bits`` bits each, which
            the conv torso does not read: it one-hots the value); width: its
            features, bits included (:func:`~gemjax.train.policy.leaf_width`).
    """

    offset: int
    shape: tuple[int, ...]
    code: bool
    width: int

    @property
    def size(self) -> int:
        """Values of the leaf (``prod(shape)``)."""
        return int(np.prod(self.shape))


@dataclass(frozen=True)
class CellLayout:
    """The static map between flat features, board channels and joint logits.

    Attributes:
        grid: ``(R, C)``.
        cell_leaves: leaves whose shapes start with ``grid`` (per-cell channels).
        global_spans: ``(start, stop)`` ranges of the features of the other leaves.
        per_cell: logits per cell (``M``: the combinations of the action components
            other than the row and column).
        off_board: combinations naming a row or column off the board.
        logit_index: int, one per joint combination (row-major, as
            :class:`~gemjax.train.policy.JointCategorical` orders them): its position
            in ``concat(cell logits [R * C * M], off-board logits [off_board])``.
    """

    grid: tuple[int, int]
    cell_leaves: tuple[LeafSlot, ...]
    global_spans: tuple[tuple[int, int], ...]
    per_cell: int
    off_board: int
    logit_index: tuple[int, ...]

    @property
    def cell_channels(self) -> int:
        """Input channels per cell: each cell leaf's values (one-hot and value for a
        code), plus one constant channel that marks the board (zero padding off it)."""
        channels = 1
        for leaf in self.cell_leaves:
            depth = leaf.size // (self.grid[0] * self.grid[1])
            channels += depth * (1 + CODE_CLASSES if leaf.code else 1)
        return channels

    @property
    def global_features(self) -> int:
        """Length of the non-board feature vector (one zero when there is none)."""
        return max(sum(stop - start for start, stop in self.global_spans), 1)


def leaf_slots(spec: Any, code_bits: int) -> tuple[LeafSlot, ...]:
    """Each leaf of an observation spec where :func:`flatten_observation` puts it."""
    slots, offset = [], 0
    for leaf in jax.tree.leaves(spec):
        slot = LeafSlot(offset, tuple(leaf.shape), is_code_leaf(leaf), leaf_width(leaf, code_bits))
        slots.append(slot)
        offset += slot.width
    return tuple(slots)


def joint_logit_index(
    head: JointCategorical, cells: ActionCells
) -> tuple[tuple[int, ...], int, int]:
    """``(logit_index, per_cell, off_board)`` of :class:`CellLayout` for a joint head
    whose components ``cells.axes`` name the row and column.

    Raises:
        ValueError: the axes are not two distinct components of the head, or the
            board does not fit inside their values.
    """
    rows_axis, cols_axis = cells.axes
    size = len(head.nvec)
    if rows_axis == cols_axis or not (0 <= rows_axis < size and 0 <= cols_axis < size):
        raise ValueError(f"cell axes {cells.axes} are not two components of {head.nvec}")
    values = np.indices(head.nvec).reshape(size, -1) + np.asarray(head.start)[:, None]
    grid = np.asarray(cells.grid)
    position = values[[rows_axis, cols_axis]] - np.asarray(cells.first)[:, None]
    for axis, first, extent in zip(cells.axes, cells.first, cells.grid, strict=True):
        low, high = head.start[axis], head.start[axis] + head.nvec[axis] - 1
        if not (low <= first and first + extent - 1 <= high):
            raise ValueError(
                f"a board of {extent} from value {first} does not fit component {axis}'s "
                f"values {low}..{high}"
            )
    on_board = np.all((position >= 0) & (position < grid[:, None]), axis=0)
    others = [axis for axis in range(size) if axis not in cells.axes]
    other_nvec = tuple(head.nvec[axis] for axis in others)
    per_cell = int(np.prod(other_nvec))
    other_index = np.ravel_multi_index(
        tuple(values[axis] - head.start[axis] for axis in others), other_nvec
    )
    cell = position[0] * cells.grid[1] + position[1]
    board_logits = cells.grid[0] * cells.grid[1] * per_cell
    off_order = np.cumsum(~on_board) - 1
    index = np.where(on_board, cell * per_cell + other_index, board_logits + off_order)
    return tuple(int(i) for i in index), per_cell, int(np.sum(~on_board))


def cell_layout(
    spec: Any, code_bits: int, head: JointCategorical, cells: ActionCells
) -> CellLayout:
    """The :class:`CellLayout` of an env's observation spec and joint action head.

    Raises:
        ValueError: no observation leaf has the board's shape (see also
            :func:`joint_logit_index`).
    """
    board, spans = [], []
    for slot in leaf_slots(spec, code_bits):
        if slot.shape[:2] == tuple(cells.grid):
            board.append(slot)
        else:
            spans.append((slot.offset, slot.offset + slot.width))
    if not board:
        raise ValueError(f"no observation leaf has the board's shape {cells.grid}")
    index, per_cell, off_board = joint_logit_index(head, cells)
    return CellLayout(cells.grid, tuple(board), tuple(spans), per_cell, off_board, index)


def board_inputs(features: jax.Array, layout: CellLayout) -> jax.Array:
    """float32[..., R, C, layout.cell_channels] from features float32[..., F]."""
    batch, (rows, cols) = features.shape[:-1], layout.grid
    channels = [jnp.ones((*batch, rows, cols, 1), jnp.float32)]
    for leaf in layout.cell_leaves:
        values = features[..., leaf.offset : leaf.offset + leaf.size]
        values = values.reshape(*batch, rows, cols, -1)
        channels.append(symlog(values))
        if leaf.code:
            one_hot = jax.nn.one_hot(jnp.round(values).astype(jnp.int32), CODE_CLASSES)
            channels.append(one_hot.reshape(*batch, rows, cols, -1))
    return jnp.concatenate(channels, axis=-1)


def global_inputs(features: jax.Array, layout: CellLayout) -> jax.Array:
    """float32[..., layout.global_features]: the non-board features, squashed (a
    zero when the observation has only board leaves)."""
    parts = [features[..., start:stop] for start, stop in layout.global_spans]
    if not parts:
        return jnp.zeros((*features.shape[:-1], 1), jnp.float32)
    return symlog(jnp.concatenate(parts, axis=-1))


def neighbourhoods(x: jax.Array) -> jax.Array:
    """float32[..., R, C, 9 * D]: each cell's 3x3 neighbourhood of x float32[..., R,
    C, D], zeros off the board (a 3x3 convolution with ``SAME`` padding is a dense
    layer on it; on CPU, XLA differentiates this matmul far faster than a conv)."""
    rows, cols = x.shape[-3], x.shape[-2]
    pad = [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
    padded = jnp.pad(x, pad)
    shifts = [padded[..., dr : dr + rows, dc : dc + cols, :] for dr in range(3) for dc in range(3)]
    return jnp.concatenate(shifts, axis=-1)


class ConvPolicy(nnx.Module):
    """Joint-action logits (and a value) from flat features, by 3x3 convolutions over
    the board. Call with features float32[..., F]; returns ``(logits float32[...,
    prod(nvec)], value float32[...])`` (value all zeros without a critic).

    Args:
        layout: the :class:`CellLayout`.
        channels: the width of each 3x3 convolution (after a per-cell embedding of
            ``channels[0]``); ``len(channels)`` layers see ``2 * len + 1`` cells
            across.
        critic: build a value head (PPO) on the pooled board.
        rngs: parameter initialisation.
    """

    def __init__(
        self, layout: CellLayout, channels: tuple[int, ...], critic: bool, *, rngs: nnx.Rngs
    ) -> None:
        self.layout = layout
        relu_init = nnx.initializers.orthogonal(np.sqrt(2))
        small = nnx.initializers.orthogonal(0.01)
        width = channels[0]
        self.embed_cell = nnx.Linear(layout.cell_channels, width, kernel_init=relu_init, rngs=rngs)
        self.embed_global = nnx.Linear(
            layout.global_features, width, kernel_init=relu_init, rngs=rngs
        )
        convs = []
        for out in channels:
            convs.append(nnx.Linear(9 * width, out, kernel_init=relu_init, rngs=rngs))
            width = out
        self.convs = nnx.List(convs)
        self.cell_logits = nnx.Linear(width, layout.per_cell, kernel_init=small, rngs=rngs)
        pooled = 2 * width + channels[0]
        self.off_board_logits = nnx.Linear(
            pooled, max(layout.off_board, 1), kernel_init=small, rngs=rngs
        )
        self.value = nnx.Linear(pooled, 1, rngs=rngs) if critic else None

    def __call__(self, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        layout, batch = self.layout, features.shape[:-1]
        glob = self.embed_global(global_inputs(features, layout))
        x = nnx.relu(self.embed_cell(board_inputs(features, layout)) + glob[..., None, None, :])
        for conv in self.convs:
            x = nnx.relu(conv(neighbourhoods(x)))
        pooled = jnp.concatenate(
            [jnp.mean(x, axis=(-3, -2)), jnp.max(x, axis=(-3, -2)), nnx.relu(glob)], axis=-1
        )
        cells = self.cell_logits(x).reshape(*batch, -1)
        logits = jnp.concatenate([cells, self.off_board_logits(pooled)], axis=-1)
        logits = logits[..., np.asarray(layout.logit_index, np.int32)]
        if self.value is None:
            return logits, jnp.zeros(batch, jnp.float32)
        return logits, self.value(pooled)[..., 0]


def conv_actor_critic(layout: CellLayout, channels: tuple[int, ...], critic: bool) -> nn.Module:
    """:class:`ConvPolicy` as a linen module (``init(key, features)``,
    ``apply(params, features)``), the interface of
    :class:`~gemjax.train.policy.ActorCritic`."""
    return nnx.bridge.to_linen(ConvPolicy, layout, channels, critic)
