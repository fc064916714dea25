"""The causal-LM policy interface, and a small decoder-only transformer on it.

Any JAX language model can be gemjax's token agent if it looks like the LLM code of
the JAX ecosystem (Tunix's Flax NNX Qwen3, Gemma): a :class:`CausalLM` is an
``nnx.Module`` with

* ``model(tokens, positions, cache, attention_mask) -> (logits, cache)``:
  ``tokens`` int32[B, L] tokenizer ids, ``positions`` int32[B, L] their positions in
  the sequence. With a cache (from ``init_cache``), each token's keys and values are
  written into slot ``positions[b, i]`` of lane ``b`` first (slots past the cache are
  dropped), and ``attention_mask`` bool[B, L, S] says which of the ``S`` slots query
  ``i`` may read; without one (``None``) the keys are the ``L`` tokens themselves and
  the mask is bool[B, L, L]. ``logits`` float32[B, L, V] are over the model's rows.
* ``init_cache(batch, length) -> cache``: an empty cache of ``length`` slots a lane
  (a pytree of arrays).
* ``token_ids``: int32[V], the tokenizer id of each row of the embedding and of the
  logits (``arange(V)`` for a model over a tokenizer's whole vocabulary), sorted.

A model may also offer ``model.logits_at(tokens, positions, cache, attention_mask,
at) -> (logits, cache)`` (:class:`SelectiveLogits`): the call's logits at int32[B, M]
indices ``at`` of the ``L`` tokens only, float32[B, M, V] (``logits[b, m]`` is the
call's ``logits[b, at[b, m]]``), with the output layer applied to those ``M``
positions alone. The prefill needs the logits after each prompt's last token, and the
learner's replay
(:meth:`~gemjax.train.token_rollout.TokenRollout.response_log_probs`) those of the
response tokens, a few of each stream's positions: with a tokenizer-sized vocabulary
(Qwen3's 151,936 rows), the ``[B, L, V]`` logits of every position (and in the
learner their gradient) are most of the memory. And it may offer
``model.causal_logits_at(tokens, positions, attention_mask, at) -> logits``
(:class:`CausalLogits`): the same without a cache, for a mask with nothing above its
diagonal, as in the learner's replay, where it may skip the scores the mask discards
(:func:`replay_logits_at` uses it when it is there).

The token rollout (:mod:`gemjax.train.token_rollout`) lays each episode out with
slot = position, so a query at position ``p`` reads the slots ``<= p``
(:func:`causal_mask`), and a step that re-encodes the end of a prompt simply
overwrites its slots.

:class:`TinyLM` is a from-scratch model on this interface: pre-norm blocks of
RMSNorm, multi-head attention with rotary position embeddings and a SwiGLU MLP, over
a compact vocabulary (the bridge's ``vocab``: a few hundred tokenizer ids), so its
sampled rows decode with the real tokenizer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

MASKED_SCORE = -1e30
#: Pieces :meth:`TinyLM.causal_logits_at` splits the queries into (about 0.6 of a full
#: pass's scores; more pieces cost more than they skip on a CPU, docs/performance.md).
CAUSAL_PIECES = 4


@runtime_checkable
class CausalLM(Protocol):
    """What the token rollout needs of a model (see the module docstring)."""

    token_ids: np.ndarray

    def __call__(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: Any,
        attention_mask: jax.Array,
    ) -> tuple[jax.Array, Any]: ...

    def init_cache(self, batch: int, length: int) -> Any: ...


@runtime_checkable
class SelectiveLogits(Protocol):
    """A :class:`CausalLM` that computes its logits at chosen positions only (see
    the module docstring)."""

    def logits_at(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: Any,
        attention_mask: jax.Array,
        at: jax.Array,
    ) -> tuple[jax.Array, Any]: ...


@runtime_checkable
class CausalLogits(Protocol):
    """A model whose cache-free :meth:`SelectiveLogits.logits_at` can be told that no
    query reads a later token, so it may skip those scores (see :func:`replay_logits_at`)."""

    def causal_logits_at(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        attention_mask: jax.Array,
        at: jax.Array,
    ) -> jax.Array: ...


def take_rows(x: jax.Array, at: jax.Array) -> jax.Array:
    """[B, M, D]: rows ``x[b, at[b, m]]`` of [B, L, D] ``x`` at int32[B, M] ``at``.

    A one-hot matrix product rather than a gather: its gradient is a product too,
    where a gather's is a scatter-add (slow on CPUs and TPUs); at full precision it
    copies the rows exactly."""
    one_hot = jax.nn.one_hot(at, x.shape[1], dtype=x.dtype)
    return jnp.einsum("bml,bld->bmd", one_hot, x, precision=jax.lax.Precision.HIGHEST)


def logits_at(
    model: CausalLM,
    tokens: jax.Array,
    positions: jax.Array,
    cache: Any,
    attention_mask: jax.Array,
    at: jax.Array,
) -> tuple[jax.Array, Any]:
    """``model``'s call over int32[B, L] ``tokens``, its logits at int32[B, M] indices
    ``at`` of them only: (float32[B, M, V], the cache). The model's own ``logits_at``
    where it has one (:class:`SelectiveLogits`), else its call's logits gathered."""
    if isinstance(model, SelectiveLogits):
        return model.logits_at(tokens, positions, cache, attention_mask, at)
    logits, cache = model(tokens, positions, cache, attention_mask)
    return jnp.take_along_axis(logits, at[:, :, None], axis=1), cache


