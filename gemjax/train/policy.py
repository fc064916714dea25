"""A compact actor-critic over a game's structured observation, and the categorical
distributions its logits parameterise over the game's action space: factored (one
independent categorical per action component) or joint (one categorical over every
combination)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from gemjax.spaces import Discrete, MultiDiscrete, Space
from gemjax.train.config import HeadKind

MASKED_LOGIT = -1e9
# The widest component a dense head may cover. Every game declares its components
# by the kernel's distinct outcomes (an out-of-range value stands for all of them),
# so GEM's largest is 61 (GuessTheNumber-random); a width near 2**31 would mean the
# space was declared by the host parser's clamp and needs a bounded declaration.
MAX_COMPONENT = 4096
# The most combinations a joint head may cover (one logit each). GEM's four
# ablation games need at most 432 (Sudoku-easy: 2 x 6 x 6 x 6).
MAX_JOINT = 4096


def is_code_leaf(leaf: Any) -> bool:
    """8-bit integer leaves hold categorical codes (hint grids, boards) by convention."""
    return jnp.issubdtype(leaf.dtype, jnp.integer) and jnp.dtype(leaf.dtype).itemsize == 1


def flatten_observation(observation: Any, spec: Any, code_bits: int) -> jax.Array:
    """Concatenate every observation leaf, flattened and cast to float32.

    8-bit integer leaves (categorical codes) also contribute their low ``code_bits``
    bits as 0/1 features, so a code is a linear feature as well as a magnitude.

    Args:
        observation: the env's observation pytree, each leaf with leading batch
            dimensions ``batch_shape`` before its unbatched shape.
        spec: the unbatched ``jax.ShapeDtypeStruct`` pytree
            (``env.observation_spec(params)``).
        code_bits: bits per code element (0: values only).

    Returns:
        float32[*batch_shape, F] (:func:`feature_size`), leaves in pytree order.
    """
    parts = []
    for leaf, leaf_spec in zip(jax.tree.leaves(observation), jax.tree.leaves(spec), strict=True):
        flat = leaf.reshape((*leaf.shape[: leaf.ndim - len(leaf_spec.shape)], -1))
        parts.append(flat.astype(jnp.float32))
        if code_bits and is_code_leaf(leaf_spec):
            bits = (flat.astype(jnp.int32)[..., None] >> jnp.arange(code_bits)) & 1
            parts.append(bits.reshape((*flat.shape[:-1], -1)).astype(jnp.float32))
    return jnp.concatenate(parts, axis=-1)


def leaf_width(leaf: Any, code_bits: int) -> int:
    """Features one unbatched leaf spec contributes to :func:`flatten_observation`:
    its values, and ``code_bits`` bits per value of a code leaf."""
    return int(np.prod(leaf.shape)) * (1 + (code_bits if is_code_leaf(leaf) else 0))


def feature_size(spec: Any, code_bits: int) -> int:
    """``F``: the length of :func:`flatten_observation`'s last axis."""
    return sum(leaf_width(leaf, code_bits) for leaf in jax.tree.leaves(spec))


