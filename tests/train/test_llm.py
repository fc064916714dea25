"""Pretrained LLMs through google-tunix (``gemjax[llm]``): loading, logits, KV cache.

Each test model is a tiny random Qwen3 (or Qwen2.5) written as a Hugging Face folder
in a temporary directory: ``config.json`` by transformers' config class, the
weights under Hugging Face's tensor names with ``safetensors``, and gemjax's
``qwen3`` tokenizer saved with ``save_pretrained``. Its logits are checked
against a NumPy forward pass that follows Hugging Face's modelling code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

pytest.importorskip("tunix")
# The whole module is in CI only (left out of the quick tier, -m "not slow").
# One xdist group: its module fixtures (the model folder, the trainer) are built once.
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.slow,
    pytest.mark.xdist_group("llm"),
]

import gemjax  # noqa: E402
from gemjax.tokenizer_bridge import TokenBridge, load_tokenizer  # noqa: E402
from gemjax.train.llm import (  # noqa: E402
    PretrainedLM,
    PretrainedTrainConfig,
    evaluate_pretrained,
    load_pretrained,
    load_pretrained_run,
    make_pretrained_train,
    run_pretrained,
    with_lora,
)
from gemjax.train.lm import CausalLM, SelectiveLogits, causal_mask  # noqa: E402
from gemjax.train.token_rollout import Generated, TokenLoopConfig, prefill  # noqa: E402
from gemjax.train.token_trainer import TokenTrainConfig  # noqa: E402

VOCAB = 151_936  # Qwen3's embedding rows (the tokenizer's ids and padding)
SHAPE = dict(
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    rms_norm_eps=1e-6,
)
TOLERANCE = dict(rtol=1e-4, atol=1e-4)  # float32 against the NumPy reference


def random_weights(config: dict, seed: int) -> dict[str, np.ndarray]:
    """float32 tensors under Hugging Face's names ([out, in] linear weights)."""
    rng = np.random.default_rng(seed)
    d, f = config["hidden_size"], config["intermediate_size"]
    heads, kv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    normal = lambda *shape, scale=0.2: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    norm = lambda n: (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)  # noqa: E731
    weights = {
        "model.embed_tokens.weight": normal(VOCAB, d, scale=1.0),
        "model.norm.weight": norm(d),
    }
    if not config["tie_word_embeddings"]:
        weights["lm_head.weight"] = normal(VOCAB, d)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        weights |= {
            p + "self_attn.q_proj.weight": normal(heads * hd, d),
            p + "self_attn.k_proj.weight": normal(kv * hd, d),
            p + "self_attn.v_proj.weight": normal(kv * hd, d),
            p + "self_attn.o_proj.weight": normal(d, heads * hd),
            p + "mlp.gate_proj.weight": normal(f, d),
            p + "mlp.up_proj.weight": normal(f, d),
            p + "mlp.down_proj.weight": normal(d, f),
            p + "input_layernorm.weight": norm(d),
            p + "post_attention_layernorm.weight": norm(d),
        }
        if config["model_type"] == "qwen3":
            weights[p + "self_attn.q_norm.weight"] = norm(hd)
            weights[p + "self_attn.k_norm.weight"] = norm(hd)
        else:
            weights[p + "self_attn.q_proj.bias"] = normal(heads * hd)
            weights[p + "self_attn.k_proj.bias"] = normal(kv * hd)
            weights[p + "self_attn.v_proj.bias"] = normal(kv * hd)
    return weights


def write_folder(path: Path, model_type: str = "qwen3", tied: bool = True, seed: int = 0):
    """A Hugging Face folder of a tiny random model; returns (config dict, weights)."""
    from safetensors.numpy import save_file
    from transformers import Qwen2Config, Qwen3Config

    kind = Qwen3Config if model_type == "qwen3" else Qwen2Config
    theta = 1_000_000.0 if model_type == "qwen3" else 10_000.0
    hf = kind(
        vocab_size=VOCAB,
        tie_word_embeddings=tied,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        **SHAPE,
    )
    path.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(path))
    config = json.loads((path / "config.json").read_text())
    config["head_dim"] = SHAPE["head_dim"]
    weights = random_weights(config, seed)
    save_file(weights, str(path / "model.safetensors"))
    load_tokenizer("qwen3").save_pretrained(str(path))
    return config, weights


