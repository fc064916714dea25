"""Sokoban level generation: ``scripts/make_sokoban_bank.py`` against gem-llm's own
generator (bit-for-bit equal rooms, GEM's ``reset(seed)`` fallbacks), the shipped
bank (format, invariants, entries regenerated from their recorded seeds), an
independent move-optimal solver on bank levels, and the 6x6 bank's floor-cell counts
and optimal solution lengths against levels from GEM's generator with fresh seeds
(the 8x8 rooms, 5-28 s each in GEM, are checked seed by seed instead).
"""

from __future__ import annotations

import importlib.util
import time
from collections import deque
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from gem.envs.game_env.sokoban import utils as gem_utils
from gem.envs.game_env.sokoban.sokoban import SokobanEnv
from scipy import stats

from gemjax.testing import preserved_global_rng

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make_sokoban_bank.py"
BANK = REPO / "gemjax" / "envs" / "data" / "sokoban" / "bank.npz"
CONFIGS = {"6x6b2": (6, 2), "8x8b4": (8, 4), "8x8b5": (8, 5)}
ALPHA = 1e-3  # two-sample tests: fail only on a clear difference

# GEM's real generator throughout: tests/conftest.py otherwise makes SokobanEnv draw
# its levels from the bank.
pytestmark = pytest.mark.gem_sokoban_generator


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("make_sokoban_bank", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bank() -> dict[str, np.ndarray]:
    with np.load(BANK) as data:
        return {name: data[name] for name in data.files}


def gem_room(dim: int, boxes: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """GEM's ``generate_room`` ``(room_fixed, room_state)``, None when it gives up."""
    try:
        fixed, state, _ = gem_utils.generate_room(
            dim=(dim, dim), num_steps=steps, num_boxes=boxes, seed=seed
        )
    except RuntimeWarning:
        return None
    return fixed, state


def our_room(script, dim: int, boxes: int, steps: int, seed: int):
    """The script's ``generate_room``, None when it gives up (RuntimeWarning)."""
    try:
        return script.generate_room(dim, steps, boxes, seed)
    except RuntimeWarning:
        return None


def gem_reset(dim: int, boxes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``SokobanEnv(dim_room=(dim, dim), num_boxes=boxes).reset(seed=seed)``'s room.
    The constructor's own unseeded reset is skipped (it can take half a minute on
    8x8); the constructor still sets GEM's ``num_gen_steps``."""
    with mock.patch.object(SokobanEnv, "reset"):
        env = SokobanEnv(dim_room=(dim, dim), num_boxes=boxes)
    with preserved_global_rng():
        env.reset(seed=seed)
    return env.room_fixed, env.room_state


def assert_same(ours, theirs, what) -> None:
    assert (ours is None) == (theirs is None), what
    if ours is not None:
        for o, t in zip(ours, theirs, strict=True):
            assert o.dtype == np.uint8 and o.shape == t.shape, what
            assert np.array_equal(o, t), (what, o, t)


# -- an independent solver: breadth-first search over (player, boxes) by moves ------


def live_cells(open_cells: frozenset, targets: frozenset) -> frozenset:
    """Cells from which a lone box can still be pushed onto some target: grown
    backwards from the targets (a box reaches ``x`` from ``x - d`` when the player
    stands on ``x - 2d``)."""
    live, todo = set(targets), list(targets)
    while todo:
        r, c = todo.pop()
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            prev, player = (r - dr, c - dc), (r - 2 * dr, c - 2 * dc)
            if prev in open_cells and player in open_cells and prev not in live:
                live.add(prev)
                todo.append(prev)
    return frozenset(live)


def solve(state: np.ndarray) -> list[tuple[int, int]] | None:
    """A shortest move sequence (``(dr, dc)`` steps) that puts every box of GEM's
    initial ``room_state`` on a target, or None when there is none. Boxes are never
    pushed onto cells from which no target is reachable (this keeps optimality)."""
    rows, cols = state.shape
    cells = [(r, c) for r in range(rows) for c in range(cols)]
    open_cells = frozenset(p for p in cells if state[p] != 0)
    targets = frozenset(p for p in cells if state[p] in (2, 3))
    boxes = frozenset(p for p in cells if state[p] in (3, 4))
    (player,) = (p for p in cells if state[p] == 5)
    live = live_cells(open_cells, targets)
    start = (player, boxes)
    parent: dict = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        (r, c), placed = node
        if placed == targets:
            path = []
            while parent[node] is not None:
                node, step = parent[node]
                path.append(step)
            return path[::-1]
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            nxt = (r + dr, c + dc)
            if nxt not in open_cells:
                continue
            if nxt in placed:
                beyond = (nxt[0] + dr, nxt[1] + dc)
                if beyond not in live or beyond in placed:
                    continue
                child = (nxt, (placed - {nxt}) | {beyond})
            else:
                child = (nxt, placed)
            if child not in parent:
                parent[child] = (node, (dr, dc))
                queue.append(child)
    return None


def test_solver_on_hand_made_levels():
    # 0 wall, 1 floor, 2 target, 4 box, 5 player
    line = np.array([[0, 0, 0, 0, 0, 0], [0, 5, 4, 1, 2, 0], [0, 0, 0, 0, 0, 0]], np.uint8)
    assert solve(line) == [(0, 1), (0, 1)]
    stuck = np.array([[0, 0, 0, 0, 0], [0, 4, 1, 5, 0], [0, 1, 2, 1, 0], [0, 0, 0, 0, 0]], np.uint8)
    assert solve(stuck) is None  # the box sits in a corner off target
    detour = np.array(
        [
            [0, 0, 0, 0, 0, 0],
            [0, 1, 1, 1, 1, 0],
            [0, 1, 4, 2, 5, 0],
            [0, 1, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 0],
        ],
        np.uint8,
    )
    assert len(solve(detour)) == 6  # up, left x3, down, then push right


# -- exactness against GEM -----------------------------------------------------------


@pytest.mark.parametrize(
    ("dim", "boxes", "steps", "seeds"),
    [
        (6, 2, 20, range(100)),  # Sokoban-v0-easy and the 6x6 of -random
        (6, 1, 20, range(100, 140)),  # one box: no frozen-box test
        (6, 3, 20, range(200, 215)),
        (7, 3, 23, range(300, 315)),
        (6, 2, 12, range(400, 440)),  # another walk length
        (6, 4, 20, range(8)),  # GEM gives up (1000 tries) on most of these seeds
        (5, 2, 17, range(2)),  # GEM never makes a 5x5 room with 2 boxes
    ],
)
def test_generate_room_matches_gem(script, dim, boxes, steps, seeds):
    for seed in seeds:
        ours = our_room(script, dim, boxes, steps, seed)
        assert_same(ours, gem_room(dim, boxes, steps, seed), (dim, boxes, steps, seed))


@pytest.mark.parametrize(("boxes", "seeds"), [(4, (0, 1, 3)), (5, (0,))])
def test_generate_room_matches_gem_8x8(script, boxes, seeds):
    # seeds GEM does in about 1.5 s each (its 8x8 levels take 1-30 s)
    for seed in seeds:
        assert_same(script.generate_room(8, 27, boxes, seed), gem_room(8, boxes, 27, seed), seed)


def test_reset_level_matches_gem_reset(script):
    for seed in (0, 7, 123, 20251203, 2**31 + 5):
        assert_same(script.reset_level(6, 2, seed), gem_reset(6, 2, seed), seed)
    # 6x6 with 4 boxes: generate_room(seed=4) gives up, so reset takes seed 5's room
    assert our_room(script, 6, 4, 20, 4) is None
    ours = script.reset_level(6, 4, 4)
    assert_same(ours, script.generate_room(6, 20, 4, 5), "fallback")
    assert_same(ours, gem_reset(6, 4, 4), "fallback vs gem")
    assert_same(script.reset_level(8, 4, 3), gem_reset(8, 4, 3), "8x8")


def test_impossible_rooms_raise_like_gem(script):
    with pytest.raises(RuntimeWarning):
        gem_utils.generate_room(dim=(3, 3), num_steps=10, num_boxes=1, seed=0)
    with pytest.raises(RuntimeWarning):
        script.generate_room(3, 10, 1, 0)  # one floor cell: too few, every try
    with pytest.raises(RuntimeError):
        script.reset_level(3, 1, 0)  # 50 seeds, then GEM's RuntimeError


def test_gem_steps_and_configs(script):
    assert script.CONFIGS == CONFIGS
    for dim in (6, 8):
        with mock.patch.object(SokobanEnv, "reset"):
            env = SokobanEnv(dim_room=(dim, dim), num_boxes=2)
        assert script.num_gen_steps(dim) == env.num_gen_steps


# -- the shipped bank ----------------------------------------------------------------


def test_bank_format_and_invariants(bank):
    assert set(bank) == {f"{tag}_{kind}" for tag in CONFIGS for kind in ("state", "seed")}
    for tag, (dim, boxes) in CONFIGS.items():
        states, seeds = bank[f"{tag}_state"], bank[f"{tag}_seed"]
        n = len(seeds)
        assert n >= (1000 if dim == 6 else 100), tag
        assert states.dtype == np.uint8 and states.shape == (n, dim, dim), tag
        assert seeds.dtype == np.int64 and seeds.shape == (n,), tag
        assert np.array_equal(seeds, seeds[0] + np.arange(n)), tag  # consecutive seeds
        border = np.ones((dim, dim), bool)
        border[1:-1, 1:-1] = False
        assert not states[:, border].any(), tag
        assert np.isin(states, (0, 1, 2, 4, 5)).all(), tag  # no box on a target (3)
        flat = states.reshape(n, -1)
        assert ((flat == 4).sum(1) == boxes).all(), tag
        assert ((flat == 2).sum(1) == boxes).all(), tag  # every target uncovered
        assert ((flat == 5).sum(1) == 1).all(), tag
        # GEM's final deadlock test, on every level: no box on a "corner" by GEM's rule
        # (walls up+down, left+right, up+right or down+left; a pulled box has open
        # cells on both sides along its last pull, so in effect: no box between two
        # opposite walls) and every box pushable one step (destination floor or
        # target, push-from cell not a wall or box)
        inner = states[:, 1:-1, 1:-1]
        box = inner == 4
        near = {  # the neighbour cells' codes, up, down, left, right
            "u": states[:, :-2, 1:-1],
            "d": states[:, 2:, 1:-1],
            "l": states[:, 1:-1, :-2],
            "r": states[:, 1:-1, 2:],
        }
        wall = {k: v == 0 for k, v in near.items()}
        corner = (
            (wall["u"] & wall["d"])
            | (wall["l"] & wall["r"])
            | (wall["u"] & wall["r"])
            | (wall["d"] & wall["l"])
        )
        assert not (box & corner).any(), tag
        free = {k: np.isin(v, (1, 2)) for k, v in near.items()}
        standable = {k: np.isin(v, (1, 2, 5)) for k, v in near.items()}
        pushable = np.zeros_like(box)
        for to, frm in (("u", "d"), ("d", "u"), ("l", "r"), ("r", "l")):
            pushable |= free[to] & standable[frm]
        assert not (box & ~pushable).any(), tag


def fixed_of(state: np.ndarray) -> np.ndarray:
    """GEM's ``room_fixed`` of a bank state: boxes and player stand on plain floor."""
    return np.where(state >= 4, 1, state).astype(np.uint8)


def test_bank_6x6_entries_regenerate(script, bank):
    states, seeds = bank["6x6b2_state"], bank["6x6b2_seed"]
    rng = np.random.default_rng(0)
    for i in rng.choice(len(seeds), 200, replace=False):
        assert_same(script.reset_level(6, 2, int(seeds[i])), (fixed_of(states[i]), states[i]), i)
    for i in rng.choice(len(seeds), 20, replace=False):
        assert_same((fixed_of(states[i]), states[i]), gem_reset(6, 2, int(seeds[i])), i)


@pytest.mark.parametrize("tag", ["8x8b4", "8x8b5"])
def test_bank_8x8_entry_regenerates_in_gem(script, bank, tag):
    """One entry per 8x8 configuration through GEM's own reset: the one among the
    first eight that the script makes fastest (GEM takes 1-30 s per 8x8 level)."""
    dim, boxes = CONFIGS[tag]
    states, seeds = bank[f"{tag}_state"], bank[f"{tag}_seed"]
    times = []
    for i in range(8):
        start = time.perf_counter()
        ours = script.reset_level(dim, boxes, int(seeds[i]))
        times.append(time.perf_counter() - start)
        assert_same(ours, (fixed_of(states[i]), states[i]), (tag, i))
    i = int(np.argmin(times))
    assert_same((fixed_of(states[i]), states[i]), gem_reset(dim, boxes, int(seeds[i])), (tag, i))


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["8x8b4", "8x8b5"])
def test_bank_8x8_entries_regenerate(script, bank, tag):
    dim, boxes = CONFIGS[tag]
    states, seeds = bank[f"{tag}_state"], bank[f"{tag}_seed"]
    rng = np.random.default_rng(1)
    for i in rng.choice(len(seeds), 25, replace=False):
        ours = script.reset_level(dim, boxes, int(seeds[i]))
        assert_same(ours, (fixed_of(states[i]), states[i]), (tag, i))


@pytest.mark.parametrize(("tag", "count"), [("6x6b2", 40), ("8x8b4", 15), ("8x8b5", 15)])
def test_bank_levels_are_solvable(bank, tag, count):
    states = bank[f"{tag}_state"]
    rng = np.random.default_rng(2)
    for i in rng.choice(len(states), count, replace=False):
        path = solve(states[i])
        assert path, (tag, i)  # solvable, and not already solved


def test_gem_accepts_a_solution(bank):
    """GEM's env, reset from a bank seed, is solved by the independent solver's moves
    (the last move wins, none before it)."""
    states, seeds = bank["6x6b2_state"], bank["6x6b2_seed"]
    names = {(-1, 0): "up", (1, 0): "down", (0, -1): "left", (0, 1): "right"}
    for i in (0, 1, 2):
        with mock.patch.object(SokobanEnv, "reset"):
            env = SokobanEnv(dim_room=(6, 6), num_boxes=2, max_turns=100)
        with preserved_global_rng():
            env.reset(seed=int(seeds[i]))
            assert np.array_equal(env.room_state, states[i])
            path = solve(states[i])
            for k, step in enumerate(path):
                _, reward, terminated, _, _ = env.step(f"\\boxed{{{names[step]}}}")
                assert terminated == (k == len(path) - 1), (i, k)
        assert reward == 1.0


# -- feature distributions against GEM's generator ------------------------------------


def features(states) -> tuple[np.ndarray, np.ndarray]:
    """Per level: the number of open cells and the optimal solution length."""
    floors = np.array([int((s != 0).sum()) for s in states])
    lengths = np.array([len(solve(s)) for s in states])
    return floors, lengths


def assert_same_distribution(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    for test in (stats.mannwhitneyu, stats.ks_2samp):
        p = test(ours, theirs).pvalue
        assert p > ALPHA, (what, test.__name__, p, np.mean(ours), np.mean(theirs))


def assert_different_distribution(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert min(stats.mannwhitneyu(ours, theirs).pvalue, stats.ks_2samp(ours, theirs).pvalue) < ALPHA


def test_bank_6x6_features_match_gem(script, bank):
    """Open cells and optimal solution lengths of 1000 bank levels against 200 rooms
    from GEM's own generator (seeds far from the bank's). The same tests reject 200
    rooms made with a shorter or longer walk (14 or 25 steps instead of 20) or with
    3 boxes."""
    states = bank["6x6b2_state"]
    seeds = set(bank["6x6b2_seed"].tolist())
    fresh = range(10**9, 10**9 + 200)
    assert not seeds.intersection(range(fresh.start - 50, fresh.stop))
    sample = np.random.default_rng(3).choice(len(states), 1000, replace=False)
    ours_floor, ours_len = features(states[sample])
    gem_floor, gem_len = features([gem_room(6, 2, 20, s)[1] for s in fresh])
    assert_same_distribution(ours_floor, gem_floor, "open cells")
    assert_same_distribution(ours_len, gem_len, "solution length")
    # power: a different generator is caught
    for steps in (14, 25):
        other_floor, _ = features([script.generate_room(6, steps, 2, s)[1] for s in fresh])
        assert_different_distribution(ours_floor, other_floor)
    _, other_len = features([script.generate_room(6, 20, 3, s)[1] for s in fresh])
    assert_different_distribution(ours_len, other_len)
