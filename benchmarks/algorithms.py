"""Update rules compared on four games under one protocol: matched update loops, a
learning-rate sweep per rule, 5 seeds with 95% intervals, and the gap to each game's
reference optimum.

Protocol (every number is from runs of this script):

* **Rules** (:data:`VARIANTS`): ReBN, REINFORCE and GRPO with one optimiser step per
  rollout (no clipping); the same three with PPO's update loop (ratio clip 0.2, 4
  epochs of 4 minibatches), so that PPO's critic is compared with sample reuse held
  equal; PPO itself (turn-level critic, GAE); GEM's recipe (ReBN, clip 0.2, 2 epochs of
  one minibatch, spec section 21.3) and GEM's GRPO (the undiscounted episode score,
  then ReBN; ``TrainConfig.grpo_score="gem"``) with GEM's loop.
* **Same budget**: every rule of a game shares the network, batch, discount,
  horizon and environment steps (:data:`BASE`, :data:`GAMES`).
* **Learning rate**: each rule trains at each of :data:`LEARNING_RATES` on the
  selection seeds (:data:`SELECTION_SEEDS`); the rate with the best mean final
  greedy return is then run on the report seeds (:data:`REPORT_SEEDS`), which the
  selection never saw. One compiled program per rule and game serves every rate
  (``make_train(..., learning_rate_in_state=True)``).
* **Intervals**: per game, Student-t 95% intervals of the mean over report seeds. A
  rule "beats" another only where the two intervals do not overlap. Across games,
  the interquartile mean (IQM) of normalised returns with a stratified bootstrap
  95% interval (rliable's recipe). A normalised return is
  ``(R - R_untrained) / (R_reference - R_untrained)``: 0 is the untrained policy's
  sampled play, 1 the reference player of ``benchmarks/results/optima.json``.
* **Curves** against environment steps and against process CPU seconds (the run's
  CPU time, compile excluded, spread evenly over its updates).

Seeds run one after the other: ``vmap`` over runs of a train function now and then
wedges XLA's CPU runtime (jax 0.10.2: compiled, then idle in ``block_until_ready``).

Policy designs (:data:`DESIGNS`) run under the same protocol: PPO with the joint head
(``TrainConfig.head="joint"``), with the format-error value masked
(``mask_format_errors``), and with both, written to ``policy_design.json`` and its
own docs section.

    python benchmarks/algorithms.py            # the protocol: JSON, plot, docs section
    python benchmarks/algorithms.py --designs  # the policy designs against PPO
    python benchmarks/algorithms.py --quick    # a smoke run: tiny budget, seconds
    python benchmarks/algorithms.py --docs     # only rewrite docs/results.md from the JSON
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

import gemjax
from gemjax.benchmark import write_section
from gemjax.train import TrainConfig, make_train
from gemjax.train.rollout import episode_metrics

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
OWNER = "benchmarks/algorithms.py"
DESIGN_OWNER = f"{OWNER} --designs"
COMMAND = "python benchmarks/algorithms.py"

BASE = TrainConfig(  # shared by every game and rule
    gamma=0.9,
    ent_coef=0.0,
    num_episodes=128,
    num_transitions=None,
    hidden=(128, 128),
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
OUTCOMES = ("cleared",)  # the games' EpisodeOutcomes the tables report (Minesweeper)
PPO_LOOP: dict[str, Any] = {"clip_eps": 0.2, "update_epochs": 4, "num_minibatches": 4}
GEM_LOOP: dict[str, Any] = {"clip_eps": 0.2, "update_epochs": 2, "num_minibatches": 1}
VARIANTS: dict[str, dict[str, Any]] = {
    "rebn": {"algo": "rebn"},
    "reinforce": {"algo": "reinforce"},
    "grpo": {"algo": "grpo"},
    "rebn+ppo-loop": {"algo": "rebn", **PPO_LOOP},
    "reinforce+ppo-loop": {"algo": "reinforce", **PPO_LOOP},
    "grpo+ppo-loop": {"algo": "grpo", **PPO_LOOP},
    "ppo": {"algo": "ppo", **PPO_LOOP},
    "gem-rebn": {"algo": "rebn", **GEM_LOOP},
    "gem-grpo": {"algo": "grpo", "grpo_score": "gem", **GEM_LOOP},
}
RULES = tuple(VARIANTS)  # the protocol's rules (the default of --variants)
# Policy designs on PPO, the protocol's best rule: the joint head and the format mask.
DESIGNS: dict[str, dict[str, Any]] = {
    "ppo+joint": {**VARIANTS["ppo"], "head": "joint"},
    "ppo+mask": {**VARIANTS["ppo"], "mask_format_errors": True},
    "ppo+joint+mask": {**VARIANTS["ppo"], "head": "joint", "mask_format_errors": True},
}
VARIANTS.update(DESIGNS)
DESIGN_OUT = RESULTS / "policy_design"
LEARNING_RATES = (1.25e-4, 5e-4, 2e-3, 8e-3, 3.2e-2)
SELECTION_SEEDS = (100, 101)
REPORT_SEEDS = (0, 1, 2, 3, 4)
QUICK = {"num_updates": 2, "eval_every": 1, "num_episodes": 16, "eval_episodes": 16}
QUICK_HIDDEN = (16,)
BOOTSTRAP_SAMPLES = 2000
# Student's t 97.5% quantiles for 1..30 degrees of freedom (beyond 30 the 30th, a
# slightly wider interval than exact).
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
T_975 += (2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)
T_975 += (2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def interval(values: Any, bounds: tuple[float, float] = (-np.inf, np.inf)) -> dict[str, float]:
    """Mean of float ``values[N]`` with its Student-t 95% interval, clipped to the
    metric's ``bounds`` (``low == high == mean`` for one value)."""
    x = np.asarray(values, np.float64)
    mean = float(x.mean())
    half = 0.0
    if x.size > 1:
        half = T_975[min(x.size - 1, len(T_975)) - 1] * float(x.std(ddof=1)) / np.sqrt(x.size)
    low, high = max(mean - half, bounds[0]), min(mean + half, bounds[1])
    return {"mean": mean, "low": low, "high": high}


