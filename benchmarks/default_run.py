"""Training runs as a user types them, for several seeds, against their goals.

The default suite is the default ``gemjax train`` run: is the paper's goal met
(greedy success >= 0.99 and mean turns <= 4.9 on GuessTheNumber 1..50 with 50 turns,
each seed within 3 minutes)? It also plays each seed's final policy once from every
target, the exact score the run's sampled evaluation estimates. The ``solve`` suite
trains three games to the ablation issue's targets, each seed within 3 minutes:
GuessTheNumber-hard (1..50 in 7 turns, success >= 0.99) as is and with a curriculum
stage of 50 turns first, Mastermind-easy (success 1.0 in at most 3.6 turns) with 3000
updates, and Sudoku-easy (success >= 0.95) with the joint head and the action mask.
The ``screen`` suite runs the defaults until 2026-12-05 (1500 updates, entropy bonus
0.003) with one setting changed at a time, toward the default run's goal.

Each run and seed runs ``gemjax train --out DIR --seed N --no-progress`` (plus the
run's flags) in a fresh process, one after the other; wall seconds and the child's
CPU seconds (user + system) include start-up and compilation. Writes the suite's
JSON under ``benchmarks/results/`` and, at the default output, its section of
``docs/results.md``.

    python benchmarks/default_run.py                 # seeds 0, 1 and 2
    python benchmarks/default_run.py --suite solve   # GuessTheNumber-hard, Mastermind, Sudoku
    python benchmarks/default_run.py --suite screen  # settings near the earlier default
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
from typing import Any, NamedTuple

import jax
import numpy as np

from gemjax.benchmark import write_section
from gemjax.train import TrainConfig, Trainer, make_train
from gemjax.train.host import restore_latest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
OPTIMA = RESULTS / "optima.json"  # the reference players' figures (benchmarks/optima.py)
OWNER = "benchmarks/default_run.py"
GOAL = {"success": 0.99, "mean_turns": 4.9, "wall_s": 180.0}
# a goal's lower bounds (the others are upper bounds): GEM's success, and Minesweeper's
# board cleared (every safe cell revealed), which GEM's success does not count
AT_LEAST = ("success", "cleared")
HARD = "game:GuessTheNumber-v0-hard"
CURRICULUM = ("--curriculum", "max_turns=50:1000", "--lr-schedule", "linear")
SOLVE_GOAL = {"success": 0.99, "wall_s": 180.0}  # the ablation issue's GuessTheNumber-hard target
MASTERMIND_GOAL = {"success": 1.0, "mean_turns": 3.6, "wall_s": 180.0}
SUDOKU_GOAL = {"success": 0.95, "wall_s": 180.0}  # the ablation issue's Sudoku-easy target
SUDOKU_FLAGS = ("--env", "game:Sudoku-v0-easy", "--head", "joint", "--mask-invalid")
# The ablation issue's Minesweeper-easy target: boards cleared (GEM's success also needs
# every mine flagged, which pays nothing); the run takes longer than the others.
MINESWEEPER_GOAL = {"cleared": 0.7, "wall_s": 600.0}
MINESWEEPER_FLAGS = ("--env", "game:Minesweeper-v0-easy", "--torso", "conv", "--head", "joint")
MINESWEEPER_FLAGS += ("--hidden", "32", "32", "32", "--mask-invalid", "--algo", "ppo")
# The defaults until 2026-12-05 (1500 updates, entropy bonus 0.003), around which the
# screen was measured: named, so that its runs do not move with the defaults.
EARLIER = {"--updates": "1500", "--ent-coef": "0.003"}


def around_earlier(*flags: str) -> tuple[str, ...]:
    """``gemjax train`` flags (name-value pairs) after the :data:`EARLIER` defaults
    they do not set themselves."""
    named = set(flags[::2])
    earlier = (
        part for name, value in EARLIER.items() if name not in named for part in (name, value)
    )
    return (*earlier, *flags)


class Suite(NamedTuple):
    """Runs compared in one table: ``runs`` maps a label to its ``gemjax train``
    flags and its goal, the bounds each seed must meet (``success`` at least,
    ``mean_turns`` and ``wall_s`` at most); ``result`` names the JSON; ``exact``: also
    play each seed's final policy once from every target (:func:`exact_greedy`; the
    default run only)."""

    runs: dict[str, tuple[tuple[str, ...], dict[str, float]]]
    result: str
    exact: bool = False

    def owner(self, name: str) -> str:
        """Who writes the suite's section of the docs."""
        return OWNER if name == "default" else f"{OWNER} --suite {name}"


