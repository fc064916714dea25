"""ReBN vs REINFORCE vs GRPO vs PPO on four games at the same environment-step budget.

Every algorithm of a game shares one configuration (:data:`BASE` with the game's
rollout size and update count: the same learning rate, network, batch, discount and
env steps); only the estimator differs, PPO adding its critic, ratio clipping and 4
epochs of 4 minibatches (the CLI's defaults). ``--seeds`` seeds run one after the other
through one compiled ``train(key)``: ``vmap`` over seeds wedged XLA's CPU runtime on
Minesweeper with PPO (jax 0.10.2: compiled, then idle in ``block_until_ready``).
Reports the last update's sampled episodes (return, success)
and the final greedy evaluation (return, success, mean turns), mean over seeds.
Writes ``benchmarks/results/algorithms.json`` and ``algorithms.png`` (learning curves
per game, one line per algorithm, mean over seeds).

    python benchmarks/algorithms.py            # the full benchmark
    python benchmarks/algorithms.py --quick    # a smoke run: tiny budget, seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

import gemjax
from gemjax.train import ALGOS, Algo, TrainConfig, make_train

RESULTS = Path(__file__).resolve().parent / "results"
# Shared by every game and algorithm: learn on every turn of each rollout.
BASE = TrainConfig(
    gamma=0.9,
    num_episodes=128,
    num_transitions=None,
    hidden=(128, 128),
    learning_rate=2e-3,
    group_size=8,
    eval_episodes=256,
)
# Updates per game (a multiple of EVAL_EVERY); env steps = updates * 128 * horizon.
GAMES: dict[str, int] = {
    "game:GuessTheNumber-v0-hard": 400,
    "game:Mastermind-v0-easy": 200,
    "game:Minesweeper-v0-easy": 80,
    "game:Sudoku-v0-easy": 100,
}
EVAL_EVERY = 10
QUICK = {"num_updates": 2, "eval_every": 1, "num_episodes": 16, "eval_episodes": 16}
QUICK_HIDDEN = (16,)


def algo_config(base: TrainConfig, algo: Algo) -> TrainConfig:
    """``base`` with ``algo``; PPO adds clip 0.2 and 4 epochs of 4 minibatches."""
    if algo == "ppo":
        return dataclasses.replace(
            base, algo=algo, clip_eps=0.2, update_epochs=4, num_minibatches=4
        )
    return dataclasses.replace(base, algo=algo)


def run_algo(config: TrainConfig, seeds: int) -> dict[str, Any]:
    """Train ``seeds`` seeds of ``config`` (keys ``split(key(0), seeds)``, one compile);
    per-seed curves (one point per evaluation) and the final numbers.

    Returns:
        A JSON-ready dict: ``env_steps`` per point; per seed lists ``[S][P]`` of the
        greedy ``return``/``success``/``mean_turns`` and of the sampled
        ``train_return``/``train_success`` (mean over each chunk's updates).
    """
    trainer = make_train(config)
    start = time.perf_counter()
    train = jax.jit(trainer.train)
    runs = [train(key)[1] for key in jax.random.split(jax.random.key(0), seeds)]
    metrics = jax.tree.map(lambda *seed: np.stack(seed), *runs)
    seconds = time.perf_counter() - start
    points = config.num_updates // config.eval_every
    sampled = metrics.train.episodes
    return {
        "algo": config.algo,
        "seconds_incl_compile": seconds,
        "env_steps": [
            (i + 1) * config.eval_every * trainer.env_steps_per_update for i in range(points)
        ],
        "return": np.asarray(metrics.eval.episode_return).tolist(),
        "success": np.asarray(metrics.eval.success).tolist(),
        "mean_turns": np.asarray(metrics.eval.mean_turns).tolist(),
        "train_return": np.asarray(sampled.episode_return).mean(axis=-1).tolist(),
        "train_success": np.asarray(sampled.success).mean(axis=-1).tolist(),
        "final_train_return": np.asarray(sampled.episode_return)[:, -1, -1].tolist(),
        "final_train_success": np.asarray(sampled.success)[:, -1, -1].tolist(),
    }


def final(row: dict[str, Any], name: str) -> float:
    """Mean over seeds of a curve's last point (or of a ``final_*`` list)."""
    values = np.asarray(row[name])
    return float(values.mean() if values.ndim == 1 else values[:, -1].mean())


HEADER = (
    f"{'game':30s} {'algo':9s} {'return':>7s} {'success':>7s} "
    f"{'greedy ret':>10s} {'greedy succ':>11s} {'greedy turns':>12s} {'s':>5s}"
)


def table_row(env_id: str, row: dict[str, Any]) -> str:
    """One line of the printed table (means over seeds)."""
    return (
        f"{env_id:30s} {row['algo']:9s} {final(row, 'final_train_return'):7.3f} "
        f"{final(row, 'final_train_success'):7.3f} {final(row, 'return'):10.3f} "
        f"{final(row, 'success'):11.3f} {final(row, 'mean_turns'):12.2f} "
        f"{row['seconds_incl_compile']:5.0f}"
    )


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Per game (a column): sampled return and greedy success against env steps,
    one line per algorithm (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(4 * len(results), 6.5), squeeze=False)
    for column, game in enumerate(results):
        top, bottom = axes[0, column], axes[1, column]
        for row in game["algos"]:
            steps = np.asarray(row["env_steps"]) / 1e6
            top.plot(steps, np.mean(row["train_return"], axis=0), label=row["algo"])
            bottom.plot(steps, np.mean(row["success"], axis=0), label=row["algo"])
        top.set(title=game["env_id"].removeprefix("game:"), ylabel="sampled return")
        bottom.set(xlabel="env steps (M)", ylabel="greedy success", ylim=(-0.02, 1.02))
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def game_config(env_id: str, updates: int, quick: bool) -> TrainConfig:
    """:data:`BASE` for one game (or the ``--quick`` smoke budget)."""
    if quick:
        return dataclasses.replace(BASE, env_id=env_id, hidden=QUICK_HIDDEN, **QUICK)
    return dataclasses.replace(BASE, env_id=env_id, num_updates=updates, eval_every=EVAL_EVERY)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; returns what it writes to ``<out>.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), help="env ids")
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny smoke budget")
    parser.add_argument("--out", type=Path, default=RESULTS / "algorithms", help="output stem")
    args = parser.parse_args(argv)
    registered = set(gemjax.list_envs())
    results = []
    print(HEADER)
    for env_id in args.games:
        if env_id not in registered:
            print(f"{env_id}: not registered, skipped")
            continue
        config = game_config(env_id, GAMES.get(env_id, max(GAMES.values())), args.quick)
        rows = []
        for algo in args.algos:
            rows.append(run_algo(algo_config(config, algo), args.seeds))
            print(table_row(env_id, rows[-1]), flush=True)
        results.append({"env_id": env_id, "config": dataclasses.asdict(config), "algos": rows})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    if results:
        plot(results, args.out.with_suffix(".png"))
    return results


if __name__ == "__main__":
    main()
