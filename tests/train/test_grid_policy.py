"""The conv torso (``--torso conv``): the map from joint combinations to board cells,
the per-cell inputs, the 3x3 convolution, translation equivariance, and training."""

import io
import itertools
import json
import re
from contextlib import redirect_stderr, redirect_stdout

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import gemjax
from gemjax import cli
from gemjax.core import ActionCells
from gemjax.spaces import MultiDiscrete
from gemjax.train import TrainConfig, make_train
from gemjax.train.grid_policy import (
    CODE_CLASSES,
    ConvPolicy,
    board_inputs,
    cell_layout,
    joint_logit_index,
    neighbourhoods,
)
from gemjax.train.policy import JointCategorical, flatten_observation

CELL_GAMES = ("game:Minesweeper-v0-easy", "game:Sudoku-v0-easy", "game:Sudoku-v0-random")


def brute_force_index(head: JointCategorical, cells: ActionCells) -> tuple[list[int], int]:
    """Per combination (row-major), its cell logit ``(r * C + c) * M + m`` or the next
    off-board logit, by walking the combinations one by one."""
    others = [a for a in range(len(head.nvec)) if a not in cells.axes]
    per_cell = int(np.prod([head.nvec[a] for a in others]))
    rows, cols = cells.grid
    index, off = [], 0
    for combo in itertools.product(*(range(n) for n in head.nvec)):
        values = [i + s for i, s in zip(combo, head.start, strict=True)]
        r = values[cells.axes[0]] - cells.first[0]
        c = values[cells.axes[1]] - cells.first[1]
        m = 0
        for a in others:
            m = m * head.nvec[a] + combo[a]
        if 0 <= r < rows and 0 <= c < cols:
            index.append((r * cols + c) * per_cell + m)
        else:
            index.append(rows * cols * per_cell + off)
            off += 1
    return index, off


@pytest.mark.parametrize("env_id", CELL_GAMES)
def test_every_combination_has_its_cells_logit(env_id):
    env = gemjax.make(env_id)
    head = JointCategorical.of(env.action_space(env.default_params))
    index, per_cell, off_board = joint_logit_index(head, env.action_cells())
    expected, expected_off = brute_force_index(head, env.action_cells())
    assert list(index) == expected and off_board == expected_off
    rows, cols = env.action_cells().grid
    # every cell logit and every off-board logit is used exactly once
    assert sorted(index) == list(range(rows * cols * per_cell + off_board))


def test_a_shifted_start_and_other_axes():
    head = JointCategorical.of(MultiDiscrete((3, 2, 4), start=(1, 0, 2)))
    cells = ActionCells(grid=(2, 2), axes=(2, 0), first=(3, 2))
    index, per_cell, off_board = joint_logit_index(head, cells)
    expected, expected_off = brute_force_index(head, cells)
    assert list(index) == expected and (per_cell, off_board) == (2, expected_off)
    assert off_board == 24 - 8


def test_a_board_that_does_not_fit_the_actions_is_refused():
    head = JointCategorical.of(MultiDiscrete((2, 4, 4)))
    with pytest.raises(ValueError, match="does not fit"):
        joint_logit_index(head, ActionCells(grid=(4, 4), axes=(1, 2), first=(1, 0)))
    with pytest.raises(ValueError, match="two components"):
        joint_logit_index(head, ActionCells(grid=(4, 4), axes=(1, 1), first=(0, 0)))


def test_the_board_inputs_are_the_cells_codes_and_flags():
    env = gemjax.make("game:Minesweeper-v0-easy")
    state, _ = env.reset(jax.random.key(3), env.default_params)
    state, ts = env.step(jax.random.key(4), state, jnp.array([1, 2, 2]), env.default_params)
    spec = env.observation_spec(env.default_params)
    head = JointCategorical.of(env.action_space(env.default_params))
    layout = cell_layout(spec, 2, head, env.action_cells())
    inputs = board_inputs(flatten_observation(ts.observation, spec, 2), layout)
    assert inputs.shape == (5, 5, layout.cell_channels)
    board = np.asarray(ts.observation["board"])
    # leaves in pytree order: active, board (value, one-hot), flags, revealed
    assert [leaf.shape for leaf in layout.cell_leaves] == [(5, 5)] * 4
    np.testing.assert_array_equal(inputs[..., 0], 1.0)  # the on-board marker
    one_hot = np.asarray(inputs[..., 3 : 3 + CODE_CLASSES])
    np.testing.assert_array_equal(one_hot.argmax(-1), board)
    np.testing.assert_array_equal(one_hot.sum(-1), 1.0)
    revealed = np.asarray(inputs[..., -1]) > 0
    np.testing.assert_array_equal(revealed, np.asarray(ts.observation["revealed"]))
    assert revealed.sum() > 0