def iqm(values: np.ndarray) -> float:
    """Interquartile mean of float ``values[N]``: the mean after dropping
    ``floor(N / 4)`` values from each end (rliable's ``scipy.stats.trim_mean(x,
    0.25)``)."""
    x = np.sort(np.asarray(values, np.float64).ravel())
    cut = x.size // 4
    return float(x[cut : x.size - cut].mean())


def iqm_interval(scores: np.ndarray, seed: int = 0) -> dict[str, float]:
    """IQM of float ``scores[G, S]`` (games x seeds) and its stratified bootstrap 95%
    interval: seeds are resampled with replacement within each game."""
    rng = np.random.default_rng(seed)
    games, seeds = scores.shape
    picks = rng.integers(0, seeds, size=(BOOTSTRAP_SAMPLES, games, seeds))
    samples = [iqm(np.take_along_axis(scores, pick, axis=1)) for pick in picks]
    low, high = np.percentile(samples, [2.5, 97.5])
    return {"mean": iqm(scores), "low": float(low), "high": float(high)}


def separated(a: dict[str, float], b: dict[str, float]) -> bool:
    """True when interval ``a`` lies wholly above interval ``b``."""
    return a["low"] > b["high"]


def variant_config(base: TrainConfig, name: str) -> TrainConfig:
    """``base`` with the settings of rule ``name`` (:data:`VARIANTS`)."""
    return dataclasses.replace(base, **VARIANTS[name])


def game_config(env_id: str, updates: int, quick: bool) -> TrainConfig:
    """:data:`BASE` for one game (or the ``--quick`` smoke budget)."""
    if quick:
        return dataclasses.replace(BASE, env_id=env_id, hidden=QUICK_HIDDEN, **QUICK)
    return dataclasses.replace(BASE, env_id=env_id, num_updates=updates, eval_every=EVAL_EVERY)


def untrained_return(config: TrainConfig) -> float:
    """Mean undiscounted return of the untrained policy's sampled play on
    ``eval_episodes`` episodes (the 0 of a normalised return)."""
    trainer = make_train(config)
    state = trainer.init(jax.random.key(0))
    reset_keys = jax.random.split(jax.random.key(1), config.eval_episodes)
    traj = jax.jit(trainer.rollout.collect)(state.params, reset_keys, jax.random.key(2))
    return float(episode_metrics(traj.valid, traj.success, traj.rewards).episode_return)