# --- a NumPy reference of Hugging Face's Qwen2/Qwen3 forward pass ----------------------


def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rotate(x: np.ndarray, theta: float) -> np.ndarray:
    """HF's rotary embedding of [T, H, D] at positions 0..T-1 (rotate_half)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(x.shape[0])[:, None] * inv[None]
    emb = np.concatenate([angles, angles], axis=-1)[:, None, :]
    half = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], axis=-1)
    return x * np.cos(emb) + half * np.sin(emb)


def reference_logits(config: dict, w: dict, ids: np.ndarray) -> np.ndarray:
    """float64[T, vocab] logits of one sequence of ids."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    heads, kv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    eps = config["rms_norm_eps"]
    theta = config["rope_parameters"]["rope_theta"]
    qwen3 = config["model_type"] == "qwen3"
    x = w["model.embed_tokens.weight"][ids]
    t = len(ids)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        h = _rms(x, w[f"model.layers.{i}.input_layernorm.weight"], eps)
        proj = {}
        for name, n in (("q", heads), ("k", kv), ("v", kv)):
            y = h @ w[p + f"{name}_proj.weight"].T
            if not qwen3:
                y = y + w[p + f"{name}_proj.bias"]
            proj[name] = y.reshape(t, n, hd)
        q, k, v = proj["q"], proj["k"], proj["v"]
        if qwen3:
            q, k = _rms(q, w[p + "q_norm.weight"], eps), _rms(k, w[p + "k_norm.weight"], eps)
        q, k = _rotate(q, theta), _rotate(k, theta)
        k, v = np.repeat(k, heads // kv, axis=1), np.repeat(v, heads // kv, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
        scores = np.where(np.tril(np.ones((t, t), bool))[None], scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        mixed = np.einsum("hts,shd->thd", scores, v).reshape(t, heads * hd)
        x = x + mixed @ w[p + "o_proj.weight"].T
        m = f"model.layers.{i}.mlp."
        h = _rms(x, w[f"model.layers.{i}.post_attention_layernorm.weight"], eps)
        gate = h @ w[m + "gate_proj.weight"].T
        up = h @ w[m + "up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[m + "down_proj.weight"].T
    x = _rms(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen3-tiny")
    config, weights = write_folder(path)
    return path, config, weights


@pytest.fixture(scope="module")
def qwen3(qwen3_folder):
    policy, tokenizer = load_pretrained(qwen3_folder[0])
    return policy, tokenizer


@pytest.fixture(scope="module")
def qwen2_untied(tmp_path_factory):
    """A tiny Qwen2 (untied output layer) and its tokenizer."""
    path = tmp_path_factory.mktemp("qwen2-tiny")
    write_folder(path, "qwen2", tied=False, seed=1)
    return load_pretrained(path)


@pytest.fixture(scope="module")
def sample_ids(qwen3):
    _, tokenizer = qwen3
    texts = [
        "You are playing Guess The Number. Guess a number between 1 and 50, then wait.",
        "My next guess is \\boxed{25}, because halving the range is what I think works.",
    ]
    encoded = [tokenizer.encode(t) for t in texts]
    size = min(len(e) for e in encoded)
    return np.asarray([e[:size] for e in encoded], np.int32)


# --- loading --------------------------------------------------------------------------


def test_policy_is_a_causal_lm_over_the_tokenizer(qwen3):
    policy, tokenizer = qwen3
    assert isinstance(policy, PretrainedLM)
    assert isinstance(policy, CausalLM)
    vocab = tokenizer.get_vocab()
    assert policy.token_ids.tolist() == sorted(vocab.values())
    assert policy.token_ids.dtype == np.int32


def test_logits_equal_the_reference(qwen3, qwen3_folder, sample_ids):
    policy, _ = qwen3
    _, config, weights = qwen3_folder
    logits = np.asarray(jax.jit(policy.logits)(jnp.asarray(sample_ids)))
    assert logits.dtype == np.float32
    assert logits.shape == (*sample_ids.shape, policy.token_ids.size)
    for lane, ids in enumerate(sample_ids):
        want = reference_logits(config, weights, ids)[:, policy.token_ids]
        np.testing.assert_allclose(logits[lane], want, **TOLERANCE)


@pytest.mark.parametrize("tied", [False])
def test_qwen2_untied_logits_equal_the_reference(tmp_path, tied, sample_ids):
    config, weights = write_folder(tmp_path, "qwen2", tied=tied, seed=1)
    policy, _ = load_pretrained(tmp_path)
    logits = np.asarray(jax.jit(policy.logits)(jnp.asarray(sample_ids[:1])))
    want = reference_logits(config, weights, sample_ids[0])[:, policy.token_ids]
    np.testing.assert_allclose(logits[0], want, **TOLERANCE)


@pytest.mark.parametrize("model_type", ["qwen3", "qwen2"])
def test_logits_at_equals_the_call_gathered(request, sample_ids, model_type):
    """tunix's output layer applied at chosen positions only (tied Qwen3, untied
    Qwen2) equals the call's logits there, without a cache and with one (the ids fed
    in two pieces), and leaves the same cache (1e-4)."""
    policy, _ = request.getfixturevalue({"qwen3": "qwen3", "qwen2": "qwen2_untied"}[model_type])
    assert isinstance(policy, SelectiveLogits)
    ids = jnp.asarray(sample_ids)
    batch, length = ids.shape
    half, slots = length // 2, 32
    positions = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), ids.shape)
    at = jnp.asarray([[0, half - 1, 3], [2, 2, half - 1]], jnp.int32)
    first, second = positions[:, :half], positions[:, half : 2 * half]
    fill = causal_mask(first, slots)
    _, cache = jax.jit(policy)(ids[:, :half], first, policy.init_cache(batch, slots), fill)
    cases = [  # (tokens, positions, cache, mask)
        (ids, positions, None, causal_mask(positions, length)),
        (ids[:, half : 2 * half], second, cache, causal_mask(second, slots)),
    ]
    for args in cases:
        want, want_cache = jax.jit(policy)(*args)
        got, got_cache = jax.jit(policy.logits_at)(*args, at)
        assert got.shape == (batch, 3, policy.token_ids.size) and got.dtype == np.float32
        picked = np.take_along_axis(np.asarray(want), np.asarray(at)[:, :, None], axis=1)
        np.testing.assert_allclose(got, picked, atol=1e-4, rtol=1e-4)
        for x, y in zip(jax.tree.leaves(got_cache), jax.tree.leaves(want_cache), strict=True):
            np.testing.assert_allclose(x, y, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("model", "spare_slots"), [("qwen3", 64), ("qwen3", 0), ("qwen2_untied", 64)]
)
def test_kv_cache_generation_equals_the_full_pass(request, sample_ids, model, spare_slots):
    """Lanes of different lengths prefilled in pieces (lane 0's last piece runs past
    the context), then tokens fed one at a time (lane 0's run past the context
    too): each logit row whose ids all fit the context equals the cache-free pass
    over the same ids (float32, within 1e-4), for Qwen3 and Qwen2 (whose cache
    gemjax builds). With no spare slots, each call appends its own."""
    base, _ = request.getfixturevalue(model)
    policy = PretrainedLM(base.model, base.token_ids, spare_slots=spare_slots)
    batch, total = sample_ids.shape
    context = total - 4
    prompt = np.array([context - 1, total - 9], np.int32)
    full = np.asarray(jax.jit(policy.logits)(jnp.asarray(sample_ids)))

    @jax.jit
    def run(ids):
        cache = policy.init_cache(batch, context)
        cache, last = prefill(
            policy, cache, ids[:, :context], jnp.zeros((batch,), jnp.int32), prompt, 5
        )
        rows = [last]
        for k in range(4):
            positions = jnp.asarray(prompt + k)[:, None]
            fed = jnp.take_along_axis(ids, positions, axis=1)
            out, cache = policy(fed, positions, cache, causal_mask(positions, context))
            rows.append(out[:, 0])
        return jnp.stack(rows, axis=1)

    got = np.asarray(run(jnp.asarray(sample_ids)))
    checked = 0
    for lane in range(batch):
        for k in range(5):
            position = prompt[lane] - 1 + k
            if position < context:
                np.testing.assert_allclose(got[lane, k], full[lane, position], **TOLERANCE)
                checked += 1
    assert checked == 7


def test_token_bridge_builds_for_the_folder_tokenizer(qwen3):
    policy, tokenizer = qwen3
    bridge = TokenBridge(gemjax.make("game:GuessTheNumber-v0-easy"), tokenizer, prompt_capacity=64)
    assert np.isin(bridge.vocab, policy.token_ids).all()


# --- through the token loop -----------------------------------------------------------

ENV_ID = "game:GuessTheNumber-v0-easy"
LOOP = TokenLoopConfig(horizon=2, context=224, response_tokens=6, prefill_chunk=64)


@pytest.fixture(scope="module")
def trainer(qwen3):
    policy, tokenizer = qwen3
    bridge = TokenBridge(gemjax.make(ENV_ID), tokenizer, prompt_capacity=LOOP.context)
    config = TokenTrainConfig(
        env_id=ENV_ID,
        loop=LOOP,
        num_episodes=4,
        num_updates=1,
        warmup_updates=0,
        eval_every=1,
        eval_episodes=4,
        replay_episodes=2,
    )
    return make_pretrained_train(config, policy, bridge)


def test_rollout_collects_with_the_pretrained_policy(trainer, qwen3):
    policy, tokenizer = qwen3
    state = trainer.init(jax.random.key(0))
    rollout = trainer.rollout
    keys = jax.random.split(jax.random.key(1), 4)
    traj = jax.device_get(jax.jit(rollout.collect)(state.params, keys, jax.random.key(2)))
    assert traj.valid[0].all()
    assert traj.response_ids.shape == (LOOP.horizon, 4, LOOP.response_tokens)
    assert np.isin(traj.response_ids[traj.response_mask], policy.token_ids).all()
    played = traj.token_log_probs[traj.response_mask]
    assert np.isfinite(played).all() and (played < 0).all()
    prompt = tokenizer.decode(traj.prompt_ids[0, 0, : traj.prompt_length[0, 0]])
    assert prompt.startswith("<|im_start|>user") and "\\boxed" in prompt
    replayed = np.asarray(jax.jit(rollout.response_log_probs)(state.params, traj))
    np.testing.assert_allclose(replayed, traj.token_log_probs, rtol=1e-4, atol=1e-4)


def forced_rollout(trainer, state):
    """Two lanes answer with well-formed guesses (return >= 0), two with a format
    error (-0.1); returns the trajectory."""
    table = trainer.table
    shape = (LOOP.horizon, 4)
    bad = trainer.rollout.bridge.tokenizer.encode("oops}", add_special_tokens=False)
    ids = np.zeros((*shape, LOOP.response_tokens), np.int32)
    length = np.zeros(shape, np.int32)
    for lane in range(4):
        tokens = table.ids[lane, : table.length[lane]] if lane < 2 else bad
        ids[:, lane, : len(tokens)] = tokens
        length[:, lane] = len(tokens)
    forced = Generated(
        ids=jnp.asarray(ids),
        log_probs=jnp.zeros(ids.shape, jnp.float32),
        length=jnp.asarray(length),
        cut=jnp.zeros(shape, jnp.bool_),
    )
    keys = jax.random.split(jax.random.key(1), 4)
    collect = jax.jit(lambda params: trainer.rollout.collect(params, keys, keys[0], forced=forced))
    traj = collect(state.params)
    rewards = np.asarray(traj.rewards[0])
    assert (rewards[:2] >= 0).all() and (rewards[2:] == -0.1).all()
    return traj


def learn_once(trainer, state, traj):
    """One ReBN step; the turn-0 log-probabilities (float32[4]) before and after."""

    def turn_log_prob(params):
        return jnp.sum(trainer.rollout.response_log_probs(params, traj)[0], axis=-1)

    before = np.asarray(jax.jit(turn_log_prob)(state.params))
    new_state, metrics = jax.jit(trainer.learn)(state, traj)
    assert np.isfinite(float(metrics.loss))
    after = np.asarray(jax.jit(turn_log_prob)(new_state.params))
    return new_state, before, after


def test_one_rebn_update_raises_a_rewarded_response(trainer):
    """One ReBN step raises the log-probability of the well-formed responses and
    lowers that of the format errors."""
    state = trainer.init(jax.random.key(0))
    _, before, after = learn_once(trainer, state, forced_rollout(trainer, state))
    assert (after[:2] > before[:2]).all()
    assert (after[2:] < before[2:]).all()


def test_lora_trains_the_adapters_only(trainer, qwen3):
    policy, _ = qwen3
    lora = with_lora(policy, rank=4, seed=3)
    ids = jnp.asarray(np.arange(100, 116).reshape(2, 8), jnp.int32)
    np.testing.assert_array_equal(np.asarray(lora.logits(ids)), np.asarray(policy.logits(ids)))
    lora_trainer = make_pretrained_train(trainer.config, lora, trainer.rollout.bridge)
    state = lora_trainer.init(jax.random.key(0))
    traj = forced_rollout(lora_trainer, state)
    new_state, before, after = learn_once(lora_trainer, state, traj)
    assert (after[:2] > before[:2]).all()
    old, new = nnx.to_flat_state(state.params), nnx.to_flat_state(new_state.params)
    moved = {
        path: not np.array_equal(np.asarray(a.value), np.asarray(b.value))
        for (path, a), (_, b) in zip(old, new, strict=True)
    }
    adapters = {path for path, _ in nnx.to_flat_state(nnx.state(lora, nnx.LoRAParam))}
    assert any(str(p[-1]).endswith("lora_b") for p in adapters)
    assert all(moved[p] for p in adapters if str(p[-1]).endswith("lora_b"))
    assert not any(moved[p] for p in moved if p not in adapters)
    size = lambda tree: sum(np.size(x) for x in jax.tree.leaves(tree))  # noqa: E731
    adapter_size = size(nnx.state(lora, nnx.LoRAParam))
    assert size(state.opt_state) <= 2 * adapter_size + 8 < size(state.params)


# --- adapters in PEFT's layout --------------------------------------------------------

PROJECTIONS = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


def peft_merged(weights: dict, adapter: Path) -> dict:
    """Hugging Face weights with a PEFT LoRA adapter merged as PEFT merges it:
    ``W + lora_alpha / r * B @ A`` for each adapted module (float64)."""
    from safetensors.numpy import load_file

    config = json.loads((adapter / "adapter_config.json").read_text())
    tensors = load_file(str(adapter / "adapter_model.safetensors"))
    merged = {name: value.astype(np.float64) for name, value in weights.items()}
    for name, lora_a in tensors.items():
        if name.endswith(".lora_A.weight"):
            module = name.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
            lora_b = tensors[f"base_model.model.{module}.lora_B.weight"]
            delta = lora_b.astype(np.float64) @ lora_a.astype(np.float64)
            merged[f"{module}.weight"] += config["lora_alpha"] / config["r"] * delta
    return merged


def test_exported_adapters_reproduce_the_lora_policy(qwen3_folder, sample_ids, tmp_path):
    """Random adapters (rank 4, alpha 6) written in PEFT's layout: each module's
    lora_A is [r, in] and lora_B [out, r] of its Hugging Face weight [out, in], and
    the base weights with them merged (NumPy) give the LoRA policy's logits, which
    differ from the base model's."""
    from safetensors.numpy import load_file

    from gemjax.train.adapters import write_peft_adapters

    folder, config, weights = qwen3_folder
    policy, _ = load_pretrained(folder)
    lora = with_lora(policy, rank=4, alpha=6.0, seed=3)
    adapters = nnx.state(lora, nnx.LoRAParam)
    rng = np.random.default_rng(5)
    nnx.update(
        lora, jax.tree.map(lambda x: rng.normal(0, 0.3, x.shape).astype(np.float32), adapters)
    )
    written = write_peft_adapters(
        nnx.state(lora, nnx.Param), tmp_path / "adapter", 6.0, str(folder)
    )
    assert sorted(p.name for p in written) == ["adapter_config.json", "adapter_model.safetensors"]

    settings = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert settings["peft_type"] == "LORA" and settings["task_type"] == "CAUSAL_LM"
    assert (settings["r"], settings["lora_alpha"]) == (4, 6)
    assert settings["target_modules"] == PROJECTIONS
    assert settings["base_model_name_or_path"] == str(folder)
    tensors = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    assert len(tensors) == 2 * len(PROJECTIONS) * config["num_hidden_layers"]
    for layer in range(config["num_hidden_layers"]):
        for name in PROJECTIONS:
            block = "mlp" if name in ("down_proj", "gate_proj", "up_proj") else "self_attn"
            module = f"model.layers.{layer}.{block}.{name}"
            out_features, in_features = weights[f"{module}.weight"].shape
            prefix = f"base_model.model.{module}."
            assert tensors[prefix + "lora_A.weight"].shape == (4, in_features)
            assert tensors[prefix + "lora_B.weight"].shape == (out_features, 4)
            assert tensors[prefix + "lora_A.weight"].dtype == np.float32

    merged = peft_merged(weights, tmp_path / "adapter")
    got = np.asarray(jax.jit(lora.logits)(jnp.asarray(sample_ids[:1])))[0]
    want = reference_logits(config, merged, sample_ids[0])[:, lora.token_ids]
    np.testing.assert_allclose(got, want, **TOLERANCE)
    base = reference_logits(config, weights, sample_ids[0])[:, lora.token_ids]
    assert np.abs(got - base).max() > 0.1


def test_adapter_export_refuses_bad_input(qwen3, tmp_path):
    from gemjax.train.adapters import write_peft_adapters

    policy, _ = qwen3
    with pytest.raises(ValueError, match="no LoRA adapters"):
        write_peft_adapters(nnx.state(policy, nnx.Param), tmp_path / "a", 4.0, "base")
    lora = with_lora(policy, rank=2, modules=".*layers.*1.*q_proj")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        write_peft_adapters(nnx.state(lora, nnx.Param), tmp_path / "file", 4.0, "base")
    write_peft_adapters(nnx.state(lora, nnx.Param), tmp_path / "one", 4.0, "base")
    settings = json.loads((tmp_path / "one" / "adapter_config.json").read_text())
    assert settings["target_modules"] == r"model\.layers\.1\.self_attn\.q_proj"


def test_evaluation_on_device(qwen3):
    policy, tokenizer = qwen3
    result = evaluate_pretrained(policy, tokenizer, ENV_ID, episodes=5, loop=LOOP, batch=3)
    assert result.episodes == 5
    assert 0.0 <= result.success <= 1.0 and 0.0 <= result.format_error_rate <= 1.0
    assert 1.0 <= result.mean_turns <= LOOP.horizon


def _run_config(folder: Path, updates: int) -> PretrainedTrainConfig:
    return PretrainedTrainConfig(
        env_id=ENV_ID,
        loop=LOOP,
        num_episodes=2,
        num_updates=updates,
        warmup_updates=0,
        eval_every=1,
        eval_episodes=2,
        model_folder=str(folder),
    )


def _comparable(records: list[dict]) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k not in ("wall_s", "steps_per_second")} for r in records
    ]


