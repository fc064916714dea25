"""Pretrained LLMs as the token agent: Qwen3 and Qwen2.5 from a local Hugging Face folder.

:func:`load_pretrained` reads a folder as Hugging Face writes it (``config.json``,
``*.safetensors``, the tokenizer files), builds the matching Flax NNX model of
google-tunix (the ``gemjax[llm]`` extra) with tunix's own safetensors loader, and
wraps it as a :class:`PretrainedLM`, a :class:`~gemjax.train.lm.CausalLM`, so the
token rollout, its ReBN update and the rest of :mod:`gemjax.train` run it
unchanged. Nothing is downloaded; tunix is imported only when a model is loaded.

The architecture comes from ``config.json``'s ``model_type``:

* ``qwen3``: ``tunix.models.qwen3`` (dense models; tunix's Qwen3 rotates with
  theta 1,000,000 whatever the config says, so other thetas are refused);
* ``qwen2`` (Qwen2.5): ``tunix.models.qwen2``.

**Cache layout.** tunix's cache (``init_cache``: per layer ``k``/``v`` of
``[B, S, kv_heads, head_dim]`` and ``end_index`` int32[B]) writes a call's ``L``
keys at slot ``end_index[0]`` for every lane (``dynamic_update_slice``, so a
write that would run past the cache is moved back, and the index wraps modulo
``S``). gemjax's interface writes each lane at its own positions and drops slots
past the cache. :class:`PretrainedLM` maps one onto the other: it runs the tunix
model once per lane (``jax.vmap``) with ``end_index`` set to the lane's first
position (at most ``S``), and its caches carry ``spare_slots`` slots past the
``S`` the rollout asked for (more are appended for a call longer than that), which
the attention mask hides and every call drops, so no write is ever moved or
wrapped. Its calls' positions must therefore be consecutive in each lane
(``positions[b] = positions[b, 0] + arange(L)``), as the token rollout's prefill
pieces and generated tokens are.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from transformers import PreTrainedTokenizerBase

from gemjax.tokenizer_bridge.bridge import TokenBridge
from gemjax.tokenizer_bridge.tokenizers import load_tokenizer
from gemjax.train.lm import take_rows
from gemjax.train.token_rollout import TokenLoopConfig, TokenRollout
from gemjax.train.token_trainer import (
    TokenTrainConfig,
    TokenTrainer,
    TokenTrainState,
    make_optimizer,
    staged_trainer,
)

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
TUNIX_THETA = 1_000_000  # the rotary base tunix 0.1.7's Qwen3 attention always uses
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"))


@dataclass(frozen=True)
class Family:
    """One architecture: its tunix package and the Hugging Face tensors it reads.

    Attributes:
        package: the tunix module holding ``model`` and ``params``.
        layer_tensors: each layer's tensor names after ``model.layers.{i}.``.
    """

    package: str
    layer_tensors: tuple[str, ...]


_COMMON_LAYER = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
)
FAMILIES: dict[str, Family] = {
    "qwen3": Family(
        "tunix.models.qwen3",
        (*_COMMON_LAYER, "self_attn.q_norm.weight", "self_attn.k_norm.weight"),
    ),
    "qwen2": Family(
        "tunix.models.qwen2",
        (
            *_COMMON_LAYER,
            "self_attn.q_proj.bias",
            "self_attn.k_proj.bias",
            "self_attn.v_proj.bias",
        ),
    ),
}


def _tunix(family: Family) -> tuple[Any, Any]:
    """tunix's ``model`` and ``params`` modules of ``family`` (imported here, lazily).

    Raises:
        ImportError: google-tunix is not installed.
    """
    try:
        model = importlib.import_module(f"{family.package}.model")
        params = importlib.import_module(f"{family.package}.params")
    except ImportError as error:
        raise ImportError(
            "pretrained models need google-tunix: pip install 'gemjax[llm]'"
        ) from error
    return model, params


Cache = dict[str, dict[str, jax.Array]]
"""tunix's KV cache: per layer name, ``k``/``v`` [B, slots, kv_heads, head_dim] and
``end_index`` int32[B]."""


def _apply(
    model: Any,
    tokens: jax.Array,
    positions: jax.Array,
    cache: Cache | None,
    attention_mask: jax.Array,
    at: jax.Array | None,
) -> tuple[jax.Array, Cache | None]:
    """A tunix model's call: its logits float32[B, L, V] over its rows (``at`` None),
    or those at int32[B, M] indices ``at`` only, its output layer applied there
    alone (the final-norm output it sows on ``output_hidden_states``)."""
    if at is None:
        return model(tokens, positions, cache, attention_mask)
    _, cache = model(tokens, positions, cache, attention_mask, output_hidden_states=True)
    (hidden,) = jax.tree.leaves(nnx.pop(model, nnx.Intermediate))
    picked = take_rows(hidden, at)
    if model.config.use_tied_embedding:
        logits = model.embedder.decode(picked)
    else:
        logits = model.lm_head(picked)
    return logits.astype(jnp.float32), cache


class PretrainedLM(nnx.Module):
    """A tunix causal LM on gemjax's :class:`~gemjax.train.lm.CausalLM` interface.

    Args:
        model: a tunix ``Qwen3``/``Qwen2`` (an ``nnx.Module`` whose weights are
            ``nnx.Param``; typed ``Any``: tunix ships no type information, and
            its ``config``, ``init_cache`` and ``get_model_input`` are read).
        token_ids: int32[V] the tokenizer's ids, sorted, each below the
            embedding's row count: the rows of the logits.
        spare_slots: cache slots kept past the context (see the module docstring);
            a call of more tokens appends the rest for that call.

    Attributes:
        model, token_ids, spare_slots: as given.
    """

    def __init__(self, model: Any, token_ids: np.ndarray, spare_slots: int = 64) -> None:
        token_ids = np.asarray(token_ids, np.int32)
        if token_ids.ndim != 1 or token_ids.size == 0 or np.any(np.diff(token_ids) <= 0):
            raise ValueError("token_ids must be a non-empty, strictly increasing int32[V]")
        rows = model.config.vocab_size
        if token_ids[-1] >= rows:
            raise ValueError(f"token id {int(token_ids[-1])} has no row in a {rows}-row embedding")
        if isinstance(spare_slots, bool) or not isinstance(spare_slots, int) or spare_slots < 0:
            raise ValueError(f"spare_slots must be an int >= 0, got {spare_slots!r}")
        self.model = model
        self.token_ids = token_ids
        self.spare_slots = spare_slots
        self._prefix = bool(np.array_equal(token_ids, np.arange(token_ids.size)))

    def _rows(self, logits: jax.Array) -> jax.Array:
        """float32[..., V]: the logits of ``token_ids`` out of the embedding's rows."""
        if self._prefix:
            return logits[..., : self.token_ids.size]
        return jnp.take(logits, jnp.asarray(self.token_ids), axis=-1)

    def __call__(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: Cache | None,
        attention_mask: jax.Array,
    ) -> tuple[jax.Array, Cache | None]:
        """Logits float32[B, L, V] after each of ``tokens`` (int32[B, L] tokenizer
        ids at int32[B, L] ``positions``) and the cache holding their keys.

        ``attention_mask`` is bool[B, L, S] over the ``S`` slots of the context
        with a cache (from :meth:`init_cache`, whose spare slots it does not
        cover), bool[B, L, L] without one (``cache=None``)."""
        return self._forward(tokens, positions, cache, attention_mask, None)

    def logits_at(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: Cache | None,
        attention_mask: jax.Array,
        at: jax.Array,
    ) -> tuple[jax.Array, Cache | None]:
        """The call's logits at int32[B, M] indices ``at`` of ``tokens`` only,
        float32[B, M, V], and the cache (:class:`~gemjax.train.lm.SelectiveLogits`).

        tunix's model records its final-norm output when asked
        (``output_hidden_states``); its own output layer (the tied embedding's
        ``decode`` or ``lm_head``) is applied to the ``M`` picked rows, and the
        logits of every position, unused, are left to XLA's dead-code elimination."""
        return self._forward(tokens, positions, cache, attention_mask, at)

    def _forward(
        self,
        tokens: jax.Array,
        positions: jax.Array,
        cache: Cache | None,
        attention_mask: jax.Array,
        at: jax.Array | None,
    ) -> tuple[jax.Array, Cache | None]:
        """The call (``at`` None) or :meth:`logits_at`."""
        if cache is None:
            logits, _ = _apply(self._current(), tokens, positions, None, attention_mask, at)
            return self._rows(logits), None
        context = attention_mask.shape[-1]
        length = tokens.shape[1]
        layers = sorted(cache)
        slots = cache[layers[0]]["k"].shape[1]
        extra = max(0, context + length - slots)
        grow = lambda x: jnp.pad(x, ((0, 0), (0, extra), (0, 0), (0, 0)))  # noqa: E731
        keys = {name: (grow(cache[name]["k"]), grow(cache[name]["v"])) for name in layers}
        mask = jnp.pad(attention_mask, ((0, 0), (0, 0), (0, slots + extra - context)))
        start = jnp.minimum(positions[:, 0], context).astype(jnp.int32)
        graph, state = nnx.split(self.model)

        def lane(tokens, positions, mask, keys, start, at):
            one = {
                name: {"k": k[None], "v": v[None], "end_index": start[None]}
                for name, (k, v) in keys.items()
            }
            model = nnx.merge(graph, state)  # built inside the vmap: see _current
            picks = None if at is None else at[None]
            logits, fed = _apply(model, tokens[None], positions[None], one, mask[None], picks)
            assert fed is not None  # a call with a cache returns one
            return logits[0], {name: (fed[name]["k"][0], fed[name]["v"][0]) for name in fed}

        logits, keys = jax.vmap(lane)(tokens, positions, mask, keys, start, at)
        end = jnp.minimum(positions[:, -1] + 1, context).astype(jnp.int32)
        new_cache = {
            name: {"k": k[:, :slots], "v": v[:, :slots], "end_index": end}
            for name, (k, v) in keys.items()
        }
        return self._rows(logits), new_cache

    def _current(self) -> Any:
        """The tunix model rebuilt at the current trace level (qwix's LoRA layers
        record attributes on each call, which nnx allows only there)."""
        graph, state = nnx.split(self.model)
        return nnx.merge(graph, state)

    def init_cache(self, batch: int, length: int) -> Cache:
        """tunix's empty cache for ``batch`` lanes of ``length`` slots plus the spare
        ones: per layer ``k``/``v`` [batch, length + spare_slots, kv_heads,
        head_dim] in the model's dtype and ``end_index`` int32[batch]."""
        config = self.model.config
        shape = (batch, length + self.spare_slots, config.num_kv_heads, config.head_dim)
        # Built here rather than by tunix's ``init_cache``, which its Qwen2 lacks
        # (its layers read and write the same per-layer dicts).
        return {
            f"layer_{index}": {
                "k": jnp.zeros(shape, config.dtype),
                "v": jnp.zeros(shape, config.dtype),
                "end_index": jnp.zeros((batch,), jnp.int32),
            }
            for index in range(config.num_layers)
        }

    def logits(self, ids: jax.Array) -> jax.Array:
        """float32[B, T, V]: the causal logits of int32[B, T] tokenizer ids at
        positions ``0..T-1`` (one cache-free forward pass; jittable)."""
        length = ids.shape[1]
        positions = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), ids.shape)
        mask = jnp.broadcast_to(
            jnp.tril(jnp.ones((length, length), jnp.bool_)), (*ids.shape, length)
        )
        return self(ids, positions, None, mask)[0]


