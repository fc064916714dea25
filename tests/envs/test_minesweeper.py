"""Minesweeper kernel: JAX contract, mine placement against GEM's distribution, flood
fill against GEM's BFS on random boards, board properties (hypothesis), and the
board/echo template slots and the ``\\boxed{word int int}`` grammar it introduced."""

from __future__ import annotations

import math
import random
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.minesweeper import MinesweeperEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import gemjax
from gemjax import testing
from gemjax.envs.minesweeper import (
    CELLS,
    FLAG,
    HIDDEN,
    OFF_BOARD,
    REVEAL,
    UNKNOWN,
    Minesweeper,
    adjacent_counts,
    distinct_priorities,
    flood_fill,
    place_mines,
)
from gemjax.testing import lane
from gemjax.text.grammar import BoxedCommand
from gemjax.text.templates import Board, Echo, Int, MessageTable, Template

EASY, HARD, RANDOM = (f"game:Minesweeper-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
BATCH = 8
OBS_KEYS = {
    "board",
    "revealed",
    "flags",
    "active",
    "turn",
    "rows",
    "cols",
    "num_mines",
    "max_turns",
}


def random_actions(rng: np.random.Generator, env: Minesweeper, batch: int) -> np.ndarray:
    """Mostly reveals and flags inside the board, some out of bounds, unknown, format errors."""
    rows, cols = env.shape
    command = rng.choice([REVEAL] * 6 + [FLAG] * 3 + [UNKNOWN, 0], size=batch)
    row = rng.integers(0, rows, size=batch)
    col = rng.integers(0, cols, size=batch)
    odd = rng.random(batch)
    row = np.where(odd < 0.05, rows + rng.integers(0, 3, size=batch), row)
    col = np.where((odd > 0.05) & (odd < 0.08), 2**31 - 1, col)
    return np.stack([command, row, col], 1).astype(np.int32)


@pytest.fixture(scope="module", params=(EASY, RANDOM))
def kit(request, kits):
    return kits(request.param)


# --- registration and parameters -----------------------------------------------------


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Minesweeper")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        if kwargs["rows"] is None:
            assert env.randomize and env.config == ("random",) and env.shape == (8, 8)
            continue
        p = env.default_params
        got = tuple(int(v) for v in (p.rows, p.cols, p.num_mines, p.max_turns))
        assert got == tuple(kwargs[k] for k in ("rows", "cols", "num_mines", "max_turns"))
        assert env.shape == (kwargs["rows"], kwargs["cols"])
    assert gemjax.make(EASY, rows=4, cols=9).config == (4, 9, 5, 25)
    for bad in [
        dict(rows=0),
        dict(cols=33),
        dict(num_mines=17),
        dict(num_mines=-1),
        dict(max_turns=0),
    ]:
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)
    gemjax.make(EASY, num_mines=16)  # 25 cells, at most 9 in the 3x3 block
    with pytest.raises(ValueError, match="capacity"):
        gemjax.make(EASY).validate_params(gemjax.make(HARD).default_params)


# --- template slots and grammar ----------------------------------------------------------


def test_board_and_echo_slots_in_tables_and_templates():
    board = Board("b", (2, 3), ("a", "b", "c"), rows="h", cols="w", header=("<", "{}", ",", ">\n"))
    table = MessageTable(
        first=Template("x{b}y {word}", b=board, word=Echo("word", fallback="?")),
        second=Template("{n}", n=Int("n")),
    )
    names = ("b[0]", "b[1]", "b[2]", "b[3]", "b[4]", "b[5]", "word", "n", "h", "w")
    assert table.arg_names == names
    event = table.event("first", b=jnp.asarray([[0, 1, 2], [2, 1, 0]]), h=2, w=2)
    args = [int(a) for a in event.args]
    assert args[:6] == [0, 1, 2, 2, 1, 0] and args[8:] == [2, 2]
    assert table.render(0, args) == "x<0,1>\nab\ncb\ny ?"
    assert table.render(0, args, {"word": "zz"}) == "x<0,1>\nab\ncb\ny zz"
    args[8], args[9] = 1, 3
    assert table.render(0, args) == "x<0,1,2>\nabc\ny ?"
    values = table.values(args)
    assert values["b"] == [0, 1, 2, 2, 1, 0] and values["h"] == 1
    # Template.render reads the size slots from the values; the table agrees with it.
    template = table.templates["first"]
    assert template.render({"b": values["b"], "h": 1, "w": 3}, {"word": "zz"}) == (
        "x<0,1,2>\nabc\ny zz"
    )
    with pytest.raises(ValueError):
        table.event("first", b=jnp.zeros((7,), jnp.int32))
    with pytest.raises(ValueError):
        Board("b", (0, 3), ("a",))