@pytest.mark.slow
def test_a_resumed_run_equals_an_uninterrupted_one(qwen3_folder, tmp_path):
    folder = qwen3_folder[0]
    whole = run_pretrained(_run_config(folder, 2), tmp_path / "whole", progress=False)
    run_pretrained(_run_config(folder, 1), tmp_path / "split", progress=False)
    resumed = run_pretrained(_run_config(folder, 2), tmp_path / "split", progress=False)
    assert _comparable(resumed.records) == _comparable(whole.records)
    settings = json.loads((tmp_path / "whole" / "config.json").read_text())
    assert settings["policy"] == "llm" and settings["model_folder"] == str(folder)
    _, state = load_pretrained_run(tmp_path / "split")
    assert int(state.update) == 2
    pairs = zip(jax.tree.leaves(state.params), jax.tree.leaves(whole.state.params), strict=True)
    for a, b in pairs:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


SHARDED_SCRIPT = """
import sys
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import gemjax
from gemjax.tokenizer_bridge import TokenBridge
from gemjax.train.llm import load_pretrained, make_pretrained_train
from gemjax.train.token_rollout import TokenLoopConfig
from gemjax.train.token_trainer import TokenTrainConfig

assert jax.device_count() == 8, jax.devices()
folder = sys.argv[1]
loop = TokenLoopConfig(horizon=2, context=224, response_tokens=6, prefill_chunk=64)
config = TokenTrainConfig(env_id="game:GuessTheNumber-v0-easy", loop=loop, num_episodes=4,
                          num_updates=1, warmup_updates=0, eval_every=1, eval_episodes=4,
                          replay_episodes=4, learning_rate=1e-2)
mesh = Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("batch", "fsdp", "tp"))
results = {}
for name, where in (("sharded", mesh), ("single", None)):
    policy, tokenizer = load_pretrained(folder, mesh=where)
    bridge = TokenBridge(gemjax.make(config.env_id), tokenizer, prompt_capacity=loop.context)
    trainer = make_pretrained_train(config, policy, bridge)
    state = trainer.init(jax.random.key(0))
    keys = jax.random.split(jax.random.key(1), 4)
    if where is not None:
        embedding = state.params["model"]["embedder"]["input_embedding"].value
        assert not embedding.sharding.is_fully_replicated, embedding.sharding
        keys = jax.device_put(keys, NamedSharding(mesh, P("batch")))
    traj = jax.jit(trainer.rollout.collect)(state.params, keys, jax.random.key(2))
    new_state, _ = jax.jit(trainer.learn)(state, traj)
    results[name] = (jax.device_get(traj), jax.device_get(new_state.params))
(a_traj, a_params), (b_traj, b_params) = results["sharded"], results["single"]
np.testing.assert_array_equal(a_traj.response_ids, b_traj.response_ids)
np.testing.assert_array_equal(a_traj.rewards, b_traj.rewards)
np.testing.assert_allclose(a_traj.token_log_probs, b_traj.token_log_probs, rtol=1e-4, atol=1e-4)
for x, y in zip(jax.tree.leaves(a_params), jax.tree.leaves(b_params), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5)
print("SHARDED_MATCHES_SINGLE")
"""


