"""The paper's discount-factor experiment: ReBN on GuessTheNumber 1..50 with 50 turns.

For each gamma, trains ``--seeds`` seeds one after the other through one compiled
train function (``vmap`` over seeds wedged XLA's CPU runtime at gamma 0.9: jax 0.10.2,
compiled, then idle) with the default :class:`~gemjax.train.TrainConfig` and prints the final greedy
success and mean turns. Writes ``benchmarks/results/discount_sweep.json`` and a plot
of greedy mean turns against updates, and its section of ``docs/results.md`` (the
default output only).

    python benchmarks/discount_sweep.py                       # the full sweep
    python benchmarks/discount_sweep.py --gammas 0.9 --seeds 3
    python benchmarks/discount_sweep.py --docs                # only rewrite the docs
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

from gemjax.benchmark import write_section
from gemjax.train import TrainConfig, make_train

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
OWNER = "benchmarks/discount_sweep.py"
OPTIMUM = 4.86  # balanced bisection on 1..50 (benchmarks/optima.py)


def sweep_gamma(config: TrainConfig, seeds: int) -> dict:
    """Train seeds ``0..seeds-1`` of ``config`` (keys ``key(seed)``, as ``gemjax
    train --seed``) one after the other through one compiled ``train``; the per-seed
    greedy curves and finals."""
    trainer = make_train(config)
    start, cpu = time.perf_counter(), time.process_time()
    train = jax.jit(trainer.train)
    runs = [jax.block_until_ready(train(jax.random.key(seed))[1]) for seed in range(seeds)]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    success = np.stack([np.asarray(run.eval.success) for run in runs])
    turns = np.stack([np.asarray(run.eval.mean_turns) for run in runs])
    return {
        "gamma": config.gamma,
        "seeds": seeds,
        "seconds_incl_compile": seconds,
        "cpu_s_incl_compile": cpu,
        "updates": [config.eval_every * (i + 1) for i in range(success.shape[1])],
        "success": success.tolist(),
        "mean_turns": turns.tolist(),
        "final_success": success[:, -1].tolist(),
        "final_mean_turns": turns[:, -1].tolist(),
    }


def render_docs(results: dict) -> str:
    """The generated section of ``docs/results.md``: the command, the setting and one
    table row per gamma."""
    config = results["config"]
    lines = [
        f"Command: `{results['command']}` ({results['machine']}, jax {results['jax']}). "
        f"`TrainConfig` defaults: {config['algo']}, {config['num_updates']} updates of "
        f"{config['num_episodes']} episodes, {config['num_transitions']} learning "
        f"transitions, greedy evaluation on {config['eval_episodes']} fixed episodes; "
        f"seeds 0 to {results['seeds'] - 1} per gamma (keys `key(seed)`, as `gemjax train "
        "--seed`), one after the other; the seconds are each gamma's, compile included.",
        "",
        "| gamma | success (per seed) | mean turns (per seed) | gap to the optimum "
        f"{OPTIMUM} (mean) | seeds at <= 4.9 turns | wall s | CPU s |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for row in results["rows"]:
        success = " ".join(f"{v:.3f}" for v in row["final_success"])
        turns = " ".join(f"{v:.3f}" for v in row["final_mean_turns"])
        met = sum(t <= 4.9 for t in row["final_mean_turns"])
        lines.append(
            f"| {row['gamma']:g} | {success} | {turns} "
            f"| {np.mean(row['final_mean_turns']) - OPTIMUM:+.3f} "
            f"| {met} of {len(row['final_mean_turns'])} "
            f"| {row['seconds_incl_compile']:.0f} | {row['cpu_s_incl_compile']:.0f} |"
        )
    lines += ["", "![greedy mean turns](../benchmarks/results/discount_sweep.png)"]
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Greedy mean turns against updates, one line per gamma (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for row in rows:
        ax.plot(row["updates"], np.mean(row["mean_turns"], axis=0), label=f"gamma {row['gamma']}")
    ax.axhline(OPTIMUM, color="gray", linestyle="--", label=f"binary search ({OPTIMUM})")
    ax.set(xlabel="update", ylabel="greedy mean turns", yscale="log")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """Run the sweep (or only rewrite the docs from the JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gammas", type=float, nargs="+", default=[1.0, 0.999, 0.99, 0.9, 0.7])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=TrainConfig.num_updates)
    parser.add_argument("--name", default="discount_sweep", help="output file stem")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs from the JSON")
    args = parser.parse_args(argv)
    json_path = RESULTS / f"{args.name}.json"
    if args.docs:
        write_section(DOCS, OWNER, render_docs(json.loads(json_path.read_text())))
        return
    rows = []
    print(f"{'gamma':>6s} {'success (per seed)':>24s} {'mean turns (per seed)':>26s} {'s':>6s}")
    for gamma in args.gammas:
        config = dataclasses.replace(TrainConfig(), gamma=gamma, num_updates=args.updates)
        row = sweep_gamma(config, args.seeds)
        rows.append(row)
        success = " ".join(f"{s:.3f}" for s in row["final_success"])
        turns = " ".join(f"{t:.2f}" for t in row["final_mean_turns"])
        print(f"{gamma:6.3f} {success:>24s} {turns:>26s} {row['seconds_incl_compile']:6.0f}")
    results = {
        "command": " ".join(["python benchmarks/discount_sweep.py", *sys.argv[1:]]),
        "machine": f"{platform.machine()}, {jax.device_count()} {jax.default_backend()} device(s)",
        "jax": jax.__version__,
        "config": dataclasses.asdict(dataclasses.replace(TrainConfig(), num_updates=args.updates)),
        "seeds": args.seeds,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    plot(rows, RESULTS / f"{args.name}.png")
    if args.name == "discount_sweep":
        write_section(DOCS, OWNER, render_docs(results))


if __name__ == "__main__":
    main()
