"""A token agent's run directory: exact resume, ``gemjax train --policy token`` and
``gemjax play --agent``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gemjax.cli import build_parser, main, token_train_config
from gemjax.train.host import RunMismatch, run_settings, run_token

ENV_ID = "game:GuessTheNumber-v0-easy"
# The CLI test's flags below ask for the run of ``tiny_token()`` but for its length:
# the two tests compile the same programs, and run in one worker (xdist_group) to
# share them through its compilation cache.
CLI_FLAGS = ["--env", ENV_ID, "--updates", "1", "--warmup", "1", "--eval-every", "1"]
CLI_FLAGS += ["--episodes", "4", "--eval-episodes", "4", "--width", "16", "--layers", "1"]
CLI_FLAGS += ["--context", "320", "--response-tokens", "6", "--horizon", "2"]
TIMING = ("wall_s", "steps_per_second")
LENGTHS = ("num_updates", "warmup_updates")


def _rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


@pytest.mark.slow
@pytest.mark.xdist_group("token_cli")
def test_a_resumed_token_run_equals_an_uninterrupted_one(tiny_token, tmp_path):
    config = tiny_token()
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    run_token(config, whole, checkpoint_every=1, progress=False)
    run_token(dataclasses.replace(config, num_updates=1), parts, checkpoint_every=1, progress=False)
    result = run_token(config, parts, checkpoint_every=1, progress=False)
    assert _rows(parts) == _rows(whole)
    assert [r["phase"] for r in result.records] == ["warmup", "warmup", "rl", "rl"]
    assert all(r["format_error_rate"] is not None for r in result.records)
    warmup = [r for r in result.records if r["phase"] == "warmup"]
    # a warm-up step plays forced random well-formed actions; the sampled evaluation
    # shows the barely trained model's own format errors
    assert all(r["train_format_error_rate"] == 0.0 for r in warmup)
    assert all(r["sampled_format_error_rate"] > 0.5 for r in warmup)
    with pytest.raises(RunMismatch, match="gamma"):
        run_token(dataclasses.replace(config, gamma=0.5), parts, progress=False)


@pytest.mark.slow
@pytest.mark.xdist_group("token_cli")
def test_cli_trains_a_token_agent_and_play_watches_it(tiny_token, tmp_path, capsys, monkeypatch):
    out = tmp_path / "agent"
    assert main(["train", "--policy", "token", *CLI_FLAGS, "--out", str(out)]) == 0
    settings = json.loads((out / "config.json").read_text())
    expected = run_settings(tiny_token(), seed=0)
    for name in LENGTHS:
        settings.pop(name), expected.pop(name)
    assert settings == expected
    printed = capsys.readouterr().out
    assert "A greedy episode of the trained agent" in printed
    assert "format errors" in printed
    assert main(["play", ENV_ID, "--agent", str(out), "--seed", "0"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("> ") >= 1
    assert "The game has ended" in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--policy", "token", "--hidden", "8"], "--hidden does not apply"),
        (["train", "--tokenizer", "bytes"], "--tokenizer does not apply to --policy mlp"),
        (["train", "--replay-episodes", "4"], "--replay-episodes does not apply to --policy mlp"),
        (["train", "--policy", "token", "--episodes", "6", "--replay-episodes", "4"], "divide"),
        (["train", "--policy", "token", "--algo", "ppo"], "algo must be one of"),
        (["train", "--auto-reset", "8"], "--auto-reset does not apply to --policy mlp"),
        (["train", "--policy", "token", "--algo", "grpo", "--auto-reset", "8"], "grpo scores"),
        (["train", "--policy", "token", "--auto-reset", "0"], "--auto-reset"),
        (["train", "--policy", "token", "--head", "joint"], "--head does not apply"),
        (["train", "--policy", "token", "--ent-coef", "-1"], "--ent-coef must be a finite"),
        (["train", "--mask-format-errors", "--policy", "token"], "--mask-format-errors does not"),
        (["train", "--head", "joint", "--env", "game:Wordle-v0-easy"], "use the factored head"),
    ],
)
def test_token_flag_misuse_is_a_usage_error(argv, message, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_token_flags_reach_the_config():
    argv = ["train", "--policy", "token", "--ent-coef", "0.01", "--lr", "0.003", "--out", "x"]
    config = token_train_config(build_parser().parse_args(argv))
    assert (config.ent_coef, config.learning_rate) == (0.01, 0.003)
    assert token_train_config(build_parser().parse_args(argv[:3] + argv[7:])).ent_coef == 0.0


def test_play_agent_needs_a_token_run(tmp_path, capsys):
    assert main(["play", ENV_ID, "--agent", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err
