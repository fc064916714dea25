"""The paper's discount-factor experiment: ReBN on GuessTheNumber 1..50 with 50 turns.

For each gamma, trains ``--seeds`` seeds at once (``vmap`` over the train function)
with the default :class:`~gemjax.train.TrainConfig` and prints the final greedy
success and mean turns. Writes ``benchmarks/results/discount_sweep.json`` and a plot
of greedy mean turns against updates.

    python benchmarks/discount_sweep.py                       # the full sweep
    python benchmarks/discount_sweep.py --gammas 0.9 --seeds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import jax
import numpy as np

from gemjax.train import TrainConfig, make_train

RESULTS = Path(__file__).resolve().parent / "results"


def sweep_gamma(config: TrainConfig, seeds: int) -> dict:
    """Train ``seeds`` seeds of ``config``; the per-seed greedy curves and finals."""
    trainer = make_train(config)
    start = time.perf_counter()
    _, metrics = jax.jit(jax.vmap(trainer.train))(jax.random.split(jax.random.key(0), seeds))
    jax.block_until_ready(metrics)
    seconds = time.perf_counter() - start
    success = np.asarray(metrics.eval.success)
    turns = np.asarray(metrics.eval.mean_turns)
    return {
        "gamma": config.gamma,
        "seeds": seeds,
        "seconds_incl_compile": seconds,
        "updates": [config.eval_every * (i + 1) for i in range(success.shape[1])],
        "success": success.tolist(),
        "mean_turns": turns.tolist(),
        "final_success": success[:, -1].tolist(),
        "final_mean_turns": turns[:, -1].tolist(),
    }


def plot(rows: list[dict], path: Path) -> None:
    """Greedy mean turns against updates, one line per gamma (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for row in rows:
        ax.plot(row["updates"], np.mean(row["mean_turns"], axis=0), label=f"gamma {row['gamma']}")
    ax.axhline(4.86, color="gray", linestyle="--", label="binary search (4.86)")
    ax.set(xlabel="update", ylabel="greedy mean turns", yscale="log")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gammas", type=float, nargs="+", default=[1.0, 0.999, 0.99, 0.9, 0.7])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=TrainConfig.num_updates)
    parser.add_argument("--name", default="discount_sweep", help="output file stem")
    args = parser.parse_args()
    rows = []
    print(f"{'gamma':>6s} {'success (per seed)':>24s} {'mean turns (per seed)':>26s} {'s':>6s}")
    for gamma in args.gammas:
        config = dataclasses.replace(TrainConfig(), gamma=gamma, num_updates=args.updates)
        row = sweep_gamma(config, args.seeds)
        rows.append(row)
        success = " ".join(f"{s:.3f}" for s in row["final_success"])
        turns = " ".join(f"{t:.2f}" for t in row["final_mean_turns"])
        print(f"{gamma:6.3f} {success:>24s} {turns:>26s} {row['seconds_incl_compile']:6.0f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(rows, indent=2) + "\n")
    plot(rows, RESULTS / f"{args.name}.png")


if __name__ == "__main__":
    main()
