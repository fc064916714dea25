"""Throughput of gemjax against GEM (``gem-llm``) and Jumanji, in one run, as ratios.

1. Kernel sweep (``--env``, default GuessTheNumber-hard): ``lax.scan`` of
   ``vmap(AutoReset(env).step)`` inside one jit, uniform random actions drawn for the
   whole batch in one call per step, per-lane keys (``gemjax.rng.split``: the keys of
   ``jax.random.split``, hashed without JAX's rolled CPU loop), at batch 1 to 16384;
   compile time apart. Against GEM's single-env Python loop on the same game
   (``sample_random_action``, ``step``, ``reset`` when done).
2. Every registered game at batch 4096 against GEM's loop on the same id: five blocks of
   rollouts alternate with five GEM blocks of the same length, and each side reports
   its median block.
2b. Reset share (``resets``): every id of the games whose reset is costly
   (``sparse_resets``), at batch 4096, against the same rollout whose resets hand out
   episodes made beforehand (:class:`PooledResets`, what a bank would cost): the share
   of the rollout spent in the game's own reset, and both against GEM's loop.
3. Minesweeper against Jumanji's ``Minesweeper`` (its default 10x10 with 10 mines, and
   8x8 with 12 mines like GEM's ``-hard``), same batch sizes, uniform random actions
   drawn in one call, auto-reset on for both (:func:`jumanji_rate`). Sudoku
   (``-hard``, 9x9) against Jumanji's ``Sudoku-v0`` the same way, both with uniform
   ``(row, col, number)`` moves inside the board, and every Game2048 id against
   Jumanji's ``Game2048-v1`` at batch 4096, both with uniform directions, and every
   Sokoban id against Jumanji's ``Sokoban`` (its rules and 10x10 grid, 50 steps) on
   GEM's ``-hard`` levels from gemjax's bank, the same way
   (:func:`against_jumanji_uniform`: Jumanji's and our rollouts take turns over nine
   rounds, and each reports its median round).
4. Text: ``gemjax.gem.make_vec`` with 64 and 1024 envs against GEM's ``SyncVectorEnv``
   with as many, stepping the same pre-generated action strings.

Usage: ``python benchmarks/throughput.py [--env ID] [--quick] [--sections S,...]
[--games SUBSTRING]`` (sections: ``kernel``, ``games``, ``resets``, ``jumanji``,
``jumanji_sudoku``, ``jumanji_2048``, ``jumanji_sokoban``, ``vector``); prints tables and writes
``benchmarks/results/throughput_<platform>.json`` (``..._partial.json`` when only some
sections or games ran). GEM games without ``sample_random_action`` (Sudoku) play
uniform actions of the kernel's action space, rendered as text.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import gemjax
from gemjax.benchmark import CompiledRollout, measure
from gemjax.envs.words import write_nltk_data
from gemjax.rng import split
from gemjax.wrappers import Wrapper

BATCH_SIZES = (1, 64, 1024, 4096, 16384)
GAME_BATCH = 4096
JUMANJI_BATCHES = (1024, 4096)
#: Episodes :class:`PooledResets` hands out.
POOL_SIZE = 256
RESULTS = Path(__file__).parent / "results"


def kernel_space_texts(env_id: str, count: int = 1000) -> list[str]:
    """Uniform actions of the kernel's action space, as response text."""
    env = gemjax.make(env_id)
    actions = env.action_space(env.default_params).sample(jax.random.key(0), (count,))
    return [env.grammar.render(a) for a in np.asarray(actions)]


def gem_loop_steps_per_second(env_id: str, seconds: float) -> float:
    """GEM's single-env Python loop (sample, step, reset when done) for ``seconds``.
    Games whose GEM env has no ``sample_random_action`` (Sudoku), or whose sampler
    writes text the game's own parser refuses (FifteenPuzzle's bare direction word,
    which would make every step a format error and a reset), cycle through pre-drawn
    uniform kernel-space actions instead (:func:`kernel_space_texts`)."""
    import gem

    env = gem.make(env_id)
    env.reset(seed=0)
    try:
        sampled = env.sample_random_action()
        texts = None if gemjax.make(env_id).grammar.parse(sampled).ok else []
    except NotImplementedError:
        texts = []
    if texts is not None:
        texts = kernel_space_texts(env_id)
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for i in range(50):
            action = texts[(steps + i) % len(texts)] if texts else env.sample_random_action()
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        steps += 50
    return steps / elapsed


