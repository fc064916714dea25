"""The ``gemjax`` command: ``list``, ``play ID``, ``bench``, ``train``, ``eval``,
``export-adapters``.

A usage error (a bad flag, an unknown id, settings that do not fit together or do
not match the run being resumed) prints one line saying what is wrong and what to
do, and exits with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gemjax.core import Environment, EpisodeOutcomes
from gemjax.registry import list_envs, spec
from gemjax.train.config import (
    ALGOS,
    GRPO_SCORES,
    HEAD_KINDS,
    LR_SCHEDULES,
    TOKENIZERS,
    TORSOS,
    TrainConfig,
)

# transformers (imported by the token bridge and trainer) announces at import that
# PyTorch is absent, which gemjax never needs: keep its stderr for errors, so a usage
# error stays one line (set TRANSFORMERS_VERBOSITY to see its notices).
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

USAGE_ERROR = 2
INTERRUPTED = 130  # the shell's status for a command ended by Ctrl-C


class UsageError(Exception):
    """A mistake in the command's input, reported as one line (exit status 2)."""


class Parser(argparse.ArgumentParser):
    """argparse, with each error on one line: the problem and where to look."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# TrainConfig's field names as ``gemjax train`` spells them, for its error messages.
TRAIN_FLAGS = {
    "env_id": "--env",
    "algo": "--algo",
    "gamma": "--gamma",
    "seed": "--seed",
    "hidden": "--hidden",
    "num_updates": "--updates",
    "num_episodes": "--episodes",
    "num_transitions": "--transitions",
    "group_size": "--group-size",
    "grpo_score": "--grpo-score",
    "learning_rate": "--lr",
    "lr_schedule": "--lr-schedule",
    "ent_coef": "--ent-coef",
    "clip_eps": "--clip-eps",
    "update_epochs": "--epochs",
    "num_minibatches": "--minibatches",
    "eval_every": "--eval-every",
    "curriculum": "--curriculum",
    "eval_episodes": "--eval-episodes",
    "checkpoint_every": "--checkpoint-every",
    "TrainConfig.horizon": "--horizon",
    "horizon": "--horizon",
}


@contextlib.contextmanager
def user_input(flags: dict[str, str] | None = None) -> Iterator[None]:
    """Report the ``ValueError``/``TypeError`` of checks on the user's input (an id,
    a config, a run directory) as a :class:`UsageError`, with the names in ``flags``
    replaced by the command's flags."""
    try:
        yield
    except (ValueError, TypeError) as error:
        message = str(error)
        for name, flag in (flags or {}).items():
            message = re.sub(rf"(?<![\w.-]){re.escape(name)}\b", flag, message)
        raise UsageError(message) from error


