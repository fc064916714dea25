"""Sudoku kernel: JAX contract for every id, puzzle generation against GEM (exact
replays of GEM's process, uniqueness by an independent exact-cover solver, the
empty-cell distribution against puzzles gem-llm makes), the board text, the
``\\boxed{int int int}`` grammar, and board properties along random play (hypothesis).
"""

from __future__ import annotations

import importlib.util
import math
import random
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.sudoku import SudokuEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import gemjax
from gemjax import testing
from gemjax.envs.sudoku import (
    MESSAGES,
    BlockBoard,
    Sudoku,
    bank9_arrays,
    draw4,
    draw9,
    grids4,
    pack_bank9,
    tables_for,
)
from gemjax.testing import lane
from gemjax.text.templates import MessageTable, Template

EASY, HARD, RANDOM = (f"game:Sudoku-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
BATCH = 8
SAMPLES = 4096  # resets per id for the distribution and uniqueness tests
OBS_KEYS = {"board", "active", "rejected", "turn", "scale", "max_turns"}
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_sudoku_bank.py"


@pytest.fixture(scope="module")
def bank_script():
    spec = importlib.util.spec_from_file_location("make_sudoku_bank", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=IDS)
def kit(request, kits):
    return kits(request.param)


@pytest.fixture(scope="module")
def samples(kits):
    """``samples(env_id)``: :data:`SAMPLES` resets of an id (host arrays), made once
    (one compiled batch shape per id)."""
    cache = {}

    def get(env_id: str):
        if env_id not in cache:
            kit = kits(env_id)
            keys = jax.random.split(jax.random.key(IDS.index(env_id)), SAMPLES)
            cache[env_id] = jax.device_get(kit.vreset(keys, kit.params))
        return cache[env_id]

    return get


def random_actions(rng: np.random.Generator, side: int, batch: int) -> np.ndarray:
    """Mostly in-range moves, some out of bounds, huge numbers and format errors."""
    ok = (rng.random(batch) > 0.05).astype(np.int64)
    moves = rng.integers(1, side + 1, size=(batch, 3))
    odd = rng.random(batch)
    moves[:, 0] = np.where(odd < 0.05, side + 1, moves[:, 0])
    moves[:, 2] = np.where((odd > 0.05) & (odd < 0.08), 2**31 - 1, moves[:, 2])
    moves[:, 1] = np.where((odd > 0.08) & (odd < 0.1), 0, moves[:, 1])
    return np.concatenate([ok[:, None], moves], axis=1).astype(np.int32)


# --- an independent solver: exact cover (Algorithm X over dicts of sets) -----------------


def count_solutions(board: np.ndarray, limit: int = 2) -> tuple[int, np.ndarray | None]:
    """``(solutions up to limit, the first solution)`` of a square puzzle (0 = empty)."""
    n = board.shape[0]
    box = math.isqrt(n)

    def constraints(r, c, v):
        b = (r // box) * box + c // box
        return [("cell", r, c), ("row", r, v), ("col", c, v), ("box", b, v)]

    rows = {(r, c, v): constraints(r, c, v) for r in range(n) for c in range(n) for v in range(n)}
    columns: dict = {}
    for key, cols in rows.items():
        for col in cols:
            columns.setdefault(col, set()).add(key)

    def select(key):
        removed = []
        for col in rows[key]:
            for other in columns[col]:
                for other_col in rows[other]:
                    if other_col != col:
                        columns[other_col].remove(other)
            removed.append(columns.pop(col))
        return removed

    def deselect(key, removed):
        for col in reversed(rows[key]):
            columns[col] = removed.pop()
            for other in columns[col]:
                for other_col in rows[other]:
                    if other_col != col:
                        columns[other_col].add(other)

    for r in range(n):
        for c in range(n):
            if board[r, c]:
                key = (r, c, int(board[r, c]) - 1)
                if not all(col in columns and key in columns[col] for col in rows[key]):
                    return 0, None
                select(key)
    found: list = []
    partial: list = []

    def search() -> None:
        if len(found) >= limit:
            return
        if not columns:
            found.append(list(partial))
            return
        col = min(columns, key=lambda k: len(columns[k]))
        for key in list(columns[col]):
            partial.append(key)
            removed = select(key)
            search()
            deselect(key, removed)
            partial.pop()
            if len(found) >= limit:
                return

    search()
    if not found:
        return 0, None
    solution = board.copy()
    for r, c, v in found[0]:
        solution[r, c] = v + 1
    return len(found), solution


def is_valid_grid(grid: np.ndarray) -> bool:
    n = grid.shape[0]
    b = math.isqrt(n)
    full = set(range(1, n + 1))
    boxes = [grid[i : i + b, j : j + b].reshape(-1) for i in range(0, n, b) for j in range(0, n, b)]
    return all(set(line.tolist()) == full for line in [*grid, *grid.T, *boxes])


# --- registration and parameters -----------------------------------------------------


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Sudoku")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        if kwargs["scale"] is None:
            assert env.randomize and env.config == ("random",) and env.side == 9
            continue
        p = env.default_params
        assert (int(p.clues), int(p.max_turns)) == (kwargs["clues"], kwargs["max_turns"])
        assert env.side == kwargs["scale"]
    assert gemjax.make(EASY, clues=16).config == (4, 16, 15)
    for bad in [dict(scale=16), dict(scale=3), dict(clues=17), dict(clues=-1), dict(max_turns=0)]:
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)
    hard = gemjax.make(HARD).default_params
    with pytest.raises(ValueError, match="tables"):
        gemjax.make(EASY).validate_params(hard.replace(clues=jnp.int32(10)))


# --- text: instructions, board, grammar ------------------------------------------------


@pytest.mark.parametrize("scale", [4, 9])
def test_instructions_match_gem(scale):
    gem_env = SudokuEnv(clues=0, max_turns=3, scale=scale)
    version = 1 if scale == 4 else 0
    text = MESSAGES.render(MESSAGES.kind("instructions"), _args(scale=scale, version=version))
    assert text == gem_env._get_instructions()
    assert ("You are playing  Sudoku." in text) == (scale == 9)


def _args(**values) -> list[int]:
    return [int(a) for a in MESSAGES.event("instructions", **values).args]


def test_board_render_matches_gem(kits):
    """Random mid-game states of both sizes, rendered by the suffix template and by GEM."""
    kit = kits(RANDOM)
    rng = np.random.default_rng(5)
    keys = jax.random.split(jax.random.key(5), 3 * BATCH).reshape(3, BATCH)
    gem_env = SudokuEnv(clues=0, max_turns=3, scale=4)
    lanes = []
    for batch in keys:  # BATCH lanes at a time: the shape test_vmap compiles
        states, _ = kit.vreset(batch, kit.params)
        for _ in range(4):
            actions = jnp.asarray(random_actions(rng, 9, BATCH))
            states, _ = kit.vstep(batch, states, actions, kit.params)
        host = jax.device_get(states)
        lanes += [lane(host, i) for i in range(BATCH)]
    sizes = set()
    for s in lanes:
        n = int(s.scale)
        gem_env.scale = n
        gem_env.board = s.board[:n, :n].tolist()
        suffix = jax.device_get(kit.env.suffix_values(s))
        values = {
            k: np.asarray(v).reshape(-1).tolist() if np.ndim(v) else int(v)
            for k, v in suffix.items()
        }
        assert kit.env.suffix.render(values) == gem_env.get_task_suffix()
        sizes.add(n)
    assert sizes == {4, 9}
    easy = kits(EASY)
    s, _ = easy.reset(jax.random.key(0), easy.params)
    gem_env.scale, gem_env.board = 4, np.asarray(s.board).tolist()
    values = {"scale": 4, "board": np.asarray(s.board).reshape(-1).tolist()}
    assert easy.env.suffix.render(values) == gem_env.get_task_suffix()


def test_block_board_slot_in_tables():
    board = BlockBoard(
        "b",
        (4, 4),
        tuple("abcd"),
        rows="h",
        cols="w",
        header=("<", "{}", ",", ">\n"),
        row_label="{}:",
        separator=".",
        block_separator="|",
        header_block_end="!",
        rule=("~", "-"),
        block=2,
        base=1,
    )
    table = MessageTable(first=Template("{b}", b=board))
    values = [0, 1, 2, 3] * 4
    args = [int(a) for a in table.event("first", b=jnp.asarray(values), h=3, w=3).args]
    expected = "<1,2!,3>\n1:a.b|c\n2:a.b|c\n~--\n3:a.b|c\n"
    assert table.render(0, args) == expected
    assert Template("{b}", b=board).render({"b": values, "h": 3, "w": 3}) == expected
    # block None: the integer square root of the printed rows
    auto = BlockBoard("b", (9, 9), tuple("0123456789"), block_separator="|", separator="")
    assert auto.format_values([1] * 81, 4, 4) == "11|11\n" * 4


GEM_PATTERN = re.compile(r"\\boxed{(\d+)\s(\d+)\s(\d+)}")


def gem_parse(text: str):
    matches = list(GEM_PATTERN.finditer(text))
    m = matches[-1] if matches else None
    try:
        return tuple(int(m.group(i)) for i in (1, 2, 3)) if m else None
    except Exception:
        return None


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{1 2 3}",
        "\\boxed{001 2 3}",
        "\\boxed{1  2 3}",
        "\\boxed{1\t2\n3}",
        "\\boxed{1\u30002\xa03}",
        "\\boxed{\u0661 \uff12 \u0663}",
        "\\boxed{1 2 3} \\boxed{4 5}",
        "\\boxed{1 2 3} \\boxed{4 5 6}",
        "\\boxed{1 2 " + "9" * 40 + "}",
        "\\boxed{1 2 3 4}",
        "\\boxed{-1 2 3}",
        "\\boxed {1 2 3}",
        "\\boxed{1 2 " + "1" * 4301 + "}",
        "",
    ],
)
def test_grammar_agrees_with_gems_regex(text):
    grammar = Sudoku().grammar
    parsed = grammar.parse(text)
    expected = gem_parse(text)
    assert parsed.ok == (expected is not None)
    if expected is None:
        assert parsed.action.tolist() == [0, 0, 0, 0] and parsed.echoes == {}
        return
    assert parsed.action.tolist() == [1, *(min(v, 2**31 - 1) for v in expected)]
    assert parsed.echoes == dict(zip(("row", "col", "num"), map(str, expected), strict=True))


