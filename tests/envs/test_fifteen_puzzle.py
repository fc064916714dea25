"""FifteenPuzzle kernel: every step branch against gem-llm on hand-built states, the
start boards (the exact 2x2 distribution and the blank's exact distribution of GEM's
100-move walk, a host replay of the walk, gem-llm 0.1.0's unsolvable shuffles), the
``-random`` variant, the texts, the case-sensitive direction grammar, and board
properties along any play (hypothesis)."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.fifteen_puzzle import FifteenPuzzleEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from tiers import seeded

import gemjax
from gemjax import testing
from gemjax.envs.fifteen_puzzle import (
    DIRECTIONS,
    MESSAGES,
    RANDOM_CONFIGS,
    WALK_MOVES,
    FifteenPuzzle,
    start_board,
    walk_board,
)
from gemjax.gem import from_gem
from gemjax.rng import random_words
from gemjax.testing import lane

EASY, HARD, RANDOM = (f"game:FifteenPuzzle-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
SAMPLES = 4096  # resets per id for the distribution tests
OBS_KEYS = {"board", "active", "turn", "num_rows", "max_turns"}
# The blank's (row, col) step per direction, written out apart from the kernel's table.
BLANK_MOVES = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}
UNDO = {"up": "down", "down": "up", "left": "right", "right": "left"}


@pytest.fixture(scope="module")
def samples(kits):
    """``samples(env_id)``: :data:`SAMPLES` resets of an id (host arrays), made once."""
    cache = {}

    def get(env_id: str):
        if env_id not in cache:
            kit = kits(env_id)
            keys = jax.random.split(jax.random.key(IDS.index(env_id)), SAMPLES)
            cache[env_id] = jax.device_get(kit.vreset(keys, kit.params))
        return cache[env_id]

    return get


# --- host oracles ------------------------------------------------------------------


def goal(n: int) -> tuple[int, ...]:
    """The solved ``n x n`` board, row-major, 0 for the blank."""
    return (*range(1, n * n), 0)


def legal(n: int, blank: int, last: str | None) -> list[str]:
    """GEM's walk moves from ``blank`` (a flat index), in GEM's order."""
    r, c = divmod(blank, n)
    return [
        d
        for d, (dr, dc) in BLANK_MOVES.items()
        if 0 <= r + dr < n and 0 <= c + dc < n and (last is None or d != UNDO[last])
    ]


def slid(n: int, board: tuple[int, ...], direction: str) -> tuple[int, ...]:
    """``board`` after the tile on ``direction``'s side slides into the blank."""
    blank = board.index(0)
    dr, dc = BLANK_MOVES[direction]
    target = blank + dr * n + dc
    cells = list(board)
    cells[blank], cells[target] = cells[target], 0
    return tuple(cells)


def walk_distribution(n: int, moves: int, key) -> dict:
    """The exact distribution of ``key(board)`` after GEM's walk of ``moves`` moves
    (each uniform among the legal moves that do not undo the previous one)."""
    states = {(goal(n), None): Fraction(1)}
    for _ in range(moves):
        nxt: dict = {}
        for (board, last), p in states.items():
            options = legal(n, board.index(0), last)
            for d in options:
                state = (slid(n, board, d), d)
                nxt[state] = nxt.get(state, 0) + p / len(options)
        # Merge what ``key`` and the next moves cannot tell apart.
        states = {}
        for (board, last), p in nxt.items():
            state = (key(board), last)
            states[state] = states.get(state, 0) + p
    out: dict = {}
    for (board, _), p in states.items():
        out[board] = out.get(board, 0) + p
    return out


def blank_key(n: int):
    """A key keeping only the blank (as a board of zeros and ones, which the walk
    moves alike)."""

    def key(board: tuple[int, ...]) -> tuple[int, ...]:
        blank = board.index(0)
        return tuple(0 if i == blank else 1 for i in range(n * n))

    return key


def solvable(board: np.ndarray, n: int) -> bool:
    """The parity invariant: the permutation's parity (blank as ``n*n``) equals the
    parity of the blank's taxicab distance from the bottom-right corner."""
    tiles = [n * n if v == 0 else int(v) for v in board[:n, :n].reshape(-1)]
    inversions = sum(a > b for a, b in itertools.combinations(tiles, 2))
    r, c = divmod(tiles.index(n * n), n)
    return (inversions + (n - 1 - r) + (n - 1 - c)) % 2 == 0


def below(word: int, count: int) -> int:
    """The kernel's word-to-choice map (the high word of ``word * count``)."""
    return (word * count) >> 32