SUITES = {
    "default": Suite({"default": ((), GOAL)}, "default_run.json", exact=True),
    "solve": Suite(
        {
            "GuessTheNumber-hard": (("--env", HARD), SOLVE_GOAL),
            "GuessTheNumber-hard, curriculum": (("--env", HARD, *CURRICULUM), SOLVE_GOAL),
            "Mastermind-easy, 3000 updates": (
                ("--env", "game:Mastermind-v0-easy", "--updates", "3000"),
                MASTERMIND_GOAL,
            ),
            "Sudoku-easy, joint head and action mask": (
                (*SUDOKU_FLAGS, "--updates", "500"),
                SUDOKU_GOAL,
            ),
            "Minesweeper-easy, conv torso, PPO": (
                (*MINESWEEPER_FLAGS, "--lr", "1e-3", "--updates", "600", "--eval-every", "100"),
                MINESWEEPER_GOAL,
            ),
        },
        "solve_runs.json",
    ),
    "screen": Suite(
        {
            " ".join(flags): (around_earlier(*flags), GOAL)
            for flags in (
                ("--ent-coef", "0"),
                ("--ent-coef", "0.001"),
                ("--ent-coef", "0.004"),
                ("--ent-coef", "0.005"),
                ("--ent-coef", "0.01"),
                ("--lr-schedule", "linear"),
                ("--lr", "3e-3"),
                ("--updates", "2500"),
                ("--episodes", "512"),
            )
        },
        "default_screen.json",
    ),
}


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every finished child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def train_seed(
    seed: int, out_dir: Path, flags: tuple[str, ...] = (), goal: dict[str, float] = GOAL
) -> dict[str, Any]:
    """One ``gemjax train`` process with every default but the seed and ``flags``; its
    final greedy evaluation, seconds and whether it meets ``goal``."""
    command = [sys.executable, "-m", "gemjax", "train", "--out", str(out_dir), "--seed", str(seed)]
    cpu, wall = children_cpu_seconds(), time.perf_counter()
    subprocess.run([*command, *flags, "--no-progress"], check=True, capture_output=True)
    cpu, wall = children_cpu_seconds() - cpu, time.perf_counter() - wall
    last = json.loads((out_dir / "metrics.jsonl").read_text().splitlines()[-1])
    row = {
        "seed": seed,
        "updates": last["update"],
        "success": last["success"],
        "mean_turns": last["mean_turns"],
        **({"cleared": last["cleared"]} if "cleared" in last else {}),
        "wall_s": wall,
        "cpu_s": cpu,
    }
    return {**row, "goal_met": meets(row, goal)}


def meets(row: dict[str, Any], goal: dict[str, float]) -> bool:
    """Whether a seed's row is within every bound of ``goal`` (:data:`AT_LEAST`
    figures at least theirs, the others at most)."""
    return all(
        row[name] >= bound if name in AT_LEAST else row[name] <= bound
        for name, bound in goal.items()
    )