LORA_MODULES = ".*(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


def with_lora(
    policy: PretrainedLM,
    rank: int,
    alpha: float | None = None,
    modules: str = LORA_MODULES,
    seed: int = 0,
) -> PretrainedLM:
    """``policy`` with qwix LoRA adapters (``nnx.LoRAParam``: A drawn from ``seed``,
    B zero, so the logits start equal) on the projections matching ``modules``
    (a regex over module paths; default: attention and MLP projections). A
    :class:`PretrainedTrainer` of it trains the adapters only.

    Raises:
        ValueError: ``rank`` < 1, or no module matches.
        ImportError: qwix (installed with google-tunix) is missing.
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank must be an int >= 1, got {rank!r}")
    try:
        import qwix
    except ImportError as error:
        raise ImportError("LoRA needs qwix: pip install 'gemjax[llm]'") from error
    provider = qwix.LoraProvider(module_path=modules, rank=rank, alpha=lora_alpha(rank, alpha))
    model = qwix.apply_lora_to_model(
        policy.model, provider, **policy.model.get_model_input(), rngs=nnx.Rngs(seed)
    )
    lora = PretrainedLM(model, policy.token_ids, spare_slots=policy.spare_slots)
    if not jax.tree.leaves(nnx.state(lora, nnx.LoRAParam)):
        raise ValueError(f"no module of the model matches the LoRA pattern {modules!r}")
    return lora


def lora_alpha(rank: int, alpha: float | None = None) -> float:
    """The adapters' scale numerator (their output is scaled by ``alpha / rank``):
    ``alpha``, or twice the rank when it is ``None``."""
    return float(2 * rank if alpha is None else alpha)


def _is_variable(x: Any) -> bool:
    return isinstance(x, nnx.Variable)


def adapter_labels(params: Any) -> Any:
    """``"lora"`` for each ``nnx.LoRAParam`` of a parameter state, ``"frozen"`` for
    the other parameters (optax ``multi_transform`` labels)."""
    return jax.tree.map(
        lambda v: "lora" if isinstance(v, nnx.LoRAParam) else "frozen",
        params,
        is_leaf=_is_variable,
    )


def read_config(folder: Path) -> dict[str, Any]:
    """``config.json`` of ``folder`` as a dict.

    Raises:
        FileNotFoundError: the folder or its ``config.json`` is missing.
        ValueError: the file is not a JSON object with a known ``model_type``.
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"no model folder at {folder}")
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: a Hugging Face model folder needs it")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(config, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise ValueError(
            f"{path}: model_type {model_type!r} is not supported; supported: "
            f"{', '.join(sorted(FAMILIES))}"
        )
    return config