# --- JAX contract ---------------------------------------------------------------------


def test_observation_layout(kit):
    """The observation's keys, dtypes and shapes; the solution is never in it
    (tests/test_contract.py runs the rest of the kernel contract on every id)."""
    env = kit.env
    _, ts = kit.reset(jax.random.key(0), kit.params)
    assert set(ts.observation) == OBS_KEYS
    side = (env.side, env.side)
    assert ts.observation["board"].shape == side and ts.observation["board"].dtype == jnp.int8
    assert ts.observation["active"].shape == side and ts.observation["active"].dtype == jnp.bool_
    rejected = ts.observation["rejected"]
    assert rejected.shape == (*side, env.side) and rejected.dtype == jnp.bool_
    assert not rejected.any()
    assert "solution" not in ts.observation


# Slow: the quick tier checks each game's contract in tests/test_contract.py.
@pytest.mark.slow
def test_contract_on_board_moves(kit):
    """jit equals eager and vmap equals a loop on mostly in-range moves (with out of
    bounds, huge numbers and format errors), and a clue-count sweep does not retrace."""
    env, params = kit.env, kit.params
    actions = testing.actions_from(random_actions(np.random.default_rng(0), env.side, 256))
    testing.check_jit_matches_eager(env, params, actions, episodes=1, steps=6)
    testing.check_vmap_matches_loop(env, params, actions, batch=BATCH, steps=8)
    other = params.replace(max_turns=params.max_turns - 1, clues=params.clues - 1)
    testing.check_no_retracing(env, params, actions, other=other)