def replay_logits_at(
    model: CausalLM,
    tokens: jax.Array,
    positions: jax.Array,
    attention_mask: jax.Array,
    at: jax.Array,
) -> jax.Array:
    """float32[B, M, V]: :func:`logits_at` without a cache, for a bool[B, L, L]
    ``attention_mask`` with nothing above its diagonal (no query reads a token that
    comes after it in ``tokens``), as in the learner's replay of a stream. A
    :class:`CausalLogits` model then skips the scores the mask would discard; any
    other model computes them all."""
    if isinstance(model, CausalLogits):
        return model.causal_logits_at(tokens, positions, attention_mask, at)
    return logits_at(model, tokens, positions, None, attention_mask, at)[0]


class LayerCache(NamedTuple):
    """Keys and values of one attention layer: float32[B, heads, S, head_dim] each.

    Heads before slots: the attention's products then read the cache as it lies.
    With slots before heads, XLA's CPU dot first transposed the whole cache, every
    call, and a one-token decoding step of a 256-lane batch over 384 slots spent
    ten times longer in attention (docs/performance.md)."""

    k: jax.Array
    v: jax.Array


def causal_mask(positions: jax.Array, slots: int) -> jax.Array:
    """bool[B, L, slots]: query ``i`` of lane ``b`` reads slot ``j`` iff
    ``j <= positions[b, i]`` (the layout where a token's slot is its position)."""
    return jnp.arange(slots)[None, None, :] <= positions[:, :, None]


def attend(q: jax.Array, keys: jax.Array, values: jax.Array, mask: jax.Array) -> jax.Array:
    """float32[B, L, H, D]: softmax attention of queries float32[B, L, H, D] over
    keys and values float32[B, H, S, D], where bool[B, L, S] ``mask`` allows."""
    scores = jnp.einsum("blhd,bhsd->bhls", q, keys) / np.sqrt(q.shape[-1])
    scores = jnp.where(mask[:, None], scores, MASKED_SCORE)
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhls,bhsd->blhd", weights, values)