def jumanji_rate(env: Any, batch_size: int, num_steps: int, draw: Any) -> Timing:
    """The :class:`Timing` of :func:`jumanji_rollout`."""
    return time_compiled(jumanji_rollout(env, batch_size, num_steps, draw), batch_size * num_steps)


def jumanji_rollout(env: Any, batch_size: int, num_steps: int, draw: Any) -> Any:
    """A Jumanji env under our protocol, jitted ``rollout(key) -> episodes``:
    ``lax.scan`` of ``vmap(AutoResetWrapper(env).step)``, the batch's uniform random
    actions drawn in one call per step (``draw(key) -> actions``)."""
    from jumanji.wrappers import AutoResetWrapper

    env = AutoResetWrapper(env)

    def rollout(key: jax.Array) -> jax.Array:
        key, reset_key = jax.random.split(key)
        state, _ = jax.vmap(env.reset)(jax.random.split(reset_key, batch_size))

        def one_step(carry, step_key):
            state, episodes = carry
            state, ts = jax.vmap(env.step)(state, draw(step_key))
            return (state, episodes + jnp.sum(ts.last(), dtype=jnp.int32)), None

        (_, episodes), _ = jax.lax.scan(
            one_step, (state, jnp.int32(0)), jax.random.split(key, num_steps)
        )
        return episodes

    return jax.jit(rollout)


def gemjax_rollout(env_id: str, batch_size: int, num_steps: int, draw: Any) -> Any:
    """``env_id`` under :func:`jumanji_rollout`'s protocol, jitted ``rollout(key) ->
    episodes``: the batch's actions from ``draw(key) -> actions`` (moves inside the
    game, as the Jumanji env takes them), :class:`~gemjax.wrappers.AutoReset`,
    per-lane keys."""
    from gemjax.wrappers import AutoReset

    env = AutoReset(gemjax.make(env_id))
    params = env.default_params
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def rollout(key: jax.Array) -> jax.Array:
        key, reset_key = jax.random.split(key)
        state, _ = reset(split(reset_key, batch_size), params)

        def one_step(carry, step_key):
            state, episodes = carry
            action_key, lanes_key = split(step_key, 2)
            state, ts = step(split(lanes_key, batch_size), state, draw(action_key), params)
            return (state, episodes + jnp.sum(ts.done, dtype=jnp.int32)), None

        (_, episodes), _ = jax.lax.scan(
            one_step, (state, jnp.int32(0)), jax.random.split(key, num_steps)
        )
        return episodes

    return jax.jit(rollout)


def uniform_draw(batch_size: int, highs: int | tuple[int, ...], low: int = 0) -> Any:
    """``draw(key)``, drawn in one call: int32[batch] uniform in ``low..low + highs - 1``
    for an int ``highs``, else int32[batch, len(highs)] with column ``i`` uniform in
    ``low..low + highs[i] - 1``."""
    sizes = jnp.asarray(highs, jnp.uint32)

    def draw(key: jax.Array) -> jax.Array:
        bits = jax.random.bits(key, (batch_size, *sizes.shape), jnp.uint32)
        return (bits % sizes).astype(jnp.int32) + low

    return draw


def jumanji_minesweeper(
    batch_size: int, num_steps: int, rows: int, cols: int, mines: int
) -> Timing:
    """The :class:`Timing` of Jumanji's Minesweeper under our protocol."""
    from jumanji.environments.logic.minesweeper import Minesweeper
    from jumanji.environments.logic.minesweeper.generator import UniformSamplingGenerator

    env = Minesweeper(UniformSamplingGenerator(rows, cols, mines))
    return jumanji_rate(env, batch_size, num_steps, uniform_draw(batch_size, (rows, cols)))