def non_negative(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def curriculum_stage(text: str) -> Any:
    """argparse type: a :class:`~gemjax.train.config.Stage` spelt
    ``field=value[,field=value]:updates`` (``max_turns=50:750``)."""
    from gemjax.train.config import Stage

    usage = f"must read field=value[,field=value]:updates (e.g. max_turns=50:750), got {text!r}"
    params_text, colon, updates_text = text.rpartition(":")
    pairs = [pair.partition("=") for pair in params_text.split(",")] if colon else []
    if not pairs or any(not name or not eq or not value for name, eq, value in pairs):
        raise argparse.ArgumentTypeError(usage)
    try:
        params = tuple((name.strip(), number(value)) for name, _, value in pairs)
        return Stage(int(updates_text), params)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(usage) from None


def number(text: str) -> int | float:
    """An int if ``text`` spells one, else a float (ValueError if neither)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def env_id_of(text: str) -> str:
    """argparse type: a registered env id (else the error names the closest ids)."""
    try:
        spec(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def cmd_list(_: argparse.Namespace) -> int:
    """Print every registered id with its configuration."""
    for env_id in list_envs():
        kwargs = ", ".join(f"{k}={v}" for k, v in spec(env_id).kwargs.items())
        print(f"{env_id:45s} {kwargs}")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """Play one episode in the terminal with GEM's exact text; at the end, say that
    the game has ended and why (the last message's name and the flags)."""
    from gemjax.gem import make

    agent = load_agent(args.agent, args.env_id) if args.agent else None
    env = make(args.env_id, seed=args.seed)
    obs, info = env.reset(seed=args.seed)
    print(obs)
    history = [obs]
    terminated = truncated = False
    while not (terminated or truncated):
        if "suffix" in info:  # GEM's Mastermind resets without one
            print(info["suffix"])
        if agent is None:
            try:
                action = input("> ")
            except EOFError:
                print()
                return 0
        else:
            action = agent_turn(agent, history, info)
        obs, reward, terminated, truncated, info = env.step(action)
        history.append(obs)
        print(obs)
        print(f"[reward {reward}, terminated {terminated}, truncated {truncated}]")
    ending = "truncated at the turn limit" if truncated else "terminated"
    print(f"The game has ended ({env.last_message.replace('_', ' ')}; {ending}).")
    return 0


def load_agent(run_dir: str, env_id: str) -> Any:
    """The greedy :class:`~gemjax.train.token_agent.HostAgent` of a token agent's
    run directory, which must have been trained on ``env_id``."""
    from gemjax.train.host import load_token_run
    from gemjax.train.token_agent import HostAgent

    with user_input():
        trainer, state = load_token_run(Path(run_dir))
    if trainer.config.env_id != env_id:
        raise UsageError(f"--agent {run_dir} was trained on {trainer.config.env_id}, not {env_id}")
    agent = HostAgent(trainer.rollout, state.params)
    agent.reset(1)
    return agent


def agent_turn(agent: Any, history: list[str], info: dict[str, Any]) -> str:
    """The agent's response to GEM's ``concat`` observation of ``history``, its
    text printed as it is generated."""
    from gemjax.train.token_agent import INVALID_ACTION

    concat = "".join(o if o.endswith("\n") else o + "\n" for o in history)
    print("> ", end="", flush=True)
    pieces = []
    for piece in agent.stream(concat + info.get("suffix", "")):
        print(piece, end="", flush=True)
        pieces.append(piece)
    print()
    text = "".join(pieces)
    return INVALID_ACTION if text.endswith(INVALID_ACTION) else text


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

    if args.json is not None and not args.json.strip():
        raise UsageError("--json must name a file, got an empty string")
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
    overrides: dict[str, Any] = {
        "env_id": args.env,
        "algo": args.algo,
        "gamma": args.gamma,
        "num_updates": args.updates,
        "num_episodes": args.episodes,
        "num_transitions": args.transitions,
        "horizon": args.horizon,
        "group_size": args.group_size,
        "grpo_score": args.grpo_score,
        "torso": args.torso,
        "hidden": tuple(args.hidden) if args.hidden else None,
        "learning_rate": args.lr,
        "lr_schedule": args.lr_schedule,
        "ent_coef": args.ent_coef,
        "clip_eps": args.clip_eps if args.clip_eps is not None else (0.2 if ppo else None),
        "update_epochs": args.epochs if args.epochs is not None else (4 if ppo else None),
        "num_minibatches": (
            args.minibatches if args.minibatches is not None else (4 if ppo else None)
        ),
        "head": args.head,
        "mask_invalid": args.mask_invalid,
        "mask_format_errors": args.mask_format_errors,
        "curriculum": tuple(args.curriculum) if args.curriculum else None,
        "eval_every": args.eval_every,
        "eval_episodes": args.eval_episodes,
    }
    with user_input(TRAIN_FLAGS):
        config = dataclasses.replace(
            TrainConfig(), **{k: v for k, v in overrides.items() if v is not None}
        )
        if args.transitions is None:
            config = fit_default_transitions(config)
    return config


def fit_default_transitions(config: TrainConfig) -> TrainConfig:
    """``config`` learning on every turn when a rollout holds fewer turns than the
    default ``num_transitions`` (GuessTheNumber-hard: 256 episodes x 7 turns), so
    the defaults train every registered id."""
    from gemjax.registry import make
    from gemjax.train.trainer import horizon_of

    turns = config.num_episodes * horizon_of(config, make(config.env_id))
    if config.num_transitions is not None and config.num_transitions > turns:
        return dataclasses.replace(config, num_transitions=None)
    return config


MLP_FLAGS: tuple[str, ...] = ("hidden", "transitions", "minibatches", "mask_invalid")
MLP_FLAGS += ("grpo_score", "lr_schedule", "head", "mask_format_errors", "torso")
TOKEN_FLAGS = (
    "tokenizer",
    "warmup",
    "context",
    "response_tokens",
    "width",
    "layers",
    "no_chat",
    "replay_episodes",
    "auto_reset",
)
LLM_FLAGS = ("model", "dtype", "lora_rank", "lora_alpha")
TINY_LM_FLAGS = ("tokenizer", "width", "layers")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _refuse_flags(args: argparse.Namespace, names: Sequence[str], policy: str) -> None:
    for name in names:
        if getattr(args, name) not in (None, False):
            raise UsageError(f"{_flag(name)} does not apply to --policy {policy}")


def token_train_config(args: argparse.Namespace) -> Any:
    """The :class:`~gemjax.train.token_trainer.TokenTrainConfig` of ``gemjax train
    --policy token``'s arguments (unset options take its defaults; the horizon is
    at most the env's turn limit)."""
    from gemjax.registry import make
    from gemjax.train.token_trainer import TokenTrainConfig

    _refuse_flags(args, MLP_FLAGS, "token")
    defaults = TokenTrainConfig()
    with user_input(TRAIN_FLAGS):
        max_turns = getattr(make(args.env).default_params, "max_turns", None)
        horizon = args.horizon or min(defaults.loop.horizon, int(max_turns or 10**9))
        loop = dataclasses.replace(
            defaults.loop,
            horizon=horizon,
            **{
                name: value
                for name, value in (
                    ("context", args.context),
                    ("response_tokens", args.response_tokens),
                    ("chat", False if args.no_chat else None),
                    ("auto_reset", None if args.auto_reset is None else True),
                    ("steps", args.auto_reset),
                )
                if value is not None
            },
        )
        model = dataclasses.replace(
            defaults.model,
            **{k: v for k, v in (("width", args.width), ("layers", args.layers)) if v},
        )
        overrides = {
            "env_id": args.env,
            "tokenizer": args.tokenizer,
            "algo": args.algo,
            "gamma": args.gamma,
            "num_updates": args.updates,
            "num_episodes": args.episodes,
            "warmup_updates": args.warmup,
            "group_size": args.group_size,
            "learning_rate": args.lr,
            "clip_eps": args.clip_eps,
            "ent_coef": args.ent_coef,
            "update_epochs": args.epochs,
            "eval_every": args.eval_every,
            "eval_episodes": args.eval_episodes,
            "replay_episodes": args.replay_episodes,
            "curriculum": tuple(args.curriculum) if args.curriculum else None,
        }
        return dataclasses.replace(
            defaults,
            model=model,
            loop=loop,
            **{k: v for k, v in overrides.items() if v is not None},
        )


def cmd_train_token(args: argparse.Namespace) -> int:
    """``gemjax train --policy token``: warm-up and RL of a token agent."""
    config = token_train_config(args)
    from gemjax.train.host import load_token_run, run_token

    guard = functools.partial(user_input, TRAIN_FLAGS)
    return train_token_agent(args, config, run_token, load_token_run, guard)


def train_token_agent(
    args: argparse.Namespace,
    config: Any,
    run: Callable[..., Any],
    load: Callable[[Path], tuple[Any, Any]],
    guard: Callable[[], contextlib.AbstractContextManager[None]],
) -> int:
    """Train a token or pretrained agent (``run(config, out, ...)``, within
    ``guard()``, which turns bad input into usage errors), load its last checkpoint
    (``load(out)``), print a greedy episode played through :mod:`gemjax.gem` and the
    final row's greedy success, mean turns and format errors (greedy and sampled)."""
    with guard():
        result = run(
            config,
            Path(args.out),
            seed=args.seed,
            checkpoint_every=args.checkpoint_every,
            progress=not args.no_progress,
        )
        trainer, state = load(Path(args.out))
    from gemjax.train.token_agent import host_transcript

    print("A greedy episode of the trained agent, played through gemjax.gem:\n")
    print(host_transcript(trainer.rollout, state.params, config.env_id, args.seed))
    print()
    last = result.records[-1]
    print(
        f"step {last['update']}: greedy success {last['success']:.3f}, "
        f"mean turns {last['mean_turns']:.2f}, format errors {last['format_error_rate']:.3f} "
        f"(sampled {last['sampled_format_error_rate']:.3f}); "
        f"compile {result.compile_seconds:.1f} s; wall {last['wall_s']:.1f} s"
    )
    return 0


@contextlib.contextmanager
def model_folder_input() -> Iterator[None]:
    """:func:`user_input`, and a missing model file or tunix (``gemjax[llm]``) as a
    :class:`UsageError` too."""
    try:
        with user_input(TRAIN_FLAGS):
            yield
    except (FileNotFoundError, ImportError) as error:
        raise UsageError(str(error)) from error


def llm_train_config(args: argparse.Namespace) -> Any:
    """The :class:`~gemjax.train.llm.PretrainedTrainConfig` of ``gemjax train
    --policy llm``: the token options (the format warm-up off unless ``--warmup``
    asks for it), ``--model`` and ``--dtype``."""
    from gemjax.train.llm import PretrainedTrainConfig, resolve_dtype

    _refuse_flags(args, TINY_LM_FLAGS, "llm")
    if not args.model:
        raise UsageError("--policy llm needs --model FOLDER (a local Hugging Face model folder)")
    if args.warmup is None:
        args.warmup = 0
    token = token_train_config(args)
    with user_input(TRAIN_FLAGS):
        fields = {f.name: getattr(token, f.name) for f in dataclasses.fields(token)}
        return PretrainedTrainConfig(
            **fields,
            model_folder=str(Path(args.model).expanduser().absolute()),
            dtype=resolve_dtype(args.dtype or "auto"),
            lora_rank=args.lora_rank,
            lora_alpha=args.lora_alpha,
        )


def cmd_train_llm(args: argparse.Namespace) -> int:
    """``gemjax train --policy llm``: RL (and an optional format warm-up) of a
    pretrained model from a local Hugging Face folder."""
    config = llm_train_config(args)
    from gemjax.train.llm import load_pretrained_run, run_pretrained

    return train_token_agent(args, config, run_pretrained, load_pretrained_run, model_folder_input)


def cmd_eval(args: argparse.Namespace) -> int:
    """``gemjax eval``: a pretrained model plays each id's episodes on device; one
    row per id (success, mean turns, format errors, context cuts)."""
    from gemjax.registry import make
    from gemjax.train.llm import DTYPES, evaluate_pretrained, load_pretrained, resolve_dtype
    from gemjax.train.token_rollout import TokenLoopConfig

    if args.json is not None and not args.json.strip():
        raise UsageError("--json must name a file, got an empty string")
    with model_folder_input():
        dtype = resolve_dtype(args.dtype)
        policy, tokenizer = load_pretrained(args.model, dtype=DTYPES[dtype])
    rows = []
    print(
        f"{'env id':45s} {'episodes':>8s} {'success':>8s} {'turns':>6s} "
        f"{'format err':>10s} {'cut':>5s}"
    )
    for env_id in args.env:
        with model_folder_input():
            max_turns = getattr(make(env_id).default_params, "max_turns", None)
            options = {
                "context": args.context,
                "response_tokens": args.response_tokens,
                "temperature": args.temperature,
            }
            loop = TokenLoopConfig(
                horizon=args.horizon or int(max_turns or 12),
                chat=not args.no_chat,
                **{name: value for name, value in options.items() if value is not None},
            )
            result = evaluate_pretrained(
                policy,
                tokenizer,
                env_id,
                args.episodes,
                loop,
                seed=args.seed,
                greedy=not args.sample,
                batch=args.batch,
            )
        rows.append(
            {**result.as_dict(), "model": args.model, "dtype": dtype, "greedy": not args.sample}
        )
        print(
            f"{env_id:45s} {result.episodes:8d} {result.success:8.3f} {result.mean_turns:6.2f} "
            f"{result.format_error_rate:10.3f} {result.context_cut:5.2f}"
        )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def cmd_export_adapters(args: argparse.Namespace) -> int:
    """``gemjax export-adapters RUN_DIR OUT_DIR``: a ``--policy llm --lora-rank R``
    run's LoRA adapters in PEFT's layout."""
    if not args.out_dir.strip():
        raise UsageError("OUT_DIR must name a directory, got an empty string")
    from gemjax.train.llm import export_run_adapters

    with model_folder_input():
        written = export_run_adapters(Path(args.run_dir), Path(args.out_dir))
    for path in written:
        print(path)
    return 0


def add_eval_parser(commands: argparse._SubParsersAction) -> None:
    """The ``eval`` subcommand (unset loop options take ``TokenLoopConfig``'s defaults)."""
    evaluate = commands.add_parser(
        "eval", help="play a pretrained model (a local Hugging Face folder) on games, on device"
    )
    evaluate.add_argument("--model", required=True, help="Hugging Face model folder")
    evaluate.add_argument(
        "--env", type=env_id_of, action="append", required=True, help="env id (repeatable)"
    )
    evaluate.add_argument("--episodes", type=positive, default=64, help="episodes per id")
    evaluate.add_argument("--batch", type=positive, default=64, help="episodes per device call")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--sample", action="store_true", help="sample (default: greedy)")
    evaluate.add_argument("--temperature", type=float, help="sampling temperature (--sample)")
    evaluate.add_argument("--horizon", type=positive, help="turns at most (default: max_turns)")
    evaluate.add_argument("--context", type=positive, help="KV-cache slots per episode")
    evaluate.add_argument("--response-tokens", type=positive, help="most tokens of a response")
    evaluate.add_argument("--no-chat", action="store_true", help="plain concat prompts")
    evaluate.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto")
    evaluate.add_argument("--json", help="also write the rows to this JSON file")
    evaluate.set_defaults(run=cmd_eval)


def cmd_train(args: argparse.Namespace) -> int:
    """Train a policy on a game; write metrics, a plot and checkpoints to ``--out``."""
    import jax

    if not args.out.strip():
        raise UsageError("--out must name a run directory, got an empty string")
    if args.policy == "llm":
        return cmd_train_llm(args)
    _refuse_flags(args, LLM_FLAGS, args.policy)
    if args.policy == "token":
        return cmd_train_token(args)
    _refuse_flags(args, TOKEN_FLAGS, "mlp")
    config = train_config(args)
    if args.distributed:
        jax.distributed.initialize()
    from gemjax.train.host import device_mesh, run

    with user_input(TRAIN_FLAGS):
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
    outcomes = "".join(f", {name} {last[name]:.3f}" for name in env_outcomes(trainer.env))
    print(
        f"update {last['update']}: greedy success {last['success']:.3f}{outcomes}, "
        f"mean turns {last['mean_turns']:.2f}{reference}; "
        f"compile {result.compile_seconds:.1f} s, "
        f"{sps} env steps/s (train step incl. update); wall {last['wall_s']:.1f} s"
    )
    return 0


def env_outcomes(env: Environment) -> tuple[str, ...]:
    """The names of a game's outcomes beside GEM's success (Minesweeper's
    ``cleared``; :class:`~gemjax.core.EpisodeOutcomes`), or none."""
    import jax

    if not isinstance(env, EpisodeOutcomes):
        return ()
    state, _ = env.reset(jax.random.key(0), env.default_params)
    return tuple(env.outcomes(state))


def add_train_parser(commands: argparse._SubParsersAction) -> None:
    """The ``train`` subcommand (unset options take :class:`TrainConfig`'s defaults)."""
    train = commands.add_parser("train", help="train a policy on a game (on device)")
    train.add_argument("--env", type=env_id_of, default=TrainConfig.env_id, help="env id")
    train.add_argument("--algo", choices=ALGOS, default=TrainConfig.algo)
    train.add_argument("--gamma", type=float, default=TrainConfig.gamma)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--out",
        required=True,
        help="run directory (resumed if present, with the same settings; --updates may grow)",
    )
    train.add_argument("--updates", type=positive, help="total updates")
    train.add_argument("--episodes", type=positive, help="episodes per update")
    train.add_argument(
        "--transitions",
        type=positive,
        help=f"learning transitions per update (default {TrainConfig.num_transitions}, or "
        "every turn when fewer)",
    )
    train.add_argument("--horizon", type=positive, help="rollout turns (default: max_turns)")
    train.add_argument("--group-size", type=positive, help="GRPO episodes per initial state")
    train.add_argument(
        "--grpo-score",
        choices=GRPO_SCORES,
        help="GRPO's episode score: discounted return (default) or gem (undiscounted, then ReBN)",
    )
    train.add_argument(
        "--torso",
        choices=TORSOS,
        help="policy body: mlp (default) or conv (board games whose moves name a cell; "
        "needs --head joint)",
    )
    train.add_argument(
        "--hidden", type=positive, nargs="+", help="MLP hidden widths (conv: channels per layer)"
    )
    train.add_argument("--lr", type=float, help="AdamW learning rate")
    train.add_argument(
        "--lr-schedule", choices=LR_SCHEDULES, help="constant (default) or linear decay to 0"
    )
    train.add_argument(
        "--ent-coef",
        type=float,
        help="entropy bonus (mlp: of each turn's action; token, llm: at each response token)",
    )
    train.add_argument("--clip-eps", type=float, help="PPO-style ratio clipping")
    train.add_argument("--epochs", type=positive, help="passes over each rollout")
    train.add_argument("--minibatches", type=positive, help="minibatches per pass")
    train.add_argument(
        "--head", choices=HEAD_KINDS, help="action distribution: factored (default) or joint"
    )
    train.add_argument("--mask-invalid", action="store_true", help="mask invalid actions")
    train.add_argument(
        "--mask-format-errors", action="store_true", help="never play the format-error action"
    )
    train.add_argument(
        "--curriculum",
        type=curriculum_stage,
        nargs="+",
        metavar="STAGE",
        help="stages before the game: field=value[,field=value]:updates, the game's params "
        "changed for that many updates (e.g. max_turns=50:750)",
    )
    train.add_argument("--eval-every", type=positive, help="updates per chunk and evaluation")
    train.add_argument("--eval-episodes", type=positive, help="greedy evaluation episodes")
    train.add_argument(
        "--checkpoint-every", type=positive, default=10, help="chunks per checkpoint"
    )
    train.add_argument(
        "--policy",
        choices=("mlp", "token", "llm"),
        default="mlp",
        help="mlp: structured observations; token: a transformer reading and writing GEM's "
        "text; llm: a pretrained model (--model) doing the same",
    )
    token = train.add_argument_group("token policy (--policy token)")
    token.add_argument("--tokenizer", choices=TOKENIZERS, help="default qwen3")
    token.add_argument("--warmup", type=non_negative, help="format warm-up steps before RL")
    token.add_argument("--context", type=positive, help="KV-cache slots per episode")
    token.add_argument("--response-tokens", type=positive, help="most tokens of a response")
    token.add_argument("--width", type=positive, help="transformer width")
    token.add_argument("--layers", type=positive, help="transformer blocks")
    token.add_argument(
        "--no-chat", action="store_true", help="plain concat prompts (no qwen3_game)"
    )
    token.add_argument(
        "--replay-episodes",
        type=positive,
        help="episodes the learner replays at once (memory grows with the square of --context)",
    )
    token.add_argument(
        "--auto-reset",
        type=positive,
        metavar="STEPS",
        help="each lane plays STEPS turns per update, starting a new episode as soon as one "
        "ends (learning from the episodes that end; not with --algo grpo)",
    )
    llm = train.add_argument_group("pretrained model (--policy llm; token options apply)")
    llm.add_argument("--model", help="a local Hugging Face folder (Qwen3, Qwen2.5)")
    llm.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16"),
        help="weights and compute (auto: bfloat16 on an accelerator, float32 on CPU)",
    )
    llm.add_argument("--lora-rank", type=positive, help="train LoRA adapters of this rank only")
    llm.add_argument("--lora-alpha", type=float, help="LoRA scale numerator (default 2 x rank)")
    train.add_argument("--distributed", action="store_true", help="jax.distributed (multi-host)")
    train.add_argument(
        "--no-progress", action="store_true", help="no progress bar (never shown off a terminal)"
    )
    train.set_defaults(run=cmd_train)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gemjax`` command."""
    parser = Parser(prog="gemjax", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list registered env ids").set_defaults(run=cmd_list)
    play = commands.add_parser("play", help="play a game in the terminal")
    play.add_argument("env_id", type=env_id_of)
    play.add_argument("--seed", type=int, default=None)
    play.add_argument("--agent", help="a token agent's run directory (gemjax train --policy token)")
    play.set_defaults(run=cmd_play)
    bench = commands.add_parser("bench", help="kernel throughput of batched random rollouts")
    bench.add_argument(
        "--env", type=env_id_of, action="append", help="env id (repeatable; default: all)"
    )
    bench.add_argument("--batch-sizes", type=positive, nargs="+", default=[4096])
    bench.add_argument("--steps", type=positive, default=200, help="scan steps per rollout")
    bench.add_argument("--json", help="also write the rows to this JSON file")
    bench.set_defaults(run=cmd_bench)
    add_train_parser(commands)
    add_eval_parser(commands)
    export = commands.add_parser(
        "export-adapters",
        help="write a --policy llm --lora-rank run's adapters as a PEFT LoRA adapter",
    )
    export.add_argument("run_dir", help="the run's --out directory")
    export.add_argument("out_dir", help="where adapter_model.safetensors and its config go")
    export.set_defaults(run=cmd_export_adapters)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gemjax`` command: the command's exit status (2 for a
    usage error, printed as one line on stderr; 130 after Ctrl-C, quietly)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # argparse: --help, or a one-line usage error
        return int(done.code or 0)
    try:
        return args.run(args)
    except UsageError as error:
        if args.debug:
            traceback.print_exc()
        print(f"gemjax {args.command}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