def causal_attend(
    q: jax.Array, keys: jax.Array, values: jax.Array, mask: jax.Array, pieces: int
) -> jax.Array:
    """:func:`attend` with ``S == L`` and ``mask`` False above its diagonal, the
    queries split into ``pieces`` runs, each attending over the keys up to its last
    query only: ``(pieces + 1) / (2 * pieces)`` of a full pass's scores, the same
    result (the skipped scores are ones the mask discards: exact zeros in the
    softmax)."""
    length = q.shape[1]
    block = -(-length // pieces)
    outputs = []
    for low in range(0, length, block):
        high = min(low + block, length)
        outputs.append(
            attend(q[:, low:high], keys[:, :, :high], values[:, :, :high], mask[:, low:high, :high])
        )
    return jnp.concatenate(outputs, axis=1)


def rotary(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
    """Rotary position embedding of float32[B, L, H, D] ``x`` at int32[B, L]
    ``positions`` (the two halves of the last axis rotate as pairs)."""
    half = x.shape[-1] // 2
    frequencies = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions[..., None].astype(jnp.float32) * frequencies  # [B, L, half]
    sin, cos = jnp.sin(angles)[:, :, None, :], jnp.cos(angles)[:, :, None, :]
    first, second = x[..., :half], x[..., half:]
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


@dataclass(frozen=True)
class TinyLMConfig:
    """Shape of a :class:`TinyLM`.

    Attributes:
        width: model width (embedding size); heads: attention heads (``width``
            divides by it, ``width // heads`` even); layers: blocks;
        mlp: hidden width of each block's SwiGLU MLP; rope_theta: rotary base.
    """

    width: int = 128
    heads: int = 4
    layers: int = 2
    mlp: int = 256
    rope_theta: float = 10_000.0

    def __post_init__(self) -> None:
        for name in ("width", "heads", "layers", "mlp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TinyLMConfig.{name} must be an int >= 1, got {value!r}")
        if self.width % self.heads or (self.width // self.heads) % 2:
            raise ValueError(
                f"width {self.width} must split into {self.heads} heads of an even size"
            )


class Attention(nnx.Module):
    """Multi-head self-attention with rotary embeddings and an optional KV cache."""

    def __init__(self, config: TinyLMConfig, rngs: nnx.Rngs) -> None:
        self.heads = config.heads
        self.head_dim = config.width // config.heads
        self.theta = config.rope_theta
        dense = functools.partial(nnx.Linear, config.width, config.width, use_bias=False, rngs=rngs)
        self.query = dense()
        self.key = dense()
        self.value = dense()
        self.out = dense()

    def _split(self, x: jax.Array) -> jax.Array:
        return x.reshape((*x.shape[:2], self.heads, self.head_dim))

    def __call__(
        self,
        x: jax.Array,
        positions: jax.Array,
        cache: LayerCache | None,
        attention_mask: jax.Array,
        causal_pieces: int | None = None,
    ) -> tuple[jax.Array, LayerCache | None]:
        """float32[B, L, width] ``x`` -> (float32[B, L, width], the updated cache).
        Without a cache, ``causal_pieces`` (for a mask with nothing above its
        diagonal) computes the attention in that many runs of queries
        (:func:`causal_attend`)."""
        q = rotary(self._split(self.query(x)), positions, self.theta)
        k = rotary(self._split(self.key(x)), positions, self.theta)  # [B, L, H, D]
        v = self._split(self.value(x))
        if cache is None:
            keys, values = jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2)  # [B, H, L, D]
            if causal_pieces is not None:
                mixed = causal_attend(q, keys, values, attention_mask, causal_pieces)
                return self.out(mixed.reshape(x.shape)), None
        else:
            # lanes [B, 1] and positions [B, L] around the heads' slice index the
            # update as [B, L, H, D], the layout k and v come in.
            lanes = jnp.arange(x.shape[0])[:, None]
            cache = LayerCache(
                cache.k.at[lanes, :, positions].set(k, mode="drop"),
                cache.v.at[lanes, :, positions].set(v, mode="drop"),
            )
            keys, values = cache.k, cache.v
        mixed = attend(q, keys, values, attention_mask)
        return self.out(mixed.reshape(x.shape)), cache


class Block(nnx.Module):
    """Pre-norm residual block: RMSNorm, attention, RMSNorm, SwiGLU MLP."""

    def __init__(self, config: TinyLMConfig, rngs: nnx.Rngs) -> None:
        self.attention_norm = nnx.RMSNorm(config.width, rngs=rngs)
        self.attention = Attention(config, rngs)
        self.mlp_norm = nnx.RMSNorm(config.width, rngs=rngs)
        self.gate = nnx.Linear(config.width, config.mlp, use_bias=False, rngs=rngs)
        self.up = nnx.Linear(config.width, config.mlp, use_bias=False, rngs=rngs)
        self.down = nnx.Linear(config.mlp, config.width, use_bias=False, rngs=rngs)

    def __call__(
        self,
        x: jax.Array,
        positions: jax.Array,
        cache: LayerCache | None,
        attention_mask: jax.Array,
        causal_pieces: int | None = None,
    ) -> tuple[jax.Array, LayerCache | None]:
        mixed, cache = self.attention(
            self.attention_norm(x), positions, cache, attention_mask, causal_pieces
        )
        x = x + mixed
        h = self.mlp_norm(x)
        return x + self.down(jax.nn.silu(self.gate(h)) * self.up(h)), cache


class TinyLM(nnx.Module):
    """A from-scratch decoder-only transformer on the :class:`CausalLM` interface.

    Args:
        token_ids: int32[V] sorted tokenizer ids the model reads and writes (a
            bridge's ``vocab``): row ``i`` of the embedding and of the logits is
            token ``token_ids[i]``.
        config: its shape.
        rngs: initialisation randomness.

    Input ids outside ``token_ids`` read the embedding of the nearest row; the
    token rollout only feeds ids from the bridge's vocabulary (checked when it is
    built).
    """

    def __init__(self, token_ids: np.ndarray, config: TinyLMConfig, rngs: nnx.Rngs) -> None:
        token_ids = np.asarray(token_ids, np.int32)
        if token_ids.ndim != 1 or token_ids.size == 0 or np.any(np.diff(token_ids) <= 0):
            raise ValueError("token_ids must be a non-empty, strictly increasing int32[V]")
        self.token_ids = token_ids
        self.config = config
        self.embed = nnx.Embed(token_ids.size, config.width, rngs=rngs)
        self.blocks = nnx.List([Block(config, rngs) for _ in range(config.layers)])
        self.final_norm = nnx.RMSNorm(config.width, rngs=rngs)
        self.head = nnx.Linear(
            config.width,
            token_ids.size,
            use_bias=False,
            kernel_init=nnx.initializers.normal(0.02),
            rngs=rngs,
        )

    def rows(self, tokens: jax.Array) -> jax.Array:
        """int32[...]: the row of each tokenizer id in ``tokens``."""
        table = jnp.asarray(self.token_ids)
        return jnp.clip(jnp.searchsorted(table, tokens), 0, table.shape[0] - 1)

    def __call__(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: tuple[LayerCache, ...] | None,
        attention_mask: jax.Array,
    ) -> tuple[jax.Array, tuple[LayerCache, ...] | None]:
        """Logits float32[B, L, V] of the next token after each of ``tokens``
        (int32[B, L] tokenizer ids), and the cache with their keys and values."""
        x, new_cache = self._trunk(tokens, positions, cache, attention_mask)
        return self.head(self.final_norm(x)), new_cache

    def logits_at(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: tuple[LayerCache, ...] | None,
        attention_mask: jax.Array,
        at: jax.Array,
    ) -> tuple[jax.Array, tuple[LayerCache, ...] | None]:
        """The call's logits at int32[B, M] indices ``at`` of ``tokens`` only,
        float32[B, M, V] (the head applied there alone), and the cache (see
        :class:`SelectiveLogits`)."""
        x, new_cache = self._trunk(tokens, positions, cache, attention_mask)
        return self.head(self.final_norm(take_rows(x, at))), new_cache

    def causal_logits_at(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        attention_mask: jax.Array,
        at: jax.Array,
    ) -> jax.Array:
        """:meth:`logits_at` without a cache, for a bool[B, L, L] mask with nothing
        above its diagonal: each layer attends in :data:`CAUSAL_PIECES` runs of
        queries, each over the keys up to its end (:class:`CausalLogits`)."""
        x, _ = self._trunk(tokens, positions, None, attention_mask, CAUSAL_PIECES)
        return self.head(self.final_norm(take_rows(x, at)))

    def _trunk(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: tuple[LayerCache, ...] | None,
        attention_mask: jax.Array,
        causal_pieces: int | None = None,
    ) -> tuple[jax.Array, tuple[LayerCache, ...] | None]:
        """float32[B, L, width]: the last block's output over int32[B, L] ``tokens``
        (before the final norm), and the updated cache (None without one)."""
        x = self.embed(self.rows(tokens))
        new_cache: list[LayerCache] = []
        for index, block in enumerate(self.blocks):
            layer_cache = None if cache is None else cache[index]
            x, layer = block(x, positions, layer_cache, attention_mask, causal_pieces)
            if layer is not None:
                new_cache.append(layer)
        return x, None if cache is None else tuple(new_cache)

    def init_cache(self, batch: int, length: int) -> tuple[LayerCache, ...]:
        """An empty cache of ``length`` slots for ``batch`` lanes."""
        head_dim = self.config.width // self.config.heads
        shape = (batch, self.config.heads, length, head_dim)
        return tuple(
            LayerCache(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32))
            for _ in range(self.config.layers)
        )
