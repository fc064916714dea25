"""LoRA adapters of a pretrained agent, exported in PEFT's on-disk layout.

A ``--policy llm --lora-rank R`` run trains qwix adapters (:func:`~gemjax.train.llm.with_lora`)
on the attention and MLP projections of a tunix Qwen3 or Qwen2.5. :func:`write_peft_adapters`
writes them as Hugging Face PEFT saves a LoRA adapter, so that PEFT, transformers or an
inference server can load them on the base model's folder:

* ``adapter_model.safetensors``: per adapted projection, float32
  ``base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`` of shape
  ``[r, in_features]`` and ``...lora_B.weight`` of shape ``[out_features, r]`` (the
  projection's Hugging Face ``weight`` is ``[out_features, in_features]``);
* ``adapter_config.json``: ``peft_type`` LORA, ``r``, ``lora_alpha``,
  ``target_modules`` and the base model's folder.

The adapted weight is PEFT's ``W + (lora_alpha / r) * B @ A``, equal to qwix's
``x @ (kernel + (alpha / rank) * a @ b)`` once the tunix kernel ``[in..., out...]``
(heads and head size flattened in row-major order, as tunix's loader reshapes the
Hugging Face weight) is transposed: ``A = a.reshape(in, r).T`` and
``B = b.reshape(r, out).T``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from flax import nnx

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
# tunix's block names inside a decoder layer and Hugging Face's for the same module
HF_BLOCKS = {"attn": "self_attn", "mlp": "mlp"}


def _hf_module(path: tuple[Any, ...]) -> str:
    """Hugging Face's module name (``model.layers.3.self_attn.q_proj``) of a tunix
    module path (``('model', 'layers', 3, 'attn', 'q_proj')``, the first entry being
    :class:`~gemjax.train.llm.PretrainedLM`'s ``model`` attribute).

    Raises:
        ValueError: a path outside a decoder layer's attention or MLP.
    """
    inner = path[1:]
    if len(inner) != 4 or inner[0] != "layers" or inner[2] not in HF_BLOCKS:
        dotted = ".".join(str(p) for p in path)
        raise ValueError(
            f"a LoRA adapter on {dotted} has no PEFT name: only the attention and MLP "
            "projections of the decoder layers can be exported"
        )
    _, layer, block, name = inner
    return f"model.layers.{int(layer)}.{HF_BLOCKS[block]}.{name}"


def lora_pairs(params: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each adapted projection of an ``nnx.Param`` state (with ``nnx.LoRAParam``
    leaves, :func:`~gemjax.train.llm.with_lora`), by Hugging Face module name:
    qwix's ``a`` [in..., r] and ``b`` [r, out...] as float32 NumPy arrays.

    Raises:
        ValueError: no adapter, an ``a`` without its ``b`` (or kernel), a kernel
            whose shape is not ``a``'s inputs then ``b``'s outputs, or an adapter
            outside the decoder layers' projections.
    """
    flat = {tuple(path): variable for path, variable in nnx.to_flat_state(params)}
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for path, variable in flat.items():
        if not (isinstance(variable, nnx.LoRAParam) and str(path[-1]).endswith("_lora_a")):
            continue
        weight = str(path[-1])[: -len("_lora_a")]
        b_path, kernel_path = (*path[:-1], weight + "_lora_b"), (*path[:-1], weight)
        if b_path not in flat or kernel_path not in flat:
            raise ValueError(f"{'.'.join(map(str, path))} has no lora_b or kernel beside it")
        a = np.asarray(flat[path].get_value(), np.float32)
        b = np.asarray(flat[b_path].get_value(), np.float32)
        kernel = tuple(flat[kernel_path].get_value().shape)
        if a.shape[-1] != b.shape[0] or kernel != (*a.shape[:-1], *b.shape[1:]):
            raise ValueError(
                f"{'.'.join(map(str, path[:-1]))}: adapters {a.shape} and {b.shape} do not "
                f"factor its kernel {kernel} as [inputs..., outputs...]"
            )
        pairs[_hf_module(path[:-1])] = (a, b)
    if not pairs:
        raise ValueError("the parameters hold no LoRA adapters (see gemjax.train.llm.with_lora)")
    return pairs


def peft_tensors(pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """PEFT's tensors of :func:`lora_pairs` (see the module docstring): float32
    ``lora_A.weight`` [r, in_features] and ``lora_B.weight`` [out_features, r] under
    ``base_model.model.{module}.``."""
    tensors = {}
    for module, (a, b) in pairs.items():
        rank = a.shape[-1]
        prefix = f"{PEFT_PREFIX}{module}."
        tensors[prefix + "lora_A.weight"] = np.ascontiguousarray(a.reshape(-1, rank).T)
        tensors[prefix + "lora_B.weight"] = np.ascontiguousarray(b.reshape(rank, -1).T)
    return tensors


def _decoder_layers(params: Any) -> int:
    """How many decoder layers (``model.layers.{i}``) an ``nnx.Param`` state has."""
    paths = (tuple(path) for path, _ in nnx.to_flat_state(params))
    return len({path[2] for path in paths if len(path) > 2 and path[1] == "layers"})


def _target_modules(modules: list[str], layers: int) -> list[str] | str:
    """PEFT's ``target_modules``: the projection names (``["k_proj", "q_proj"]``)
    when every one of the ``layers`` decoder layers has the same ones, else a regex
    that PEFT full-matches against exactly the adapted modules' names."""
    names = sorted({module.rsplit(".", 1)[1] for module in modules})
    per_layer = {module.split(".")[2] for module in modules}
    if len(modules) == len(names) * layers and len(per_layer) == layers:
        return names
    return "|".join(module.replace(".", r"\.") for module in sorted(modules))


def write_peft_adapters(
    params: Any, out_dir: str | Path, alpha: float, base_model: str
) -> list[Path]:
    """Write the LoRA adapters of ``params`` (an ``nnx.Param`` state of a
    :func:`~gemjax.train.llm.with_lora` policy) to ``out_dir`` as PEFT does:
    ``adapter_model.safetensors`` and ``adapter_config.json`` (``r``, ``lora_alpha``
    = ``alpha``, qwix's scale numerator, ``target_modules``, and ``base_model``
    as ``base_model_name_or_path``).

    Returns:
        The two files written.

    Raises:
        ValueError: see :func:`lora_pairs`; adapters of different ranks;
            ``out_dir`` is a file.
    """
    from safetensors.numpy import save_file

    pairs = lora_pairs(params)
    ranks = {a.shape[-1] for a, _ in pairs.values()}
    if len(ranks) != 1:
        raise ValueError(f"the adapters have several ranks {sorted(ranks)}: PEFT needs one r")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir} is a file: name a directory for the adapters")
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": ranks.pop(),
        "lora_alpha": int(alpha) if float(alpha).is_integer() else float(alpha),
        "target_modules": _target_modules(list(pairs), _decoder_layers(params)),
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
        "inference_mode": True,
    }
    weights, settings = out_dir / ADAPTER_WEIGHTS, out_dir / ADAPTER_CONFIG
    save_file(peft_tensors(pairs), str(weights), metadata={"format": "pt"})
    settings.write_text(json.dumps(config, indent=2) + "\n")
    return [weights, settings]