def _rope_theta(config: dict[str, Any]) -> float:
    """The rotary base of a config (``rope_theta``, or transformers 5's
    ``rope_parameters``; Hugging Face's default 10,000 when neither is given)."""
    parameters = config.get("rope_parameters") or {}
    return float(config.get("rope_theta", parameters.get("rope_theta", 10_000.0)))


def tunix_config(config: dict[str, Any], dtype: Any, param_dtype: Any) -> Any:
    """The tunix ``ModelConfig`` of a Hugging Face ``config.json`` dict.

    Raises:
        ValueError: a setting the tunix model cannot express (attention bias in a
            Qwen3, a rotary scaling, sliding windows, a Qwen3 theta other than
            tunix's).
    """
    model_type = config["model_type"]
    module, _ = _tunix(FAMILIES[model_type])
    if config.get("use_sliding_window"):
        raise ValueError("config.json: sliding-window attention is not supported")
    parameters = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    if parameters.get("rope_type", "default") != "default" or scaling:
        raise ValueError("config.json: rotary scaling is not supported")
    theta = _rope_theta(config)
    if model_type == "qwen3":
        if config.get("attention_bias"):
            raise ValueError("config.json: a Qwen3 with attention_bias is not supported")
        if config.get("num_experts"):
            raise ValueError("config.json: mixture-of-experts Qwen3 is not supported")
        if theta != TUNIX_THETA:
            raise ValueError(
                f"config.json: rope_theta {theta:g}: tunix's Qwen3 rotates with "
                f"{TUNIX_THETA:g} only"
            )
    heads = config["num_attention_heads"]
    return module.ModelConfig(
        num_layers=config["num_hidden_layers"],
        vocab_size=config["vocab_size"],
        embed_dim=config["hidden_size"],
        hidden_dim=config["intermediate_size"],
        num_heads=heads,
        head_dim=config.get("head_dim") or config["hidden_size"] // heads,
        num_kv_heads=config.get("num_key_value_heads", heads),
        rope_theta=int(theta),
        norm_eps=config["rms_norm_eps"],
        use_tied_embedding=bool(config.get("tie_word_embeddings", False)),
        dtype=dtype,
        param_dtype=param_dtype,
    )