class Timing(NamedTuple):
    """A compiled rollout's rates: wall ``steps_per_second`` (best of 3 runs),
    ``compile_seconds``, and ``cpu_steps_per_second`` (steps over the process CPU
    seconds of that run, every thread counted: steadier than wall time on a shared
    machine)."""

    steps_per_second: float
    compile_seconds: float
    cpu_steps_per_second: float


def time_compiled(function: Any, steps: int) -> Timing:
    """The :class:`Timing` of a jitted ``function(key)`` running ``steps`` steps."""
    compiled, compile_seconds = compile_rollout(function)
    best = (float("inf"), float("inf"))
    for repeat in range(3):
        best = min(best, time_run(compiled, repeat + 1))
    return Timing(steps / best[0], compile_seconds, steps / best[1])


def compile_rollout(function: Any) -> tuple[Any, float]:
    """A jitted ``function(key)`` compiled and run once; with its compile seconds."""
    key = jax.random.key(0)
    start = time.perf_counter()
    compiled = function.lower(key).compile()
    compile_seconds = time.perf_counter() - start
    jax.block_until_ready(compiled(key))
    return compiled, compile_seconds


def time_run(compiled: Any, seed: int) -> tuple[float, float]:
    """Wall and process CPU seconds of one ``compiled(key(seed))`` call."""
    start, cpu_start = time.perf_counter(), time.process_time()
    jax.block_until_ready(compiled(jax.random.key(seed)))
    return time.perf_counter() - start, time.process_time() - cpu_start


def time_alternating(functions: list[Any], steps: int, rounds: int = 9) -> list[Timing]:
    """The :class:`Timing` of each jitted ``function(key)`` running ``steps`` steps,
    timed in ``rounds`` rounds that call every function in turn (so a slow phase of
    a shared machine hits all of them alike); each reports its median round."""
    compiled = [compile_rollout(function) for function in functions]
    runs: list[list[tuple[float, float]]] = [[] for _ in functions]
    for round_ in range(rounds):
        for (run, _), times in zip(compiled, runs, strict=True):
            times.append(time_run(run, round_ + 1))
    return [
        Timing(
            steps / float(np.median([wall for wall, _ in times])),
            compile_seconds,
            steps / float(np.median([cpu for _, cpu in times])),
        )
        for (_, compile_seconds), times in zip(compiled, runs, strict=True)
    ]


def random_actions(num_envs: int, rounds: int, low: int, high: int) -> list[list[str]]:
    """Pre-generated ``\\boxed{n}`` responses, ``n`` uniform in ``[low, high]``."""
    rng = random.Random(0)
    return [
        ["\\boxed{" + str(rng.randint(low, high)) + "}" for _ in range(num_envs)]
        for _ in range(rounds)
    ]


def vector_seconds_per_call(vec: Any, actions: list[list[str]], num_calls: int) -> float:
    """Mean seconds of one ``vec.step`` over ``num_calls`` calls."""
    start = time.perf_counter()
    for i in range(num_calls):
        vec.step(actions[i % len(actions)])
    return (time.perf_counter() - start) / num_calls


