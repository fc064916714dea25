"""Throughput and memory of the on-device loop with a pretrained-LLM-shaped agent.

A Qwen3 of the real 0.6B configuration (tunix's ``ModelConfig.qwen3_0p6b``) with
random weights, on the :class:`~gemjax.train.llm.PretrainedLM` interface, plays
GuessTheNumber (``game:GuessTheNumber-v0-hard``, qwen3 tokenizer, ``qwen3_game``
chat prompts). For each batch ``B``, one ReBN update timed whole:

* **device**: :meth:`TokenTrainer.update` in one jitted call (kernel, bridge,
  prefill, sampling, parse, replay and update);
* **host**: the same model and update with the text on the host
  (``benchmarks/token_loop.py``'s ``host_rollout``: gem-llm's envs render the
  strings, ``tokenizer(batch)``, one device call a turn, ``batch_decode``, the
  env's regex), then the same jitted update on the collected ids.

It also reports memory from the shapes (parameters, AdamW state with and without
LoRA, KV cache per episode, the learner's replay per episode: the logits of the
response tokens, the only ones it computes, and the layers' activations) and the batch
that fits a device of ``--memory-gib`` GiB by that estimate; each measured batch
checks the estimate against the compiled update's memory (XLA's buffer assignment:
arguments, outputs and temporaries). ``--quick`` swaps in a 2-layer model of Qwen3's
vocabulary and a small batch, to run on a CPU. Prints a table and writes
``benchmarks/results/llm_loop_<backend>[_quick].json`` (or ``--out``).

Usage: ``python benchmarks/llm_loop.py [--batches 64 256] [--lora-rank 16] [--quick]
[--memory-only]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from token_loop import rates, time_host_update, warm_then_best_of

import gemjax
from gemjax.tokenizer_bridge import TokenBridge, load_tokenizer
from gemjax.train.llm import PretrainedLM, make_pretrained_train, with_lora
from gemjax.train.token_rollout import TokenLoopConfig
from gemjax.train.token_trainer import TokenTrainConfig

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "game:GuessTheNumber-v0-hard"
LOOP = TokenLoopConfig(horizon=7, context=512, response_tokens=8, prefill_chunk=64)
QUICK_LOOP = TokenLoopConfig(horizon=3, context=256, response_tokens=8, prefill_chunk=64)
GIB = 2**30


def model_config(quick: bool) -> Any:
    """tunix's Qwen3-0.6B config, or (``quick``) a 2-layer one of the same vocabulary."""
    from tunix.models.qwen3 import model as qwen3

    config = qwen3.ModelConfig.qwen3_0p6b()
    if quick:
        config = dataclasses.replace(
            config,
            num_layers=2,
            embed_dim=128,
            hidden_dim=256,
            num_heads=4,
            num_kv_heads=2,
            head_dim=32,
        )
    return config


def random_policy(config: Any, token_ids: np.ndarray) -> PretrainedLM:
    """A tunix Qwen3 with tunix's random initialisation, as a PretrainedLM."""
    from tunix.models.qwen3 import model as qwen3

    return PretrainedLM(qwen3.Qwen3(config, rngs=nnx.Rngs(0)), token_ids)


def count(tree: Any) -> int:
    return int(sum(np.size(x) for x in jax.tree.leaves(tree)))


def memory(config: Any, policy: PretrainedLM, loop: TokenLoopConfig, lora_rank: int) -> dict:
    """Bytes from the shapes (float32 weights and optimizer; see the module doc)."""
    params = count(nnx.state(policy, nnx.Param))
    lora = count(nnx.state(with_lora(policy, lora_rank), nnx.LoRAParam))
    slots = loop.context + policy.spare_slots
    kv = 2 * config.num_layers * slots * config.num_kv_heads * config.head_dim * 4
    vocab = policy.token_ids.size
    # The logits of the response positions only (SelectiveLogits), their log-softmax
    # and its gradient; the prefill's of each prompt's last token.
    replay = 3 * loop.horizon * loop.response_tokens * vocab * 4
    prefill = 2 * vocab * 4
    return {
        **replay_activations(config, loop.replay_tokens),
        "params": params,
        "params_bytes": 4 * params,
        "adamw_bytes": 8 * params,
        "lora_rank": lora_rank,
        "lora_params": lora,
        "adamw_lora_bytes": 8 * lora,
        "kv_cache_bytes_per_episode": kv,
        "prefill_logits_bytes_per_episode": prefill,
        "replay_logits_bytes_per_episode": replay,
    }


def replay_activations(config: Any, stream: int) -> dict:
    """The float32 activations one episode's replay keeps for the backward pass, per
    layer and token: the block's input, its two norms' outputs, the attention
    output, projected, and the residual sum (6 x embed), the query, attention
    output and key/value projections (2 x heads x head_dim + 2 x kv_heads x
    head_dim), the MLP's gate, up and product (3 x hidden), and a row of attention
    probabilities (heads x stream)."""
    per_token = (
        6 * config.embed_dim
        + 2 * config.num_heads * config.head_dim
        + 2 * config.num_kv_heads * config.head_dim
        + 3 * config.hidden_dim
        + config.num_heads * stream
    )
    return {"replay_activation_bytes_per_episode": 4 * config.num_layers * stream * per_token}


