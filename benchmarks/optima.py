"""Reference optima of the benchmark games (gemjax.reference), as a table and JSON.

* GuessTheNumber-hard (1..50, 7 turns) and the discount experiment's 50-turn id:
  the exact optimum (balanced bisection).
* Mastermind-easy: the exact minimum expected number of guesses.
* Minesweeper-easy: the best-probability player over boards from the kernel's reset,
  without flags (a return-maximiser: flags earn nothing) and with flags (GEM's
  success needs every mine flagged).
* Sudoku-easy: a player that knows the solution needs one turn per empty cell.
* Sudoku-easy and Minesweeper-easy: uniform random play over the game's action mask,
  where a policy trained with ``--mask-invalid`` starts from.

Writes ``benchmarks/results/optima.json`` and, at the default output, the table of
``docs/results.md``'s reference-optima section.

    python benchmarks/optima.py                   # 10000 boards per player, 20000 puzzles
    python benchmarks/optima.py --boards 200 --puzzles 2000 --out /tmp/optima.json
    python benchmarks/optima.py --docs            # only rewrite the docs from the JSON
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

from gemjax.benchmark import write_section
from gemjax.reference import (
    Estimate,
    guess_the_number_optimum,
    masked_random_play,
    mastermind_optimum,
    play_minesweeper,
    sudoku_empty_cells,
)
from gemjax.registry import make

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
OWNER = "benchmarks/optima.py"


def timed_row(env_id: str, player: str, compute: Any, *args: Any, **extra: Any) -> dict:
    """A table row: ``compute(*args)``'s fields, ``extra``, and its process CPU seconds."""
    start = time.process_time()
    result = dataclasses.asdict(compute(*args))
    seconds = time.process_time() - start
    return {"env_id": env_id, "player": player, **result, **extra, "cpu_s": seconds}


def reference_rows(boards: int, puzzles: int, seed: int) -> list[dict]:
    """One row per (game id, player)."""
    exact = "balanced bisection (exact)"
    rows = [
        timed_row(env_id, exact, guess_the_number_optimum, *make(env_id).config)
        for env_id in ("game:GuessTheNumber-v0-hard", "game:GuessTheNumber-v0-hard-no-max-turn")
    ]
    length, numbers, turns, duplicates = make("game:Mastermind-v0-easy").config
    rows.append(
        timed_row(
            "game:Mastermind-v0-easy",
            "optimal guess tree (exact)",
            mastermind_optimum,
            length,
            numbers,
            duplicates,
            turns,
        )
    )
    minesweeper = "game:Minesweeper-v0-easy"
    for flag_mines, player in (
        (False, "best-probability, no flags"),
        (True, "best-probability, flags mines"),
    ):
        rows.append(
            timed_row(
                minesweeper,
                player,
                play_minesweeper,
                minesweeper,
                boards,
                seed,
                flag_mines,
                first_cell="centre",
            )
        )
    sudoku = "game:Sudoku-v0-easy"
    rows.append(timed_row(sudoku, "knows the solution", sudoku_empty_cells, sudoku, puzzles, seed))
    for env_id, episodes in ((sudoku, puzzles), (minesweeper, boards)):
        row = timed_row(
            env_id, "uniform over the action mask", masked_random_play, env_id, episodes, seed
        )
        outcomes = row.pop("outcomes")
        rows.append({**row, **outcomes})
    return rows


def cell(value: Any) -> str:
    """A table cell: an estimate as ``value [low, high]``, a float to 3 places."""
    if isinstance(value, dict) and set(value) == {f.name for f in dataclasses.fields(Estimate)}:
        return f"{value['value']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def print_table(rows: list[dict]) -> None:
    """The rows as ``game | player | success | turns | return``, with 95% intervals."""
    print(f"{'game':40} {'player':32} {'success':24} {'turns':24} {'return / cleared'}")
    for row in rows:
        success = row.get("success", row.get("gem_success", ""))
        turns = row.get("expected_turns", row.get("mean_turns", ""))
        extra = ""
        if "cleared" in row:
            extra = f"return {cell(row['mean_return'])}, cleared {cell(row['cleared'])}"
        print(f"{row['env_id']:40} {row['player']:32} {cell(success):24} {cell(turns):24} {extra}")


def render_docs(results: dict) -> str:
    """The generated table of ``docs/results.md``: one row per player, 95% intervals
    where the figure is sampled."""
    lines = [
        f"Command: `{results['command']}` ({results['machine']}, jax {results['jax']}); "
        f"{results['cpu_s']:.1f} s of process CPU, seed {results['seed']}.",
        "",
        "| game | player | success | turns | return | cleared (every safe cell) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in results["rows"]:
        success = row.get("success", row.get("gem_success", ""))
        turns = cell(row.get("expected_turns", row.get("mean_turns", "")))
        if "worst_turns" in row:
            turns += f" (worst {row['worst_turns']})"
        values = [
            cell(success),
            turns,
            cell(row.get("mean_return", "")),
            cell(row.get("cleared", "")),
        ]
        lines.append(
            f"| {row['env_id'].removeprefix('game:')} | {row['player']} | {' | '.join(values)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boards", type=int, default=10_000, help="Minesweeper boards per player")
    parser.add_argument("--puzzles", type=int, default=20_000, help="Sudoku puzzles drawn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "optima.json")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs from the JSON")
    args = parser.parse_args()
    if args.docs:
        write_section(DOCS, OWNER, render_docs(json.loads(args.out.read_text())))
        return
    start = time.process_time()
    rows = reference_rows(args.boards, args.puzzles, args.seed)
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "command": " ".join(["python benchmarks/optima.py", *sys.argv[1:]]),
        "boards": args.boards,
        "puzzles": args.puzzles,
        "seed": args.seed,
        "cpu_s": time.process_time() - start,
        "machine": platform.machine(),
        "jax": f"{jax.__version__} on {jax.default_backend()}",
        "rows": rows,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    if args.out == RESULTS / "optima.json":
        write_section(DOCS, OWNER, render_docs(results))


if __name__ == "__main__":
    main()
