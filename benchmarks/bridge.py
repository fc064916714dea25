"""Throughput of the on-device text bridge against the host text path, in one run.

For each game (one id per game by default) at batch ``B`` (default 4096):

* **device**: one jitted, vmapped call that renders every lane's observation and
  suffix to ``qwen3`` token ids (buffers of :data:`CAPACITY` tokens) (:meth:`TokenBridge.render`,
  :meth:`TokenBridge.render_suffix`) and parses a generated response per lane from
  token ids (:meth:`TokenBridge.parse`); the JSON also records the share of
  observations rendered from token programs (``token_program_share``; the rest go
  through code points);
* **host**: what a host loop does for the same work: render the strings (gemjax's
  host renderer, as ``gemjax.gem`` does), ``tokenizer(batch)`` (Hugging Face fast,
  batched), ``tokenizer.batch_decode`` of the responses and the regex grammar.

States come from random play; responses are ~40-token texts ending in a
``\\boxed{...}`` action rendered from a random action. Render and parse are also
timed alone (``x render``: the host's render + tokenize against the device render;
``x parse``: the host's decode + parse against the device parse), and so is the
first observation of an episode, the instructions (``reset ms``: the device render
of freshly reset lanes in ``RESET_CAPACITY`` ids; ``x reset``: the host's render +
tokenize of the same). Prints a table and writes
``benchmarks/results/bridge_cpu.json`` (or ``--out``).

Usage: ``python benchmarks/bridge.py [--batch 4096] [--games Sudoku,Wordle] [--repeats 5]``
(each timing is the best of ``repeats`` rounds; a round runs every device and host
function once, in turn)
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import gemjax
from gemjax.tokenizer_bridge.bridge import TokenBridge
from gemjax.tokenizer_bridge.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
CAPACITY = 256  # token ids per rendered observation / suffix
RESET_CAPACITY = 1024  # token ids per rendered reset observation (the instructions)
FILLER = "Let me think about the feedback so far and narrow it down step by step. "


def states_from_random_play(env: Any, batch: int, steps: int) -> tuple[Any, Any]:
    """``(state, timestep)`` batches after ``steps`` random moves (jitted)."""
    params = env.default_params

    @jax.jit
    def play(keys: jax.Array) -> tuple[Any, Any]:
        state, ts = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        for step in range(steps):
            step_keys = jax.vmap(lambda k, s=step: jax.random.fold_in(k, s))(keys)
            action = jax.vmap(env.random_action)(step_keys, state)
            state, ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                step_keys, state, action, params
            )
        return state, ts

    return play(jax.random.split(jax.random.key(0), batch))


def responses(
    env: Any, state: Any, tokenizer: Any, width: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Generated-looking responses (text and padded token ids) ending in an action."""
    keys = jax.random.split(jax.random.key(1), jax.tree.leaves(state)[0].shape[0])
    actions = np.asarray(jax.vmap(env.random_action)(keys, state))
    texts = [FILLER + "So my answer is " + env.grammar.render(a) for a in actions]
    ids = np.zeros((len(texts), width), np.int32)
    lengths = np.zeros(len(texts), np.int32)
    for row, encoded in enumerate(tokenizer(texts, add_special_tokens=False)["input_ids"]):
        ids[row, : len(encoded)] = encoded[:width]
        lengths[row] = min(len(encoded), width)
    return texts, ids, lengths