def expected_tensors(config: dict[str, Any]) -> list[str]:
    """The Hugging Face tensor names a model of ``config`` must have."""
    family = FAMILIES[config["model_type"]]
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    if not config.get("tie_word_embeddings", False):
        names.append("lm_head.weight")
    for layer in range(config["num_hidden_layers"]):
        names += [f"model.layers.{layer}.{name}" for name in family.layer_tensors]
    return names


def check_weights(folder: Path, config: dict[str, Any]) -> None:
    """Every tensor the model needs is in the folder's safetensors files.

    Raises:
        FileNotFoundError: no ``*.safetensors`` file, or one that
            ``model.safetensors.index.json`` names is missing.
        ValueError: a needed tensor is in no file.
    """
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        for name in sorted(set(json.loads(index.read_text()).get("weight_map", {}).values())):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder / name} is missing ({index.name} names it)")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no *.safetensors weights")
    present: set[str] = set()
    for path in files:
        with safe_open(str(path), framework="numpy") as handle:
            present.update(handle.keys())
    missing = [name for name in expected_tensors(config) if name not in present]
    if missing:
        raise ValueError(
            f"the safetensors files of {folder} ({', '.join(p.name for p in files)}) lack "
            f"{len(missing)} tensors the config needs, e.g. {', '.join(missing[:3])}"
        )