def target_keys(trainer: Trainer, draws: int = 4096) -> jax.Array:
    """key array[n]: one reset key for each of the ``n`` targets of the trainer's
    GuessTheNumber (``min_number..max_number``), the first of ``draws`` keys to draw it.

    Raises:
        ValueError: some target was not drawn.
    """
    rollout = trainer.rollout
    keys = jax.random.split(jax.random.key(0), draws)
    states, _ = jax.jit(jax.vmap(rollout.env.reset, in_axes=(0, None)))(keys, rollout.env_params)
    targets = np.asarray(states.target)
    wanted = range(int(states.min_number[0]), int(states.max_number[0]) + 1)
    missing = sorted(set(wanted) - set(targets.tolist()))
    if missing:
        raise ValueError(f"targets {missing} not drawn in {draws} resets")
    return keys[np.asarray([np.flatnonzero(targets == t)[0] for t in wanted])]


def exact_greedy(out_dir: Path, seed: int) -> dict[str, float]:
    """Greedy play of the default run's final policy (restored from ``out_dir``) once
    from each target: the exact success and mean turns over uniformly drawn targets,
    which the run's own evaluation estimates from 16384 sampled episodes (about 0.01
    turns of standard error, a quarter of the goal's margin over the optimum)."""
    trainer = make_train(TrainConfig())
    state = restore_latest(out_dir, jax.jit(trainer.init)(jax.random.key(seed)))
    evaluate = jax.jit(trainer.rollout.evaluate)
    metrics = evaluate(state.params, target_keys(trainer), jax.random.key(0))
    return {
        "exact_success": float(metrics.success),
        "exact_mean_turns": float(metrics.mean_turns),
    }


def bounds(goal: dict[str, float]) -> str:
    """A goal in words: ``success >= 0.99, mean_turns <= 4.9, wall_s <= 180``."""
    return ", ".join(
        f"{name} {'>=' if name in AT_LEAST else '<='} {value:g}" for name, value in goal.items()
    )


def reference_cell(env_id: str, row: dict[str, Any], optima: list[dict[str, Any]]) -> str:
    """The reference player's figure for a row's game (``gemjax.reference``, from
    ``benchmarks/results/optima.json``) and the row's gap to it: Minesweeper's boards
    cleared (the best-probability player), else the optimal mean turns."""
    best = next((r for r in optima if r["env_id"] == env_id and "uniform" not in r["player"]), None)
    if best is None:
        return "-"
    if "cleared" in best:
        reference, figure = best["cleared"]["value"], row.get("cleared")
        unit = "cleared"
    else:
        turns = best.get("expected_turns", best.get("mean_turns"))
        reference = turns["value"] if isinstance(turns, dict) else turns
        figure, unit = row["mean_turns"], "turns"
    gap = f" ({figure - reference:+.3f})" if figure is not None else ""
    return f"{reference:.3f} {unit}{gap}"


def run_env(flags: tuple[str, ...] | list[str]) -> str:
    """The env id a ``gemjax train`` command line trains on."""
    flags = list(flags)
    return flags[flags.index("--env") + 1] if "--env" in flags else TrainConfig.env_id