def test_action_shape_and_dtype_checked(kits):
    kit = kits(EASY)
    state, _ = kit.reset(jax.random.key(0), kit.params)
    with pytest.raises(ValueError):
        kit.env.step(jax.random.key(0), state, jnp.zeros((3,), jnp.int32), kit.params)
    with pytest.raises(TypeError):
        kit.env.step(jax.random.key(0), state, jnp.zeros((4,)), kit.params)


def test_random_variant_configurations_and_random_action(kits, samples):
    """``-random`` draws GEM's configurations; ``random_action`` writes in-bounds moves."""
    kit = kits(RANDOM)
    n = SAMPLES
    states, ts = samples(RANDOM)
    scales = states.scale
    assert set(scales.tolist()) == {4, 9} and abs((scales == 4).mean() - 0.5) < 0.03
    np.testing.assert_array_equal(states.max_turns, np.where(scales == 4, 15, 50))
    small = scales == 4
    assert (states.num_empty[small] <= 10).all() and (states.num_empty[~small] <= 50).all()
    assert (states.num_empty[~small] >= 40).all()
    assert not states.board[small][:, 4:].any() and not states.solution[small][:, :, 4:].any()
    np.testing.assert_array_equal(ts.observation["active"].sum(axis=(1, 2)), scales**2)
    actions = np.asarray(
        jax.jit(jax.vmap(kit.env.random_action))(jax.random.split(jax.random.key(4), n), states)
    )
    assert actions.shape == (n, 4) and actions.dtype == np.int32
    assert bool(kit.env.action_space(kit.params).contains(actions).all())
    # Well formed and in bounds for the episode's scale, every value reached.
    assert (actions[:, 0] == 1).all()
    moves, scale = actions[:, 1:], np.asarray(states.scale)[:, None]
    assert ((moves >= 1) & (moves <= scale)).all()
    for side in (4, 9):
        assert set(moves[scales == side].ravel().tolist()) == set(range(1, side + 1))