def test_board_render_matches_gem(kits):
    """Random mid-game states of every size, rendered by the suffix template and by GEM."""
    kit = kits(RANDOM)
    rng = np.random.default_rng(5)
    keys = jax.random.split(jax.random.key(5), 32)
    states, _ = kit.vreset(keys, kit.params)
    for _ in range(6):
        states, _ = kit.vstep(
            keys, states, jnp.asarray(random_actions(rng, kit.env, 32)), kit.params
        )
    gem_env = MinesweeperEnv(rows=5, cols=5, num_mines=5, max_turns=25)
    host = jax.device_get(states)
    sizes, shown = set(), 0
    for i in range(32):
        s = lane(host, i)
        n = int(s.rows)
        gem_env.rows = gem_env.cols = n
        counts = np.asarray(adjacent_counts(jnp.asarray(s.mines)))
        gem_env.grid = np.where(s.mines, -1, counts)[:n, :n].tolist()
        gem_env.revealed = s.revealed[:n, :n].tolist()
        gem_env.flags = s.flags[:n, :n].tolist()
        values = {
            k: np.asarray(v).reshape(-1).tolist() if np.ndim(v) else int(v)
            for k, v in jax.device_get(kit.env.suffix_values(s)).items()
        }
        assert kit.env.suffix.render(values) == gem_env.get_task_suffix()
        sizes.add(n)
        shown += int(s.revealed.sum() + s.flags.sum())
    assert len(sizes) >= 3 and shown > 0


GEM_PATTERN = re.compile(r"\\boxed{([a-zA-Z]+)\s(\d+)\s(\d+)}")


def gem_parse(text: str):
    matches = list(GEM_PATTERN.finditer(text))
    m = matches[-1] if matches else None
    try:
        return (m.group(1).lower(), int(m.group(2)), int(m.group(3))) if m else None
    except Exception:
        return None


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{reveal 3 2}",
        "\\boxed{REVEAL 0 0}",
        "\\boxed{Flag 007 1}",
        "\\boxed{reveal  3 2}",
        "\\boxed{reveal\t3\n2}",
        "\\boxed{reveal\u30003\xa02}",
        "\\boxed{open 1 2}",
        "\\boxed{reveal \u0663 \uff12}",
        "\\boxed{r\u00e9veal 1 2}",
        "\\boxed{\u212aing 1 2}",
        "\\boxed{reveal 1 2} \\boxed{flag 3}",
        "\\boxed{reveal 1 2} \\boxed{flag 3 4}",
        "\\boxed{reveal 99999999999999999999 2}",
        "\\boxed{reveal -1 2}",
        "\\boxed{reveal 1 2 3}",
        "\\boxed {reveal 1 2}",
        "\\boxed{reveal 1 " + "1" * 4301 + "}",
        "",
    ],
)
def test_boxed_command_agrees_with_gems_regex(text):
    grammar = Minesweeper().grammar
    parsed = grammar.parse(text)
    expected = gem_parse(text)
    assert parsed.ok == (expected is not None)
    if expected is None:
        assert parsed.action.tolist() == [0, 0, 0] and parsed.echoes == {}
        return
    word, row, col = expected
    code = {"reveal": REVEAL, "flag": FLAG}.get(word, UNKNOWN)
    assert parsed.action.tolist() == [code, min(row, 2**31 - 1), min(col, 2**31 - 1)]
    assert parsed.echoes == {"command": word, "row": str(row), "col": str(col)}
    assert grammar.parse(grammar.render(parsed.action)).action.tolist() == parsed.action.tolist()