def load_folder_tokenizer(folder: Path, vocab_size: int) -> PreTrainedTokenizerBase:
    """The folder's tokenizer, checked against the embedding's ``vocab_size`` rows.

    Raises:
        FileNotFoundError: no ``tokenizer.json`` (nor ``vocab.json`` and
            ``merges.txt``).
        ValueError: a token id has no row in the embedding.
    """
    if not any(all((folder / name).is_file() for name in names) for names in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"{folder / 'tokenizer.json'} is missing: the folder needs its tokenizer files"
        )
    tokenizer = load_tokenizer(str(folder))
    largest = max(tokenizer.get_vocab().values())
    if largest >= vocab_size:
        raise ValueError(
            f"the tokenizer of {folder} has id {largest}, but config.json's vocab_size "
            f"(the embedding's rows) is {vocab_size}: they do not belong together"
        )
    return tokenizer


def load_pretrained(
    folder: str | Path,
    dtype: Any = jnp.float32,
    param_dtype: Any = None,
    mesh: jax.sharding.Mesh | None = None,
    spare_slots: int = 64,
) -> tuple[PretrainedLM, PreTrainedTokenizerBase]:
    """A local Hugging Face folder as a token-agent policy and its tokenizer.

    Args:
        folder: holds ``config.json`` (``model_type`` qwen3 or qwen2),
            ``*.safetensors`` under Hugging Face's tensor names and the tokenizer
            files (``tokenizer.json``, as ``save_pretrained`` writes them).
        dtype: the model's compute dtype (``jnp.bfloat16`` halves memory and
            time on accelerators); logits are float32 either way.
        param_dtype: the weights' dtype (default: ``dtype``).
        mesh: place the weights on this mesh by tunix's sharding annotations
            (axes ``fsdp`` and ``tp``); default: the first device.
        spare_slots: see :class:`PretrainedLM`.

    Returns:
        ``(policy, tokenizer)``: the :class:`PretrainedLM` (its ``token_ids`` are
        every id of the tokenizer) and the tokenizer to build the
        :class:`~gemjax.tokenizer_bridge.TokenBridge` with.

    Raises:
        FileNotFoundError: the folder, ``config.json``, the weights or the
            tokenizer files are missing (the message names the file).
        ValueError: an unknown ``model_type``, a setting tunix cannot express,
            missing tensors, or a tokenizer whose ids the embedding does not cover.
        ImportError: google-tunix is not installed.
    """
    folder = Path(folder).expanduser()
    config = read_config(folder)
    param_dtype = dtype if param_dtype is None else param_dtype
    model_config = tunix_config(config, dtype, param_dtype)
    check_weights(folder, config)
    tokenizer = load_folder_tokenizer(folder, model_config.vocab_size)
    _, params = _tunix(FAMILIES[config["model_type"]])
    model = params.create_model_from_safe_tensors(
        str(folder), model_config, mesh=mesh, dtype=param_dtype
    )
    token_ids = np.asarray(sorted(tokenizer.get_vocab().values()), np.int32)
    return PretrainedLM(model, token_ids, spare_slots=spare_slots), tokenizer


@dataclass(frozen=True)
class PretrainedTrainer(TokenTrainer):
    """A :class:`~gemjax.train.token_trainer.TokenTrainer` whose runs start from a
    pretrained policy's weights instead of a fresh :class:`~gemjax.train.lm.TinyLM`.

    Attributes:
        initial: the policy's ``nnx.Param`` state every run starts from
            (:meth:`initial_params`).
    """

    initial: Any = None

    def initial_params(self, key: jax.Array) -> Any:
        """The pretrained weights (``key`` is not used: nothing is drawn)."""
        return jax.tree.map(jnp.asarray, self.initial)