def compare_vector(env_id: str, num_envs: int, num_calls: int, blocks: int = 9) -> dict[str, Any]:
    """``make_vec`` against GEM's ``SyncVectorEnv``, same actions, same run.

    The two alternate in ``blocks`` blocks of ``num_calls`` calls each and the median
    block is kept, so a slow phase of a shared machine hits both alike.
    """
    import gem

    import gemjax.gem

    actions = random_actions(num_envs, 50, 1, 50)
    ours = gemjax.gem.make_vec([env_id] * num_envs, seed=0)
    with contextlib.redirect_stdout(io.StringIO()):  # GEM prints which vector env it built
        theirs = gem.make_vec([env_id] * num_envs, seed=0)
    theirs.reset(seed=0)
    ours.reset(seed=0)
    for vec in (theirs, ours):  # warm-up (compiles ours)
        vector_seconds_per_call(vec, actions, 5)
    times: dict[str, list[float]] = {"gem": [], "gemjax": []}
    for _ in range(blocks):
        times["gem"].append(vector_seconds_per_call(theirs, actions, num_calls))
        times["gemjax"].append(vector_seconds_per_call(ours, actions, num_calls))
    gem_rate, our_rate = (num_envs / float(np.median(times[name])) for name in ("gem", "gemjax"))
    return {
        "num_envs": num_envs,
        "gemjax_steps_per_second": our_rate,
        "gem_steps_per_second": gem_rate,
        "ratio": our_rate / gem_rate,
        "cpu_async_dispatch": bool(jax.config.read("jax_cpu_enable_async_dispatch")),
    }