def test_reward_is_float32_of_gems():
    for n in range(1, 82):
        assert np.float32(1.0) / np.float32(n) == np.float32(1 / n)


# --- generation: 4x4 ----------------------------------------------------------------------


def test_4x4_table_is_every_grid_with_gems_probability():
    """The 288 grids are distinct and valid; their weights are GEM's backtracking
    probabilities, recomputed here by walking its search tree with our own solver."""
    grids, weights = grids4()
    assert grids.shape == (288, 16) and len({g.tobytes() for g in grids}) == 288
    assert all(is_valid_grid(g.reshape(4, 4)) for g in grids)

    def probability(grid: np.ndarray) -> float:
        p, board = 1.0, np.zeros((4, 4), np.int8)
        for i in range(16):
            r, c = divmod(i, 4)
            extendable = 0
            for v in range(1, 5):
                board[r, c] = v
                extendable += count_solutions(board, limit=1)[0]
            p /= extendable
            board[r, c] = grid[i]
        return p

    for i in range(0, 288, 7):
        assert weights[i] / 384 == pytest.approx(probability(grids[i]))


def replay_gem_4x4(seeds):
    """GEM's 4x4 resets with the cell order its removal used (``random.shuffle`` of the
    16 cells, popped from the end): ``(full grids, boards, attempt orders)``."""
    gem_env = SudokuEnv(clues=10, max_turns=15, scale=4)
    original = random.shuffle
    orders: list = []

    def recording_shuffle(items, *args):
        original(items, *args)
        if items and isinstance(items[0], tuple):
            orders.append([r * 4 + c for r, c in reversed(items)])

    grids, boards = [], []
    random.shuffle = recording_shuffle
    try:
        for seed in seeds:
            gem_env.reset(seed=seed)
            grids.append(np.asarray(gem_env.full_grid).reshape(-1))
            boards.append(np.asarray(gem_env.board).reshape(-1))
    finally:
        random.shuffle = original
    return np.asarray(grids), np.asarray(boards), np.asarray(orders)


def test_4x4_removal_replays_gem_exactly():
    """Given GEM's grid and cell order, the on-device removal keeps exactly GEM's
    empty cells (300 GEM resets)."""
    grids, boards, orders = replay_gem_4x4(range(300))
    table, weights = grids4()
    index = np.asarray([np.flatnonzero((table == g).all(axis=1))[0] for g in grids])
    start = np.concatenate([[0], np.cumsum(weights)])[index]  # a u that picks the grid
    attempt = np.argsort(orders, axis=1)  # each cell's attempt index (its rank)
    bits = np.concatenate([start[:, None], attempt], axis=1).astype(np.uint32)
    tables = tables_for((4,))
    solution, empty, count = jax.jit(jax.vmap(draw4, in_axes=(None, 0, None)))(
        tables, jnp.asarray(bits), jnp.int32(10)
    )
    np.testing.assert_array_equal(np.asarray(solution), grids)
    np.testing.assert_array_equal(np.where(np.asarray(empty), 0, grids), boards)
    np.testing.assert_array_equal(np.asarray(count), (boards == 0).sum(axis=1))


