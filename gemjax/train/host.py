"""The host loop of ``gemjax train``: jitted chunks of updates, JSONL metrics, a
learning-curve plot, orbax checkpoints (exact resume) and a progress bar."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh
from tqdm import tqdm

from gemjax.checks import integer
from gemjax.train.config import Stage, TrainConfig
from gemjax.train.lm import TinyLMConfig
from gemjax.train.rollout import EpisodeMetrics
from gemjax.train.token_rollout import TokenLoopConfig
from gemjax.train.token_trainer import (
    TokenChunkMetrics,
    TokenTrainConfig,
    TokenTrainer,
    TokenTrainState,
    make_token_train,
)
from gemjax.train.trainer import BATCH_AXIS, ChunkMetrics, Trainer, make_train

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "learning_curve.png"
CHECKPOINT_DIR = "checkpoints"
CONFIG_FILE = "config.json"
# Fields a resume may change: a longer run (never below the updates already done).
RESUMABLE = frozenset({"num_updates"})
TrainerT = TypeVar("TrainerT", bound=TokenTrainer)


class RunMismatch(ValueError):
    """A run directory that cannot be resumed with the given settings."""


def device_mesh() -> Mesh | None:
    """A 1-D ``batch`` mesh over every visible device, or None with a single device."""
    devices = jax.devices()
    return Mesh(np.array(devices), (BATCH_AXIS,)) if len(devices) > 1 else None


def to_checkpoint(state: Any) -> dict[str, Any]:
    """A plain pytree of arrays of a train state's fields (PRNG keys as their uint32
    key data)."""
    return {
        field.name: _key_data(getattr(state, field.name)) for field in dataclasses.fields(state)
    }


def from_checkpoint(tree: dict[str, Any], like: Any) -> Any:
    """Inverse of :func:`to_checkpoint`: a state of ``like``'s type (whose keys say
    which leaves are PRNG keys)."""
    fields = {}
    for field in dataclasses.fields(like):
        value = tree[field.name]
        if _is_key(getattr(like, field.name)):
            value = jax.random.wrap_key_data(value)
        fields[field.name] = value
    return like.replace(**fields)


def fresh_shapes(state: Any) -> Any:
    """The ``jax.ShapeDtypeStruct`` tree of a freshly initialised state, to compile
    its chunks for: a state restored from a checkpoint has its arrays committed to
    their devices and a fresh one has not, which changes the lowered module (and so
    misses the compilation cache) but not what it computes; compiled for these
    shapes, a resumed run runs the program of an uninterrupted one."""

    def shape(x: jax.Array) -> jax.ShapeDtypeStruct:
        sharding = x.sharding if x.committed else None
        weak = getattr(x, "weak_type", False)  # PRNG key arrays have no weak type
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding, weak_type=weak)

    return jax.tree.map(shape, state)


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _key_data(x: Any) -> Any:
    return jax.random.key_data(x) if _is_key(x) else x


def _number(x: Any) -> float | None:
    """A JSON-safe float (NaN becomes None)."""
    value = float(x)
    return None if math.isnan(value) else value


def chunk_record(metrics: ChunkMetrics) -> dict[str, Any]:
    """A JSONL row's metrics: the greedy evaluation after the chunk (``return``,
    ``success``, ``mean_turns``, ``mean_turns_success``) and the chunk's last
    update's training metrics (``run`` adds ``update``, ``phase``, ``env_steps``,
    ``wall_s`` and ``steps_per_second``)."""
    train = jax.tree.map(lambda x: x[-1], metrics.train)
    return {
        **episode_record("", metrics.eval),
        **episode_record("train_", train.episodes),
        "loss": _number(train.loss),
        "policy_loss": _number(train.policy_loss),
        "value_loss": _number(train.value_loss),
        "entropy": _number(train.entropy),
    }


def episode_record(prefix: str, episodes: EpisodeMetrics) -> dict[str, float | None]:
    """``return``, ``success``, ``mean_turns``, ``mean_turns_success`` and the env's
    outcomes (Minesweeper's ``cleared``) of :class:`EpisodeMetrics`, each name after
    ``prefix``."""
    return {
        f"{prefix}return": _number(episodes.episode_return),
        f"{prefix}success": _number(episodes.success),
        f"{prefix}mean_turns": _number(episodes.mean_turns),
        f"{prefix}mean_turns_success": _number(episodes.mean_turns_success),
        **{f"{prefix}{name}": _number(value) for name, value in episodes.outcomes.items()},
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


def run_settings(config: Any, seed: int) -> dict[str, Any]:
    """What ``config.json`` records: every config field and the seed, as JSON reads
    them back (tuples as lists); a token agent's run also says ``"policy": "token"``
    (or its config class's ``POLICY``, ``"llm"`` for a pretrained agent)."""
    settings = {**dataclasses.asdict(config), "seed": seed}
    if isinstance(config, TokenTrainConfig):
        settings["policy"] = policy_of(type(config))
    return json.loads(json.dumps(settings))


def default_settings(config: Any) -> dict[str, Any]:
    """Each field of a config dataclass with a default, as :func:`run_settings` writes
    it: what a run written before that setting existed ran with."""
    defaults = {}
    for field in dataclasses.fields(config):
        if field.default is dataclasses.MISSING:
            continue
        value = field.default
        nested = dataclasses.is_dataclass(value) and not isinstance(value, type)
        defaults[field.name] = dataclasses.asdict(value) if nested else value
    return json.loads(json.dumps(defaults))


def policy_of(config_class: type[TokenTrainConfig]) -> str:
    """The ``--policy`` of a token agent's config class: its ``POLICY``, else
    ``"token"``."""
    return getattr(config_class, "POLICY", "token")


def check_resume(
    out_dir: Path, config: Any, seed: int, done: int | None, planned: int | None = None
) -> None:
    """Raise unless the run in ``out_dir`` (if any) can go on under ``config`` and
    ``seed``: every setting equal to the recorded ones, but for :data:`RESUMABLE`,
    and the ``planned`` steps (default ``num_updates``) at least the ``done`` steps of
    its latest checkpoint.

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
    saved = {**default_settings(config), **saved}
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
    planned = config.num_updates if planned is None else planned
    if done is not None and planned < done:
        raise RunMismatch(
            f"{out_dir} is at update {done}, past num_updates {planned}: ask for at "
            f"least {done} updates, or train into a new --out"
        )


def _restore(manager: ocp.CheckpointManager, state: Any, out_dir: Path) -> Any:
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
    return from_checkpoint(restored, state)


@dataclasses.dataclass
class RunResult:
    """What :func:`run` returns.

    Attributes:
        state: the final train state.
        records: every JSONL row of the run directory.
        compile_seconds: compilation of the chunk functions.
        steps_per_second: env steps per second of the whole train step (rollout and
            update), over the chunks run now (None if none ran).
    """

    state: Any
    records: list[dict[str, Any]]
    compile_seconds: float
    steps_per_second: float | None


@dataclasses.dataclass(frozen=True)
class Phase:
    """A stretch of a run, chunk after chunk (RL updates; a token agent's format
    warm-up before them).

    Attributes:
        name: written in each row's ``phase``.
        chunk: ``chunk(state) -> (state, metrics)``, jitted here, ``steps`` steps.
        steps: steps per chunk.
        total: steps of the phase.
        done: steps of the phase a state has done.
        record: the phase's JSONL fields of a chunk's metrics.
        env_steps: env steps a step of the phase runs.
    """

    name: str
    chunk: Callable[[Any], tuple[Any, Any]]
    steps: int
    total: int
    done: Callable[[Any], int]
    record: Callable[[Any], dict[str, Any]]
    env_steps: int


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
    return run_phases(
        config,
        out_dir,
        seed,
        trainer.init,
        rl_phases(trainer),
        checkpoint_every,
        progress,
        f"{config.env_id} {config.algo}",
    )


def rl_phases(
    trainer: Trainer | TokenTrainer,
    record: Callable[[Any], dict[str, Any]] = chunk_record,
) -> list[Phase]:
    """One phase per stretch of ``trainer``'s RL (its ``stages()``): the
    curriculum's stages, named ``stage 1`` ..., then ``rl``, the game itself; each
    chunk's row gets ``record(metrics)``."""
    phases, before = [], 0
    stages: tuple[tuple[int, Trainer | TokenTrainer], ...] = trainer.stages()
    for index, (updates, stage) in enumerate(stages):
        last = index == len(stages) - 1

        def done(state: Any, before: int = before, updates: int = updates) -> int:
            return min(max(int(state.update) - before, 0), updates)

        name = "rl" if last else f"stage {index + 1}"
        steps = trainer.config.eval_every
        phases.append(
            Phase(name, stage.chunk, steps, updates, done, record, stage.env_steps_per_update)
        )
        before += updates
    return phases


def run_phases(
    config: Any,
    out_dir: Path,
    seed: int,
    init: Callable[[jax.Array], Any],
    phases: list[Phase],
    checkpoint_every: int,
    progress: bool,
    title: str,
) -> RunResult:
    """The host loop of :func:`run` over ``phases`` in turn (steps counted across
    them: a row's ``update`` and the checkpoint numbers are steps of every phase)."""
    checkpoints = (out_dir / CHECKPOINT_DIR).absolute()
    planned = sum(phase.total for phase in phases)
    done = None
    if checkpoints.exists():
        with ocp.CheckpointManager(checkpoints) as reader:
            done = reader.latest_step()
    check_resume(out_dir, config, seed, done, planned)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = jax.jit(init)(jax.random.key(seed))
    shapes = fresh_shapes(state)
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
    steps_done = lambda state: sum(phase.done(state) for phase in phases)  # noqa: E731
    env_steps = lambda state: sum(p.done(state) * p.env_steps for p in phases)  # noqa: E731
    start = steps_done(state)
    records = _read_records(metrics_path, start)
    metrics_path.write_text("".join(json.dumps(r) + "\n" for r in records))

    run_seconds = compile_seconds = 0.0
    chunks = env_steps_run = 0
    with (
        tqdm(
            total=planned,
            initial=start,
            disable=not (progress and sys.stderr.isatty()),
            unit="upd",
            desc=f"{config.env_id} (compiling)",
        ) as bar,
        metrics_path.open("a") as sink,
    ):
        for phase in phases:
            if phase.done(state) >= phase.total:
                continue
            bar.set_description(f"{config.env_id} {phase.name} (compiling)")
            compile_start = time.perf_counter()
            chunk = jax.jit(phase.chunk).lower(shapes).compile()
            compile_seconds += time.perf_counter() - compile_start
            bar.set_description(f"{config.env_id} {phase.name}")
            while phase.done(state) < phase.total:
                tick = time.perf_counter()
                state, metrics = chunk(state)
                jax.block_until_ready(metrics)
                elapsed = time.perf_counter() - tick
                run_seconds += elapsed
                chunks += 1
                env_steps_run += phase.steps * phase.env_steps
                step = steps_done(state)
                record = {
                    "update": step,
                    "phase": phase.name,
                    "env_steps": env_steps(state),
                    "wall_s": run_seconds + compile_seconds,
                    "steps_per_second": phase.steps * phase.env_steps / elapsed,
                    **phase.record(metrics),
                }
                records.append(record)
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                bar.update(phase.steps)
                bar.set_postfix(success=record["success"], turns=record["mean_turns"])
                if chunks % checkpoint_every == 0 or step >= planned:
                    manager.save(step, args=ocp.args.StandardSave(to_checkpoint(state)))
    manager.wait_until_finished()
    manager.close()
    if records:
        plot_learning_curve(records, out_dir / PLOT_FILE, title)
    sps = env_steps_run / run_seconds if chunks else None
    return RunResult(state, records, compile_seconds, sps)


def token_record(metrics: TokenChunkMetrics) -> dict[str, Any]:
    """A token-agent row's metrics: :func:`chunk_record`'s episode fields, plus
    ``format_error_rate`` (greedy) and ``train_format_error_rate``, the ``sampled_``
    episode fields and format-error rate of the evaluation episodes played at the
    sampling temperature (in a warm-up row, ``train_`` play is the forced random
    actions', so the ``sampled_`` fields are the model's), the episodes stopped by
    the context rule, the episodes the last step learned from, the generated tokens
    per turn, the loss and the mean response log-probability of the chunk's last
    step."""
    train = jax.tree.map(lambda x: x[-1], metrics.train)
    return {
        **episode_record("", metrics.eval.episodes),
        **episode_record("train_", train.rollout.episodes),
        **episode_record("sampled_", metrics.sampled.episodes),
        "format_error_rate": _number(metrics.eval.format_error_rate),
        "train_format_error_rate": _number(train.rollout.format_error_rate),
        "sampled_format_error_rate": _number(metrics.sampled.format_error_rate),
        "context_cut": _number(metrics.eval.context_cut),
        "train_episodes": _number(train.rollout.episode_count),
        "response_tokens": _number(train.rollout.response_tokens),
        "loss": _number(train.loss),
        "response_log_prob": _number(train.response_log_prob),
    }


def run_token(
    config: TokenTrainConfig,
    out_dir: Path,
    seed: int = 0,
    checkpoint_every: int = 10,
    progress: bool = True,
) -> RunResult:
    """:func:`run` for a token agent: the format warm-up's chunks, then RL's, into
    ``out_dir`` (rows of both phases in ``metrics.jsonl``, ``phase`` tells which;
    ``update`` counts the steps of both). Resumes exactly, under the same rules."""
    if integer("checkpoint_every", checkpoint_every) < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    trainer = make_token_train(config)
    title = f"{config.env_id} token agent {config.algo}"
    return run_token_phases(config, trainer, out_dir, seed, checkpoint_every, progress, title)


def run_token_phases(
    config: TokenTrainConfig,
    trainer: TokenTrainer,
    out_dir: Path,
    seed: int,
    checkpoint_every: int,
    progress: bool,
    title: str,
) -> RunResult:
    """:func:`run_phases` over a token trainer's warm-up chunks (played by its first
    stretch of RL, :meth:`TokenTrainer.stages`), then its RL chunks (:func:`rl_phases`);
    ``config`` is the run's config (recorded, and checked on resume)."""
    first = trainer.stages()[0][1]
    warmup = Phase(
        "warmup",
        first.warmup_chunk,
        config.eval_every,
        config.warmup_updates,
        lambda state: int(state.warmup),
        token_record,
        first.env_steps_per_update,
    )
    phases = [warmup, *rl_phases(trainer, token_record)]
    return run_phases(
        config,
        out_dir,
        seed,
        trainer.init,
        phases,
        checkpoint_every,
        progress,
        title,
    )


def load_token_run(out_dir: Path) -> tuple[TokenTrainer, TokenTrainState]:
    """The trainer and latest checkpointed state of a token agent's run directory.

    Raises:
        RunMismatch: ``out_dir`` holds no token agent's run, or no checkpoint.
    """
    return load_run(out_dir, TokenTrainConfig, make_token_train)


def load_run(
    out_dir: Path,
    config_class: type[TokenTrainConfig],
    make_trainer: Callable[[Any], TrainerT],
) -> tuple[TrainerT, TokenTrainState]:
    """The trainer and latest checkpointed state of a token or pretrained agent's
    run directory: its ``config.json`` read back as a ``config_class`` (whose policy,
    :func:`policy_of`, it must record), the trainer ``make_trainer(config)`` and
    the latest checkpoint restored into that trainer's state.

    Raises:
        RunMismatch: ``out_dir`` holds no run of that policy, or no checkpoint.
    """
    path = out_dir / CONFIG_FILE
    if not path.is_file():
        raise RunMismatch(f"{out_dir} has no {CONFIG_FILE}: name a gemjax train --out")
    settings = json.loads(path.read_text())
    policy = policy_of(config_class)
    if settings.pop("policy", None) != policy:
        raise RunMismatch(
            f"{out_dir} holds no --policy {policy} run: name the --out of a "
            f"gemjax train --policy {policy}"
        )
    seed = settings.pop("seed")
    settings["model"] = TinyLMConfig(**settings["model"])
    settings["loop"] = TokenLoopConfig(**settings["loop"])
    settings["curriculum"] = tuple(
        Stage(stage["updates"], tuple((name, value) for name, value in stage["params"]))
        for stage in settings.get("curriculum", ())
    )
    trainer = make_trainer(config_class(**settings))
    return trainer, restore_latest(out_dir, jax.jit(trainer.init)(jax.random.key(seed)))


def restore_latest(out_dir: Path, like: Any) -> Any:
    """The latest checkpoint of the run in ``out_dir``, as a train state of
    ``like``'s structure (a fresh state of the run's trainer).

    Raises:
        RunMismatch: ``out_dir`` has no checkpoint yet, or one that does not fit.
    """
    checkpoints = (out_dir / CHECKPOINT_DIR).absolute()
    if not checkpoints.exists():
        raise RunMismatch(f"{out_dir} has no checkpoint yet")
    with ocp.CheckpointManager(checkpoints) as manager:
        if manager.latest_step() is None:
            raise RunMismatch(f"{out_dir} has no checkpoint yet")
        return _restore(manager, like, out_dir)