def reference(env_id: str) -> tuple[float, float | None]:
    """The reference player of ``optima.json`` on ``env_id`` (its first row): mean
    return (the measured one where the row has it, as for Minesweeper; else 1.0, since
    a won game's progress rewards sum to 1.0) and expected turns (``None`` if no row)."""
    rows = json.loads((RESULTS / "optima.json").read_text())["rows"]
    row = next((row for row in rows if row["env_id"] == env_id), None)
    if row is None:
        return 1.0, None
    turns = row.get("expected_turns", row.get("mean_turns"))
    mean_return = row["mean_return"]["value"] if "mean_return" in row else 1.0
    return float(mean_return), float(turns["value"] if isinstance(turns, dict) else turns)


class Runner:
    """One compiled ``train(key, learning_rate)`` of a game and rule, run per seed."""

    def __init__(self, config: TrainConfig):
        self.config = config
        self.trainer = make_train(config, learning_rate_in_state=True)
        start = time.perf_counter()
        args = (jax.random.key(0), np.float32(config.learning_rate))
        self.train = jax.jit(self.trainer.train).lower(*args).compile()
        self.compile_s = time.perf_counter() - start

    def run(self, seed: int, learning_rate: float) -> dict[str, Any]:
        """One run: its greedy curves (one point per evaluation), sampled returns and
        process CPU seconds (compile excluded)."""
        cpu, wall = time.process_time(), time.perf_counter()
        _, metrics = self.train(jax.random.key(seed), np.float32(learning_rate))
        jax.block_until_ready(metrics)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return {
            "return": np.asarray(metrics.eval.episode_return).tolist(),
            "success": np.asarray(metrics.eval.success).tolist(),
            "mean_turns": np.asarray(metrics.eval.mean_turns).tolist(),
            **{name: np.asarray(v).tolist() for name, v in metrics.eval.outcomes.items()},
            "train_return": np.asarray(metrics.train.episodes.episode_return).mean(-1).tolist(),
            "cpu_s": cpu,
            "wall_s": wall,
        }


def run_variant(
    config: TrainConfig,
    name: str,
    rates: tuple[float, ...],
    selection: tuple[int, ...],
    report: tuple[int, ...],
) -> dict[str, Any]:
    """Sweep ``rates`` on the ``selection`` seeds, then run the best rate on the
    ``report`` seeds. Returns the JSON row of rule ``name`` (curves ``[S][P]``)."""
    runner = Runner(variant_config(config, name))
    sweep = {
        str(rate): [runner.run(seed, rate)["return"][-1] for seed in selection] for rate in rates
    }
    best = max(rates, key=lambda rate: float(np.mean(sweep[str(rate)])))
    runs = [runner.run(seed, best) for seed in report]
    points = config.num_updates // config.eval_every
    steps_per_point = config.eval_every * runner.trainer.env_steps_per_update
    curves = {key: [run[key] for run in runs] for key in runs[0] if key not in ("cpu_s", "wall_s")}
    return {
        "variant": name,
        "settings": VARIANTS[name],
        "compile_s": runner.compile_s,
        "sweep_final_return": sweep,
        "learning_rate": best,
        "seeds": list(report),
        "env_steps": [(i + 1) * steps_per_point for i in range(points)],
        "cpu_s": [[run["cpu_s"] * (i + 1) / points for i in range(points)] for run in runs],
        "wall_s": [run["wall_s"] for run in runs],
        **curves,
        "final": {
            "return": interval([curve[-1] for curve in curves["return"]]),
            "success": interval([curve[-1] for curve in curves["success"]], (0.0, 1.0)),
            "mean_turns": interval([curve[-1] for curve in curves["mean_turns"]], (1.0, np.inf)),
            **{
                name: interval([curve[-1] for curve in curves[name]], (0.0, 1.0))
                for name in OUTCOMES
                if name in curves
            },
        },
    }


def normalized_finals(game: dict[str, Any], row: dict[str, Any]) -> np.ndarray:
    """float[S]: a rule's final greedy returns on a game, normalised between the
    untrained policy (0) and the reference player (1)."""
    low, high = game["untrained_return"], game["reference_return"]
    return (np.asarray(row["return"])[:, -1] - low) / (high - low)


def summarize(games: list[dict[str, Any]]) -> dict[str, Any]:
    """Across games: each rule's IQM of normalised final returns with its bootstrap
    interval; per game, the pairs ``[winner, loser]`` whose intervals separate."""
    names = [row["variant"] for row in games[0]["variants"]]
    scores = {
        name: np.stack(
            [
                normalized_finals(g, row)
                for g in games
                for row in g["variants"]
                if row["variant"] == name
            ]
        )
        for name in names
    }
    beats = {
        g["env_id"]: [
            [a["variant"], b["variant"]]
            for a in g["variants"]
            for b in g["variants"]
            if separated(a["final"]["return"], b["final"]["return"])
        ]
        for g in games
    }
    return {
        "iqm_normalized_return": {n: iqm_interval(s) for n, s in scores.items()},
        "beats": beats,
    }