def test_4x4_empty_cells_and_grids_match_gem(samples):
    """Chi-square: our empty-cell counts and full grids against gem-llm's (300 resets)."""
    _, boards, _ = replay_gem_4x4(range(1000, 1300))
    n = SAMPLES
    states, _ = samples(EASY)
    ours = np.bincount(np.asarray(states.num_empty), minlength=17)
    theirs = np.bincount((boards == 0).sum(axis=1), minlength=17)
    assert ours[:7].sum() == 0 and ours[11:].sum() == 0 and theirs[11:].sum() == 0
    # Pool 7 and 8 empties (rare) so every expected count is >= 5.
    ours_c = np.asarray([ours[:9].sum(), ours[9], ours[10]])
    theirs_c = np.asarray([theirs[:9].sum(), theirs[9], theirs[10]])
    assert stats.chisquare(theirs_c, ours_c / n * len(boards)).pvalue > 1e-3, (ours, theirs)
    table, weights = grids4()
    drawn = np.asarray(states.solution).reshape(n, 16)
    drawn_index = (drawn[:, None, :] == table[None]).all(axis=2).argmax(axis=1)
    counts = np.bincount(drawn_index, minlength=288)
    assert stats.chisquare(counts, weights / 384 * n).pvalue > 1e-3


def test_4x4_puzzles_are_unique(samples):
    """Every sampled puzzle has exactly one completion among all 288 grids (checked
    to be every 4x4 grid above); a few also by the exact-cover solver."""
    states, _ = samples(EASY)
    boards = states.board.reshape(-1, 16)
    table, _ = grids4()
    fits = ((boards[:, None, :] == table[None]) | (boards[:, None, :] == 0)).all(axis=2)
    assert (fits.sum(axis=1) == 1).all()
    np.testing.assert_array_equal(table[fits.argmax(axis=1)], states.solution.reshape(-1, 16))
    for i in range(40):
        count, found = count_solutions(states.board[i])
        assert count == 1 and (found == states.solution[i]).all()


# --- generation: 9x9 --------------------------------------------------------------------


def test_bank_script_replays_gem_exactly(bank_script):
    """The bank generator makes GEM's own puzzle for the same seed (both sizes' rule:
    the first ``clues`` attempts)."""
    gem_env = SudokuEnv(clues=50, max_turns=50, scale=9)
    for seed in (0, 7):
        gem_env.reset(seed=seed)
        solution, attempt, removed = bank_script.generate(random.Random(seed))
        assert solution == [v for row in gem_env.full_grid for v in row]
        board = [
            0 if a < 50 and r else v for v, a, r in zip(solution, attempt, removed, strict=True)
        ]
        assert board == [v for row in gem_env.board for v in row]


def test_bank_is_consistent():
    bank = bank9_arrays()
    solution, attempt, removed = bank["solution"], bank["attempt"], bank["removed"]
    n = len(solution)
    assert n >= 2000 and solution.shape == attempt.shape == removed.shape == (n, 81)
    assert (np.sort(attempt, axis=1) == np.arange(81)).all()
    rng = np.random.default_rng(0)
    for i in rng.choice(n, 20, replace=False):
        assert is_valid_grid(solution[i].reshape(9, 9).astype(np.int64))
    empties = (removed & (attempt < 50)).sum(axis=1)
    assert 45 <= empties.mean() <= 50 and empties.max() <= 50