def render_docs(results: dict[str, Any]) -> str:
    """The generated section of ``docs/results.md``: one row per seed (and run, for a
    suite of several, each with its flags)."""
    runs = results.get("runs")
    flags = " FLAGS" if runs else ""
    lines = [
        f"Command: `{results['command']}` ({results['machine']}, jax {results['jax']}): "
        f"`gemjax train --out DIR --seed N{flags} --no-progress` per seed, one process "
        "after the other; seconds include start-up and compilation.",
        "",
    ]
    if runs:
        goals = [goal for _, goal in runs.values()]
        for label, (flags_of_run, goal) in runs.items():
            parts = [f"`{' '.join(flags_of_run)}`"] if label != " ".join(flags_of_run) else []
            parts += [f"goal: {bounds(goal)}"] if len(set(map(str, goals))) > 1 else []
            if parts:
                lines.append(f"* {label}: {'; '.join(parts)}")
        if len(set(map(str, goals))) == 1:
            lines.append(f"Every run's goal: {bounds(goals[0])}.")
        lines.append("")
    run_head, run_rule = ("| run ", "|---") if runs else ("", "")
    exact = "exact_mean_turns" in results["rows"][0]
    cleared = any("cleared" in row for row in results["rows"])
    cleared_head, cleared_rule = ("| board cleared ", "|---:") if cleared else ("", "")
    exact_head, exact_rule = (
        ("| every target once: success | mean turns ", "|---:|---:") if exact else ("", "")
    )
    lines += [
        f"{run_head}| seed | greedy success | greedy mean turns {cleared_head}{exact_head}"
        "| reference (gap) | wall s | CPU s (user + system) | goal |",
        f"{run_rule}|---:|---:|---:{cleared_rule}{exact_rule}|---:|---:|---:|---|",
    ]
    optima = json.loads(OPTIMA.read_text())["rows"]
    for row in results["rows"]:
        goal = "met" if row["goal_met"] else "**not met**"
        run_cell = f"| {row['run']} " if runs else ""
        exact_cells = (
            f"| {row['exact_success']:.3f} | {row['exact_mean_turns']:.3f} " if exact else ""
        )
        cleared_cell = ""
        if cleared:
            cleared_cell = f"| {row['cleared']:.3f} " if "cleared" in row else "| - "
        env_id = run_env(runs[row["run"]][0] if runs else ())
        lines.append(
            f"{run_cell}| {row['seed']} | {row['success']:.3f} | {row['mean_turns']:.3f} "
            f"{cleared_cell}{exact_cells}| {reference_cell(env_id, row, optima)} "
            f"| {row['wall_s']:.0f} | {row['cpu_s']:.0f} | {goal} |"
        )
    lines += [
        "",
        "Reference (gap): the game's reference player (`gemjax.reference`, "
        "`benchmarks/optima.py`): its optimal mean turns, or for Minesweeper the boards "
        "the best-probability player clears; the gap is the row's greedy figure minus it.",
    ]
    if exact:
        lines += [
            "",
            "Greedy figures: the run's own evaluation (16384 sampled episodes); every target "
            "once: the final checkpoint's greedy play from each target (exact over uniform "
            "targets). The goal is judged on the run's own evaluation.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the suite's seeds (or only rewrite the docs); returns what it writes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="default")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, help="the JSON (default: the suite's)")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs from the JSON")
    args = parser.parse_args(argv)
    suite = SUITES[args.suite]
    default_out = RESULTS / suite.result
    out = args.out or default_out
    if args.docs:
        results = json.loads(out.read_text())
    else:
        results = run_suite(suite, args.seeds, argv)
        out.write_text(json.dumps(results, indent=2) + "\n")
    if out == default_out:
        write_section(DOCS, suite.owner(args.suite), render_docs(results))
    return results


def run_suite(suite: Suite, seeds: list[int], argv: list[str] | None) -> dict[str, Any]:
    """Every run of ``suite`` for each seed, in fresh processes; the JSON's content."""
    with tempfile.TemporaryDirectory() as scratch:
        rows = []
        for index, (label, (flags, goal)) in enumerate(suite.runs.items()):
            for seed in seeds:
                out_dir = Path(scratch) / f"run{index}_seed{seed}"
                row = train_seed(seed, out_dir, flags, goal)
                if suite.exact:
                    row.update(exact_greedy(out_dir, seed))
                rows.append({"run": label, **row} if len(suite.runs) > 1 else row)
                print(json.dumps(rows[-1]), flush=True)
    results = {
        "command": " ".join(["python benchmarks/default_run.py", *(argv or sys.argv[1:])]),
        "machine": f"{platform.machine()}, {jax.device_count()} {jax.default_backend()} device(s)",
        "jax": jax.__version__,
        "config": dataclasses.asdict(TrainConfig()),
        "rows": rows,
    }
    if len(suite.runs) == 1:
        results["goal"] = next(iter(suite.runs.values()))[1]
    else:
        results["runs"] = suite.runs
    return results


if __name__ == "__main__":
    main()
