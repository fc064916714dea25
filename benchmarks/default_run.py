"""The default ``gemjax train`` run, as a user types it, for several seeds: is the
paper's goal met (greedy success >= 0.99 and mean turns <= 4.9 on
GuessTheNumber 1..50 with 50 turns, each seed within 3 minutes)?

Each seed runs ``gemjax train --out DIR --seed N --no-progress`` in a fresh process,
one after the other; wall seconds and the child's CPU seconds (user + system) include
start-up and compilation. Writes ``benchmarks/results/default_run.json`` and, at the
default output, its section of ``docs/results.md``.

    python benchmarks/default_run.py                 # seeds 0, 1 and 2
    python benchmarks/default_run.py --docs          # only rewrite the docs from the JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax

from gemjax.benchmark import write_section
from gemjax.train import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
OWNER = "benchmarks/default_run.py"
GOAL = {"success": 0.99, "mean_turns": 4.9, "wall_s": 180.0}


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every finished child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def train_seed(seed: int, out_dir: Path) -> dict[str, Any]:
    """One ``gemjax train`` process with every default but the seed; its final
    greedy evaluation, seconds and whether it meets :data:`GOAL`."""
    command = [sys.executable, "-m", "gemjax", "train", "--out", str(out_dir), "--seed", str(seed)]
    cpu, wall = children_cpu_seconds(), time.perf_counter()
    subprocess.run([*command, "--no-progress"], check=True, capture_output=True)
    cpu, wall = children_cpu_seconds() - cpu, time.perf_counter() - wall
    last = json.loads((out_dir / "metrics.jsonl").read_text().splitlines()[-1])
    met = (
        last["success"] >= GOAL["success"]
        and last["mean_turns"] <= GOAL["mean_turns"]
        and wall <= GOAL["wall_s"]
    )
    return {
        "seed": seed,
        "updates": last["update"],
        "success": last["success"],
        "mean_turns": last["mean_turns"],
        "wall_s": wall,
        "cpu_s": cpu,
        "goal_met": met,
    }


def render_docs(results: dict[str, Any]) -> str:
    """The generated section of ``docs/results.md``: one row per seed."""
    lines = [
        f"Command: `{results['command']}` ({results['machine']}, jax {results['jax']}): "
        "`gemjax train --out DIR --seed N --no-progress` per seed, one process after the "
        "other; seconds include start-up and compilation.",
        "",
        "| seed | greedy success | greedy mean turns | wall s | CPU s (user + system) | goal |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for row in results["rows"]:
        goal = "met" if row["goal_met"] else "**not met**"
        lines.append(
            f"| {row['seed']} | {row['success']:.3f} | {row['mean_turns']:.3f} | "
            f"{row['wall_s']:.0f} | {row['cpu_s']:.0f} | {goal} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the seeds (or only rewrite the docs); returns what it writes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS / "default_run.json")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs from the JSON")
    args = parser.parse_args(argv)
    if args.docs:
        results = json.loads(args.out.read_text())
    else:
        with tempfile.TemporaryDirectory() as scratch:
            rows = []
            for seed in args.seeds:
                rows.append(train_seed(seed, Path(scratch) / f"seed{seed}"))
                print(json.dumps(rows[-1]), flush=True)
        results = {
            "command": " ".join(["python benchmarks/default_run.py", *(argv or sys.argv[1:])]),
            "machine": f"{platform.machine()}, {jax.device_count()} {jax.default_backend()} "
            "device(s)",
            "jax": jax.__version__,
            "config": dataclasses.asdict(TrainConfig()),
            "goal": GOAL,
            "rows": rows,
        }
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.out == RESULTS / "default_run.json":
        write_section(DOCS, OWNER, render_docs(results))
    return results


if __name__ == "__main__":
    main()