def test_9x9_symmetries_keep_an_entry_valid_and_unique():
    """One bank entry under identity bits is itself; under random bits it gives
    distinct valid puzzles with the same number of empties, all unique."""
    bank = bank9_arrays()
    entry = {k: v[:1] for k, v in bank.items()}
    lines, removal = pack_bank9(**entry)
    tables = tables_for((9,)).replace(lines9=jnp.asarray(lines), removal9=jnp.asarray(removal))
    draw = jax.jit(jax.vmap(draw9, in_axes=(None, 0, None)))
    identity = np.concatenate([[0], np.arange(9), np.tile(np.arange(3), 8), [0]]).astype(np.uint32)
    solution, empty, _ = draw(tables, jnp.asarray(identity[None]), jnp.int32(50))
    np.testing.assert_array_equal(np.asarray(solution)[0], entry["solution"][0])
    expected = entry["removed"][0] & (entry["attempt"][0] < 50)
    np.testing.assert_array_equal(np.asarray(empty)[0], expected)
    bits = jax.random.bits(jax.random.key(0), (200, 35), jnp.uint32)
    solution, empty, count = jax.device_get(draw(tables, bits, jnp.int32(50)))
    boards = np.where(empty, 0, solution)
    assert len({b.tobytes() for b in boards}) == 200
    assert (empty.sum(axis=1) == expected.sum()).all() and (count == expected.sum()).all()
    for i in range(0, 200, 20):
        count, found = count_solutions(boards[i].reshape(9, 9))
        assert count == 1 and (found.reshape(-1) == solution[i]).all()


def test_9x9_puzzles_are_unique(samples):
    states, _ = samples(HARD)
    for i in range(25):
        board, solution = states.board[i], states.solution[i]
        count, found = count_solutions(board)
        assert count == 1 and (found == solution).all() and is_valid_grid(solution)
        assert ((board == 0) | (board == solution)).all()


def gem_9x9_empties(bank_script, count: int, seed: int) -> np.ndarray:
    """``init_num_empty`` of ``count`` gem-llm 9x9 resets, its solution counter swapped
    for the bank script's exact one (GEM's takes 0.3 s a puzzle here; the RNG calls
    and decisions, so the puzzles, are the same: see the bank script test)."""
    gem_env = SudokuEnv(clues=50, max_turns=50, scale=9)

    def fast_count(grid, solutions, limit=2):
        found = bank_script.count_solutions([v for row in grid for v in row], limit)
        solutions.extend([None] * found)
        return len(solutions)

    gem_env._count_solutions = fast_count
    random.seed(seed)
    out = []
    for _ in range(count):
        gem_env.reset()
        out.append(gem_env.init_num_empty)
    return np.asarray(out)


def test_9x9_empty_cells_match_gem(samples, bank_script):
    """Chi-square: our empty-cell counts against 300 of gem-llm's 9x9 puzzles."""
    theirs = gem_9x9_empties(bank_script, 300, seed=12)
    n = SAMPLES
    states, _ = samples(HARD)
    ours = np.bincount(np.asarray(states.num_empty), minlength=82)
    assert ours[:40].sum() == 0 and ours[51:].sum() == 0
    # Bins 40..46 pooled (rare), then 47, 48, 49, 50.
    edges = [(0, 47), (47, 48), (48, 49), (49, 50), (50, 51)]
    ours_c = np.asarray([ours[a:b].sum() for a, b in edges])
    theirs_c = np.asarray([((theirs >= a) & (theirs < b)).sum() for a, b in edges])
    expected = ours_c / n * len(theirs)
    assert stats.chisquare(theirs_c, expected).pvalue > 1e-3, (ours_c, theirs_c)


# --- properties ----------------------------------------------------------------------------

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from([1, 1, 1, 1, 0]),
        st.integers(0, 10),
        st.integers(0, 10),
        st.integers(0, 10),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=ACTIONS, oracle=st.booleans())
