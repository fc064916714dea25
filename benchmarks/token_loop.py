"""Throughput of the whole token-agent loop on device against the same loop with the
text on the host, in one run.

For each model size and batch ``B``, one RL update (ReBN) of a token agent on
GuessTheNumber (``game:GuessTheNumber-v0-hard``, qwen3 tokenizer, ``qwen3_game``
chat prompts), timed whole:

* **device**: :meth:`TokenTrainer.update`, one jitted call: the kernel, the bridge's
  prompt rendering and parsing, the model's prefill and sampling, and the ReBN
  update of the replayed responses;
* **auto-reset**: the same update with an auto-reset rollout of ``horizon`` turns a
  lane (``TokenLoopConfig.auto_reset``): the same lane-turns, every one played;
* **host**: the same model, sizes and update, with the text on the host as a GEM
  user's loop has it: ``gem-llm``'s envs with GEM's ``concat`` wrapper render the
  observation strings, the qwen3_game template wraps them, ``tokenizer(batch)``
  tokenizes, one device call a turn generates (the same KV-cache reuse),
  ``batch_decode`` decodes and the env's regex parses; then the same jitted update
  on the collected token ids;
* **host auto-reset**: the host loop with the auto-reset loop's rules (a lane's next
  episode starts at its next turn, the same turns a lane, the same update), so that
  "auto x host auto" compares one loop with its text on device and on the host, and
  "auto x host" mixes that with the turns auto-reset adds.

The model is first warmed up on the format (a few supervised steps) so episodes run
several turns. Figures: env turns per second and generated tokens per second (both
counted from the episodes played), per wall second and per CPU second of this
process (the fairer figure on a shared machine), the ratios device/host, and the
share of the device update's CPU time that the kernel and the bridge take (a rollout
with the same responses forced, without the model). Prints a table and
writes ``benchmarks/results/token_loop_<backend>.json`` (or ``--out``).

Usage: ``python benchmarks/token_loop.py [--batches 256 1024] [--sizes default small]
[--repeats 2] [--quick]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import gem as gem_llm
import jax
import jax.numpy as jnp
import numpy as np
from gem.wrappers.observation_wrapper import ObservationWrapper

from gemjax.train.lm import TinyLMConfig
from gemjax.train.token_agent import HostAgent
from gemjax.train.token_rollout import (
    TokenLoopConfig,
    TokenTrajectory,
    ends_later,
    shared_prefix,
)
from gemjax.train.token_trainer import TokenTrainConfig, TokenTrainer, make_token_train

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "game:GuessTheNumber-v0-hard"
SIZES = {
    "default": TinyLMConfig(),
    "small": TinyLMConfig(width=64, heads=2, layers=2, mlp=128),
    "large": TinyLMConfig(width=256, heads=8, layers=4, mlp=512),
    "tiny": TinyLMConfig(width=32, heads=2, layers=1, mlp=64),
}
LOOP = TokenLoopConfig(horizon=7, context=384, response_tokens=8, prefill_chunk=32)
WARMUP_STEPS = 40


class Timing(NamedTuple):
    """One timed call: wall seconds, and this process's CPU seconds (all its
    threads; on a machine shared with other jobs, the fairer of the two)."""

    wall: float
    cpu: float


def best_of(repeats: int, run: Any) -> Timing:
    """The fastest (by wall time) of ``repeats`` timed calls of ``run``. Nothing may be
    running when it starts: JAX dispatches asynchronously, so a call left running
    (an untimed first call not waited for) would be timed with the next."""
    times = []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(run())
        times.append(Timing(time.perf_counter() - start, time.process_time() - start_cpu))
    return min(times)


def warm_then_best_of(repeats: int, run: Any) -> tuple[Any, Timing]:
    """``run()``'s result from a first call (compilation and first-call costs),
    waited for, then :func:`best_of` ``repeats`` calls."""
    result = jax.block_until_ready(run())
    return result, best_of(repeats, run)


def host_rollout(trainer: TokenTrainer, params: Any, batch: int, seed: int) -> TokenTrajectory:
    """``batch`` lanes of gem-llm episodes played through the host text path; the ids
    each turn fed and generated, as a :class:`TokenTrajectory` for the same update.

    One episode a lane, or, when the trainer's loop auto-resets, ``steps`` turns a
    lane with a lane's next episode starting at its next turn, as on device: an
    episode ends at GEM's end or after ``horizon`` turns, a lane whose stream would
    outgrow ``stream_tokens`` stops (a context cut), and the learner uses the turns of
    the episodes that ended within the rollout."""
    rollout = trainer.rollout
    config = rollout.config
    auto_reset = config.auto_reset
    agent = HostAgent(rollout, params, greedy=False, seed=seed)
    envs = [
        ObservationWrapper(gem_llm.make(ENV_ID), include_action=False, include_chat_template=False)
        for _ in range(batch)
    ]
    observations = [env.reset(seed=seed + lane)[0] for lane, env in enumerate(envs)]
    next_seed = seed + batch
    agent.reset(batch)
    running = np.ones(batch, np.bool_)
    cut = np.zeros(batch, np.bool_)
    episode_turn = np.zeros(batch, np.int32)
    used = np.zeros(batch, np.int32)
    turns: list[dict[str, np.ndarray]] = []
    own = np.zeros((batch, config.context), np.int32)
    own_length = np.zeros(batch, np.int32)
    for _ in range(config.lane_turns):
        if not running.any():
            break
        responses = agent.act(observations)
        last = agent.last
        start = np.asarray(shared_prefix(own, own_length, last.prompt_ids, last.prompt_length))
        room = used + last.prompt_length - start + config.response_tokens <= config.stream_tokens
        valid = running & ~agent.cut & room
        cut |= running & ~valid
        rewards = np.zeros(batch, np.float32)
        errors = np.zeros(batch, np.bool_)
        done = np.zeros(batch, np.bool_)
        for lane in np.nonzero(valid)[0]:
            observation, reward, terminated, truncated, _ = envs[lane].step(responses[lane])
            observations[lane] = observation
            rewards[lane] = reward
            errors[lane] = observation.endswith("did not provide a valid guess.")
            done[lane] = terminated or truncated
        ended = valid & (done | (episode_turn + 1 >= config.horizon))
        used += np.where(valid, last.prompt_length - start + last.response_length, 0)
        own = np.where(valid[:, None], last.prompt_ids, own)
        own_length = np.where(valid, last.prompt_length, own_length)
        turns.append(
            dict(
                prompt_ids=last.prompt_ids,
                prompt_length=last.prompt_length,
                prompt_start=start,
                response_ids=last.response_ids,
                response_length=last.response_length,
                rewards=rewards,
                valid=valid,
                success=valid & (rewards == 1.0),
                format_error=valid & errors,
                episode_end=ended,
                episode_turn=episode_turn.copy(),
            )
        )
        if auto_reset:
            for lane in np.nonzero(ended)[0]:
                observations[lane] = envs[lane].reset(seed=next_seed)[0]
                next_seed += 1
            running = valid
        else:
            running = valid & ~done
        episode_turn = np.where(ended, 0, episode_turn + 1)
    horizon = config.lane_turns
    stacked = {k: np.stack([t[k] for t in turns]) for k in turns[0]}
    pad = horizon - len(turns)
    stacked = {k: np.pad(v, [(0, pad)] + [(0, 0)] * (v.ndim - 1)) for k, v in stacked.items()}
    mask, episode_end = stacked["valid"], jnp.asarray(stacked["episode_end"])
    # Auto-reset learns from the episodes that ended within the rollout, as on device.
    learn = mask & ends_later(episode_end) if auto_reset else jnp.asarray(mask)
    return TokenTrajectory(
        prompt_ids=jnp.asarray(np.where(mask[..., None], stacked["prompt_ids"], 0)),
        prompt_length=jnp.asarray(np.where(mask, stacked["prompt_length"], 0)),
        prompt_start=jnp.asarray(np.where(mask, stacked["prompt_start"], 0)),
        response_ids=jnp.asarray(np.where(mask[..., None], stacked["response_ids"], 0)),
        response_length=jnp.asarray(np.where(mask, stacked["response_length"], 0)),
        token_log_probs=jnp.zeros((horizon, batch, config.response_tokens), jnp.float32),
        actions=jnp.zeros((horizon, batch), jnp.int32),
        rewards=jnp.asarray(stacked["rewards"]),
        valid=jnp.asarray(mask),
        success=jnp.asarray(stacked["success"]),
        format_error=jnp.asarray(stacked["format_error"]),
        response_cut=jnp.zeros((horizon, batch), jnp.bool_),
        context_cut=jnp.asarray(cut),
        episode_turn=jnp.asarray(np.where(mask, stacked["episode_turn"], 0), jnp.int32),
        episode_end=episode_end,
        learn=learn,
    )


def auto_reset_trainer(trainer: TokenTrainer) -> TokenTrainer:
    """The same trainer with an auto-reset loop of ``horizon`` turns a lane (the
    same lane-turns per update as one episode a lane, every one of them played)."""
    loop = dataclasses.replace(LOOP, auto_reset=True, steps=LOOP.horizon)
    config = dataclasses.replace(trainer.config, loop=loop)
    return dataclasses.replace(trainer, config=config, rollout=trainer.rollout.with_config(loop))


def measure(size: str, batch: int, repeats: int, warmup_steps: int) -> dict[str, Any]:
    """One row of the table: device and host updates of one model size and batch."""
    config = TokenTrainConfig(
        env_id=ENV_ID,
        model=SIZES[size],
        loop=LOOP,
        num_episodes=batch,
        num_updates=1,
        warmup_updates=0,
        eval_every=1,
        warmup_learning_rate=1e-2,
    )
    trainer = make_token_train(config)
    state = jax.jit(trainer.init)(jax.random.key(0))
    warm = dataclasses.replace(trainer, config=dataclasses.replace(config, num_episodes=32))
    step = jax.jit(warm.warmup_step)
    for _ in range(warmup_steps):
        state, _ = step(state)
    state = jax.block_until_ready(state.replace(warmup=jnp.int32(0)))

    update = jax.jit(trainer.update)
    compile_start = time.perf_counter()
    compiled = update.lower(state).compile()
    compile_s = time.perf_counter() - compile_start
    (_, metrics), device_s = warm_then_best_of(repeats, lambda: compiled(state))
    played = float(metrics.rollout.episodes.mean_turns) * batch
    tokens = float(metrics.rollout.response_tokens) * played

    forced = trainer._forced_responses(jax.random.key(1))
    keys = jax.random.split(jax.random.key(2), batch)
    env_only = jax.jit(lambda p: trainer.rollout.collect(p, keys, jax.random.key(3), forced=forced))
    _, env_s = warm_then_best_of(repeats, lambda: env_only(state.params))

    auto = auto_reset_trainer(trainer)
    auto_update = jax.jit(auto.update).lower(state).compile()
    (_, auto_metrics), auto_s = warm_then_best_of(repeats, lambda: auto_update(state))
    auto_played = float(auto_metrics.rollout.turns_played)
    auto_tokens = float(auto_metrics.rollout.response_tokens) * auto_played

    host_s, host_played, host_tokens = time_host_update(trainer, state, batch, repeats)
    host_auto_s, host_auto_played, host_auto_tokens = time_host_update(auto, state, batch, repeats)
    row = {
        "size": size,
        "params": int(sum(x.size for x in jax.tree.leaves(state.params))),
        "batch": batch,
        "compile_s": compile_s,
        **rates("device", device_s, played, tokens),
        **rates("host", host_s, host_played, host_tokens),
        **rates("auto_reset", auto_s, auto_played, auto_tokens),
        **rates("host_auto_reset", host_auto_s, host_auto_played, host_auto_tokens),
        "env_and_bridge_share": env_s.cpu / device_s.cpu,
        "auto_reset_episodes_learned": float(auto_metrics.rollout.episode_count),
        "mean_turns": played / batch,
    }
    for name in ("device", "auto_reset"):
        prefix = "" if name == "device" else f"{name}_"
        row[f"{prefix}speedup"] = row[f"{name}_turns_per_s"] / row["host_turns_per_s"]
        row[f"{prefix}speedup_cpu"] = row[f"{name}_turns_per_cpu_s"] / row["host_turns_per_cpu_s"]
    # The same auto-reset loop on both sides: what moving the text to the device gains.
    row["auto_reset_same_loop_speedup"] = (
        row["auto_reset_turns_per_s"] / row["host_auto_reset_turns_per_s"]
    )
    row["auto_reset_same_loop_speedup_cpu"] = (
        row["auto_reset_turns_per_cpu_s"] / row["host_auto_reset_turns_per_cpu_s"]
    )
    return row


def time_host_update(
    trainer: TokenTrainer, state: Any, batch: int, repeats: int
) -> tuple[Timing, float, float]:
    """The best of ``repeats`` host updates (:func:`host_rollout` of ``trainer``'s
    loop, then its jitted ``learn``), after an untimed one; and the turns and
    generated tokens the rollout played."""
    learn = jax.jit(trainer.learn)
    traj = host_rollout(trainer, state.params, batch, seed=0)
    jax.block_until_ready(learn(state, traj))
    timing = best_of(repeats, lambda: learn(state, host_rollout(trainer, state.params, batch, 0)))
    turns = float(np.sum(traj.valid))
    tokens = float(np.sum(np.where(traj.valid, traj.response_length, 0)))
    return timing, turns, tokens


def rates(name: str, timing: Timing, turns: float, tokens: float) -> dict[str, float]:
    """A loop's seconds and its turns and generated tokens per wall and per CPU
    second, keyed ``{name}_...``."""
    return {
        f"{name}_s": timing.wall,
        f"{name}_cpu_s": timing.cpu,
        f"{name}_turns": turns,
        f"{name}_turns_per_s": turns / timing.wall,
        f"{name}_tokens_per_s": tokens / timing.wall,
        f"{name}_turns_per_cpu_s": turns / timing.cpu,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Measure the table's rows (``argv`` as on the command line), print them and
    write the JSON; returns the rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["default", "small"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warmup-steps", type=int, default=WARMUP_STEPS)
    parser.add_argument("--quick", action="store_true", help="tiny model, batch 16, 1 repeat")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.sizes, args.repeats, args.warmup_steps = [16], ["tiny"], 1, 2
    backend = jax.default_backend()
    out = args.out or ROOT / "benchmarks" / "results" / f"token_loop_{backend}.json"
    rows: list[dict[str, Any]] = []
    header = (
        f"{'size':>8} {'params':>8} {'batch':>6} {'device turns/s':>15} {'auto-reset':>11} "
        f"{'host turns/s':>13} {'host auto':>10} {'x host':>7} {'auto x host auto':>17} "
        f"{'(CPU s)':>8} {'auto x host':>12} {'env+bridge':>11}"
    )
    print(header)
    for size in args.sizes:
        for batch in args.batches:
            row = measure(size, batch, args.repeats, args.warmup_steps)
            rows.append(row)
            print(
                f"{size:>8} {row['params']:>8} {batch:>6} {row['device_turns_per_s']:>15.1f} "
                f"{row['auto_reset_turns_per_s']:>11.1f} {row['host_turns_per_s']:>13.1f} "
                f"{row['host_auto_reset_turns_per_s']:>10.1f} {row['speedup']:>7.2f} "
                f"{row['auto_reset_same_loop_speedup']:>17.2f} "
                f"{row['auto_reset_same_loop_speedup_cpu']:>8.2f} "
                f"{row['auto_reset_speedup']:>12.2f} {row['env_and_bridge_share']:>10.1%}",
                flush=True,
            )
            write_results(out, backend, rows, argv)
    print(f"wrote {out}")
    return rows


def write_results(
    out: Path, backend: str, rows: list[dict[str, Any]], argv: list[str] | None
) -> None:
    """The rows measured so far, as JSON at ``out`` (rewritten after every row, so
    an interrupted run keeps what it measured), with the command's arguments."""
    args = sys.argv[1:] if argv is None else argv
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "env_id": ENV_ID,
                "loop": dataclasses.asdict(LOOP),
                "backend": backend,
                "devices": [str(d) for d in jax.devices()],
                "machine": platform.machine(),
                "python": platform.python_version(),
                "jax": jax.__version__,
                "date": time.strftime("%Y-%m-%d"),
                "command": " ".join(["python", "benchmarks/token_loop.py", *args]),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
