"""The trainer end to end: every algorithm updates, exact resume, the CLI, learning."""

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gemjax import cli, make
from gemjax.train import ALGOS, make_train
from gemjax.train.host import RunMismatch, check_resume, fresh_shapes, run, run_settings
from gemjax.train.play import binary_search_mean_turns, binary_search_optimum


def leaves_equal(a, b) -> bool:
    return all(
        bool(jnp.array_equal(x, y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def timeless(rows: list[dict]) -> list[dict]:
    """JSONL rows without their timing fields."""
    return [{k: v for k, v in r.items() if k not in ("wall_s", "steps_per_second")} for r in rows]


@pytest.mark.parametrize(
    "algo", [pytest.param(a, marks=() if a == "rebn" else pytest.mark.slow) for a in ALGOS]
)
def test_every_algorithm_changes_the_policy_with_finite_losses(tiny, algo):
    config = tiny(algo=algo, clip_eps=0.2 if algo == "ppo" else None, num_minibatches=2)
    trainer = make_train(config)
    state = trainer.init(jax.random.key(0))
    new_state, metrics = jax.jit(trainer.update)(state)
    assert int(new_state.update) == 1
    assert not leaves_equal(new_state.params["params"]["actor"], state.params["params"]["actor"])
    assert np.isfinite(float(metrics.loss)) and np.isfinite(float(metrics.entropy))
    assert 0.0 <= float(metrics.episodes.success) <= 1.0
    assert 1.0 <= float(metrics.episodes.mean_turns) <= 4.0
    if algo == "ppo":
        assert float(metrics.value_loss) > 0.0
        assert "critic" in new_state.params["params"]
    else:
        assert "critic" not in new_state.params["params"]


def test_gem_grpo_trains_and_its_score_is_grpo_only(tiny):
    config = tiny(algo="grpo", group_size=4, grpo_score="gem")
    trainer = make_train(config)
    state = trainer.init(jax.random.key(0))
    new_state, metrics = jax.jit(trainer.update)(state)
    assert not leaves_equal(new_state.params, state.params)
    assert np.isfinite(float(metrics.loss))
    with pytest.raises(ValueError, match="grpo_score applies to algo 'grpo' only"):
        tiny(grpo_score="gem")
    with pytest.raises(ValueError, match="grpo_score must be one of"):
        tiny(algo="grpo", grpo_score="undiscounted")


def test_one_compiled_train_serves_every_learning_rate(tiny):
    config = tiny(learning_rate=2e-3)
    swept = make_train(config, learning_rate_in_state=True)
    train = jax.jit(swept.train)
    key = jax.random.key(5)
    at_default = train(key, 2e-3)[1]
    fixed = jax.jit(make_train(config).train)(key)[1]
    np.testing.assert_allclose(at_default.train.loss, fixed.train.loss, rtol=1e-3, atol=1e-6)
    faster = train(key, 3e-2)[1]
    assert train._cache_size() == 1  # the second rate reused the compiled program
    assert not np.allclose(faster.train.loss[-1], at_default.train.loss[-1])
    with pytest.raises(ValueError, match="learning_rate_in_state=True"):
        make_train(config).init(key, 1e-3)


def test_a_linear_schedule_decays_the_rate_to_zero_over_the_run(tiny):
    import optax

    from gemjax.train.trainer import make_optimizer

    config = tiny(lr_schedule="linear", num_updates=4, update_epochs=2, num_minibatches=2)
    optimizer = make_optimizer(config)
    params = {"w": jnp.zeros(3)}
    state = optimizer.init(params)
    sizes = []
    for _ in range(4 * 2 * 2 + 1):  # every optimiser step of the run, then one more
        updates, state = optimizer.update({"w": jnp.ones(3)}, state, params)
        params = optax.apply_updates(params, updates)
        sizes.append(float(jnp.abs(updates["w"][0])))
    assert sizes[0] == pytest.approx(config.learning_rate, rel=1e-3)
    assert sizes[8] == pytest.approx(config.learning_rate / 2, rel=1e-2)
    assert sizes[-1] == 0.0
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        tiny(lr_schedule="cosine")
    with pytest.raises(ValueError, match="needs lr_schedule 'constant'"):
        make_train(config, learning_rate_in_state=True)


def test_grpo_groups_share_their_initial_state(tiny):
    trainer = make_train(tiny(algo="grpo", group_size=4))
    keys = trainer._reset_keys(jax.random.key(3))
    targets = jax.vmap(trainer.env.reset, in_axes=(0, None))(keys, trainer.rollout.env_params)[
        0
    ].target.reshape(4, 4)
    assert bool(jnp.all(targets == targets[:, :1]))
    assert len(set(np.asarray(targets[:, 0]).tolist())) > 1


@pytest.mark.slow
def test_resume_equals_training_straight(tiny, tmp_path):
    half, full = tiny(num_updates=2), tiny(num_updates=4)
    first = run(half, tmp_path / "resumed", seed=1, progress=False)
    assert int(first.state.update) == 2
    resumed = run(full, tmp_path / "resumed", seed=1, progress=False)
    straight = run(full, tmp_path / "straight", seed=1, progress=False)
    assert int(resumed.state.update) == int(straight.state.update) == 4
    assert leaves_equal(resumed.state.params, straight.state.params)
    assert leaves_equal(resumed.state.opt_state, straight.state.opt_state)
    assert leaves_equal(
        jax.random.key_data(resumed.state.key), jax.random.key_data(straight.state.key)
    )
    assert timeless(resumed.records) == timeless(straight.records)
    assert [r["update"] for r in resumed.records] == [2, 4]


def test_a_restored_state_runs_the_program_compiled_for_a_fresh_one(tiny_state):
    """A checkpoint's arrays come back committed to their device, which changes the
    lowered module; chunks are compiled for :func:`fresh_shapes`, the module of the
    fresh state, and run a restored state unchanged."""
    restored = jax.device_put(tiny_state, jax.devices()[0])
    assert restored.update.committed and not tiny_state.update.committed

    def step(state):
        return state.replace(update=state.update + 1)

    fresh = jax.jit(step).lower(tiny_state).as_text()
    assert jax.jit(step).lower(restored).as_text() != fresh
    compiled = jax.jit(step).lower(fresh_shapes(tiny_state))
    assert compiled.as_text() == fresh
    assert int(compiled.compile()(restored).update) == int(tiny_state.update) + 1


@pytest.mark.slow
def test_resume_refuses_other_settings_and_keeps_the_run(tiny, tmp_path):
    out = tmp_path / "run"
    run(tiny(), out, seed=1, progress=False)
    saved = (out / "config.json").read_text()
    changes = [
        (tiny(gamma=0.5), 1, "gamma 0.9 -> 0.5"),
        (tiny(algo="reinforce"), 1, "algo 'rebn' -> 'reinforce'"),
        (tiny(), 2, "seed 1 -> 2"),
        (tiny(learning_rate=1e-3), 1, "learning_rate 0.002 -> 0.001"),
        (tiny(hidden=(8,)), 1, "hidden [16] -> [8]"),
        (tiny(num_updates=2), 1, "at update 4, past num_updates 2"),
    ]
    for config, seed, message in changes:
        with pytest.raises(RunMismatch, match=re.escape(message)):
            run(config, out, seed=seed, progress=False)
    assert (out / "config.json").read_text() == saved
    longer = run(tiny(num_updates=6), out, seed=1, progress=False)  # safe: a longer run
    assert [r["update"] for r in longer.records] == [2, 4, 6]
    # A checkpoint that no longer fits the recorded model is one clear error.
    (out / "config.json").write_text(
        json.dumps({**json.loads(saved), "hidden": [8], "num_updates": 8})
    )
    with pytest.raises(RunMismatch, match="does not fit this model"):
        run(tiny(hidden=(8,), num_updates=8), out, seed=1, progress=False)
    (out / "config.json").unlink()
    with pytest.raises(RunMismatch, match="holds checkpoints but no config"):
        run(tiny(num_updates=8), out, seed=1, progress=False)


@pytest.mark.slow
def test_resume_drops_a_partial_last_metrics_line(tiny, tmp_path):
    out = tmp_path / "run"
    run(tiny(num_updates=2), out, seed=1, progress=False)
    with (out / "metrics.jsonl").open("a") as sink:
        sink.write('{"update": 4, "env_st')  # an interrupted write
    resumed = run(tiny(), out, seed=1, progress=False)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == [2, 4]
    assert [r["update"] for r in resumed.records] == [2, 4]


def test_a_bad_config_writes_nothing(tiny, tmp_path):
    with pytest.raises(ValueError, match="unknown environment id"):
        run(tiny(env_id="game:NoSuchGame-v0"), tmp_path / "a", progress=False)
    with pytest.raises(ValueError, match="checkpoint_every must be >= 1"):
        run(tiny(), tmp_path / "b", checkpoint_every=0, progress=False)
    with pytest.raises(ValueError, match="more than the 64 turns"):
        run(tiny(num_transitions=128), tmp_path / "c", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_run_written_before_a_setting_existed_resumes_at_its_default(tiny, tmp_path):
    config = tiny()
    settings = run_settings(config, seed=1)
    del settings["torso"]  # a run directory from before the conv torso
    (tmp_path / "config.json").write_text(json.dumps(settings))
    check_resume(tmp_path, config, seed=1, done=2)
    with pytest.raises(RunMismatch, match="torso 'mlp' -> 'conv'"):
        conv = tiny(env_id="game:Minesweeper-v0-easy", torso="conv", head="joint")
        settings = {**run_settings(conv, seed=1), "torso": "mlp"}
        (tmp_path / "config.json").write_text(json.dumps(settings))
        check_resume(tmp_path, conv, seed=1, done=2)


@pytest.mark.slow
def test_cli_train_writes_metrics_plot_and_checkpoint(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--env", "game:GuessTheNumber-v0-easy", "--out", str(out)]
    argv += ["--updates", "4", "--episodes", "16", "--transitions", "32", "--hidden", "16"]
    argv += ["--eval-every", "2", "--eval-episodes", "16", "--no-progress", "--seed", "1"]
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert cli.main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [2, 4]
    for row in rows:
        assert 0.0 <= row["success"] <= 1.0
        assert 1.0 <= row["mean_turns"] <= 4.0
        assert row["steps_per_second"] > 0
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "checkpoints" / "4").is_dir()
    assert json.loads((out / "config.json").read_text())["num_updates"] == 4
    assert "greedy success" in printed.getvalue()
    assert "(binary-search optimum 2.90)" in printed.getvalue()  # 1..10
    # Resuming with other settings, or fewer updates than done, is one line, status 2,
    # and leaves the run as it was.
    saved = (out / "config.json").read_text()
    changes = [["--gamma", "0.5"], ["--algo", "reinforce"], ["--seed", "2"], ["--lr", "0.01"]]
    changes += [["--hidden", "8"], ["--env", "game:GuessTheNumber-v0-hard"], ["--updates", "2"]]
    for change in changes:
        with redirect_stderr(io.StringIO()) as error:
            assert cli.main(argv + change) == 2, change
        assert error.getvalue().count("\n") == 1 and "Traceback" not in error.getvalue()
        assert change[0] in error.getvalue() or "at update 4" in error.getvalue(), change
        assert "new --out" in error.getvalue()
    assert (out / "config.json").read_text() == saved


def test_binary_search_optimum_of_guess_the_number():
    assert binary_search_mean_turns(50) == pytest.approx(4.86)  # 243 guesses / 50
    assert binary_search_mean_turns(1) == 1.0
    assert binary_search_optimum(make("game:GuessTheNumber-v0-hard-no-max-turn")) == 4.86
    assert binary_search_optimum(make("game:GuessTheNumber-v0-random")) is None
    assert binary_search_optimum(make("game:Mastermind-v0-easy")) is None


@pytest.mark.slow
def test_rebn_improves_on_easy_guess_the_number_for_two_seeds_at_once(tiny):
    config = tiny(
        num_updates=300,
        eval_every=100,
        num_episodes=64,
        num_transitions=128,
        hidden=(64, 64),
        eval_episodes=128,
        learning_rate=3e-3,
    )
    trainer = make_train(config)
    keys = jax.random.split(jax.random.key(0), 2)
    untrained = jax.jit(jax.vmap(lambda k: trainer.evaluate(trainer.init(k)).success))(keys)
    _, metrics = jax.jit(jax.vmap(trainer.train))(keys)
    success = metrics.eval.success
    assert success.shape == (2, 3)
    assert bool(jnp.all(success[:, -1] >= untrained + 0.15)), (untrained, success)
    # The seeds train apart (their losses differ; equal success rates out of 128
    # episodes can happen by chance, and did).
    assert not bool(jnp.array_equal(metrics.train.loss[0], metrics.train.loss[1]))