def host_walk(n: int, words: list[int]) -> tuple[int, ...]:
    """GEM's walk with the choice of each move read from one word."""
    board, last = goal(n), None
    for word in words:
        options = legal(n, board.index(0), last)
        last = options[below(word, len(options))]
        board = slid(n, board, last)
    return board


def gem_env(n: int, max_turns: int, board, turn: int) -> FifteenPuzzleEnv:
    """A gem-llm env in a hand-built state."""
    env = FifteenPuzzleEnv(max_turns=max_turns, num_rows=n)
    cells = np.asarray(board).reshape(n, n)
    env.board = [[None if v == 0 else int(v) for v in row] for row in cells]
    env.turn_count = turn
    return env


# --- registration and parameters ----------------------------------------------------


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:FifteenPuzzle")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        if kwargs["num_rows"] is None:
            assert env.randomize and env.config == ("random",) and env.side == 4
            continue
        assert env.config == (kwargs["num_rows"], kwargs["max_turns"])
        assert int(env.default_params.max_turns) == kwargs["max_turns"]
    assert gemjax.make(EASY, num_rows=3).config == (3, 10)
    assert FifteenPuzzle(max_turns=None, num_rows=3).randomize  # GEM: either None
    for bad in [dict(num_rows=1), dict(num_rows=11), dict(max_turns=0)]:
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)


# --- text: instructions, board, grammar -----------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4, 10])
def test_instructions_match_gem(n):
    env = FifteenPuzzleEnv(max_turns=5, num_rows=n)
    args = [int(a) for a in MESSAGES.event("instructions", greatest=n * n - 1).args]
    assert MESSAGES.render(MESSAGES.kind("instructions"), args) == env._get_instructions()


def test_board_render_matches_gem(kits, samples):
    """Start boards of every size and mid-game boards, rendered by the suffix template
    and by GEM (``__`` for the blank, two-character tiles, the space before the
    first newline)."""
    kit = kits(RANDOM)
    states, _ = samples(RANDOM)
    rng = np.random.default_rng(3)
    actions = jnp.asarray(rng.integers(0, 5, size=(6, SAMPLES)), jnp.int32)
    keys = jax.random.split(jax.random.key(0), SAMPLES)
    moved = states
    for step in actions:
        moved, _ = kit.vstep(keys, moved, step, kit.params)
    moved = jax.device_get(moved)
    sizes = set()
    for batch in (states, moved):
        for i in range(0, SAMPLES, 97):
            s = lane(batch, i)
            n = int(s.num_rows)
            gem = gem_env(n, 5, s.board[:n, :n], 0)
            values = {"num_rows": n, "board": s.board.reshape(-1).tolist()}
            assert kit.env.suffix.render(values) == gem.get_task_suffix()
            sizes.add(n)
    assert sizes == {2, 3, 4}


GEM_PATTERN = re.compile(r"\\boxed{(up|down|left|right)}")


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{up}",
        "\\boxed{down}",
        "I move \\boxed{left} now.",
        "\\boxed{right}",
        "\\boxed{Up}",
        "\\boxed{UP}",
        "\\boxed{r\u0130ght}",
        "\\boxed{r\u0131ght}",
        "up",
        "\\boxed{ up}",
        "\\boxed{up }",
        "\\boxed{upp}",
        "\\boxed{up} \\boxed{left}",
        "\\boxed{left} \\boxed{Up}",
        "\\boxed{\\boxed{down}}",
        "\\boxed{up",
        "\\BOXED{up}",
        "",
    ],
)
def test_grammar_is_gems_case_sensitive_regex(text):
    grammar = gemjax.make(EASY).grammar
    matches = GEM_PATTERN.findall(text)
    parsed = grammar.parse(text)
    assert parsed.ok == bool(matches) and parsed.echoes == {}
    assert parsed.action == (DIRECTIONS.index(matches[-1]) + 1 if matches else 0)
    if matches:
        assert grammar.render(np.asarray(parsed.action)) == f"\\boxed{{{matches[-1]}}}"


def test_random_action_is_uniform_over_the_directions(kits, samples):
    """GEM's sampler draws one of the four words uniformly; gemjax boxes it."""
    kit = kits(HARD)
    states, _ = samples(HARD)
    keys = jax.random.split(jax.random.key(9), SAMPLES)
    actions = np.asarray(jax.jit(jax.vmap(kit.env.random_action))(keys, states))
    counts = np.bincount(actions, minlength=5)
    assert counts[0] == 0 and stats.chisquare(counts[1:]).pvalue > 1e-3
    env = gemjax.gem.make(EASY, seed=0)
    assert GEM_PATTERN.fullmatch(env.sample_random_action())


# --- every branch against gem-llm ------------------------------------------------------