def kernel_sweep(env_id: str, scale: float, gem_rate: float) -> list[dict[str, Any]]:
    """Section 1: one game over :data:`BATCH_SIZES`."""
    print(f"\n== {env_id}: GEM loop {gem_rate:,.0f} steps/s ({1e6 / gem_rate:.2f} us/step)")
    print(f"{'batch':>6s} {'steps/s':>14s} {'ns/step':>9s} {'x GEM':>8s} {'compile s':>9s}")
    rows = []
    for batch_size in BATCH_SIZES:
        num_steps = max(50, int(scale * min(2000, 4_000_000 // batch_size)))
        result = measure(env_id, batch_size, num_steps)
        rows.append({**result.as_dict(), "ratio_vs_gem": result.steps_per_second / gem_rate})
        print(
            f"{batch_size:6d} {result.steps_per_second:14,.0f} "
            f"{1e9 / result.steps_per_second:9.1f} {rows[-1]['ratio_vs_gem']:8.1f} "
            f"{result.compile_seconds:9.2f}"
        )
    return rows


def time_block(rollout: CompiledRollout, seconds: float, seed: int) -> tuple[float, int]:
    """Rollouts back to back for at least ``seconds`` (as long as a GEM block): the
    mean seconds of one and the episodes of the first."""
    elapsed, episodes = rollout.run(seed)
    runs = 1
    while elapsed < seconds:
        elapsed += rollout.run(seed + runs)[0]
        runs += 1
    return elapsed / runs, episodes


def gem_constructs(env_id: str) -> bool:
    """GEM registers ``env_id`` and its constructor runs (GEM's FifteenPuzzle
    ``-random`` raises a TypeError, its Crosswords ``-random`` a ValueError)."""
    import gem

    if env_id not in gem.envs.registration.ENV_REGISTRY:
        return False
    try:
        gem.make(env_id)
    except (TypeError, ValueError):
        return False
    return True


def all_games(
    scale: float, gem_seconds: float, only: str = "", blocks: int = 5
) -> list[dict[str, Any]]:
    """Section 2: every registered id (containing ``only``) at :data:`GAME_BATCH`,
    against GEM's loop: ``blocks`` blocks of rollouts alternate with as many GEM blocks,
    each ``gem_seconds / blocks`` long, and each side reports its median block."""
    print(f"\n== every game at batch {GAME_BATCH}")
    print(f"{'env id':42s} {'steps/s':>13s} {'GEM loop':>10s} {'x GEM':>8s} {'compile s':>9s}")
    rows = []
    for env_id in (i for i in gemjax.list_envs() if only in i):
        rollout = CompiledRollout(env_id, GAME_BATCH, max(20, int(200 * scale)))
        rollout.run(0)  # warm-up
        runs, gem_rates = [], []
        with_gem = gem_constructs(env_id)  # not hard-no-max-turn nor GEM's crashing ids
        for block in range(blocks):  # alternate, so a slow phase of the machine hits both
            runs.append(time_block(rollout, gem_seconds / blocks, seed=100 * block))
            if with_gem:
                gem_rates.append(gem_loop_steps_per_second(env_id, gem_seconds / blocks))
        result = rollout.result(*sorted(runs)[blocks // 2])
        gem_rate = float(np.median(gem_rates)) if gem_rates else None
        ratio = result.steps_per_second / gem_rate if gem_rate else None
        rows.append({**result.as_dict(), "gem_steps_per_second": gem_rate, "ratio_vs_gem": ratio})
        print(
            f"{env_id:42s} {result.steps_per_second:13,.0f} "
            f"{gem_rate or float('nan'):10,.0f} {ratio or float('nan'):8.1f} "
            f"{result.compile_seconds:9.2f}"
        )
    return rows


class PooledResets(Wrapper):
    """``env`` whose reset hands out one of ``size`` episodes made beforehand by the
    game's own reset, picked by the key: what a reset costs with a bank of pre-made
    episodes (about the least a reset can cost), to measure what share of a rollout
    the game's own reset takes. Everything else, the auto-reset's sparse resets
    included, is the game's."""

    def __init__(self, env: gemjax.core.Environment, size: int) -> None:
        super().__init__(env)
        self.size = size
        keys = jax.random.split(jax.random.key(2026), size)
        self.pool = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, env.default_params)

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        index = jax.random.randint(key, (), 0, self.size)
        return jax.tree.map(lambda leaf: leaf[index], self.pool)


def reset_microseconds(env_id: str, batch_size: int, repeats: int = 20) -> float:
    """Microseconds a lane of ``jit(vmap(env.reset))`` at ``batch_size`` (best of
    ``repeats`` calls)."""
    env = gemjax.make(env_id)
    keys = jax.random.split(jax.random.key(0), batch_size)
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    jax.block_until_ready(reset(keys, env.default_params))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(reset(keys, env.default_params))
        best = min(best, time.perf_counter() - start)
    return 1e6 * best / batch_size


def reset_shares(
    scale: float, gem_seconds: float, only: str = "", rounds: int = 7
) -> list[dict[str, Any]]:
    """Section 2b: every id (containing ``only``) of the games whose reset is costly
    (``sparse_resets``), at :data:`GAME_BATCH`: the rollout of section 2 against the
    same rollout with :class:`PooledResets` (``rounds`` alternating rounds, each side's
    median), so the share of the rollout spent in resets, and what
    a bank of pre-made episodes would give against GEM's loop; one reset's cost at the
    sparse-reset chunk size (``GAME_BATCH / 8``)."""
    print(f"\n== reset share at batch {GAME_BATCH} (pooled: resets drawn from a pre-made pool)")
    print(
        f"{'env id':34s} {'steps/s':>11s} {'pooled/s':>12s} {'GEM loop':>9s} {'x GEM':>7s} "
        f"{'pooled x GEM':>12s} {'resets/step':>11s} {'reset share':>11s} {'us/reset':>8s}"
    )
    num_steps = max(20, int(scale * 200))
    rows = []
    for env_id in gemjax.list_envs():
        env = gemjax.make(env_id)
        if only not in env_id or not env.sparse_resets:
            continue
        own = CompiledRollout(env_id, GAME_BATCH, num_steps)
        pooled = CompiledRollout(
            env_id, GAME_BATCH, num_steps, wrap=lambda game: PooledResets(game, POOL_SIZE)
        )
        runs: tuple[list[float], list[float]] = ([], [])
        episodes = []  # the game's own rollout, per round
        for round_ in range(rounds):  # alternate, so a slow phase of the machine hits both
            for rollout, seconds in zip((own, pooled), runs, strict=True):
                elapsed, finished = rollout.run(round_)
                seconds.append(elapsed)
                if rollout is own:
                    episodes.append(finished)
        ours, theirs = (GAME_BATCH * num_steps / float(np.median(t)) for t in runs)
        gem_rate = None
        if gem_constructs(env_id):
            gem_rate = gem_loop_steps_per_second(env_id, gem_seconds)
        row = {
            "env_id": env_id,
            "batch_size": GAME_BATCH,
            "steps_per_second": ours,
            "pooled_steps_per_second": theirs,
            "gem_steps_per_second": gem_rate,
            "ratio_vs_gem": ours / gem_rate if gem_rate else None,
            "pooled_ratio_vs_gem": theirs / gem_rate if gem_rate else None,
            "resets_per_step": float(np.mean(episodes)) / num_steps,
            "reset_share": 1.0 - ours / theirs,
            "reset_microseconds": reset_microseconds(env_id, GAME_BATCH // 8),
        }
        rows.append(row)
        print(
            f"{env_id:34s} {ours:11,.0f} {theirs:12,.0f} {gem_rate or float('nan'):9,.0f} "
            f"{row['ratio_vs_gem'] or float('nan'):7.1f} "
            f"{row['pooled_ratio_vs_gem'] or float('nan'):12.1f} "
            f"{row['resets_per_step']:11,.0f} {row['reset_share']:11.2f} "
            f"{row['reset_microseconds']:8.2f}"
        )
    return rows


def against_jumanji(scale: float) -> list[dict[str, Any]]:
    """Section 3: Minesweeper against Jumanji's."""
    print("\n== Minesweeper against Jumanji (uniform random actions, auto-reset)")
    print(f"{'config':28s} {'batch':>6s} {'gemjax/s':>13s} {'jumanji/s':>13s} {'ratio':>7s}")
    rows = []
    configs = [("10x10, 10 mines", 10, 10, 10, None), ("8x8, 12 mines", 8, 8, 12, "hard")]
    for label, rows_, cols, mines, gem_variant in configs:
        for batch_size in JUMANJI_BATCHES:
            num_steps = max(20, int(scale * 200))
            kwargs = {} if gem_variant else {"rows": rows_, "cols": cols, "num_mines": mines}
            env_id = "game:Minesweeper-v0-hard"
            ours = measure(env_id, batch_size, num_steps, **kwargs)
            theirs, jumanji_compile, _ = jumanji_minesweeper(
                batch_size, num_steps, rows_, cols, mines
            )
            ratio = ours.steps_per_second / theirs
            rows.append(
                {
                    "config": label,
                    "batch_size": batch_size,
                    "gemjax_steps_per_second": ours.steps_per_second,
                    "jumanji_steps_per_second": theirs,
                    "gemjax_compile_seconds": ours.compile_seconds,
                    "jumanji_compile_seconds": jumanji_compile,
                    "ratio": ratio,
                }
            )
            print(
                f"{label:28s} {batch_size:6d} {ours.steps_per_second:13,.0f} "
                f"{theirs:13,.0f} {ratio:7.2f}"
            )
    return rows


def jumanji_sokoban_on_gem_levels(time_limit: int = 50) -> Any:
    """Jumanji's ``Sokoban`` (its 10x10 grid and rules, ``time_limit`` steps) drawing
    uniformly from gemjax's bank of GEM's ``-hard`` levels (8x8, 4 boxes; walls
    around them), instead of its default generator, which downloads DeepMind's
    Boxoban levels."""
    from jumanji.environments.routing.sokoban import Sokoban
    from jumanji.environments.routing.sokoban import constants as their
    from jumanji.environments.routing.sokoban.generator import Generator
    from jumanji.environments.routing.sokoban.types import State

    from gemjax.envs import sokoban as ours

    levels = ours.bank_levels(ours.bank_tag(8, 4))
    side = their.GRID_SIZE
    room = np.full((len(levels), side, side), ours.WALL, np.uint8)
    room[:, :8, :8] = levels
    fixed = np.select(
        [room == ours.WALL, room == ours.TARGET], [their.WALL, their.TARGET], their.EMPTY
    )
    variable = np.select(
        [room == ours.BOX, room == ours.PLAYER], [their.BOX, their.AGENT], their.EMPTY
    )

    class GemLevels(Generator):
        def __init__(self) -> None:
            self._fixed_grids = jnp.asarray(fixed, jnp.uint8)
            self._variable_grids = jnp.asarray(variable, jnp.uint8)

        def __call__(self, rng_key: jax.Array) -> Any:
            key, index_key = jax.random.split(rng_key)
            index = jax.random.randint(index_key, (), 0, len(levels))
            variable_grid = self._variable_grids[index]
            return State(
                key=key,
                fixed_grid=self._fixed_grids[index],
                variable_grid=variable_grid,
                agent_location=self.get_agent_coordinates(variable_grid),
                step_count=jnp.int32(0),
            )

    return Sokoban(generator=GemLevels(), time_limit=time_limit)


def jumanji_uniform_moves(name: str, batch_size: int, num_steps: int) -> Any:
    """Jumanji's ``Sudoku-v0`` (uniform ``(row, col, value)`` in ``0..8``; an illegal
    move ends its episode), ``Game2048-v1`` or ``Sokoban-v0`` (on GEM's levels:
    :func:`jumanji_sokoban_on_gem_levels`) (a uniform direction) as a
    :func:`jumanji_rollout`."""
    import jumanji

    highs = {"Sudoku-v0": (9, 9, 9), "Game2048-v1": 4, "Sokoban-v0": 4}[name]
    env = jumanji_sokoban_on_gem_levels() if name == "Sokoban-v0" else jumanji.make(name)
    return jumanji_rollout(env, batch_size, num_steps, uniform_draw(batch_size, highs))


def gemjax_uniform_moves(env_id: str, batch_size: int, num_steps: int) -> Any:
    """``env_id`` as a :func:`gemjax_rollout` with the moves of
    :func:`jumanji_uniform_moves`: Sudoku ``(row, col, number)`` uniform in ``1..9``
    (the kernel action ``[1, row, col, number]``), 2048 a uniform direction (``1..4``)."""
    if "Sudoku" in env_id:
        moves = uniform_draw(batch_size, (9, 9, 9), low=1)

        def draw(key: jax.Array) -> jax.Array:
            return jnp.concatenate([jnp.ones((batch_size, 1), jnp.int32), moves(key)], axis=1)

    else:
        draw = uniform_draw(batch_size, 4, low=1)
    return gemjax_rollout(env_id, batch_size, num_steps, draw)


JUMANJI_UNIFORM = {
    "jumanji_sudoku": ("Sudoku-v0", ("game:Sudoku-v0-hard",), JUMANJI_BATCHES),
    "jumanji_2048": (
        "Game2048-v1",
        tuple(f"game:Game2048-v0-{v}" for v in ("easy", "hard", "extreme-hard", "random")),
        (GAME_BATCH,),
    ),
    "jumanji_sokoban": (
        "Sokoban-v0",
        tuple(f"game:Sokoban-v0-{v}" for v in ("easy", "hard", "random")),
        (GAME_BATCH,),
    ),
}
"""Sections comparing a game with a Jumanji env on uniform moves: the Jumanji env,
our ids, the batch sizes."""


def against_jumanji_uniform(section: str, scale: float, gem_seconds: float) -> list[dict[str, Any]]:
    """Section 3b/3c/3d: Sudoku (9x9) against Jumanji's ``Sudoku-v0``, every Game2048
    id against Jumanji's ``Game2048-v1``, every Sokoban id against Jumanji's
    ``Sokoban`` on GEM's ``-hard`` levels: uniform moves, auto-reset on both, timed in
    alternating rounds (:func:`time_alternating`), and GEM's loop on each id."""
    name, env_ids, batches = JUMANJI_UNIFORM[section]
    print(f"\n== {', '.join(env_ids)} against Jumanji's {name} (uniform moves, auto-reset)")
    header = ("env id", "batch", "gemjax/s", "jumanji/s", "x jumanji", "x (CPU)", "x GEM")
    print(
        "{:32s} {:>6s} {:>13s} {:>13s} {:>9s} {:>8s} {:>9s} {:>8s} {:>9s}".format(
            *header, "ours cs", "theirs cs"
        )
    )
    rows = []
    for batch_size in batches:
        num_steps = max(20, int(scale * 200))
        rollouts = [jumanji_uniform_moves(name, batch_size, num_steps)]
        rollouts += [gemjax_uniform_moves(i, batch_size, num_steps) for i in env_ids]
        (theirs, their_compile, their_cpu), *timings = time_alternating(
            rollouts, batch_size * num_steps
        )
        for env_id, (ours, our_compile, our_cpu) in zip(env_ids, timings, strict=True):
            gem_rate = gem_loop_steps_per_second(env_id, gem_seconds)
            rows.append(
                {
                    "env_id": env_id,
                    "jumanji_env": name,
                    "batch_size": batch_size,
                    "gemjax_steps_per_second": ours,
                    "jumanji_steps_per_second": theirs,
                    "gem_loop_steps_per_second": gem_rate,
                    "gemjax_cpu_steps_per_second": our_cpu,
                    "jumanji_cpu_steps_per_second": their_cpu,
                    "gemjax_compile_seconds": our_compile,
                    "jumanji_compile_seconds": their_compile,
                    "ratio": ours / theirs,
                    "cpu_ratio": our_cpu / their_cpu,
                    "ratio_vs_gem": ours / gem_rate,
                }
            )
            print(
                f"{env_id:32s} {batch_size:6d} {ours:13,.0f} {theirs:13,.0f} "
                f"{ours / theirs:9.2f} {our_cpu / their_cpu:8.2f} {ours / gem_rate:9.0f} "
                f"{our_compile:8.2f} "
                f"{their_compile:9.2f}"
            )
    return rows


SECTIONS = (
    "kernel",
    "games",
    "resets",
    "jumanji",
    "jumanji_sudoku",
    "jumanji_2048",
    "jumanji_sokoban",
    "vector",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="game:GuessTheNumber-v0-hard")
    parser.add_argument("--quick", action="store_true", help="fewer steps (smoke test)")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    parser.add_argument("--games", default="", help="sections 2 and 2b: only ids containing this")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if not sections <= set(SECTIONS):
        parser.error(f"unknown sections {sorted(sections - set(SECTIONS))}")
    scale = 0.1 if args.quick else 1.0
    gem_seconds = 0.3 if args.quick else 2.0
    os.environ["NLTK_DATA"] = str(write_nltk_data(Path(tempfile.mkdtemp())))

    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()})")
    gem_rate = sweep = None
    if "kernel" in sections or "vector" in sections:
        gem_rate = gem_loop_steps_per_second(args.env, gem_seconds)
    if "kernel" in sections:
        sweep = kernel_sweep(args.env, scale, gem_rate)
    games = all_games(scale, gem_seconds, args.games) if "games" in sections else None
    resets = reset_shares(scale, gem_seconds, args.games) if "resets" in sections else None
    jumanji = against_jumanji(scale) if "jumanji" in sections else None
    uniform = {
        section: against_jumanji_uniform(section, scale, gem_seconds)
        if section in sections
        else None
        for section in JUMANJI_UNIFORM
    }
    if "vector" in sections:
        print("\n== text API: make_vec(N) against GEM's SyncVectorEnv(N), same action strings")
    vector = []
    for num_envs in (64, 1024) if "vector" in sections else ():
        calls = max(2, int(scale * 40 * 64 / num_envs))
        vector.append(compare_vector(args.env, num_envs, calls))
        print(
            f"N={num_envs:5d}: gemjax {vector[-1]['gemjax_steps_per_second']:,.0f} steps/s, "
            f"GEM {vector[-1]['gem_steps_per_second']:,.0f} steps/s: {vector[-1]['ratio']:.2f}x"
        )
    report = {
        "env_id": args.env,
        "platform": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "gem_loop_steps_per_second": gem_rate,
        "kernel": sweep,
        "games": games,
        "reset_shares": resets,
        "jumanji_minesweeper": jumanji,
        **uniform,
        "vector_text": vector if "vector" in sections else None,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    partial = sections != set(SECTIONS) or args.games
    suffix = "_partial" if partial else ""
    out = RESULTS / f"throughput_{jax.default_backend()}{suffix}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