def test_boxed_command_rejects_bad_declarations():
    with pytest.raises(ValueError):
        BoxedCommand(("Reveal",), "w", ("r",))
    with pytest.raises(ValueError):
        BoxedCommand((), "w", ("r",))
    assert BoxedCommand(("go",), "w", ("a", "b", "c")).parse(
        "\\boxed{GO 1 2 3}"
    ).action.tolist() == [
        1,
        1,
        2,
        3,
    ]


# --- JAX contract ---------------------------------------------------------------------


def test_observation_layout(kit):
    """The observation's keys, dtypes and shapes; mines are never in it
    (tests/test_contract.py runs the rest of the kernel contract on every id)."""
    env = kit.env
    _, ts = kit.reset(jax.random.key(0), kit.params)
    assert set(ts.observation) == OBS_KEYS
    assert ts.observation["board"].shape == env.shape and ts.observation["board"].dtype == jnp.int8
    for name in ("revealed", "flags", "active"):
        assert ts.observation[name].shape == env.shape and ts.observation[name].dtype == jnp.bool_
    assert "mines" not in ts.observation and "priority" not in ts.observation


# Slow: the quick tier checks each game's contract in tests/test_contract.py.
@pytest.mark.slow
def test_contract_on_board_moves(kit):
    """jit equals eager and vmap equals a loop on mostly in-board reveals and flags
    (mines get placed, cells revealed and flagged), and a mine count sweep does not
    retrace."""
    env, params = kit.env, kit.params
    actions = testing.actions_from(random_actions(np.random.default_rng(0), env, 256))
    timesteps = testing.check_jit_matches_eager(env, params, actions, episodes=1, steps=6)
    assert bool(timesteps[-1].observation["revealed"].any())
    history = testing.check_vmap_matches_loop(env, params, actions, batch=BATCH, steps=10)
    final = history.observation
    assert int(final["revealed"][-1].sum()) > BATCH and int(final["flags"][-1].sum()) > 0
    other = params.replace(max_turns=params.max_turns - 1, num_mines=params.num_mines - 1)
    testing.check_no_retracing(env, params, actions, other=other)


def test_action_shape_and_dtype_checked(kit):
    env = kit.env
    state, _ = kit.reset(jax.random.key(0), kit.params)
    with pytest.raises(ValueError):
        env.step(jax.random.key(0), state, jnp.zeros((4,), jnp.int32), kit.params)
    with pytest.raises(TypeError):
        env.step(jax.random.key(0), state, jnp.zeros((3,)), kit.params)


