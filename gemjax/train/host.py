"""The host loop of ``gemjax train``: jitted chunks of updates, JSONL metrics, a
learning-curve plot, orbax checkpoints (exact resume) and a progress bar."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh
from tqdm import tqdm

from gemjax.checks import integer
from gemjax.train.config import TrainConfig
from gemjax.train.trainer import BATCH_AXIS, ChunkMetrics, TrainState, make_train

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "learning_curve.png"
CHECKPOINT_DIR = "checkpoints"
CONFIG_FILE = "config.json"
# Fields a resume may change: a longer run (never below the updates already done).
RESUMABLE = frozenset({"num_updates"})


class RunMismatch(ValueError):
    """A run directory that cannot be resumed with the given settings."""


def device_mesh() -> Mesh | None:
    """A 1-D ``batch`` mesh over every visible device, or None with a single device."""
    devices = jax.devices()
    return Mesh(np.array(devices), (BATCH_AXIS,)) if len(devices) > 1 else None


def to_checkpoint(state: TrainState) -> dict[str, Any]:
    """A plain pytree of arrays (PRNG keys as their uint32 key data)."""
    return {
        "params": state.params,
        "opt_state": state.opt_state,
        "key": jax.random.key_data(state.key),
        "eval_key": jax.random.key_data(state.eval_key),
        "update": state.update,
    }


def from_checkpoint(tree: dict[str, Any]) -> TrainState:
    """Inverse of :func:`to_checkpoint`."""
    return TrainState(
        params=tree["params"],
        opt_state=tree["opt_state"],
        key=jax.random.wrap_key_data(tree["key"]),
        eval_key=jax.random.wrap_key_data(tree["eval_key"]),
        update=tree["update"],
    )


def _number(x: Any) -> float | None:
    """A JSON-safe float (NaN becomes None)."""
    value = float(x)
    return None if math.isnan(value) else value


def chunk_record(
    metrics: ChunkMetrics, update: int, env_steps: int, wall_s: float, steps_per_second: float
) -> dict[str, Any]:
    """One JSONL row: the greedy evaluation after ``update`` updates (``return``,
    ``success``, ``mean_turns``, ``mean_turns_success``) and the last update's
    training metrics."""
    train = jax.tree.map(lambda x: x[-1], metrics.train)
    return {
        "update": update,
        "env_steps": env_steps,
        "wall_s": wall_s,
        "steps_per_second": steps_per_second,
        "return": _number(metrics.eval.episode_return),
        "success": _number(metrics.eval.success),
        "mean_turns": _number(metrics.eval.mean_turns),
        "mean_turns_success": _number(metrics.eval.mean_turns_success),
        "train_return": _number(train.episodes.episode_return),
        "train_success": _number(train.episodes.success),
        "train_mean_turns": _number(train.episodes.mean_turns),
        "train_mean_turns_success": _number(train.episodes.mean_turns_success),
        "loss": _number(train.loss),
        "policy_loss": _number(train.policy_loss),
        "value_loss": _number(train.value_loss),
        "entropy": _number(train.entropy),
    }


def plot_learning_curve(records: list[dict[str, Any]], path: Path, title: str) -> None:
    """Greedy success and mean turns (and the sampled episodes' mean turns) against
    updates, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    updates = [r["update"] for r in records]
    fig, (ax_success, ax_turns) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_success.plot(updates, [r["success"] for r in records], label="greedy eval")
    ax_success.plot(updates, [r["train_success"] for r in records], label="sampled")
    ax_success.set(xlabel="update", ylabel="success rate", ylim=(-0.02, 1.02))
    ax_turns.plot(updates, [r["mean_turns"] for r in records], label="greedy eval")
    ax_turns.plot(updates, [r["train_mean_turns"] for r in records], label="sampled")
    ax_turns.set(xlabel="update", ylabel="mean turns", yscale="log")
    for ax in (ax_success, ax_turns):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _read_records(path: Path, up_to: int) -> list[dict[str, Any]]:
    """The JSONL rows of updates ``<= up_to`` (a resumed run drops later ones, and a
    last line cut short by an interrupted write).

    Raises:
        RunMismatch: a line before the last is not a JSON row.
    """
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # the partial last line of an interrupted run
            raise RunMismatch(
                f"{path} line {number} is not a JSON row: repair or delete the file"
            ) from None
    return [r for r in rows if r["update"] <= up_to]


def run_settings(config: TrainConfig, seed: int) -> dict[str, Any]:
    """What ``config.json`` records: every config field and the seed, as JSON reads
    them back (tuples as lists)."""
    return json.loads(json.dumps({**dataclasses.asdict(config), "seed": seed}))


def check_resume(out_dir: Path, config: TrainConfig, seed: int, done: int | None) -> None:
    """Raise unless the run in ``out_dir`` (if any) can go on under ``config`` and
    ``seed``: every setting equal to the recorded ones, but for :data:`RESUMABLE`,
    and ``num_updates`` at least the ``done`` updates of its latest checkpoint.

    Raises:
        RunMismatch: with each changed setting and what to do.
    """
    path = out_dir / CONFIG_FILE
    if not path.exists():
        if done is not None:
            raise RunMismatch(
                f"{out_dir} holds checkpoints but no {CONFIG_FILE}: train into a new --out"
            )
        return
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError:
        raise RunMismatch(f"{path} is not JSON: repair it, or train into a new --out") from None
    settings = run_settings(config, seed)
    changed = [
        f"{name} {saved.get(name)!r} -> {settings.get(name)!r}"
        for name in sorted(set(saved) | set(settings))
        if name not in RESUMABLE and saved.get(name) != settings.get(name)
    ]
    if changed:
        raise RunMismatch(
            f"{out_dir} holds a run with other settings ({'; '.join(changed)}): resume it "
            "with the same settings (only --updates may change, to a longer run), or "
            "train into a new --out"
        )
    if done is not None and config.num_updates < done:
        raise RunMismatch(
            f"{out_dir} is at update {done}, past num_updates {config.num_updates}: ask "
            f"for at least {done} updates, or train into a new --out"
        )


def _restore(manager: ocp.CheckpointManager, state: TrainState, out_dir: Path) -> TrainState:
    """The latest checkpoint of ``manager``, in ``state``'s structure.

    Raises:
        RunMismatch: it does not fit (a checkpoint of another model), with the cause
            in one line rather than orbax's traceback.
    """
    step = manager.latest_step()
    try:
        restored = manager.restore(step, args=ocp.args.StandardRestore(to_checkpoint(state)))
    except Exception as error:  # orbax raises many types; each means "does not fit"
        cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RunMismatch(
            f"the checkpoint at update {step} in {out_dir} does not fit this model ({cause}): "
            "train into a new --out"
        ) from error
    return from_checkpoint(restored)


@dataclasses.dataclass
class RunResult:
    """What :func:`run` returns.

    Attributes:
        state: the final :class:`TrainState`.
        records: every JSONL row of the run directory.
        compile_seconds: compilation of the chunk function.
        steps_per_second: env steps per second of the whole train step (rollout and
            update), over the chunks run now (None if none ran).
    """

    state: TrainState
    records: list[dict[str, Any]]
    compile_seconds: float
    steps_per_second: float | None


def run(
    config: TrainConfig,
    out_dir: Path,
    seed: int = 0,
    mesh: Mesh | None = None,
    checkpoint_every: int = 10,
    progress: bool = True,
) -> RunResult:
    """Train ``config.num_updates`` updates into ``out_dir``, resuming from its latest
    checkpoint if any: every setting must equal the recorded ones but for
    ``num_updates``, which may grow (:func:`check_resume`).

    Writes ``metrics.jsonl`` (one row per chunk of ``eval_every`` updates, see
    :func:`chunk_record`), ``learning_curve.png``, ``config.json`` and orbax
    checkpoints under ``checkpoints/`` every ``checkpoint_every`` chunks and at the end.
    ``progress``: a progress bar on stderr, shown only when stderr is a terminal.

    Raises:
        ValueError: an impossible config (:func:`make_train`) or ``checkpoint_every``;
            :class:`RunMismatch`: ``out_dir`` holds a run that cannot go on under
            these settings. Both before anything is written.
    """
    if integer("checkpoint_every", checkpoint_every) < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    trainer = make_train(config, mesh)  # before any file: a bad config writes nothing
    checkpoints = (out_dir / CHECKPOINT_DIR).absolute()
    done = None
    if checkpoints.exists():
        with ocp.CheckpointManager(checkpoints) as reader:
            done = reader.latest_step()
    check_resume(out_dir, config, seed, done)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = jax.jit(trainer.init)(jax.random.key(seed))
    manager = ocp.CheckpointManager(
        checkpoints, options=ocp.CheckpointManagerOptions(max_to_keep=2)
    )
    if manager.latest_step() is not None:
        try:
            state = _restore(manager, state, out_dir)
        except RunMismatch:
            manager.close()
            raise
    (out_dir / CONFIG_FILE).write_text(json.dumps(run_settings(config, seed), indent=2) + "\n")
    metrics_path = out_dir / METRICS_FILE
    start = int(state.update)
    records = _read_records(metrics_path, start)
    metrics_path.write_text("".join(json.dumps(r) + "\n" for r in records))

    steps_per_chunk = config.eval_every * trainer.env_steps_per_update
    run_seconds = 0.0
    chunks = 0
    with (
        tqdm(
            total=config.num_updates,
            initial=start,
            disable=not (progress and sys.stderr.isatty()),
            unit="upd",
            desc=f"{config.env_id} (compiling)",
        ) as bar,
        metrics_path.open("a") as sink,
    ):
        compile_start = time.perf_counter()
        chunk = jax.jit(trainer.chunk).lower(state).compile()
        compile_seconds = time.perf_counter() - compile_start
        bar.set_description(config.env_id)
        while int(state.update) < config.num_updates:
            tick = time.perf_counter()
            state, metrics = chunk(state)
            jax.block_until_ready(metrics)
            elapsed = time.perf_counter() - tick
            run_seconds += elapsed
            chunks += 1
            update = int(state.update)
            record = chunk_record(
                metrics,
                update,
                update * trainer.env_steps_per_update,
                wall_s=run_seconds + compile_seconds,
                steps_per_second=steps_per_chunk / elapsed,
            )
            records.append(record)
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            bar.update(config.eval_every)
            bar.set_postfix(success=record["success"], turns=record["mean_turns"])
            if chunks % checkpoint_every == 0 or update >= config.num_updates:
                manager.save(update, args=ocp.args.StandardSave(to_checkpoint(state)))
    manager.wait_until_finished()
    manager.close()
    if records:
        plot_learning_curve(records, out_dir / PLOT_FILE, f"{config.env_id} {config.algo}")
    sps = chunks * steps_per_chunk / run_seconds if chunks else None
    return RunResult(state, records, compile_seconds, sps)
