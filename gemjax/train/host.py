"""The host loop of ``gemjax train``: jitted chunks of updates, JSONL metrics, a
learning-curve plot, orbax checkpoints (exact resume) and a progress bar."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh
from tqdm import tqdm

from gemjax.train.config import TrainConfig
from gemjax.train.trainer import BATCH_AXIS, ChunkMetrics, TrainState, make_train

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "learning_curve.png"
CHECKPOINT_DIR = "checkpoints"


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
    """The JSONL rows of updates ``<= up_to`` (a resumed run drops later ones)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [r for r in rows if r["update"] <= up_to]


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
    checkpoint if any (the config must match but for ``num_updates``).

    Writes ``metrics.jsonl`` (one row per chunk of ``eval_every`` updates, see
    :func:`chunk_record`), ``learning_curve.png``, ``config.json`` and orbax
    checkpoints under ``checkpoints/`` every ``checkpoint_every`` chunks and at the end.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    trainer = make_train(config, mesh)
    state = jax.jit(trainer.init)(jax.random.key(seed))
    manager = ocp.CheckpointManager(
        (out_dir / CHECKPOINT_DIR).absolute(), options=ocp.CheckpointManagerOptions(max_to_keep=2)
    )
    if manager.latest_step() is not None:
        restored = manager.restore(
            manager.latest_step(), args=ocp.args.StandardRestore(to_checkpoint(state))
        )
        state = from_checkpoint(restored)
    (out_dir / "config.json").write_text(
        json.dumps({**dataclasses.asdict(config), "seed": seed}, indent=2) + "\n"
    )
    metrics_path = out_dir / METRICS_FILE
    start = int(state.update)
    records = _read_records(metrics_path, start)
    metrics_path.write_text("".join(json.dumps(r) + "\n" for r in records))

    compile_start = time.perf_counter()
    chunk = jax.jit(trainer.chunk).lower(state).compile()
    compile_seconds = time.perf_counter() - compile_start
    steps_per_chunk = config.eval_every * trainer.env_steps_per_update
    run_seconds = 0.0
    chunks = 0
    with (
        tqdm(total=config.num_updates, initial=start, disable=not progress, unit="upd") as bar,
        metrics_path.open("a") as sink,
    ):
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