@pytest.mark.slow
def test_sharded_over_8_devices_matches_one(qwen3_folder):
    """Weights over an (fsdp, tp) mesh by tunix's annotations, episodes over a batch
    axis (2 x 2 x 2 forced host devices): the rollout and one ReBN update equal one
    device's."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags.strip()}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", SHARDED_SCRIPT, str(qwen3_folder[0])],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SHARDED_MATCHES_SINGLE" in done.stdout


# --- the command line ---------------------------------------------------------------

SMALL_LOOP = ["--horizon", "2", "--context", "224", "--response-tokens", "6"]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from gemjax.cli import main

    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_usage_errors_are_one_line(qwen3_folder, tmp_path, capsys):
    folder = str(qwen3_folder[0])
    out = str(tmp_path / "run")
    full = tmp_path / "full-run"  # a --policy llm run that trained every weight
    full.mkdir()
    (full / "config.json").write_text(json.dumps({"policy": "llm", "lora_rank": None}))
    cases = [
        (("train", "--policy", "llm", "--out", out), "needs --model"),
        (("train", "--policy", "token", "--model", folder, "--out", out), "--model does not"),
        (("train", "--policy", "llm", "--model", folder, "--width", "8", "--out", out), "--width"),
        (("train", "--policy", "llm", "--model", str(tmp_path), "--out", out), "config.json"),
        (("eval", "--model", str(tmp_path / "none"), "--env", ENV_ID), "no model folder"),
        (("train", "--lora-rank", "4", "--out", out), "--lora-rank does not apply"),
        (("export-adapters", str(tmp_path / "none"), out), "config.json"),
        (("export-adapters", str(full), out), "no --lora-rank"),
        (("export-adapters", str(full), ""), "OUT_DIR must name"),
    ]
    for argv, words in cases:
        status, _, err = _cli(capsys, *argv)
        assert status == 2, argv
        assert words in err and err.count("\n") == 1, err


def test_cli_eval_reports_each_id(qwen3_folder, tmp_path, capsys):
    path = tmp_path / "eval.json"
    argv = ("eval", "--model", str(qwen3_folder[0]), "--env", ENV_ID, "--episodes", "3")
    status, out, _ = _cli(capsys, *argv, *SMALL_LOOP, "--json", str(path))
    assert status == 0
    assert ENV_ID in out and "format err" in out
    (row,) = json.loads(path.read_text())
    assert row["env_id"] == ENV_ID and row["episodes"] == 3 and row["greedy"]
    assert row["dtype"] == "float32"  # auto on CPU


@pytest.mark.slow
def test_cli_train_llm_writes_a_run(qwen3_folder, sample_ids, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ("train", "--policy", "llm", "--model", str(qwen3_folder[0]), "--env", ENV_ID)
    sizes = ("--updates", "1", "--eval-every", "1", "--episodes", "2", "--eval-episodes", "2")
    lora = ("--lora-rank", "2")
    status, text, _ = _cli(
        capsys, *argv, *sizes, *SMALL_LOOP, *lora, "--replay-episodes", "2", "--out", str(out)
    )
    assert status == 0, text
    assert "greedy success" in text
    settings = json.loads((out / "config.json").read_text())
    assert settings["policy"] == "llm" and settings["warmup_updates"] == 0
    assert settings["lora_rank"] == 2
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["rl"]

    adapter = tmp_path / "adapter"
    status, text, _ = _cli(capsys, "export-adapters", str(out), str(adapter))
    assert status == 0, text
    assert (adapter / "adapter_model.safetensors").is_file()
    settings = json.loads((adapter / "adapter_config.json").read_text())
    assert (settings["r"], settings["lora_alpha"]) == (2, 4)
    _, config, weights = qwen3_folder
    trainer, state = load_pretrained_run(out)
    model = trainer.rollout.model(state.params)
    trained = np.asarray(jax.jit(model.logits)(jnp.asarray(sample_ids[:1])))[0]
    merged = peft_merged(weights, adapter)
    want = reference_logits(config, merged, sample_ids[0])[:, model.token_ids]
    np.testing.assert_allclose(trained, want, **TOLERANCE)
    base = reference_logits(config, weights, sample_ids[0])[:, model.token_ids]
    assert np.abs(trained - base).max() > 1e-5  # the update moved the adapters


# --- bad input ------------------------------------------------------------------------


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


def test_missing_folder_and_files_are_named(qwen3_folder, tmp_path):
    with pytest.raises(FileNotFoundError, match="no model folder"):
        load_pretrained(tmp_path / "absent")
    folder = _copy(qwen3_folder[0], tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        load_pretrained(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"\*\.safetensors"):
        load_pretrained(folder)
    (folder / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        load_pretrained(folder)


def test_incomplete_weights_and_unknown_model_type(qwen3_folder, tmp_path):
    from safetensors.numpy import save_file

    folder = _copy(qwen3_folder[0], tmp_path)
    weights = dict(qwen3_folder[2])
    del weights["model.layers.1.mlp.up_proj.weight"]
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        load_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "mamba"}))
    with pytest.raises(ValueError, match="model_type 'mamba' is not supported"):
        load_pretrained(folder)
    index = {"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(FileNotFoundError, match=r"model-00002-of-00002\.safetensors"):
        load_pretrained(folder)


def test_tokenizer_that_outgrows_the_embedding(qwen3_folder, tmp_path):
    folder = _copy(qwen3_folder[0], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"vocab_size": 1000}))
    with pytest.raises(ValueError, match="vocab_size"):
        load_pretrained(folder)


def test_unsupported_rope_theta_of_qwen3(qwen3_folder, tmp_path):
    folder = _copy(qwen3_folder[0], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 5_000_000.0}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="rope_theta"):
        load_pretrained(folder)


def test_gemjax_does_not_import_tunix():
    code = (
        "import sys, gemjax, gemjax.cli, gemjax.train, gemjax.train.llm, gemjax.train.adapters,"
        " gemjax.train.token_rollout;"
        "print('tunix' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_llm_extra_is_tunix_requirements_without_the_safetensors_pin():
    """pyproject's ``llm`` extra lists the installed tunix's requirements (those of
    no extra of tunix's), each with tunix's version range, but for safetensors,
    whose ``<0.8`` pin it leaves out (tunix goes in with ``--no-deps``)."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())

    def ranges(lines):
        parsed = (Requirement(line) for line in lines)
        return {canonicalize_name(r.name): str(r.specifier) for r in parsed if r.marker is None}

    extra = ranges(pyproject["project"]["optional-dependencies"]["llm"])
    tunix = ranges(requires("google-tunix"))
    assert tunix.pop("safetensors") == "<0.8" and extra.pop("safetensors") == ""
    assert extra == tunix


def test_transformers_logits_agree(qwen3, qwen3_folder, sample_ids):
    """Where torch is installed: transformers' own Qwen3ForCausalLM on the folder."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen3ForCausalLM

    policy, _ = qwen3
    model = Qwen3ForCausalLM.from_pretrained(str(qwen3_folder[0]), torch_dtype=torch.float32)
    with torch.no_grad():
        want = model(torch.as_tensor(sample_ids, dtype=torch.long)).logits.numpy()
    got = np.asarray(jax.jit(policy.logits)(jnp.asarray(sample_ids)))
    np.testing.assert_allclose(got, want[..., policy.token_ids], **TOLERANCE)