def update_bytes(mem: dict, replay_episodes: int) -> tuple[int, int]:
    """The estimate's ``(fixed, per_episode)`` bytes of one full fine-tuning update:
    weights, gradients, AdamW and one replay chunk of ``replay_episodes``; and each
    episode's KV cache and prefill logits."""
    fixed = mem["params_bytes"] * 2 + mem["adamw_bytes"]
    replay = mem["replay_logits_bytes_per_episode"] + mem["replay_activation_bytes_per_episode"]
    fixed += replay_episodes * replay
    per_episode = mem["kv_cache_bytes_per_episode"] + mem["prefill_logits_bytes_per_episode"]
    return fixed, per_episode


def fitting_batch(mem: dict, gib: float, replay_episodes: int) -> dict:
    """Episodes a rollout holds in ``gib`` GiB by :func:`update_bytes`."""
    fixed, per_episode = update_bytes(mem, replay_episodes)
    return {
        "memory_gib": gib,
        "replay_episodes": replay_episodes,
        "batch": int((gib * GIB - fixed) // per_episode),
    }


def compiled_bytes(compiled: Any) -> int | None:
    """The bytes XLA's buffer assignment gives a compiled update: its arguments,
    outputs and temporaries, less the outputs aliasing arguments (``None`` where the
    backend reports no memory analysis)."""
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    return int(
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


def measure(trainer: Any, batch: int, repeats: int, mem: dict) -> dict[str, Any]:
    """Device and host updates of one batch, and the compiled update's memory against
    the estimate of :func:`update_bytes` (the measured point of the estimate)."""
    state = trainer.init(jax.random.key(0))
    update = jax.jit(trainer.update)
    start = time.perf_counter()
    compiled = update.lower(state).compile()
    compile_s = time.perf_counter() - start
    fixed, per_episode = update_bytes(mem, trainer.config.replay_episodes)
    estimated = fixed + batch * per_episode
    measured = compiled_bytes(compiled)
    (_, metrics), device_s = warm_then_best_of(repeats, lambda: compiled(state))
    played = float(metrics.rollout.turns_played)
    tokens = float(metrics.rollout.response_tokens) * played
    host_s, host_played, host_tokens = time_host_update(trainer, state, batch, repeats)
    row = {
        "batch": batch,
        "compile_s": compile_s,
        "estimated_bytes": estimated,
        "compiled_bytes": measured,
        "compiled_over_estimate": None if measured is None else measured / estimated,
        **rates("device", device_s, played, tokens),
        **rates("host", host_s, host_played, host_tokens),
        "mean_turns": played / batch,
    }
    row["speedup"] = row["device_turns_per_s"] / row["host_turns_per_s"]
    row["speedup_cpu"] = row["device_turns_per_cpu_s"] / row["host_turns_per_cpu_s"]
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--replay-episodes", type=int, default=4)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--memory-gib", type=float, default=139.0)
    parser.add_argument("--quick", action="store_true", help="2-layer model, batch 4, 1 repeat")
    parser.add_argument("--memory-only", action="store_true", help="the estimate, no timing")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.repeats = [4], 1
    loop = QUICK_LOOP if args.quick else LOOP
    tokenizer = load_tokenizer("qwen3")
    bridge = TokenBridge(gemjax.make(ENV_ID), tokenizer, prompt_capacity=loop.context)
    config = model_config(args.quick)
    token_ids = np.asarray(sorted(tokenizer.get_vocab().values()), np.int32)
    policy = random_policy(config, token_ids)
    mem = memory(config, policy, loop, args.lora_rank)
    fit = fitting_batch(mem, args.memory_gib, args.replay_episodes)
    rows = []
    print(f"{'batch':>6s} {'device t/s':>11s} {'host t/s':>9s} {'ratio':>6s} {'tok/s':>8s}")
    for batch in [] if args.memory_only else args.batches:
        train = TokenTrainConfig(
            env_id=ENV_ID,
            loop=loop,
            num_episodes=batch,
            num_updates=1,
            warmup_updates=0,
            eval_every=1,
            replay_episodes=min(args.replay_episodes, batch),
        )
        row = measure(make_pretrained_train(train, policy, bridge), batch, args.repeats, mem)
        rows.append(row)
        print(
            f"{batch:6d} {row['device_turns_per_s']:11.2f} {row['host_turns_per_s']:9.2f} "
            f"{row['speedup']:6.2f} {row['device_tokens_per_s']:8.1f}"
        )
    print(json.dumps({"memory": mem, "fits": fit}, indent=2))
    result = {
        "command": "python benchmarks/llm_loop.py " + " ".join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "machine": platform.processor() or platform.machine(),
        "model": "qwen3-0.6b shape, random" if not args.quick else "qwen3 2-layer (quick)",
        "loop": dataclasses.asdict(loop),
        "rows": rows,
        "memory": mem,
        "fits": fit,
    }
    suffix = ("_quick" if args.quick else "") + ("_memory" if args.memory_only else "")
    out = (
        args.out
        or ROOT / "benchmarks" / "results" / f"llm_loop_{jax.default_backend()}{suffix}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