def test_board_properties(kits, seed, actions, oracle):
    """Along any action sequence (past the end too): givens never change; every shown
    digit equals the solution's; the board only gains cells, one per correct move,
    each paying 1/num_empty; success exactly when the last empty cell is filled."""
    kit = kits(RANDOM)
    key = jax.random.key(seed)
    state, _ = kit.reset(key, kit.params)
    givens = np.asarray(state.board)
    solution = np.asarray(state.solution)
    for action in actions:
        before = jax.device_get(state)
        if oracle and action[0] and (before.board[: before.scale, : before.scale] == 0).any():
            r, c = np.argwhere(before.board[: before.scale, : before.scale] == 0)[0]
            action = (1, r + 1, c + 1, int(solution[r, c]))
        state, ts = kit.step(key, state, jnp.asarray(action, jnp.int32), kit.params)
        after = jax.device_get(state)
        board = after.board
        assert (board[givens != 0] == givens[givens != 0]).all()
        assert ((board == 0) | (board == solution)).all()
        gained = int((board != 0).sum() - (before.board != 0).sum())
        assert gained in (0, 1) and (before.board[board == 0] == 0).all()
        reward = float(ts.reward)
        if gained:
            assert reward == np.float32(1) / np.float32(after.num_empty)
        else:
            assert reward == (-0.1 if action[0] == 0 else 0.0) or np.isclose(reward, -0.1)
        complete = bool((board == solution).all())
        assert bool(ts.info["success"]) == (gained == 1 and complete)
        np.testing.assert_array_equal(np.asarray(ts.observation["board"]), board)
        assert int(after.turn) == int(before.turn) + 1


# --- the action mask (gemjax.train's mask_invalid) ------------------------------------


@pytest.mark.parametrize("env_id", [EASY, RANDOM])
def test_action_mask_allows_exactly_the_digits_no_peer_holds(kits, samples, env_id):
    """Against a brute force on sampled puzzles, on boards half solved, and with
    digits rejected: in every empty active cell, the digits its row, column and box
    lack and that were not rejected there (the solution's among them); nothing in a
    filled cell, outside the board, or out of bounds."""
    kit = kits(env_id)
    states, _ = samples(env_id)
    states = jax.tree.map(lambda x: x[:24], states)
    side = kit.env.side
    half = np.where(np.arange(81).reshape(9, 9)[:side, :side] % 2 == 0, 1, 0)
    halfway = states.replace(board=np.where(half, states.solution, states.board).astype(np.int8))
    wrong = (np.arange(1, side + 1) != states.solution[..., None]) & (states.board == 0)[..., None]
    tried = states.replace(rejected=wrong & (np.arange(side) % 2 == 0))
    for batch in (states, halfway, tried):
        masks = np.asarray(jax.jit(jax.vmap(kit.env.valid_action_mask))(batch))
        assert masks.shape == (24, 2, side + 2, side + 2, side + 2)
        for k in range(24):
            scale, board = int(batch.scale[k]), batch.board[k]
            box = math.isqrt(scale)
            expected = np.zeros_like(masks[k])
            for i, j in np.ndindex(scale, scale):
                if board[i, j]:
                    continue
                band_i, band_j = box * (i // box), box * (j // box)
                peers = {*board[i, :scale], *board[:scale, j]}
                peers |= {*board[band_i : band_i + box, band_j : band_j + box].ravel()}
                assert batch.solution[k][i, j] not in peers
                for digit in set(range(1, scale + 1)) - peers:
                    expected[1, i + 1, j + 1, digit] = not batch.rejected[k][i, j, digit - 1]
            np.testing.assert_array_equal(masks[k], expected)


def test_a_wrong_digit_is_rejected_in_the_observation_and_the_mask(kits, samples):
    """A digit placed in an empty cell and judged wrong is recorded there (and
    leaves the mask); a correct one, a filled cell or an out-of-bounds move records
    nothing."""
    kit = kits(EASY)
    states, _ = samples(EASY)
    state = jax.tree.map(lambda x: x[0], states)
    i, j = map(int, np.argwhere(state.board == 0)[0])
    right = int(state.solution[i, j])
    wrong = next(d for d in range(1, 5) if d != right)
    step = jax.jit(kit.env.step)
    moved, ts = step(jax.random.key(0), state, jnp.array([1, i + 1, j + 1, wrong]), kit.params)
    expected = np.zeros((4, 4, 4), bool)
    expected[i, j, wrong - 1] = True
    np.testing.assert_array_equal(ts.observation["rejected"], expected)
    assert not kit.env.valid_action_mask(moved)[1, i + 1, j + 1, wrong]
    filled = tuple(map(int, np.argwhere(state.board != 0)[0]))
    for action in ([1, i + 1, j + 1, right], [1, filled[0] + 1, filled[1] + 1, 1], [1, 5, 1, 1]):
        _, ts = step(jax.random.key(0), moved, jnp.array(action), kit.params)
        np.testing.assert_array_equal(ts.observation["rejected"], expected)