def best_of(repeats: int, functions: dict[str, Any]) -> dict[str, float]:
    """Fastest wall time of each ``functions[name]()`` over ``repeats`` rounds, the
    functions taken in turn within a round (seconds): a slow spell of a shared
    machine then slows the device and the host side alike, not one of them."""
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def measure_game(env_id: str, tokenizer: Any, batch: int, repeats: int) -> dict[str, Any]:
    env = gemjax.make(env_id)
    start = time.perf_counter()
    bridge = TokenBridge(env, tokenizer)
    build_seconds = time.perf_counter() - start
    state, ts = states_from_random_play(env, batch, 3)
    _, ids, lengths = responses(env, state, tokenizer, 64)
    ids_d, lengths_d = jnp.asarray(ids), jnp.asarray(lengths)

    def render(state: Any, ts: Any) -> Any:
        return (
            jax.vmap(lambda s, t: bridge.render(s, t, capacity=CAPACITY))(state, ts),
            jax.vmap(lambda s: bridge.render_suffix(s, capacity=CAPACITY))(state),
        )

    @jax.jit
    def device(state: Any, ts: Any, ids: jax.Array, lengths: jax.Array) -> Any:
        return render(state, ts), jax.vmap(bridge.parse)(ids, lengths)

    start = time.perf_counter()
    jax.block_until_ready(device(state, ts, ids_d, lengths_d))
    compile_seconds = time.perf_counter() - start
    render_only = jax.jit(render)
    observations, suffixes = render_only(state, ts)
    overflow = float(jax.numpy.mean(observations.overflow | suffixes.overflow))
    token_share = float(
        jnp.mean(
            jax.jit(jax.vmap(lambda k, a: bridge.token_messages.render(k, a, CAPACITY)[3]))(
                ts.event.kind, ts.event.args
            )
        )
    )
    parse_only = jax.jit(jax.vmap(bridge.parse))
    jax.block_until_ready(parse_only(ids_d, lengths_d))
    reset_state, reset_ts = states_from_random_play(env, batch, 0)
    reset_only = jax.jit(jax.vmap(lambda s, t: bridge.render(s, t, capacity=RESET_CAPACITY)))
    reset_overflow = float(jnp.mean(reset_only(reset_state, reset_ts).overflow))

    kinds = np.asarray(ts.event.kind).tolist()
    args = np.asarray(ts.event.args).tolist()
    values = jax.device_get(jax.vmap(env.suffix_values)(state))
    rows = [
        {k: v[i].reshape(-1).tolist() if v[i].ndim else int(v[i]) for k, v in values.items()}
        for i in range(batch)
    ]

    def host_render() -> None:
        observations = [env.messages.render(k, a) for k, a in zip(kinds, args, strict=True)]
        suffixes = [env.suffix.render(r) for r in rows]
        tokenizer(observations, add_special_tokens=False)
        tokenizer(suffixes, add_special_tokens=False)

    id_rows = [row[:n].tolist() for row, n in zip(ids, lengths, strict=True)]
    reset_events = list(
        zip(
            np.asarray(reset_ts.event.kind).tolist(),
            np.asarray(reset_ts.event.args).tolist(),
            strict=True,
        )
    )

    def host_reset() -> None:
        tokenizer([env.messages.render(k, a) for k, a in reset_events], add_special_tokens=False)

    def host_parse() -> None:
        for text in tokenizer.batch_decode(id_rows):
            env.grammar.parse(text)

    best = best_of(
        repeats,
        {
            "device": lambda: jax.block_until_ready(device(state, ts, ids_d, lengths_d)),
            "render": lambda: jax.block_until_ready(render_only(state, ts)),
            "parse": lambda: jax.block_until_ready(parse_only(ids_d, lengths_d)),
            "reset": lambda: jax.block_until_ready(reset_only(reset_state, reset_ts)),
            "host_render": host_render,
            "host_parse": host_parse,
            "host_reset": host_reset,
        },
    )
    device_seconds, device_render, device_parse = best["device"], best["render"], best["parse"]
    host_render_seconds, host_parse_seconds = best["host_render"], best["host_parse"]
    host_seconds = host_render_seconds + host_parse_seconds
    return {
        "env_id": env_id,
        "batch_size": batch,
        "repeats": repeats,
        "build_seconds": build_seconds,
        "compile_seconds": compile_seconds,
        "device_seconds": device_seconds,
        "device_render_seconds": device_render,
        "device_parse_seconds": device_parse,
        "host_render_tokenize_seconds": host_render_seconds,
        "host_decode_parse_seconds": host_parse_seconds,
        "host_seconds": host_seconds,
        "ratio": host_seconds / device_seconds,
        "render_ratio": host_render_seconds / device_render,
        "parse_ratio": host_parse_seconds / device_parse,
        "device_reset_seconds": best["reset"],
        "host_reset_render_tokenize_seconds": best["host_reset"],
        "reset_ratio": best["host_reset"] / best["reset"],
        "reset_token_capacity": RESET_CAPACITY,
        "reset_overflow_fraction": reset_overflow,
        "non_canonical_at_construction": bridge.non_canonical,
        "token_capacity": CAPACITY,
        "overflow_fraction": overflow,
        "token_program_share": token_share,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--games", default="", help="comma-separated game names (default: all)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bridge_cpu.json"
    )
    options = parser.parse_args()
    tokenizer = load_tokenizer("qwen3")
    ids = [
        i for i in gemjax.list_envs() if i.endswith("-easy") or i == "game:GuessTheNumber-v0-hard"
    ]
    ids = [i for i in ids if i != "game:GuessTheNumber-v0-easy"]
    if options.games:
        wanted = options.games.split(",")
        ids = [i for i in ids if any(f"game:{g}-" in i for g in wanted)]
    platform_name = jax.devices()[0].platform
    print(f"== on-device bridge vs host text path, qwen3, batch {options.batch} ({platform_name})")
    columns = (
        "device ms", "render ms", "parse ms", "host ms", "x host", "x render", "x parse",
        "reset ms", "x reset", "build s", "compile s",
    )  # fmt: skip
    print(f"{'env':34s} " + " ".join(f"{c:>10s}" for c in columns))
    results = []
    for env_id in ids:
        r = measure_game(env_id, tokenizer, options.batch, options.repeats)
        results.append(r)
        row = (
            1e3 * r["device_seconds"],
            1e3 * r["device_render_seconds"],
            1e3 * r["device_parse_seconds"],
            1e3 * r["host_seconds"],
            r["ratio"],
            r["render_ratio"],
            r["parse_ratio"],
            1e3 * r["device_reset_seconds"],
            r["reset_ratio"],
            r["build_seconds"],
            r["compile_seconds"],
        )
        print(f"{env_id:34s} " + " ".join(f"{v:10.1f}" for v in row))
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(
        json.dumps(
            {
                "platform": jax.devices()[0].platform,
                "machine": platform.machine(),
                "cpu_count": __import__("os").cpu_count(),
                "jax_version": jax.__version__,
                "results": results,
            },
            indent=2,
        )
    )
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