def run_protocol(args: argparse.Namespace) -> dict[str, Any]:
    """Every game and rule of the protocol; prints one line per rule as it ends."""
    registered = set(gemjax.list_envs())
    rates = (BASE.learning_rate,) if args.quick else tuple(args.rates)
    games = []
    for env_id in args.games:
        if env_id not in registered:
            print(f"{env_id}: not registered, skipped")
            continue
        config = game_config(env_id, GAMES.get(env_id, max(GAMES.values())), args.quick)
        reference_return, reference_turns = reference(env_id)
        game = {
            "env_id": env_id,
            "config": dataclasses.asdict(config),
            "untrained_return": untrained_return(config),
            "reference_return": reference_return,
            "reference_turns": reference_turns,
            "variants": [],
        }
        for name in args.variants:
            row = run_variant(config, name, rates, tuple(args.selection_seeds), tuple(args.seeds))
            game["variants"].append(row)
            print(table_row(game, row), flush=True)
        games.append(game)
    return {
        "command": " ".join([COMMAND, *args.argv]),
        "machine": f"{platform.machine()}, {jax.device_count()} {jax.default_backend()} device(s)",
        "jax": jax.__version__,
        "learning_rates": list(rates),
        "selection_seeds": list(args.selection_seeds),
        "games": games,
        "summary": summarize(games) if games else {},
    }


def fmt(estimate: dict[str, float], digits: int = 3) -> str:
    """``mean [low, high]``."""
    mean, low, high = (f"{estimate[k]:.{digits}f}" for k in ("mean", "low", "high"))
    return f"{mean} [{low}, {high}]"


def table_row(game: dict[str, Any], row: dict[str, Any]) -> str:
    """One printed line: a rule's finals on a game (means over report seeds, 95%
    intervals)."""
    final = row["final"]
    gap = game["reference_return"] - final["return"]["mean"]
    cpu = np.mean([curve[-1] for curve in row["cpu_s"]])
    return (
        f"{game['env_id']:30s} {row['variant']:19s} lr {row['learning_rate']:g}  "
        f"return {fmt(final['return'])}  gap {gap:.3f}  success {fmt(final['success'])}  "
        f"turns {fmt(final['mean_turns'], 2)}  "
        + "".join(f"{name} {fmt(final[name])}  " for name in OUTCOMES if name in final)
        + f"cpu {cpu:.1f} s"
    )


def game_table(game: dict[str, Any]) -> list[str]:
    """The Markdown table of one game (with a column per outcome its rows report)."""
    turns = game["reference_turns"]
    outcomes = [name for name in OUTCOMES if name in game["variants"][0]["final"]]
    lines = [
        f"### {game['env_id'].removeprefix('game:')}",
        "",
        f"Reference player: return {game['reference_return']:.3f}"
        + (f", {turns:.2f} turns" if turns is not None else "")
        + f". Untrained policy (sampled): return {game['untrained_return']:.3f}. "
        + f"Budget: {game['variants'][0]['env_steps'][-1]:,} env steps per run.",
        "",
        "| rule | lr | greedy return [95%] | gap to ref. | success [95%] | turns [95%] "
        + "".join(f"| {name} [95%] " for name in outcomes)
        + "| CPU s / run |",
        "|---|---:|---|---:|---|---|" + "---|" * len(outcomes) + "---:|",
    ]
    for row in game["variants"]:
        final = row["final"]
        gap = game["reference_return"] - final["return"]["mean"]
        cpu = np.mean([curve[-1] for curve in row["cpu_s"]])
        lines.append(
            f"| {row['variant']} | {row['learning_rate']:g} | {fmt(final['return'])} | "
            f"{gap:.3f} | {fmt(final['success'])} | {fmt(final['mean_turns'], 2)} | "
            + "".join(f"{fmt(final[name])} | " for name in outcomes)
            + f"{cpu:.1f} |"
        )
    return lines


def beats_lines(pairs: list[list[str]]) -> list[str]:
    """Markdown bullets, one per rule that beats any: ``rule > loser, loser``."""
    winners: dict[str, list[str]] = {}
    for winner, loser in pairs:
        winners.setdefault(winner, []).append(loser)
    if not winners:
        return ["* none: every pair of intervals overlaps."]
    return [f"* {winner} > {', '.join(losers)}" for winner, losers in winners.items()]


