"""Curriculum stages: their checks, the params a stage plays while evaluation plays
the game, a run across a stage boundary (records, env steps, exact resume), the CLI."""

import json

import jax
import numpy as np
import pytest

from gemjax import cli
from gemjax.train import Stage, TrainConfig, make_train
from gemjax.train.host import run

EASY_TURNS = 4  # GuessTheNumber-v0-easy: 1..10 in 4 turns
LONG = Stage(2, (("max_turns", 20),))


def test_stage_checks():
    with pytest.raises(ValueError, match="stage updates must be >= 1"):
        Stage(0, (("max_turns", 20),))
    with pytest.raises(TypeError, match="non-empty tuple"):
        Stage(2, ())
    with pytest.raises(TypeError, match="pairs"):
        Stage(2, ("max_turns",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a number"):
        Stage(2, (("max_turns", "20"),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="each param once"):
        Stage(2, (("max_turns", 20), ("max_turns", 30)))
    assert (
        str(Stage(750, (("max_turns", 50), ("min_number", 1)))) == "max_turns=50,min_number=1:750"
    )


def test_config_checks_the_curriculum(tiny):
    with pytest.raises(ValueError, match="multiple of eval_every"):
        tiny(curriculum=(Stage(3, (("max_turns", 20),)),))
    with pytest.raises(ValueError, match="the game itself needs some"):
        tiny(curriculum=(LONG, LONG))  # 4 of 4 updates
    with pytest.raises(TypeError, match="tuple of Stage"):
        tiny(curriculum=[LONG])


@pytest.mark.parametrize(
    "params, message",
    [
        ((("turns", 20),), "no scalar field 'turns'"),
        ((("rewards", 1),), "no scalar field 'rewards'"),
        ((("max_turns", 2.5),), "takes an integer"),
        ((("max_turns", 0),), "max_turns"),
        ((("max_number", 99),), "capacity"),
    ],
)
def test_stage_params_that_do_not_fit_the_game_are_refused(tiny, params, message):
    with pytest.raises(ValueError, match=message):
        make_train(tiny(curriculum=(Stage(2, params),)))


def test_a_random_id_refuses_stages(tiny):
    """A -random id draws its configuration at every reset: a stage would do nothing."""
    with pytest.raises(ValueError, match="-random id"):
        make_train(tiny(env_id="game:GuessTheNumber-v0-random", curriculum=(LONG,)))


def test_a_stage_plays_its_params_while_evaluation_plays_the_game(tiny):
    trainer = make_train(tiny(curriculum=(LONG,)))
    (stage_updates, stage), (game_updates, game) = trainer.stages()
    assert (stage_updates, game_updates) == (2, 2) and game is trainer
    assert stage.horizon == 20 and int(stage.rollout.env_params.max_turns) == 20
    assert trainer.horizon == EASY_TURNS
    keys = jax.random.split(jax.random.key(3), 64)
    params = jax.jit(trainer.init)(jax.random.key(0)).params
    stage_turns = jax.jit(stage.rollout.collect)(params, keys, jax.random.key(4)).valid.sum(0)
    game_turns = jax.jit(game.rollout.collect)(params, keys, jax.random.key(4)).valid.sum(0)
    # An untrained policy misses some targets in 4 turns: the stage plays on past them.
    assert int(stage_turns.max()) > EASY_TURNS >= int(game_turns.max())
    state, metrics = jax.jit(trainer.train)(jax.random.key(0))
    assert int(state.update) == 4 and metrics.eval.mean_turns.shape == (2,)
    assert float(metrics.eval.mean_turns.max()) <= EASY_TURNS  # evaluation: the game
    assert float(metrics.train.episodes.mean_turns[0].max()) > EASY_TURNS  # stage's rollouts


def test_a_run_records_its_stages_and_resumes_past_them(tiny, tmp_path):
    config = tiny(curriculum=(LONG,), num_updates=6)
    straight = run(config, tmp_path / "straight", seed=1, progress=False)
    assert [(r["update"], r["phase"]) for r in straight.records] == [
        (2, "stage 1"),
        (4, "rl"),
        (6, "rl"),
    ]
    episodes = config.num_episodes
    assert [r["env_steps"] for r in straight.records] == [
        2 * episodes * 20,
        2 * episodes * 20 + 2 * episodes * EASY_TURNS,
        2 * episodes * 20 + 4 * episodes * EASY_TURNS,
    ]
    run(tiny(curriculum=(LONG,), num_updates=4), tmp_path / "resumed", seed=1, progress=False)
    resumed = run(config, tmp_path / "resumed", seed=1, progress=False)
    for a, b in zip(
        jax.tree.leaves(resumed.state.params), jax.tree.leaves(straight.state.params), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    timeless = lambda rows: [  # noqa: E731
        {k: v for k, v in r.items() if k not in ("wall_s", "steps_per_second")} for r in rows
    ]
    assert timeless(resumed.records) == timeless(straight.records)
    saved = json.loads((tmp_path / "straight" / "config.json").read_text())
    assert saved["curriculum"] == [{"updates": 2, "params": [["max_turns", 20]]}]


def test_a_resume_with_another_curriculum_is_refused(tiny, tmp_path):
    run(tiny(curriculum=(LONG,)), tmp_path / "run", progress=False)
    other = tiny(curriculum=(Stage(2, (("max_turns", 30),)),), num_updates=6)
    with pytest.raises(ValueError, match="curriculum"):
        run(other, tmp_path / "run", progress=False)


def test_cli_parses_stages():
    assert cli.curriculum_stage("max_turns=50:750") == Stage(750, (("max_turns", 50),))
    two = cli.curriculum_stage("max_turns=20,min_number=2:10")
    assert two == Stage(10, (("max_turns", 20), ("min_number", 2)))
    assert TrainConfig(curriculum=(two,), num_updates=100, eval_every=10).curriculum == (two,)


@pytest.mark.parametrize(
    "stage, message",
    [
        ("max_turns50:750", "must read field=value"),
        ("max_turns=50", "must read field=value"),
        ("max_turns=50:x", "must read field=value"),
        ("max_turns=:750", "must read field=value"),
        ("=3:750", "must read field=value"),
        ("max_turns=50:0", "must read field=value"),
    ],
)
def test_cli_refuses_a_misspelt_stage(stage, message, tmp_path, capsys):
    assert cli.main(["train", "--curriculum", stage, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--curriculum", "turns=50:750"], "no scalar field 'turns'"),
        (["--updates", "1500", "--curriculum", "max_turns=50:1500"], "the game itself needs some"),
        (["--curriculum", "max_turns=50:75"], "--curriculum stage max_turns=50:75 must last"),
        (["--policy", "token", "--curriculum", "max_turns=50:10"], "multiple of --eval-every (20)"),
    ],
)
def test_cli_curriculum_misuse_is_a_usage_error(argv, message, tmp_path, capsys):
    assert cli.main(["train", *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