def test_a_dense_layer_on_the_neighbourhoods_is_a_3x3_convolution():
    x = jax.random.normal(jax.random.key(0), (2, 5, 6, 3))
    kernel = jax.random.normal(jax.random.key(1), (3, 3, 3, 4))
    dense = neighbourhoods(x) @ kernel.reshape(27, 4)
    conv = jax.lax.conv_general_dilated(
        x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    np.testing.assert_allclose(dense, conv, rtol=1e-5, atol=1e-5)


def test_the_cell_scores_move_with_the_board():
    """Translation equivariance: a pattern moved one column right, far enough from
    the edges, moves its cells' logits with it (a board of zeros elsewhere)."""
    head = JointCategorical.of(MultiDiscrete((2, 9, 9)))
    spec = {"board": jax.ShapeDtypeStruct((9, 9), jnp.int8)}
    layout = cell_layout(spec, 0, head, ActionCells(grid=(9, 9), axes=(1, 2), first=(0, 0)))
    model = ConvPolicy(layout, (8, 8), critic=False, rngs=nnx.Rngs(0))
    pattern = np.zeros((9, 9), np.int8)
    pattern[3:6, 2:4] = [[1, 2], [3, 0], [5, 1]]
    moved = np.roll(pattern, 1, axis=1)
    features = jnp.stack([jnp.asarray(b, jnp.float32).reshape(-1) for b in (pattern, moved)])
    logits, value = model(features)
    assert logits.shape == (2, 2 * 9 * 9) and value.shape == (2,)
    cells = np.asarray(logits).reshape(2, 2, 9, 9)  # [board, command, row, col]
    # two 3x3 layers see two cells away: columns 3..6 of the moved board see what
    # columns 2..5 of the original saw (both at least two columns from an edge)
    np.testing.assert_allclose(cells[1][:, :, 3:7], cells[0][:, :, 2:6], rtol=1e-5, atol=1e-6)
    assert not np.allclose(cells[0][:, 4, 1], cells[0][:, 4, 5])


@pytest.mark.parametrize("env_id", CELL_GAMES[:2])
def test_the_conv_torso_trains_and_plays_only_the_masks_moves(tiny, env_id):
    config = tiny(env_id=env_id, torso="conv", head="joint", hidden=(8, 8), mask_invalid=True)
    trainer = make_train(config)
    state = trainer.init(jax.random.key(0))
    new_state, metrics = jax.jit(trainer.update)(state)
    assert np.isfinite(float(metrics.loss))
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), new_state.params, state.params)
    # every layer but the off-board logits, which the mask never lets the policy play
    assert not any(jax.tree.leaves(moved["params"].pop("off_board_logits")))
    assert all(jax.tree.leaves(moved))
    keys = jax.random.split(jax.random.key(1), 16)
    traj = jax.jit(trainer.rollout.collect)(state.params, keys, state.key)
    valid = np.asarray(traj.valid)
    # every move played is one the env's mask allows in the state it was played in
    allowed = np.asarray(traj.action_mask)[valid]
    head = trainer.rollout.head
    flat = np.ravel_multi_index(tuple((np.asarray(traj.actions)[valid] - head.start).T), head.nvec)
    assert allowed[np.arange(len(flat)), flat].all() and len(flat) > 16
    assert not allowed.all(axis=-1).any()  # the mask rules moves out in every state
    assert np.isfinite(float(jax.jit(trainer.evaluate)(new_state).episode_return))


def test_the_conv_torso_needs_a_board_and_the_joint_head():
    with pytest.raises(ValueError, match="needs head 'joint'"):
        TrainConfig(env_id="game:Minesweeper-v0-easy", torso="conv")
    with pytest.raises(ValueError, match="torso must be one of"):
        TrainConfig(torso="cnn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name no board cell"):
        make_train(TrainConfig(env_id="game:Mastermind-v0-easy", torso="conv", head="joint"))


@pytest.mark.slow
def test_the_cli_trains_resumes_and_reports_the_boards_cleared(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--env", "game:Minesweeper-v0-easy", "--torso", "conv", "--head", "joint"]
    argv += ["--hidden", "8", "8", "--mask-invalid", "--algo", "ppo", "--episodes", "16"]
    argv += ["--transitions", "32", "--eval-every", "2", "--eval-episodes", "16"]
    argv += ["--out", str(out), "--no-progress"]
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert cli.main([*argv, "--updates", "2"]) == 0
        assert cli.main([*argv, "--updates", "4"]) == 0  # resumed from update 2
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["update"] for row in rows] == [2, 4]
    assert all(0.0 <= row["cleared"] <= 1.0 for row in rows)
    assert re.search(r"update 4: greedy success 0\.000, cleared \d\.\d{3}", printed.getvalue())
    assert json.loads((out / "config.json").read_text())["torso"] == "conv"
    factored = [arg for arg in argv if arg not in ("--head", "joint")]
    with redirect_stderr(io.StringIO()) as error:
        assert cli.main([*factored, "--updates", "2"]) == 2
    assert error.getvalue().count("\n") == 1 and "head 'joint'" in error.getvalue()
