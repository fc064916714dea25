"""The ``gemjax`` command: ``list``, ``play ID``, ``bench``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gemjax.registry import list_envs, spec


def cmd_list(_: argparse.Namespace) -> int:
    """Print every registered id with its configuration."""
    for env_id in list_envs():
        kwargs = ", ".join(f"{k}={v}" for k, v in spec(env_id).kwargs.items())
        print(f"{env_id:45s} {kwargs}")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """Play one episode in the terminal with GEM's exact text."""
    from gemjax.gem import make

    env = make(args.env_id, seed=args.seed)
    obs, info = env.reset(seed=args.seed)
    print(obs)
    terminated = truncated = False
    while not (terminated or truncated):
        if "suffix" in info:  # GEM's Mastermind resets without one
            print(info["suffix"])
        try:
            action = input("> ")
        except EOFError:
            print()
            return 0
        obs, reward, terminated, truncated, info = env.step(action)
        print(obs)
        print(f"[reward {reward}, terminated {terminated}, truncated {truncated}]")
    return 0


def sample_episode(env_id: str, seed: int) -> str:
    """One episode of random play as GEM's ``concat_with_action`` text."""
    from gemjax.gem import WRAPPER_FACTORY, make

    env = WRAPPER_FACTORY["concat_with_action"](make(env_id, seed=seed))
    obs, _ = env.reset(seed=seed)
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(env.sample_random_action())
        done = terminated or truncated
    return obs


def cmd_bench(args: argparse.Namespace) -> int:
    """Kernel throughput table for the chosen ids, then a sample episode."""
    from gemjax.benchmark import measure

    env_ids = args.env or list_envs()
    rows = []
    print(f"{'env id':45s} {'batch':>6s} {'steps/s':>14s} {'ns/step':>9s} {'compile s':>9s}")
    for env_id in env_ids:
        for batch_size in args.batch_sizes:
            result = measure(env_id, batch_size, args.steps)
            rows.append(result.as_dict())
            print(
                f"{env_id:45s} {batch_size:6d} {result.steps_per_second:14,.0f} "
                f"{1e9 / result.steps_per_second:9.1f} {result.compile_seconds:9.2f}"
            )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print("\nA sample episode (random play, GEM's concat_with_action view):\n")
    print(sample_episode(env_ids[0], seed=0))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gemjax`` command."""
    parser = argparse.ArgumentParser(prog="gemjax", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list registered env ids").set_defaults(run=cmd_list)
    play = commands.add_parser("play", help="play a game in the terminal")
    play.add_argument("env_id")
    play.add_argument("--seed", type=int, default=None)
    play.set_defaults(run=cmd_play)
    bench = commands.add_parser("bench", help="kernel throughput of batched random rollouts")
    bench.add_argument("--env", action="append", help="env id (repeatable; default: all)")
    bench.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 1024, 4096])
    bench.add_argument("--steps", type=int, default=200, help="scan steps per rollout")
    bench.add_argument("--json", help="also write the rows to this JSON file")
    bench.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gemjax`` command."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
