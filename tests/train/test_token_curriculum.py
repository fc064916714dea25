"""A token agent's curriculum: its checks, the params each stage's rollouts and
warm-up play while evaluation plays the game, a run across a stage boundary
(records, exact resume, the run directory read back), and the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gemjax.cli import main
from gemjax.train import Stage
from gemjax.train.host import RunMismatch, load_token_run, run_token
from gemjax.train.token_trainer import make_token_train, warmup_table

ENV_ID = "game:GuessTheNumber-v0-easy"  # 1..10 in 4 turns (tiny_token's game)
SMALL_RANGE = Stage(1, (("max_number", 3),))
ONE_TURN = Stage(1, (("max_turns", 1),))
TIMING = ("wall_s", "steps_per_second")


def test_config_checks_the_curriculum(tiny_token):
    base = tiny_token(warmup_updates=1)
    with pytest.raises(ValueError, match="multiple of eval_every"):
        dataclasses.replace(
            base, eval_every=2, num_updates=4, warmup_updates=2, curriculum=(SMALL_RANGE,)
        )
    with pytest.raises(ValueError, match="the game itself needs some"):
        dataclasses.replace(base, curriculum=(SMALL_RANGE, ONE_TURN))
    with pytest.raises(TypeError, match="tuple of Stage"):
        dataclasses.replace(base, curriculum=[SMALL_RANGE])


def test_stages_play_their_params_and_evaluation_plays_the_game(tiny_token):
    base = tiny_token(warmup_updates=1)
    trainer = make_token_train(dataclasses.replace(base, curriculum=(SMALL_RANGE,)))
    (updates, stage), (left, game) = trainer.stages()
    assert (updates, left) == (1, 1) and game is trainer
    assert int(stage.rollout.env_params.max_number) == 3
    assert int(game.rollout.env_params.max_number) == 10
    assert stage.eval_rollout is trainer.rollout and game.eval_rollout is None
    # the warm-up (on the 1..3 stage) writes the random well-formed actions of the
    # stage and of the game: a table of the stage's alone never writes 4..10
    tokenizer = trainer.rollout.bridge.tokenizer
    table = trainer.table
    guesses = {
        tokenizer.decode(ids[:length]) for ids, length in zip(table.ids, table.length, strict=True)
    }
    assert guesses == {f"\\boxed{{{n}}}" for n in range(1, 11)}
    assert stage.table is table
    stage_alone = warmup_table([stage.rollout])
    assert len(stage_alone.ids) == 3
    plain = make_token_train(base)
    np.testing.assert_array_equal(plain.table.ids, table.ids)
    assert plain.stages() == ((2, plain),)


@pytest.mark.parametrize(
    "params, message",
    [
        ((("turns", 5),), "no scalar field 'turns'"),
        ((("max_number", 2.5),), "takes an integer"),
        ((("max_turns", 0),), "max_turns"),
        ((("max_number", 11),), "capacity"),
    ],
)
def test_stage_params_that_do_not_fit_the_game_are_refused(tiny_token, params, message):
    base = tiny_token(warmup_updates=1)
    with pytest.raises(ValueError, match=message):
        make_token_train(dataclasses.replace(base, curriculum=(Stage(1, params),)))


def test_a_stage_whose_prompt_outgrows_the_context_is_refused(tiny_token):
    """GuessTheNumber's instructions name the turn limit: a stage's reset prompt is
    checked against the context as the game's is (here one token longer than the
    game's, which fills the context)."""
    base = tiny_token(warmup_updates=1)
    longest = make_token_train(base).rollout.reset_prompt_length()
    loop = dataclasses.replace(base.loop, context=longest + base.loop.response_tokens)
    make_token_train(dataclasses.replace(base, loop=loop))  # the game fits
    staged = dataclasses.replace(base, loop=loop, curriculum=(Stage(1, (("max_turns", 20),)),))
    with pytest.raises(ValueError, match=f"the reset prompt takes {longest + 1} tokens"):
        make_token_train(staged)


def _rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


@pytest.mark.slow
@pytest.mark.xdist_group("token_curriculum")
def test_a_run_across_a_stage_resumes_exactly_and_reads_back(tiny_token, tmp_path):
    """A one-turn stage, then the game: the stage's sampled episodes last one turn,
    the game's greedy evaluation plays its own; a run stopped after the stage and
    resumed equals the straight run; the run directory reads back its curriculum."""
    base = tiny_token(warmup_updates=1)
    config = dataclasses.replace(base, num_updates=3, curriculum=(ONE_TURN,))
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    result = run_token(config, whole, checkpoint_every=1, progress=False)
    assert [r["phase"] for r in result.records] == ["warmup", "stage 1", "rl", "rl"]
    warmup_row, stage_row, game_row = result.records[:3]
    assert stage_row["train_mean_turns"] == 1.0
    assert stage_row["env_steps"] - warmup_row["env_steps"] == 4 * 2  # 4 lanes, horizon 2
    assert game_row["env_steps"] - stage_row["env_steps"] == 4 * 2
    run_token(dataclasses.replace(config, num_updates=2), parts, checkpoint_every=1, progress=False)
    run_token(config, parts, checkpoint_every=1, progress=False)
    assert _rows(parts) == _rows(whole)
    trainer, state = load_token_run(whole)
    assert trainer.config.curriculum == (ONE_TURN,) and int(state.update) == 3
    other = dataclasses.replace(config, curriculum=(SMALL_RANGE,))
    with pytest.raises(RunMismatch, match="curriculum"):
        run_token(other, whole, progress=False)
    assert np.isfinite(result.records[-1]["loss"])


def test_cli_token_curriculum_misuse_is_a_usage_error(tmp_path, capsys):
    argv = ["train", "--policy", "token", "--env", ENV_ID, "--curriculum", "max_number=3:10"]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--curriculum stage max_number=3:10 must last a multiple of --eval-every (20)" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
