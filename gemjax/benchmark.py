"""Kernel throughput measurement, and the docs sections benchmarks write.

Used by ``gemjax bench`` and ``benchmarks/throughput.py``. A rollout runs
``lax.scan`` over steps of ``vmap(AutoReset(env).step)`` with per-lane keys and
uniform random actions drawn for the whole batch in one call per step. Compile
time is measured apart from run time.

A benchmark script that owns a part of a Markdown file writes it between two
markers (:func:`write_section`), generated from its JSON; tests compare
:func:`read_section` with what the script renders from the committed JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from gemjax.core import Environment
from gemjax.registry import make
from gemjax.rng import split
from gemjax.wrappers import AutoReset


@dataclass(frozen=True)
class Throughput:
    """One measurement.

    Attributes:
        env_id, batch_size, num_steps: what ran (``num_steps`` scan steps of the batch).
        compile_seconds: lowering plus XLA compilation.
        run_seconds: wall time of the compiled rollout (best of ``repeats``).
        steps_per_second: ``batch_size * num_steps / run_seconds``.
        episodes: episodes finished during the timed run.
    """

    env_id: str
    batch_size: int
    num_steps: int
    compile_seconds: float
    run_seconds: float
    steps_per_second: float
    episodes: int

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def make_rollout(env: Environment, batch_size: int, num_steps: int):
    """A jittable ``rollout(key) -> (finished episodes int32[], reward sum float32[])``."""
    wrapped = AutoReset(env)
    params = env.default_params
    space = env.action_space(params)
    reset = jax.vmap(wrapped.reset, in_axes=(0, None))
    step = jax.vmap(wrapped.step, in_axes=(0, 0, 0, None))

    def rollout(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key, reset_key = jax.random.split(key)
        state, _ = reset(split(reset_key, batch_size), params)

        def one_step(carry, step_key):
            state, episodes, total = carry
            action_key, lanes_key = split(step_key, 2)
            actions = space.sample(action_key, (batch_size,))
            state, ts = step(split(lanes_key, batch_size), state, actions, params)
            episodes = episodes + jnp.sum(ts.done, dtype=jnp.int32)
            return (state, episodes, total + jnp.sum(ts.reward)), None

        init = (state, jnp.int32(0), jnp.float32(0.0))
        (_, episodes, total), _ = jax.lax.scan(one_step, init, jax.random.split(key, num_steps))
        return episodes, total

    return rollout


class CompiledRollout:
    """A compiled random rollout of one env, to time as often as wanted (for example
    alternating with another measurement so that a slow phase of the machine hits
    both).

    Attributes:
        env_id, batch_size, num_steps: what it runs (``gemjax.make(env_id,
            **make_kwargs)``, passed through ``wrap`` where given).
        compile_seconds: lowering plus XLA compilation.
    """

    def __init__(
        self,
        env_id: str,
        batch_size: int,
        num_steps: int,
        wrap: Callable[[Environment], Environment] | None = None,
        **make_kwargs: Any,
    ) -> None:
        self.env_id, self.batch_size, self.num_steps = env_id, batch_size, num_steps
        env = make(env_id, **make_kwargs)
        rollout = jax.jit(make_rollout(wrap(env) if wrap else env, batch_size, num_steps))
        start = time.perf_counter()
        self._compiled = rollout.lower(jax.random.key(0)).compile()
        self.compile_seconds = time.perf_counter() - start

    def run(self, seed: int) -> tuple[float, int]:
        """Wall seconds of one rollout from ``jax.random.key(seed)`` and the episodes
        it finished."""
        start = time.perf_counter()
        episodes, _ = jax.block_until_ready(self._compiled(jax.random.key(seed)))
        return time.perf_counter() - start, int(episodes)

    def result(self, seconds: float, episodes: int) -> Throughput:
        """The :class:`Throughput` of a run that took ``seconds``."""
        steps = self.batch_size * self.num_steps
        return Throughput(
            self.env_id,
            self.batch_size,
            self.num_steps,
            self.compile_seconds,
            seconds,
            steps / seconds,
            episodes,
        )


def measure(
    env_id: str, batch_size: int, num_steps: int, repeats: int = 3, **make_kwargs: Any
) -> Throughput:
    """Compile and time a random rollout of ``gemjax.make(env_id, **make_kwargs)``:
    one warm-up run, then the best of ``repeats``."""
    rollout = CompiledRollout(env_id, batch_size, num_steps, **make_kwargs)
    rollout.run(0)  # warm-up
    return rollout.result(*min(rollout.run(seed) for seed in range(1, repeats + 1)))


def section_markers(owner: str) -> tuple[str, str]:
    """The HTML comments that open and close the section ``owner`` (a script's path)
    generates in a Markdown file."""
    return (
        f"<!-- generated by {owner} from its JSON: edit the script, not this text -->",
        f"<!-- end of {owner}'s section -->",
    )


def read_section(path: Path, owner: str) -> str:
    """The text between ``owner``'s markers in ``path`` (markers excluded).

    Raises:
        ValueError: ``path`` lacks the markers.
    """
    begin, end = section_markers(owner)
    text = path.read_text()
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no section of {owner}: add its two marker lines")
    return text.split(begin, 1)[1].split(end, 1)[0]


def write_section(path: Path, owner: str, body: str) -> None:
    """Replace the text between ``owner``'s markers in ``path`` with ``body``
    (surrounded by blank lines).

    Raises:
        ValueError: ``path`` lacks the markers.
    """
    begin, end = section_markers(owner)
    text = path.read_text()
    old = read_section(path, owner)
    path.write_text(text.replace(begin + old + end, f"{begin}\n\n{body.strip()}\n\n{end}", 1))