RESPONSES = (
    *(f"\\boxed{{{d}}}" for d in DIRECTIONS),
    "Let me slide it: \\boxed{up}.",
    "\\boxed{left} or rather \\boxed{down}",
    "\\boxed{Up}",
    "\\boxed{RIGHT}",
    "left",
    "\\boxed{up} \\boxed{Left}",
    "",
)


def branch_states(n: int, max_turns: int, rng: random.Random):
    """Boards: walked, one move from the goal, shuffled (gem-llm 0.1.0's resets, half
    of them unsolvable); turns: the start, the last turn, past the end."""
    boards = [host_walk(n, [rng.getrandbits(32) for _ in range(WALK_MOVES)]) for _ in range(3)]
    solved = goal(n)
    boards += [slid(n, solved, d) for d in legal(n, solved.index(0), None)]
    for _ in range(3):
        tiles = list(solved)
        rng.shuffle(tiles)
        boards.append(tuple(tiles))
    for board in boards:
        for turn in (0, max_turns - 1, max_turns + 1):
            yield board, turn


@pytest.mark.parametrize(("n", "max_turns"), [(2, 10), (3, 20), (4, 50)])
def test_every_branch_matches_gem(n, max_turns):
    """Every response on every hand-built state: the 5-tuple equals gem-llm's (the
    max-turn reward counts the blank's cell; success on the last turn is not
    truncated; a format error on it is)."""
    rng = random.Random(n)
    seen: Counter = Counter()
    classify = testing.message_classifier(MESSAGES)
    ours = None
    for board, turn in branch_states(n, max_turns, rng):
        for response in RESPONSES:
            theirs = gem_env(n, max_turns, board, turn)
            ours = testing.mirror(theirs, ours)
            want, got = theirs.step(response), ours.step(response)
            problems = testing.check_step(got, want)
            assert not problems, (board, turn, response, problems, got, want)
            name = classify(want[0]).split("[")[0]
            seen[name] += 1
            seen["soft reward > 0"] += name == "max_turns" and want[1] > 0
    assert set(seen) == {*MESSAGES.names[1:], "soft reward > 0"}, seen
    assert seen["soft reward > 0"] > 0


class FifteenStream(testing.ActionStream):
    """Adversarial responses for one FifteenPuzzle episode: mostly moves whose tile is
    on the board (read from our mirror's public board, equal to GEM's), also off-board
    moves, case and spacing GEM's case-sensitive regex refuses, two boxes; plus the
    base kinds."""

    def __init__(self, rng: random.Random, gem_env, ours) -> None:
        super().__init__(rng, gem_env, ours)
        self.kinds = [
            (self.legal, 50),
            (self.any_direction, 10),
            (self.refused_spelling, 6),
            (self.two_moves, 4),
            *self.kinds,
        ]

    def legal(self) -> str:
        mask = np.asarray(self.ours.kernel.valid_action_mask(self.ours.state))
        direction = self.rng.choice([DIRECTIONS[i - 1] for i in np.flatnonzero(mask)])
        return self.boxed(direction, prose=0.2)

    def any_direction(self) -> str:
        return self.boxed(self.rng.choice(DIRECTIONS))

    def refused_spelling(self) -> str:
        word = self.rng.choice(DIRECTIONS)
        return self.rng.choice(
            [
                self.boxed(word.upper()),
                self.boxed(word.capitalize()),
                self.boxed(f" {word}"),
                self.boxed(f"{word} "),
                word,
            ]
        )

    def two_moves(self) -> str:
        return f"{self.any_direction()} then {self.legal()}"


PARITY_EPISODES = {EASY: 200, HARD: 60}


@pytest.mark.parametrize(("env_id", "stream_seed"), seeded((EASY, HARD)))
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    """Hundreds of episodes side by side with gem-llm from ``from_gem`` (its -random
    id cannot be made): every 5-tuple equal, every message reached on the 2x2 board."""
    import gem

    seen = testing.check_gem_parity(
        gem.make(env_id),
        env_id,
        PARITY_EPISODES[env_id],
        stream_seed,
        stream=FifteenStream,
        extra_turns=(3, 4),
        turns_past_limit=5,
        describe=lambda gem_env: f"board {gem_env.board} turn {gem_env.turn_count}",
    )
    names = {name.split("[")[0] for name in seen}
    expected = set(MESSAGES.names) - {"instructions"}
    assert names == expected if env_id == EASY else names == expected - {"success"}, seen


