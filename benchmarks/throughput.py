"""Throughput of gemjax against GEM (``gem-llm``), in one run, as ratios.

1. Kernel: ``lax.scan`` of ``vmap(AutoReset(env).step)`` inside one jit, uniform
   random actions drawn for the whole batch in one call per step, per-lane keys;
   compile time reported apart. Against GEM's single-env Python loop on the same
   game (``sample_random_action``, ``step``, ``reset`` when done).
2. Text: ``gemjax.gem.make_vec`` with 64 envs against GEM's ``SyncVectorEnv`` with
   64, stepping the same pre-generated action strings.

Usage: ``python benchmarks/throughput.py [--env ID] [--quick]``; prints a table
and writes ``benchmarks/results/throughput_<platform>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import random
import time
from pathlib import Path
from typing import Any

import jax

from gemjax.benchmark import measure

BATCH_SIZES = (1, 64, 1024, 4096, 16384)
RESULTS = Path(__file__).parent / "results"


def gem_loop_steps_per_second(env_id: str, num_steps: int) -> float:
    """GEM's single-env Python loop: sample, step, reset when done."""
    import gem

    env = gem.make(env_id)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(num_steps):
        _, _, terminated, truncated, _ = env.step(env.sample_random_action())
        if terminated or truncated:
            env.reset()
    return num_steps / (time.perf_counter() - start)


def random_actions(num_envs: int, rounds: int, low: int, high: int) -> list[list[str]]:
    """Pre-generated ``\\boxed{n}`` responses, ``n`` uniform in ``[low, high]``."""
    rng = random.Random(0)
    return [
        ["\\boxed{" + str(rng.randint(low, high)) + "}" for _ in range(num_envs)]
        for _ in range(rounds)
    ]


def vector_steps_per_second(vec: Any, actions: list[list[str]], num_calls: int) -> float:
    """Env steps per second of ``vec.step`` over ``num_calls`` calls."""
    for batch in actions[:5]:
        vec.step(batch)
    start = time.perf_counter()
    for i in range(num_calls):
        vec.step(actions[i % len(actions)])
    return num_calls * len(actions[0]) / (time.perf_counter() - start)


def compare_vector(env_id: str, num_envs: int, num_calls: int) -> dict[str, float]:
    """``make_vec`` against GEM's ``SyncVectorEnv``, same actions, same run."""
    import gem

    import gemjax.gem

    actions = random_actions(num_envs, 50, 1, 50)
    ours = gemjax.gem.make_vec([env_id] * num_envs, seed=0)
    with contextlib.redirect_stdout(io.StringIO()):  # GEM prints which vector env it built
        theirs = gem.make_vec([env_id] * num_envs, seed=0)
    theirs.reset(seed=0)
    ours.reset(seed=0)
    gem_rate = vector_steps_per_second(theirs, actions, num_calls)
    our_rate = vector_steps_per_second(ours, actions, num_calls)
    return {
        "num_envs": num_envs,
        "gemjax_steps_per_second": our_rate,
        "gem_steps_per_second": gem_rate,
        "ratio": our_rate / gem_rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="game:GuessTheNumber-v0-hard")
    parser.add_argument("--quick", action="store_true", help="fewer steps (smoke test)")
    args = parser.parse_args()
    steps_scale = 0.1 if args.quick else 1.0

    gem_rate = gem_loop_steps_per_second(args.env, int(50_000 * steps_scale))
    kernel_rows = []
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), env: {args.env}")
    print(f"GEM single-env Python loop: {gem_rate:,.0f} steps/s ({1e6 / gem_rate:.2f} us/step)\n")
    print(f"{'batch':>6s} {'steps/s':>14s} {'ns/step':>9s} {'x GEM':>8s} {'compile s':>9s}")
    for batch_size in BATCH_SIZES:
        num_steps = max(50, int(steps_scale * min(2000, 4_000_000 // batch_size)))
        result = measure(args.env, batch_size, num_steps)
        row = {**result.as_dict(), "ratio_vs_gem": result.steps_per_second / gem_rate}
        kernel_rows.append(row)
        print(
            f"{batch_size:6d} {result.steps_per_second:14,.0f} "
            f"{1e9 / result.steps_per_second:9.1f} {row['ratio_vs_gem']:8.1f} "
            f"{result.compile_seconds:9.2f}"
        )
    vector = compare_vector(args.env, 64, int(300 * steps_scale) or 10)
    print(
        f"\nmake_vec(64) {vector['gemjax_steps_per_second']:,.0f} steps/s vs GEM SyncVectorEnv(64) "
        f"{vector['gem_steps_per_second']:,.0f} steps/s: {vector['ratio']:.2f}x"
    )
    report = {
        "env_id": args.env,
        "platform": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "machine": platform.machine(),
        "cpu_count": jax.device_count(),
        "jax_version": jax.__version__,
        "gem_loop_steps_per_second": gem_rate,
        "kernel": kernel_rows,
        "vector_text": vector,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"throughput_{jax.default_backend()}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