def test_random_variant_configurations_and_examples(kits):
    kit = kits(RANDOM)
    n = 4000
    states, ts = jax.device_get(kit.vreset(jax.random.split(jax.random.key(7), n), kit.params))
    sizes = states.rows
    assert (states.rows == states.cols).all()
    counts = np.bincount(sizes, minlength=9)[5:]
    assert counts.sum() == n and (np.abs(counts / n - 0.25) < 0.03).all(), counts
    np.testing.assert_array_equal(states.num_mines, sizes * sizes // 5)
    np.testing.assert_array_equal(states.max_turns, sizes * sizes)
    assert (states.example >= 0).all() and (states.example < sizes[:, None]).all()
    assert len({tuple(e) for e in states.example.tolist()}) > 100
    board = ts.observation["board"]
    active = ts.observation["active"]
    assert (board[active] == HIDDEN).all() and (board[~active] == OFF_BOARD).all()
    np.testing.assert_array_equal(active.sum(axis=(1, 2)), sizes * sizes)
    assert not states.placed.any() and not states.mines.any()


def test_random_action_follows_gems_sampler(kits):
    kit = kits(RANDOM)
    states, _ = kit.vreset(jax.random.split(jax.random.key(3), 2000), kit.params)
    actions = np.asarray(
        jax.jit(jax.vmap(kit.env.random_action))(jax.random.split(jax.random.key(4), 2000), states)
    )
    assert actions.shape == (2000, 3) and actions.dtype == np.int32
    assert abs((actions[:, 0] == REVEAL).mean() - 0.9) < 0.03
    assert set(actions[:, 0].tolist()) == {REVEAL, FLAG}
    rows = np.asarray(states.rows)
    assert (
        (actions[:, 1] < rows).all() and (actions[:, 2] < rows).all() and actions[:, 1:].min() == 0
    )
    assert bool(kit.env.action_space(kit.params).contains(actions).all())


# --- mine placement against GEM ---------------------------------------------------------


@pytest.mark.parametrize(("env_id", "start"), [(EASY, (0, 0)), (HARD, (3, 4))])
def test_mine_placement_matches_gems_distribution(kits, env_id, start):
    """Per-cell mine frequencies after a first reveal: ours and GEM's are both
    consistent with the exact uniform-subset probabilities (chi-square) and with
    each other (two-sample chi-square); the block around the reveal stays clear."""
    kit = kits(env_id)
    n = 4000
    keys = jax.random.split(jax.random.key(11), n)
    states, _ = kit.vreset(keys, kit.params)
    action = jnp.broadcast_to(jnp.asarray([REVEAL, *start], jnp.int32), (n, 3))
    states, _ = kit.vstep(keys, states, action, kit.params)
    mines = np.asarray(states.mines)
    rows, cols = kit.env.shape
    num_mines = int(kit.params.num_mines)
    np.testing.assert_array_equal(mines.sum(axis=(1, 2)), num_mines)
    r, c = np.ogrid[:rows, :cols]
    block = (np.abs(r - start[0]) <= 1) & (np.abs(c - start[1]) <= 1)
    assert not mines[:, block].any()
    ours = mines.sum(axis=0)[~block]

    gem_env = MinesweeperEnv(rows=rows, cols=cols, num_mines=num_mines)
    random.seed(123)
    theirs = np.zeros((rows, cols), np.int64)
    for _ in range(n):
        gem_env.grid = [[0] * cols for _ in range(rows)]
        gem_env._setup_mines(*start)
        theirs += np.asarray(gem_env.grid) == -1
    theirs = theirs[~block]

    expected = np.full(ours.shape, n * num_mines / ours.size)
    # Each cell is mined with probability k/m; the counts have variance n p (1 - p),
    # so scale the Pearson statistic by 1/(1 - p) to get a chi-square(m - 1).
    p = num_mines / ours.size
    for counts in (ours, theirs):
        statistic = np.sum((counts - expected) ** 2 / expected) * 1 / (1 - p)
        assert stats.chi2.sf(statistic, ours.size - 1) > 1e-4, counts
    table = np.stack([ours, theirs])
    assert stats.chi2_contingency(table).pvalue > 1e-4
    # Pairs: two given cells are both mines with probability k(k-1)/(m(m-1)).
    pair = np.mean(mines[:, ~block][:, 0] & mines[:, ~block][:, -1])
    m = ours.size
    exact = num_mines * (num_mines - 1) / (m * (m - 1))
    assert abs(pair - exact) < 5 * np.sqrt(exact / n) + 1e-3, (pair, exact)


@pytest.mark.parametrize(
    ("board", "reveal", "num_mines"), [((4, 3), (0, 2), 3), ((3, 5), (1, 2), 2)]
)
def test_placement_draws_every_subset_equally(board, reveal, num_mines):
    """Random distinct priorities on an active board smaller than the capacity (6x6), with the
    reveal at a corner (a 2x2 block) or in the middle: every subset of the allowed
    cells comes up equally often (chi-square over all subsets)."""
    shape, n = (6, 6), 30000
    words = jax.random.bits(jax.random.key(5), (n, shape[0] * shape[1]), jnp.uint32)
    priority = jax.vmap(distinct_priorities)(words).reshape(n, *shape)
    r, c = np.ogrid[: shape[0], : shape[1]]
    allowed = (r < board[0]) & (c < board[1])
    allowed &= ~((np.abs(r - reveal[0]) <= 1) & (np.abs(c - reveal[1]) <= 1))
    draw = jax.jit(jax.vmap(place_mines, in_axes=(0, None, None)))
    mines = np.asarray(draw(priority, jnp.asarray(allowed), num_mines))
    assert not mines[:, ~allowed].any()
    np.testing.assert_array_equal(mines.sum(axis=(1, 2)), num_mines)
    codes = mines[:, allowed] @ (1 << np.arange(int(allowed.sum())))
    _, counts = np.unique(codes, return_counts=True)
    assert counts.size == math.comb(int(allowed.sum()), num_mines)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_first_reveal_on_a_flag_still_places_mines(kits):
    kit = kits(EASY)
    state, _ = kit.reset(jax.random.key(0), kit.params)
    state, ts = kit.step(jax.random.key(0), state, jnp.asarray([FLAG, 2, 2]), kit.params)
    assert not bool(state.placed) and ts.event.kind == kit.env.messages.kind("flag")
    state, ts = kit.step(jax.random.key(0), state, jnp.asarray([REVEAL, 2, 2]), kit.params)
    assert bool(state.placed) and int(state.mines.sum()) == 5
    assert int(ts.event.kind) == kit.env.messages.kind("reveal_repeat")
    assert not bool(state.revealed.any()) and float(ts.reward) == 0.0
    # Out-of-bounds and unknown commands do not place mines.
    state, _ = kit.reset(jax.random.key(1), kit.params)
    for action in ([REVEAL, 5, 0], [UNKNOWN, 1, 1], [0, 1, 1]):
        state, _ = kit.step(jax.random.key(0), state, jnp.asarray(action), kit.params)
    assert not bool(state.placed) and int(state.turn) == 3


def test_cleared_is_every_safe_cell_revealed_without_the_flags(kits):
    """The ``cleared`` outcome holds once the last safe cell is revealed, while GEM's
    success (which needs every mine flagged too) does not, and the game goes on."""
    kit = kits(EASY)
    env, params = kit.env, kit.params
    state, _ = kit.reset(jax.random.key(3), params)
    assert not bool(env.outcomes(state)["cleared"])
    state, ts = kit.step(jax.random.key(0), state, jnp.asarray([REVEAL, 2, 2]), params)
    hidden_safe = np.argwhere(np.asarray(~state.mines & ~state.revealed)).tolist()
    assert hidden_safe, "the opening cleared the board: pick another seed"
    for row, col in hidden_safe:
        assert not bool(env.outcomes(state)["cleared"])
        state, ts = kit.step(jax.random.key(0), state, jnp.asarray([REVEAL, row, col]), params)
    assert bool(env.outcomes(state)["cleared"])
    assert not bool(ts.info["success"]) and not bool(ts.done)


def test_action_mask_allows_reveals_of_unflagged_and_flags_of_hidden_cells(kit):
    """After random moves, on boards of each configuration: ``reveal`` exactly on the
    hidden cells without a flag, ``flag`` on the hidden cells, both on the episode's
    board; nothing else (format errors, unknown words, out of bounds)."""
    env, params = kit.env, kit.params
    rng = np.random.default_rng(0)
    keys = jax.random.split(jax.random.key(5), BATCH)
    state, _ = kit.vreset(keys, params)
    mask_of = jax.jit(jax.vmap(env.valid_action_mask))
    for _ in range(6):
        masks = np.asarray(mask_of(state))
        rows, cols = env.shape
        assert masks.shape == (BATCH, UNKNOWN + 1, rows + 1, cols + 1)
        for k in range(BATCH):
            active = np.zeros((rows, cols), bool)
            active[: int(state.rows[k]), : int(state.cols[k])] = True
            hidden = active & ~np.asarray(state.revealed[k])
            expected = np.zeros_like(masks[k])
            expected[REVEAL, :rows, :cols] = hidden & ~np.asarray(state.flags[k])
            expected[FLAG, :rows, :cols] = hidden
            np.testing.assert_array_equal(masks[k], expected)
        state, _ = kit.vstep(keys, state, random_actions(rng, env, BATCH), params)


# --- flood fill against GEM's BFS ---------------------------------------------------------


def test_reveal_matches_gems_bfs_on_random_boards(kits):
    """Random boards with earlier reveals and flags (flags on mines and on safe
    cells, unflagged holes next to revealed zeros): one reveal each, compared with
    GEM's ``_update_grid`` cell by cell, with its reward and success."""
    kit = kits(HARD)
    rng = np.random.default_rng(17)
    n, size = 300, 8
    gem_env = MinesweeperEnv(rows=size, cols=size, num_mines=12, max_turns=64)
    fields = {name: [] for name in ("mines", "revealed", "flags")}
    targets, expected = [], []
    for _ in range(n):
        num_mines = int(rng.integers(0, 20))
        mines = np.zeros(size * size, bool)
        mines[rng.choice(size * size, num_mines, replace=False)] = True
        mines = mines.reshape(size, size)
        counts = np.asarray(adjacent_counts(jnp.asarray(mines)))
        revealed = ~mines & (rng.random((size, size)) < rng.choice([0.0, 0.2, 0.6]))
        flags = ~revealed & (rng.random((size, size)) < rng.choice([0.0, 0.1, 0.9]))
        if rng.random() < 0.5:
            flags |= mines
        hidden = np.argwhere(~mines & ~revealed & ~flags)
        if not len(hidden):
            continue
        r, c = hidden[rng.integers(len(hidden))]
        gem_env.num_mines = num_mines
        gem_env.grid = np.where(mines, -1, counts).tolist()
        gem_env.revealed = revealed.tolist()
        gem_env.flags = flags.tolist()
        gem_env.first_reveal = False
        gem_env.turn_count = 0
        obs, reward, *_ = gem_env.step(f"\\boxed{{reveal {r} {c}}}")
        expected.append((np.asarray(gem_env.revealed), reward, obs.startswith("Congrat")))
        for name, value in (("mines", mines), ("revealed", revealed), ("flags", flags)):
            fields[name].append(value)
        targets.append((REVEAL, r, c, num_mines))
    count = len(targets)
    base, _ = kit.vreset(jax.random.split(jax.random.key(0), count), kit.params)
    t = np.asarray(targets, np.int32)
    states = base.replace(
        placed=jnp.ones((count,), bool),
        num_mines=jnp.asarray(t[:, 3]),
        **{name: jnp.asarray(np.stack(v)) for name, v in fields.items()},
    )
    states, ts = kit.vstep(
        jax.random.split(jax.random.key(1), count), states, jnp.asarray(t[:, :3]), kit.params
    )
    revealed, rewards, success = (
        np.asarray(states.revealed),
        np.asarray(ts.reward),
        np.asarray(ts.info["success"]),
    )
    multi = 0
    for i, (gem_revealed, reward, won) in enumerate(expected):
        np.testing.assert_array_equal(revealed[i], gem_revealed, err_msg=str(i))
        assert rewards[i] == np.float32(reward) and success[i] == won, i
        multi += int(gem_revealed.sum() - fields["revealed"][i].sum()) > 1
    assert count > 250 and multi > 50 and success.any()


def bfs_reveal(start: tuple[int, int], zero: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """GEM's queue-based reveal, for any board shape."""
    height, width = zero.shape
    out = np.zeros_like(zero)
    queue = [start]
    out[start] = True
    while queue:
        r, c = queue.pop()
        if not zero[r, c]:
            continue
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                rr, cc = r + dr, c + dc
                if 0 <= rr < height and 0 <= cc < width and not blocked[rr, cc] and not out[rr, cc]:
                    out[rr, cc] = True
                    queue.append((rr, cc))
    return out


@pytest.mark.parametrize(
    "shape", [(6, 7), (8, 8), (5, 5), (11, 3), (9, 16), (5, 1), (4, 32), (3, 40)]
)
def test_flood_fill_matches_a_queue_on_any_width(shape):
    """Both formulations (bit words of several rows up to 32 columns, bool grids
    beyond), on boards whose rows fill a word, leave bits spare or span words."""
    rng = np.random.default_rng(shape[1])
    fill = jax.jit(jax.vmap(flood_fill))
    starts, zeros, blockeds, expected = [], [], [], []
    for _ in range(40):
        zero = rng.random(shape) < rng.choice([0.5, 0.8, 0.95])
        blocked = rng.random(shape) < rng.choice([0.0, 0.05, 0.2])
        r, c = rng.integers(shape[0]), rng.integers(shape[1])
        blocked[r, c] = False
        start = np.zeros(shape, bool)
        start[r, c] = True
        starts.append(start)
        zeros.append(zero)
        blockeds.append(blocked)
        expected.append(bfs_reveal((r, c), zero, blocked))
    got = np.asarray(fill(*(jnp.asarray(np.stack(x)) for x in (starts, zeros, blockeds))))
    np.testing.assert_array_equal(got, np.stack(expected))
    assert max(int(e.sum()) for e in expected) > shape[1]


def test_reveal_fraction_is_float32_of_gems():
    for safe in range(1, 65):
        for k in range(safe + 1):
            assert np.float32(k) / np.float32(safe) == np.float32(k / safe)


# --- properties ----------------------------------------------------------------------------

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from([REVEAL, REVEAL, REVEAL, FLAG, FLAG, UNKNOWN, 0]),
        st.integers(-1, 8),
        st.integers(-1, 8),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=ACTIONS)
def test_board_properties(kits, seed, actions):
    """Along any action sequence (past the end too): the revealed set only grows;
    every shown number equals the adjacent mines; flags never reveal; no mine is
    ever revealed; flags and revealed cells never overlap; the observation's board
    codes agree with its masks."""
    kit = kits(RANDOM)
    key = jax.random.key(seed)
    state, _ = kit.reset(key, kit.params)
    for action in actions:
        before = jax.device_get(state)
        state, ts = kit.step(key, state, jnp.asarray(action, jnp.int32), kit.params)
        after, obs = jax.device_get((state, ts.observation))
        assert (after.revealed >= before.revealed).all()
        if action[0] != REVEAL:
            np.testing.assert_array_equal(after.revealed, before.revealed)
        assert not (after.revealed & after.mines).any()
        assert not (after.revealed & after.flags).any()
        counts = np.asarray(adjacent_counts(jnp.asarray(after.mines)))
        board = obs["board"]
        np.testing.assert_array_equal(board[after.revealed], counts[after.revealed])
        np.testing.assert_array_equal(obs["revealed"], after.revealed)
        np.testing.assert_array_equal(obs["flags"], after.flags)
        hidden = obs["active"] & ~after.revealed
        np.testing.assert_array_equal(board[hidden], np.where(after.flags, 10, HIDDEN)[hidden])
        # The text shows the same board.
        n = int(after.rows)
        text = kit.env.suffix.render({"rows": n, "cols": n, "board": board.reshape(-1).tolist()})
        lines = text.split("\n")[2 : 2 + n]
        assert [line[3:] for line in lines] == [
            "".join(CELLS[v] for v in board[r, :n]) for r in range(n)
        ]