def symlog(x: jax.Array) -> jax.Array:
    """``sign(x) * log1p(|x|)``: keeps small integer codes apart and squashes large
    counts (a turn limit of 50) to the same order of magnitude; float32 like ``x``."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


class MLP(nn.Module):
    """Dense layers with ReLU; the last layer's output has ``out`` features.

    Attributes:
        hidden: hidden widths; out: output width; out_scale: orthogonal-init gain of
            the last layer (small for a near-uniform initial policy).
    """

    hidden: tuple[int, ...]
    out: int
    out_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
        return nn.Dense(self.out, kernel_init=nn.initializers.orthogonal(self.out_scale))(x)


class ActorCritic(nn.Module):
    """Policy logits (for a :class:`FactoredCategorical`) and, with ``critic``, a
    value head (a separate MLP of the same widths).

    Attributes:
        num_logits: :attr:`FactoredCategorical.num_logits` of the action space.
        hidden: hidden widths of each MLP.
        critic: build the value head (PPO).

    Call with features float32[..., F] (squashed by :func:`symlog` first); returns
    ``(logits float32[..., num_logits], value float32[...])`` (value all zeros
    without a critic).
    """

    num_logits: int
    hidden: tuple[int, ...]
    critic: bool

    @nn.compact
    def __call__(self, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        features = symlog(features)
        logits = MLP(self.hidden, self.num_logits, 0.01, name="actor")(features)
        if self.critic:
            value = MLP(self.hidden, 1, 1.0, name="critic")(features)[..., 0]
        else:
            value = jnp.zeros(features.shape[:-1], jnp.float32)
        return logits, value


@dataclass(frozen=True)
class FactoredCategorical:
    """One independent categorical per action component, read from flat logits.

    Component ``i`` takes ``nvec[i]`` values ``start[i] + j``; its logits are the
    ``nvec[i]`` consecutive entries after those of the earlier components, so the
    logits are float32[..., L] with ``L = sum(nvec)`` (:attr:`num_logits`). A joint
    action's log-probability is the sum of its components' and so is the entropy.
    A ``Discrete`` space is one component with int32 scalar actions; a
    ``MultiDiscrete`` one has int32[K] actions (``K = len(nvec)``). Nothing is
    masked here: the head covers the whole declared space (masking, an ablation,
    sets logits to :data:`MASKED_LOGIT` before these methods see them).

    Attributes:
        nvec: values per component; start: the smallest value per component;
        scalar: actions are scalars (a ``Discrete`` space).
    """

    nvec: tuple[int, ...]
    start: tuple[int, ...]
    scalar: bool

    @classmethod
    def of(cls, space: Space) -> FactoredCategorical:
        """The distribution over a ``Discrete`` or ``MultiDiscrete`` space.

        Raises:
            ValueError: another space, or a component wider than :data:`MAX_COMPONENT`.
        """
        if isinstance(space, Discrete):
            head = cls((space.n,), (space.start,), scalar=True)
        elif isinstance(space, MultiDiscrete):
            head = cls(space.nvec, space.start, scalar=False)  # type: ignore[arg-type]
        else:
            raise ValueError(f"no categorical head for {space!r}")
        if max(head.nvec) > MAX_COMPONENT:
            raise ValueError(
                f"action component of {max(head.nvec)} values (> {MAX_COMPONENT}): declare "
                "the space by the kernel's distinct outcomes, not the parser's range"
            )
        return head

    @property
    def num_logits(self) -> int:
        """``L = sum(nvec)``: the policy's output width."""
        return sum(self.nvec)

    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        """int32[K, M] indices into the flat logits and bool[K, M] real entries
        (``M = max(nvec)``; shorter components are padded)."""
        width = np.arange(max(self.nvec))
        offsets = np.cumsum((0, *self.nvec[:-1]))
        real = width[None, :] < np.asarray(self.nvec)[:, None]
        return np.where(real, offsets[:, None] + width[None, :], 0), real

    def per_component(self, logits: jax.Array) -> jax.Array:
        """float32[..., L] logits as float32[..., K, M], padding at :data:`MASKED_LOGIT`."""
        index, real = self._layout()
        return jnp.where(real, logits[..., index], MASKED_LOGIT)

    def log_softmax(self, logits: jax.Array) -> jax.Array:
        """float32[..., K, M] per-component log-probabilities (padding about -1e9)."""
        return jax.nn.log_softmax(self.per_component(logits), axis=-1)

    def _values(self, indices: jax.Array) -> jax.Array:
        return component_values(indices, self.start, self.scalar)

    def sample(self, key: jax.Array, logits: jax.Array) -> jax.Array:
        """Actions drawn from float32[..., L] logits: int32[...] or int32[..., K]."""
        return self._values(jax.random.categorical(key, self.per_component(logits), axis=-1))

    def mode(self, logits: jax.Array) -> jax.Array:
        """The most likely action (each component's argmax), as :meth:`sample`."""
        return self._values(jnp.argmax(self.per_component(logits), axis=-1))

    def log_prob(self, logits: jax.Array, actions: jax.Array) -> jax.Array:
        """float32[...]: ``sum_i log p_i(actions_i)`` of actions shaped as :meth:`sample`."""
        indices = (actions[..., None] if self.scalar else actions) - jnp.asarray(self.start)
        picked = jnp.take_along_axis(self.log_softmax(logits), indices[..., None], axis=-1)
        return jnp.sum(picked[..., 0], axis=-1)

    def entropy(self, logits: jax.Array) -> jax.Array:
        """float32[...]: ``sum_i H(p_i)`` (padding has probability 0)."""
        log_p = self.log_softmax(logits)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=(-2, -1))

    def layout_mask(self, mask: jax.Array) -> jax.Array:
        """bool[..., L] allowed logits from an env's mask: bool[..., sum(nvec)] allowed
        values per component (the same layout here), or bool[..., *nvec] allowed
        combinations, of which a factored head keeps each component's values that
        some allowed combination uses (it may then draw a combination outside)."""
        if not is_joint_mask(mask, self.nvec):
            return mask
        axes = range(mask.ndim - len(self.nvec), mask.ndim)
        return jnp.concatenate(
            [jnp.any(mask, axis=tuple(a for a in axes if a != axis)) for axis in axes], axis=-1
        )


