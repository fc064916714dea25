"""The ``gemjax`` command: ``list``, ``play ID``, ``bench``, ``train``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gemjax.registry import list_envs, spec
from gemjax.train.config import ALGOS, TrainConfig


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


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The :class:`~gemjax.train.TrainConfig` of ``gemjax train``'s arguments (PPO
    defaults to clip 0.2, 4 epochs of 4 minibatches)."""
    ppo = args.algo == "ppo"
    overrides = {
        "env_id": args.env,
        "algo": args.algo,
        "gamma": args.gamma,
        "num_updates": args.updates,
        "num_episodes": args.episodes,
        "num_transitions": args.transitions,
        "horizon": args.horizon,
        "group_size": args.group_size,
        "hidden": tuple(args.hidden) if args.hidden else None,
        "learning_rate": args.lr,
        "ent_coef": args.ent_coef,
        "clip_eps": args.clip_eps if args.clip_eps is not None else (0.2 if ppo else None),
        "update_epochs": args.epochs or (4 if ppo else None),
        "num_minibatches": args.minibatches or (4 if ppo else None),
        "mask_invalid": args.mask_invalid,
        "eval_every": args.eval_every,
        "eval_episodes": args.eval_episodes,
    }
    return dataclasses.replace(
        TrainConfig(), **{k: v for k, v in overrides.items() if v is not None}
    )


def cmd_train(args: argparse.Namespace) -> int:
    """Train a policy on a game; write metrics, a plot and checkpoints to ``--out``."""
    import jax

    if args.distributed:
        jax.distributed.initialize()
    from gemjax.train.host import device_mesh, run

    config = train_config(args)
    result = run(
        config,
        Path(args.out),
        seed=args.seed,
        mesh=device_mesh(),
        checkpoint_every=args.checkpoint_every,
        progress=not args.no_progress,
    )
    from gemjax.train import greedy_transcript, make_train
    from gemjax.train.play import binary_search_optimum

    trainer = make_train(config)
    print("A greedy episode of the trained policy:\n")
    print(greedy_transcript(trainer, result.state.params, jax.random.key(args.seed)))
    print()
    last = result.records[-1]
    sps = f"{result.steps_per_second:,.0f}" if result.steps_per_second else "n/a"
    optimum = binary_search_optimum(trainer.env)
    reference = f" (binary-search optimum {optimum:.2f})" if optimum is not None else ""
    print(
        f"update {last['update']}: greedy success {last['success']:.3f}, "
        f"mean turns {last['mean_turns']:.2f}{reference}; "
        f"compile {result.compile_seconds:.1f} s, "
        f"{sps} env steps/s (train step incl. update); wall {last['wall_s']:.1f} s"
    )
    return 0


def add_train_parser(commands: argparse._SubParsersAction) -> None:
    """The ``train`` subcommand (unset options take :class:`TrainConfig`'s defaults)."""
    train = commands.add_parser("train", help="train a policy on a game (on device)")
    train.add_argument("--env", default=TrainConfig.env_id, help="env id")
    train.add_argument("--algo", choices=ALGOS, default=TrainConfig.algo)
    train.add_argument("--gamma", type=float, default=TrainConfig.gamma)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", required=True, help="run directory (resumed if present)")
    train.add_argument("--updates", type=int, help="total updates")
    train.add_argument("--episodes", type=int, help="episodes per update")
    train.add_argument("--transitions", type=int, help="learning transitions per update")
    train.add_argument("--horizon", type=int, help="rollout turns (default: max_turns)")
    train.add_argument("--group-size", type=int, help="GRPO episodes per initial state")
    train.add_argument("--hidden", type=int, nargs="+", help="MLP hidden widths")
    train.add_argument("--lr", type=float, help="AdamW learning rate")
    train.add_argument("--ent-coef", type=float, help="entropy bonus")
    train.add_argument("--clip-eps", type=float, help="PPO-style ratio clipping")
    train.add_argument("--epochs", type=int, help="passes over each rollout")
    train.add_argument("--minibatches", type=int, help="minibatches per pass")
    train.add_argument("--mask-invalid", action="store_true", help="mask invalid actions")
    train.add_argument("--eval-every", type=int, help="updates per chunk and evaluation")
    train.add_argument("--eval-episodes", type=int, help="greedy evaluation episodes")
    train.add_argument("--checkpoint-every", type=int, default=10, help="chunks per checkpoint")
    train.add_argument("--distributed", action="store_true", help="jax.distributed (multi-host)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(run=cmd_train)


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
    bench.add_argument("--batch-sizes", type=int, nargs="+", default=[4096])
    bench.add_argument("--steps", type=int, default=200, help="scan steps per rollout")
    bench.add_argument("--json", help="also write the rows to this JSON file")
    bench.set_defaults(run=cmd_bench)
    add_train_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gemjax`` command."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