def make_pretrained_train(
    config: TokenTrainConfig, policy: PretrainedLM, bridge: TokenBridge
) -> PretrainedTrainer:
    """The token trainer of ``config`` (its estimator, optimizer, loop sizes and
    warm-up and curriculum; its ``model`` and ``tokenizer`` fields are not used) with
    ``policy`` as the agent on ``bridge`` (built with the policy's tokenizer). A
    policy with LoRA adapters (:func:`with_lora`) trains them only.

    Raises:
        ValueError: see :class:`~gemjax.train.token_rollout.TokenRollout` and
            :func:`~gemjax.train.token_trainer.staged_trainer`.
    """
    rollout = TokenRollout(policy, bridge, config.loop, tokenizer=bridge.tokenizer)
    optimizer = make_optimizer(config)
    if jax.tree.leaves(nnx.state(policy, nnx.LoRAParam)):
        # adapters only: the base weights get zero updates and no optimizer state
        optimizer = optax.multi_transform(
            {"lora": optimizer, "frozen": optax.set_to_zero()}, adapter_labels
        )
    return staged_trainer(
        PretrainedTrainer, config, rollout, optimizer, initial=nnx.state(policy, nnx.Param)
    )


# --- runs: gemjax train --policy llm, gemjax eval ---------------------------------------


def resolve_dtype(name: str) -> str:
    """``float32`` or ``bfloat16``; ``auto`` is bfloat16 on an accelerator, float32
    on CPU (where bfloat16 matmuls are emulated and slower).

    Raises:
        ValueError: another name.
    """
    if name == "auto":
        return "float32" if jax.default_backend() == "cpu" else "bfloat16"
    if name not in DTYPES:
        raise ValueError(f"dtype must be auto, float32 or bfloat16, got {name!r}")
    return name


@dataclass(frozen=True)
class PretrainedTrainConfig(TokenTrainConfig):
    """A :class:`~gemjax.train.token_trainer.TokenTrainConfig` whose agent is a
    pretrained model (its ``model`` and ``tokenizer`` fields are unused).

    Attributes:
        model_folder: the Hugging Face folder (:func:`load_pretrained`).
        dtype: ``float32`` or ``bfloat16`` (compute and weights).
        lora_rank: train LoRA adapters of this rank only (:func:`with_lora`);
            ``None``: every weight trains.
        lora_alpha: their scale numerator (``None``: twice the rank).
    """

    POLICY: ClassVar[str] = "llm"
    model_folder: str = ""
    dtype: str = "float32"
    lora_rank: int | None = None
    lora_alpha: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model_folder:
            raise ValueError("model_folder must name a Hugging Face model folder")
        resolve_dtype(self.dtype)
        rank = self.lora_rank
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise ValueError(f"lora_rank must be an int >= 1, got {rank!r}")


def bridge_for(
    env_id: str, tokenizer: PreTrainedTokenizerBase, loop: TokenLoopConfig
) -> TokenBridge:
    """The token bridge of ``env_id`` for ``tokenizer``, its prompt buffer the context."""
    from gemjax.registry import make

    return TokenBridge(make(env_id), tokenizer, prompt_capacity=loop.context)


def make_run_trainer(config: PretrainedTrainConfig) -> PretrainedTrainer:
    """Load ``config.model_folder`` and build its :class:`PretrainedTrainer`."""
    policy, tokenizer = load_pretrained(config.model_folder, dtype=DTYPES[config.dtype])
    if config.lora_rank is not None:
        policy = with_lora(policy, config.lora_rank, config.lora_alpha, seed=0)
    return make_pretrained_train(config, policy, bridge_for(config.env_id, tokenizer, config.loop))


def run_pretrained(
    config: PretrainedTrainConfig,
    out_dir: Path,
    seed: int = 0,
    checkpoint_every: int = 10,
    progress: bool = True,
) -> Any:
    """:func:`gemjax.train.host.run_token` for a pretrained agent: its format
    warm-up (if ``warmup_updates``) and RL chunks into ``out_dir``, with
    ``metrics.jsonl``, the plot, orbax checkpoints of the whole state (weights and
    optimizer) and exact resume under the same rules. Returns its ``RunResult``."""
    from gemjax.checks import integer
    from gemjax.train.host import run_token_phases

    if integer("checkpoint_every", checkpoint_every) < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    trainer = make_run_trainer(config)
    title = f"{config.env_id} {Path(config.model_folder).name} {config.algo}"
    return run_token_phases(config, trainer, out_dir, seed, checkpoint_every, progress, title)