def test_soft_reward_is_float32_of_gems_sum():
    """GEM adds ``1 / N**2`` once per matching cell in float64; the kernel divides
    once in float32: equal after rounding to float32, for every count and size."""
    for n in range(2, 11):
        for k in range(n * n + 1):
            total = 0.0
            for _ in range(k):
                total += 1 / (n * n)
            assert np.float32(total) == np.float32(k) / np.float32(n * n)


# --- start boards -----------------------------------------------------------------------


def test_easy_has_gems_two_start_boards(samples):
    """After the first move the 2x2 walk is forced around the 4-cycle: exactly two
    boards, each with probability 1/2 (the exact distribution of GEM's walk)."""
    exact = walk_distribution(2, WALK_MOVES, key=lambda board: board)
    assert exact == {(3, 1, 2, 0): Fraction(1, 2), (2, 3, 1, 0): Fraction(1, 2)}
    states, _ = samples(EASY)
    boards = Counter(map(tuple, states.board.reshape(SAMPLES, -1).tolist()))
    assert set(boards) == set(exact)
    assert stats.binomtest(boards[(3, 1, 2, 0)], SAMPLES, 0.5).pvalue > 1e-3


@pytest.mark.parametrize("n", [3, 4])
def test_blank_follows_gems_exact_distribution(samples, n):
    """The blank's cell after the walk: the exact distribution against 4096 resets
    (of ``-hard`` for 4x4, of ``-random``'s 3x3 draws)."""
    exact = walk_distribution(n, WALK_MOVES, key=blank_key(n))
    probability = np.zeros(n * n)
    for board, p in exact.items():
        probability[board.index(0)] += float(p)
    states, _ = samples(HARD if n == 4 else RANDOM)
    boards = states.board[states.num_rows == n][:, :n, :n].reshape(-1, n * n)
    counts = np.bincount((boards == 0).argmax(axis=1), minlength=n * n)
    reachable = probability > 0
    assert not counts[~reachable].any()
    expected = probability[reachable] * len(boards)
    assert stats.chisquare(counts[reachable], expected).pvalue > 1e-3, (counts, expected)


def walk_from_array(words: jax.Array, num_rows: jax.Array, side: int) -> jax.Array:
    """:func:`walk_board` reading its words from uint32[moves] ``words``."""
    return walk_board(lambda k: words[k], num_rows, side, moves=words.shape[0])


def test_walk_replays_gems_rule():
    """The kernel's walk equals the host walk on the same words (each word picks
    among the legal, non-undoing moves in GEM's order), on every board size, in the
    padded 4x4 array and in its own (bit planes up to 4x4, packed cells on 5x5)."""
    rng = np.random.default_rng(0)
    walk = jax.jit(jax.vmap(walk_from_array, in_axes=(0, None, None)), static_argnums=2)
    for n, side in ((2, 4), (3, 4), (4, 4), (2, 2), (3, 3), (4, 5), (5, 5)):
        words = rng.integers(0, 2**32, size=(64, WALK_MOVES), dtype=np.uint32)
        boards = np.asarray(walk(jnp.asarray(words), jnp.int32(n), side))
        assert not boards[:, n:].any() and not boards[:, :, n:].any()
        for row, board in zip(words.tolist(), boards, strict=True):
            assert tuple(board[:n, :n].reshape(-1).tolist()) == host_walk(n, row)


def test_two_by_two_start_reads_the_walks_board():
    """On a 2x2 array the reset reads the board of the walk's first pick instead of
    walking: the same board as the walk for the same words."""
    rng = np.random.default_rng(1)
    words = jnp.asarray(rng.integers(0, 2**32, size=(256, WALK_MOVES), dtype=np.uint32))
    walked = jax.jit(jax.vmap(walk_from_array, in_axes=(0, None, None)), static_argnums=2)
    read = jax.jit(jax.vmap(lambda w, n: start_board(lambda k: w[k], n, 2), in_axes=(0, None)))
    expected = np.asarray(walked(words, jnp.int32(2), 2))
    np.testing.assert_array_equal(np.asarray(read(words, jnp.int32(2))), expected)
    assert len({board.tobytes() for board in expected}) == 2


@pytest.mark.parametrize("env_id", [HARD, RANDOM])
def test_reset_walks_with_its_random_words(env_id):
    """A reset draws its walk's words one by one inside the loop: the board of the
    walk over ``random_words(key, 101)``'s first 100, and ``-random``'s configuration
    from the last."""
    env = gemjax.make(env_id)
    keys = jax.random.split(jax.random.key(11), 32)
    states, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, env.default_params)
    words = jax.vmap(lambda key: random_words(key, WALK_MOVES + 1))(keys)
    walked = jax.jit(jax.vmap(walk_from_array, in_axes=(0, 0, None)), static_argnums=2)
    expected = np.asarray(walked(words[:, :WALK_MOVES], states.num_rows, 4))
    np.testing.assert_array_equal(np.asarray(states.board), expected)
    if env_id == RANDOM:
        picks = [below(int(w), len(RANDOM_CONFIGS)) for w in np.asarray(words[:, -1])]
        assert states.num_rows.tolist() == [RANDOM_CONFIGS[p][0] for p in picks]