@dataclass(frozen=True)
class JointCategorical:
    """One categorical over every combination of the action components' values.

    Unlike :class:`FactoredCategorical` it can express dependence between components
    (reveal cell (1, 3) or (3, 1), but neither (1, 1) nor (3, 3)), at one logit per
    combination: float32[..., L] with ``L = prod(nvec)`` (:attr:`num_logits`), the
    combinations in row-major order of their component indices (the last component
    varies fastest). Actions are laid out as :class:`FactoredCategorical`'s.

    Attributes:
        nvec, start, scalar: as :class:`FactoredCategorical`'s.
    """

    nvec: tuple[int, ...]
    start: tuple[int, ...]
    scalar: bool

    @classmethod
    def of(cls, space: Space) -> JointCategorical:
        """The joint distribution over a ``Discrete`` or ``MultiDiscrete`` space.

        Raises:
            ValueError: another space, or more than :data:`MAX_JOINT` combinations.
        """
        factored = FactoredCategorical.of(space)
        head = cls(factored.nvec, factored.start, factored.scalar)
        if head.num_logits > MAX_JOINT:
            raise ValueError(
                f"a joint head over {head.nvec} needs {head.num_logits} logits (> "
                f"{MAX_JOINT}): use the factored head"
            )
        return head

    @property
    def num_logits(self) -> int:
        """``L = prod(nvec)``: the policy's output width."""
        return int(np.prod(self.nvec))

    def _strides(self) -> np.ndarray:
        """int32[K]: a combination's flat index is ``sum(index_i * strides_i)``."""
        return np.cumprod((1, *self.nvec[:0:-1]))[::-1].astype(np.int32)

    def _values(self, flat: jax.Array) -> jax.Array:
        """Actions (int32[...] or int32[..., K]) from int[...] flat indices."""
        indices = (flat[..., None] // self._strides()) % np.asarray(self.nvec, np.int32)
        return component_values(indices, self.start, self.scalar)

    def sample(self, key: jax.Array, logits: jax.Array) -> jax.Array:
        """Actions drawn from float32[..., L] logits: int32[...] or int32[..., K]."""
        return self._values(jax.random.categorical(key, logits, axis=-1))

    def mode(self, logits: jax.Array) -> jax.Array:
        """The most likely combination, as :meth:`sample`."""
        return self._values(jnp.argmax(logits, axis=-1))

    def log_prob(self, logits: jax.Array, actions: jax.Array) -> jax.Array:
        """float32[...]: the log-probability of actions shaped as :meth:`sample`."""
        indices = (actions[..., None] if self.scalar else actions) - jnp.asarray(self.start)
        flat = jnp.sum(indices * self._strides(), axis=-1)
        log_p = jax.nn.log_softmax(logits, axis=-1)
        return jnp.take_along_axis(log_p, flat[..., None], axis=-1)[..., 0]

    def entropy(self, logits: jax.Array) -> jax.Array:
        """float32[...]: the joint distribution's entropy."""
        log_p = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)

    def layout_mask(self, mask: jax.Array) -> jax.Array:
        """bool[..., L] allowed combinations from an env's mask: bool[..., *nvec]
        (the combinations themselves), or bool[..., sum(nvec)] allowed values per
        component (the factored layout: a combination is allowed when each of its
        components' values is)."""
        if is_joint_mask(mask, self.nvec):
            return mask.reshape(*mask.shape[: mask.ndim - len(self.nvec)], self.num_logits)
        indices = np.indices(self.nvec).reshape(len(self.nvec), -1).T  # [L, K]
        offsets = np.cumsum((0, *self.nvec[:-1]))
        return jnp.all(mask[..., indices + offsets], axis=-1)


ActionHead = FactoredCategorical | JointCategorical


def is_joint_mask(mask: jax.Array, nvec: tuple[int, ...]) -> bool:
    """Whether an env's action mask gives combinations, bool[..., *nvec], rather than
    each component's values, bool[..., sum(nvec)]: the two never share their last
    axes when there are several components (``sum(nvec) > nvec[-1]``)."""
    return len(nvec) > 1 and tuple(mask.shape[mask.ndim - len(nvec) :]) == tuple(nvec)


def action_head(space: Space, kind: HeadKind) -> ActionHead:
    """The ``kind`` head (``factored`` or ``joint``) over ``space``."""
    if kind == "joint":
        return JointCategorical.of(space)
    return FactoredCategorical.of(space)


def component_values(indices: jax.Array, start: tuple[int, ...], scalar: bool) -> jax.Array:
    """int32[..., K] component indices as actions (int32[...] when ``scalar``)."""
    actions = indices.astype(jnp.int32) + jnp.asarray(start, jnp.int32)
    return actions[..., 0] if scalar else actions


def format_error_free(head: ActionHead) -> np.ndarray:
    """bool[sum(nvec)] allowed values per component (the factored layout) with the
    format-error value masked: value 0 of the first component, which every kernel
    reads as "no parseable answer" (GuessTheNumber's guess 0, Minesweeper's command 0,
    the ``ok``/count field of the others; ``tests/train`` checks each game)."""
    allowed = np.ones(sum(head.nvec), np.bool_)
    if head.start[0] <= 0 < head.start[0] + head.nvec[0]:
        allowed[-head.start[0]] = False
    return allowed