def load_pretrained_run(out_dir: Path) -> tuple[PretrainedTrainer, TokenTrainState]:
    """The trainer and latest checkpointed state of a ``--policy llm`` run
    (:func:`gemjax.train.host.load_run`; the model folder is loaded again).

    Raises:
        gemjax.train.host.RunMismatch: no such run, or no checkpoint yet.
    """
    from gemjax.train.host import load_run

    return load_run(out_dir, PretrainedTrainConfig, make_run_trainer)


def export_run_adapters(run_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write the LoRA adapters of a ``--policy llm --lora-rank R`` run's latest
    checkpoint to ``out_dir`` in PEFT's layout
    (:func:`gemjax.train.adapters.write_peft_adapters`), with the run's model folder
    as the base model. Returns the files written.

    Raises:
        gemjax.train.host.RunMismatch: no such run, or no checkpoint yet.
        ValueError: the run trained every weight (no adapters).
    """
    from gemjax.train.adapters import write_peft_adapters
    from gemjax.train.host import CONFIG_FILE

    run_dir = Path(run_dir)
    path = run_dir / CONFIG_FILE
    settings = json.loads(path.read_text()) if path.is_file() else {}
    if settings.get("policy") == PretrainedTrainConfig.POLICY and not settings.get("lora_rank"):
        # before the model is loaded: a full fine-tune has no adapters
        raise ValueError(f"{run_dir} trained every weight (no --lora-rank): it has no adapters")
    trainer, state = load_pretrained_run(run_dir)
    config = trainer.config
    if not isinstance(config, PretrainedTrainConfig) or config.lora_rank is None:
        raise ValueError(f"{run_dir} is not a pretrained-LLM run with LoRA adapters")
    alpha = lora_alpha(config.lora_rank, config.lora_alpha)
    return write_peft_adapters(state.params, out_dir, alpha, config.model_folder)


@dataclass(frozen=True)
class Evaluation:
    """One id's evaluation over ``episodes`` episodes: the fraction that succeeded,
    ``mean_turns`` (turns played per episode), ``format_error_rate`` (per played
    turn) and ``context_cut`` (the fraction stopped by the context rule)."""

    env_id: str
    episodes: int
    success: float
    mean_turns: float
    format_error_rate: float
    context_cut: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def evaluate_pretrained(
    policy: PretrainedLM,
    tokenizer: PreTrainedTokenizerBase,
    env_id: str,
    episodes: int,
    loop: TokenLoopConfig,
    seed: int = 0,
    greedy: bool = True,
    batch: int = 64,
) -> Evaluation:
    """Play ``episodes`` episodes of ``env_id`` with ``policy`` fully on device (the
    token rollout, ``batch`` episodes a call) and average their statistics.

    Raises:
        ValueError: see :class:`~gemjax.train.token_rollout.TokenRollout`, or
            ``episodes``/``batch`` below 1.
    """
    for name, value in (("episodes", episodes), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    rollout = TokenRollout(policy, bridge_for(env_id, tokenizer, loop), loop, tokenizer=tokenizer)
    params = nnx.state(policy, nnx.Param)
    calls = -(-episodes // batch)
    size = -(-episodes // calls)

    @jax.jit
    def play(params: Any, key: jax.Array) -> dict[str, jax.Array]:
        """Per-episode statistics of ``size`` episodes (each [size])."""
        reset_key, key = jax.random.split(key)
        traj = rollout.collect(params, jax.random.split(reset_key, size), key, greedy=greedy)
        return {
            "success": jnp.any(traj.success, axis=0),
            "turns": jnp.sum(traj.valid, axis=0),
            "format_errors": jnp.sum(traj.format_error & traj.valid, axis=0),
            "context_cut": traj.context_cut,
        }

    keys = jax.random.split(jax.random.key(seed), calls)
    parts = [jax.device_get(play(params, key)) for key in keys]
    stats = {name: np.concatenate([p[name] for p in parts])[:episodes] for name in parts[0]}
    turns = int(stats["turns"].sum())
    return Evaluation(
        env_id=env_id,
        episodes=episodes,
        success=float(stats["success"].mean()),
        mean_turns=float(stats["turns"].mean()),
        format_error_rate=float(stats["format_errors"].sum() / max(turns, 1)),
        context_cut=float(stats["context_cut"].mean()),
    )