def test_start_boards_are_solvable_unlike_gem_llm_0_1_0(samples):
    """gem-llm 0.1.0 shuffles the tiles uniformly (about half of its boards cannot
    be solved; upstream GEM replaced it with the walk): gemjax's are all solvable."""
    gem = FifteenPuzzleEnv(max_turns=10, num_rows=3)
    shuffled = []
    for seed in range(400):
        gem.reset(seed=seed)
        shuffled.append(np.asarray([[0 if t is None else t for t in r] for r in gem.board]))
    unsolvable = sum(not solvable(b, 3) for b in shuffled)
    assert 150 < unsolvable < 250
    for env_id in IDS:
        states, _ = samples(env_id)
        for i in range(0, SAMPLES, 16):
            assert solvable(states.board[i], int(states.num_rows[i]))


def test_random_variant_draws_gems_intended_configurations(samples):
    states, ts = samples(RANDOM)
    turns = dict(RANDOM_CONFIGS)
    counts = Counter(states.num_rows.tolist())
    assert set(counts) == set(turns) and stats.chisquare(list(counts.values())).pvalue > 1e-3
    np.testing.assert_array_equal(states.max_turns, [turns[n] for n in states.num_rows.tolist()])
    np.testing.assert_array_equal(ts.observation["active"].sum(axis=(1, 2)), states.num_rows**2)
    assert not (states.board * ~ts.observation["active"]).any()


def test_observation_layout(kits):
    kit = kits(RANDOM)
    _, ts = kit.reset(jax.random.key(0), kit.params)
    assert set(ts.observation) == OBS_KEYS
    assert ts.observation["board"].shape == (4, 4) and ts.observation["board"].dtype == jnp.int8
    assert ts.observation["active"].dtype == jnp.bool_


def test_valid_action_mask_names_the_legal_directions(kits, samples):
    kit = kits(RANDOM)
    states, _ = samples(RANDOM)
    masks = np.asarray(jax.jit(jax.vmap(kit.env.valid_action_mask))(states))
    for i in range(0, SAMPLES, 31):
        n = int(states.num_rows[i])
        blank = int((states.board[i][:n, :n] == 0).argmax())
        want = [False] + [d in legal(n, blank, None) for d in DIRECTIONS]
        assert masks[i].tolist() == want


def test_from_gem_mirrors_a_shuffled_board():
    """gem-llm 0.1.0's own reset (a shuffle) mirrors exactly."""
    gem = FifteenPuzzleEnv(max_turns=10, num_rows=4)
    gem.reset(seed=11)
    ours = from_gem(gem)
    assert ours.get_task_suffix() == gem.get_task_suffix()


# --- properties along any play ------------------------------------------------------------

ACTIONS = st.lists(st.sampled_from([0, 1, 2, 3, 4, 1, 2, 3, 4, -7, 9]), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=ACTIONS)
def test_board_properties(kits, seed, actions):
    """Along any action sequence (past the end too): the active cells hold a
    permutation of ``0..N*N-1`` and the rest zeros; the solvability invariant holds;
    a legal direction swaps the blank with that neighbour, anything else changes
    nothing; success exactly when a legal move reaches the goal."""
    kit = kits(RANDOM)
    key = jax.random.key(seed)
    state, _ = kit.reset(key, kit.params)
    for action in actions:
        before = jax.device_get(state)
        n = int(before.num_rows)
        state, ts = kit.step(key, state, jnp.int32(action), kit.params)
        after = jax.device_get(state)
        board = after.board
        assert sorted(board[:n, :n].reshape(-1).tolist()) == list(range(n * n))
        assert not board[n:].any() and not board[:, n:].any()
        assert solvable(board, n)
        flat = tuple(before.board[:n, :n].reshape(-1).tolist())
        direction = DIRECTIONS[action - 1] if 1 <= action <= 4 else None
        moves = legal(n, flat.index(0), None)
        expected = slid(n, flat, direction) if direction in moves else flat
        assert tuple(board[:n, :n].reshape(-1).tolist()) == expected
        assert bool(ts.info["success"]) == (direction in moves and expected == goal(n))
        assert int(after.turn) == int(before.turn) + 1
        np.testing.assert_array_equal(np.asarray(ts.observation["board"]), board)