def render_docs(results: dict[str, Any], plot_name: str = "algorithms.png") -> str:
    """The generated section of ``docs/results.md`` (between its markers), showing
    the plot ``benchmarks/results/<plot_name>``."""
    summary = results["summary"]
    lines = [
        f"Command: `{results['command']}` ({results['machine']}, jax {results['jax']}). "
        f"Learning rates swept: {', '.join(f'{r:g}' for r in results['learning_rates'])} "
        f"on seeds {', '.join(map(str, results['selection_seeds']))}; the table's figures "
        f"are over report seeds {', '.join(map(str, results['games'][0]['variants'][0]['seeds']))}"
        " at each rule's selected rate.",
        "",
        "IQM of normalised final greedy returns across games (0: untrained policy, 1: "
        "reference player), stratified bootstrap 95% interval:",
        "",
        "| rule | IQM [95%] |",
        "|---|---|",
    ]
    ranked = sorted(summary["iqm_normalized_return"].items(), key=lambda kv: -kv[1]["mean"])
    lines += [f"| {name} | {fmt(estimate)} |" for name, estimate in ranked]
    for game in results["games"]:
        lines += ["", *game_table(game), ""]
        lines.append("Rules whose final greedy return interval lies wholly above others':")
        lines += ["", *beats_lines(summary["beats"][game["env_id"]])]
    lines += ["", f"![learning curves](../benchmarks/results/{plot_name})"]
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    """Per game (a column): greedy return against env steps (top) and against CPU
    seconds (bottom), one line per rule: the mean over report seeds, shaded by its
    95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = results["games"]
    fig, axes = plt.subplots(2, len(games), figsize=(4.5 * len(games), 7), squeeze=False)
    for column, game in enumerate(games):
        top, bottom = axes[0, column], axes[1, column]
        for row in game["variants"]:
            curves = np.asarray(row["return"])
            bands = [interval(curves[:, p]) for p in range(curves.shape[1])]
            mean = [b["mean"] for b in bands]
            low, high = [b["low"] for b in bands], [b["high"] for b in bands]
            for ax, x in (
                (top, np.asarray(row["env_steps"]) / 1e6),
                (bottom, np.mean(row["cpu_s"], axis=0)),
            ):
                (line,) = ax.plot(x, mean, label=row["variant"], lw=1.2)
                ax.fill_between(x, low, high, color=line.get_color(), alpha=0.15)
        top.set(title=game["env_id"].removeprefix("game:"), xlabel="env steps (M)")
        bottom.set(xlabel="process CPU seconds")
        for ax in (top, bottom):
            ax.axhline(game["reference_return"], color="k", ls=":", lw=1)
            ax.set_ylabel("greedy return")
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the protocol (or only rewrite the docs); returns what it writes to
    ``<out>.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), help="env ids")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(RULES))
    parser.add_argument("--rates", nargs="+", type=float, default=list(LEARNING_RATES))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(REPORT_SEEDS))
    parser.add_argument("--selection-seeds", nargs="+", type=int, default=list(SELECTION_SEEDS))
    parser.add_argument("--quick", action="store_true", help="tiny smoke budget, one rate")
    parser.add_argument(
        "--designs",
        action="store_true",
        help="the policy designs against PPO (default output policy_design, own docs section)",
    )
    parser.add_argument("--out", type=Path, help="output stem (default algorithms)")
    parser.add_argument(
        "--docs", action="store_true", help="only recompute the summary and rewrite the docs"
    )
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if args.designs:
        args.variants = ["ppo", *DESIGNS]
    default_out = DESIGN_OUT if args.designs else RESULTS / "algorithms"
    out = args.out or default_out
    owner = DESIGN_OWNER if args.designs else OWNER
    json_path = out.with_suffix(".json")
    if args.docs:
        results = json.loads(json_path.read_text())
        results["summary"] = summarize(results["games"])
        json_path.write_text(json.dumps(results, indent=1) + "\n")
        write_section(DOCS, owner, render_docs(results, out.name + ".png"))
        return results
    results = run_protocol(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    if results["games"]:
        plot(results, out.with_suffix(".png"))
        if out == default_out and not args.quick:
            write_section(DOCS, owner, render_docs(results, out.name + ".png"))
    return results


if __name__ == "__main__":
    main()
