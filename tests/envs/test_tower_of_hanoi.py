"""TowerofHanoi kernel: GEM's rules branch by branch against ``gem-llm`` on hand-built
boards, the texts, the reset distribution, the grammar, the board invariants
(hypothesis) and GEM parity over hundreds of episodes of adversarial and solving
streams (tests/test_contract.py runs the kernel contract and the base stream)."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.tower_of_hanoi import TowerofHanoiEnv
from gem.envs.registration import ENV_REGISTRY
from hypothesis import given, settings
from hypothesis import strategies as st

import gemjax
import gemjax.gem as gg
from gemjax import testing
from gemjax.envs.tower_of_hanoi import MAX_DISKS, PATTERN, RANDOM_CONFIGS, TowerofHanoiState
from gemjax.testing import lane

EASY, HARD, RANDOM = (f"game:TowerofHanoi-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
SLOW = pytest.mark.slow  # left out of the quick tier (-m "not slow"), run in CI


def gem_env(board: dict[str, list[int]], turn: int, max_turns: int) -> TowerofHanoiEnv:
    """GEM's env on a hand-built board."""
    disks = sum(len(t) for t in board.values())
    env = TowerofHanoiEnv(num_disks=disks, max_turns=max_turns)
    env.board = {name: list(tower) for name, tower in board.items()}
    env.turn_count = turn
    return env


def gem_action(text: str) -> tuple[str, str] | None:
    """GEM's reading of a response (its regex, last match, upper-cased)."""
    matches = list(re.finditer(PATTERN, text))
    if not matches:
        return None
    return matches[-1].group(1).upper(), matches[-1].group(2).upper()


def test_registered_ids_match_gem_registry():
    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:TowerofHanoi")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        if kwargs["num_disks"] is None:
            assert env.randomize and env.config == ("random",) and env.size == 5
            continue
        p = env.default_params
        assert (int(p.num_disks), int(p.max_turns)) == (kwargs["num_disks"], kwargs["max_turns"])
        assert env.config == (kwargs["num_disks"], kwargs["max_turns"])
    # GEM's rule: either argument None is the random variant.
    assert gemjax.make(EASY, max_turns=None).randomize
    for bad in (dict(num_disks=0), dict(num_disks=MAX_DISKS + 1), dict(max_turns=0)):
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)
    with pytest.raises(ValueError, match="capacity"):
        gemjax.make(EASY).validate_params(gemjax.make(HARD).default_params)


@pytest.mark.parametrize("disks", range(1, MAX_DISKS + 1))
def test_reset_text_matches_gem(disks):
    """Instructions and suffix for every disk count; the reset board is all on A."""
    ours = gg.make(EASY, num_disks=disks, max_turns=3 * disks, seed=0)
    theirs = TowerofHanoiEnv(num_disks=disks, max_turns=3 * disks)
    assert ours.reset(seed=1) == theirs.reset(seed=1)
    assert ours.get_task_suffix() == theirs.get_task_suffix()


def test_observation_layout(kits):
    for env_id in IDS:
        kit = kits(env_id)
        _, ts = kit.reset(jax.random.key(0), kit.params)
        obs = ts.observation
        assert set(obs) == {"pegs", "turn", "num_disks", "max_turns"}
        assert obs["pegs"].shape == (kit.env.size,) and obs["pegs"].dtype == jnp.int8
        n = int(obs["num_disks"])
        assert obs["pegs"].tolist() == [0] * n + [-1] * (kit.env.size - n)
        for name in ("turn", "num_disks", "max_turns"):
            assert obs[name].shape == () and obs[name].dtype == jnp.int32


@pytest.mark.parametrize("env_id", IDS)
def test_reset_distribution(kits, env_id):
    """Fixed ids always start from the same board; -random draws GEM's candidates,
    each about a third of the time."""
    n = 3000
    kit = kits(env_id)
    states, _ = jax.device_get(kit.vreset(jax.random.split(jax.random.key(7), n), kit.params))
    configs = Counter(zip(states.num_disks.tolist(), states.max_turns.tolist(), strict=True))
    if env_id == RANDOM:
        assert set(configs) == set(RANDOM_CONFIGS)
        for config in RANDOM_CONFIGS:  # 5 sigma is about 0.043
            assert abs(configs[config] / n - 1 / 3) < 0.043, configs
    else:
        p = kit.params
        assert set(configs) == {(int(p.num_disks), int(p.max_turns))}
    assert (states.turn == 0).all()
    disks = np.arange(1, kit.env.size + 1)
    expected = np.where(disks[None] <= states.num_disks[:, None], 0, -1)
    np.testing.assert_array_equal(jax.vmap(kit.env.pegs)(states), expected)


def test_random_action_is_a_uniform_well_formed_move(kits):
    kit = kits(RANDOM)
    n = 9000
    keys = jax.random.split(jax.random.key(3), n)
    states, _ = kit.vreset(keys, kit.params)
    actions = np.asarray(jax.jit(jax.vmap(kit.env.random_action))(keys, states))
    assert actions.shape == (n, 2) and actions.dtype == np.int32
    pairs = Counter(map(tuple, actions.tolist()))
    assert set(pairs) == {(s, d) for s in (1, 2, 3) for d in (1, 2, 3)}
    for count in pairs.values():  # each 1/9: 5 sigma is about 0.016
        assert abs(count / n - 1 / 9) < 0.016, pairs


# --- every branch ---------------------------------------------------------------------------

E: list[int] = []
# (name, board, turn, max_turns, response, expected message, reward, terminated, truncated)
BRANCHES = [
    ("format_error", ([3, 2, 1], E, E), 0, 10, "move A to C", "format_error", -0.1, 1, 0),
    ("format_error_last", ([3, 2, 1], E, E), 9, 10, "\\boxed{A D}", "format_error", -0.1, 1, 1),
    ("format_error_past", ([3, 2, 1], E, E), 10, 10, "\\boxed{}", "format_error", -0.1, 1, 0),
    ("empty", ([3, 2, 1], E, E), 0, 10, "\\boxed{B C}", "empty", 0.0, 0, 0),
    ("empty_same", ([3, 2, 1], E, E), 0, 10, "\\boxed{c,c}", "empty", 0.0, 0, 0),
    ("larger", ([3, 2], [1], E), 1, 10, "\\boxed{A B}", "larger", 0.0, 0, 0),
    ("moved", ([3, 2, 1], E, E), 0, 10, "\\boxed{a c}", "moved", 0.0, 0, 0),
    ("onto_larger", ([3], [1], [2]), 2, 10, "\\boxed{B,C}", "moved", 0.0, 0, 0),
    ("same_tower", ([3, 2, 1], E, E), 0, 10, "\\boxed{AA}", "moved", 0.0, 0, 0),
    ("success", ([1], E, [3, 2]), 6, 10, "\\boxed{A , C}", "success", 1.0, 1, 0),
    ("success_last", (E, [1], [3, 2]), 9, 10, "\\boxed{B\tC}", "success", 1.0, 1, 0),
    ("success_same", (E, E, [3, 2, 1]), 12, 10, "\\boxed{C C}", "success", 1.0, 1, 0),
    ("last_moved", ([3, 2], E, [1]), 9, 10, "\\boxed{A B}", "max_turns", 1 / 3, 1, 1),
    ("last_empty", (E, [3, 2], [1]), 9, 10, "\\boxed{A B}", "max_turns", 1 / 3, 1, 1),
    ("last_larger", ([3], E, [2, 1]), 9, 10, "\\boxed{A C}", "max_turns", 2 / 3, 1, 1),
    ("last_to_c", ([3, 2], [1], E), 34, 35, "\\boxed{B C}", "max_turns", 1 / 3, 1, 1),
    ("past_end", (E, [3, 2, 1], E), 15, 10, "\\boxed{B A}", "max_turns", 0.0, 1, 1),
]


def state_of(board, turn, max_turns, size: int = 5) -> TowerofHanoiState:
    env = gemjax.make(EASY, num_disks=size, max_turns=max_turns)
    return env.state_from_gem(gem_env(dict(zip("ABC", board, strict=True)), turn, max_turns))


@pytest.fixture(scope="module")
def branch_results(kits):
    """Every case stepped in one vmapped call (capacity 5: 3 disks and 2 padding)."""
    kit = kits(EASY, num_disks=5, max_turns=10)
    states = [state_of(board, turn, turns) for _, board, turn, turns, *_ in BRANCHES]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    actions = np.stack([np.asarray(kit.env.grammar.parse(case[4]).action) for case in BRANCHES])
    keys = jax.random.split(jax.random.key(0), len(BRANCHES))
    return jax.device_get(kit.vstep(keys, stacked, jnp.asarray(actions), kit.params))


@pytest.mark.parametrize("index", range(len(BRANCHES)), ids=[c[0] for c in BRANCHES])
def test_branch(kits, branch_results, index):
    env = kits(EASY, num_disks=5, max_turns=10).env
    _, board, turn, turns, text, kind, reward, term, trunc = BRANCHES[index]
    new_state, ts = lane(branch_results, index)
    assert env.messages.names[int(ts.event.kind)] == kind
    assert ts.reward == np.float32(reward)
    assert (bool(ts.terminated), bool(ts.truncated)) == (bool(term), bool(trunc))
    assert bool(ts.info["success"]) is (kind == "success")
    assert int(new_state.turn) == turn + 1
    # GEM agrees: message, reward, flags, suffix and the board after the step.
    gem = gem_env(dict(zip("ABC", board, strict=True)), turn, turns)
    g_obs, g_reward, g_term, g_trunc, g_info = gem.step(text)
    assert env.messages.render(int(ts.event.kind), ts.event.args.tolist()) == g_obs
    assert np.float32(g_reward) == ts.reward and (g_term, g_trunc) == (term, trunc)
    mirror = gemjax.make(EASY, num_disks=3, max_turns=turns)
    np.testing.assert_array_equal(mirror.state_from_gem(gem).towers, new_state.towers)
    values = jax.device_get(dict(env.suffix_values(new_state)))
    host = {k: v.tolist() if v.ndim else int(v) for k, v in values.items()}
    assert env.suffix.render(host) == g_info["suffix"]


def test_max_turn_reward_is_float32_of_gems():
    """``len(C) / n``: one float32 division equals GEM's float64 ratio rounded."""
    for n in range(1, MAX_DISKS + 1):
        for on_c in range(n + 1):
            assert np.float32(on_c) / np.float32(n) == np.float32(on_c / n)


def test_state_from_gem_refuses_impossible_boards():
    env = gemjax.make(EASY)
    with pytest.raises(ValueError, match="largest first"):
        env.state_from_gem(gem_env({"A": [2, 3], "B": [1], "C": []}, 0, 10))
    with pytest.raises(ValueError, match="once each"):
        env.state_from_gem(gem_env({"A": [3, 1], "B": [1], "C": []}, 0, 10))
    with pytest.raises(ValueError, match="fit"):
        env.state_from_gem(gem_env({"A": [4, 3, 2, 1], "B": [], "C": []}, 0, 10))


# --- the grammar ----------------------------------------------------------------------------

PIECES = (
    "\\boxed{", "}", "A", "b", "C", "a", "B", "c", "D", "d", ",", ",,", " ", "  ", "\t", "\n",
    "\u3000", "\xa0", "\x85", "\x1c", "\u2003", "ı", "Å", "Ａ", "\\boxed{A C}", "{", "\\",
    "boxed", "I move ",
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join) | st.text(max_size=20))
def test_grammar_agrees_with_gems_regex(text):
    grammar = gemjax.make(EASY).grammar
    parsed = grammar.parse(text)
    expected = gem_action(text)
    assert parsed.ok is (expected is not None)
    if expected is None:
        assert parsed.action.tolist() == [0, 0]
    else:
        assert parsed.action.tolist() == ["ABC".index(t) + 1 for t in expected]
        assert gem_action(grammar.render(parsed.action)) == expected


# --- board invariants (hypothesis) ----------------------------------------------------------

STEPS = 40


@pytest.fixture(scope="module")
def rollout():
    """``(pegs, timesteps, towers)`` of a -random episode from ``key`` under
    ``actions`` (int32[STEPS, 2]), stacked over steps."""
    env = gemjax.make(RANDOM)
    params = env.default_params

    def run(key, actions):
        state, _ = env.reset(key, params)

        def body(state, action):
            state, ts = env.step(key, state, action, params)
            return state, (env.pegs(state), ts, env.towers(state))

        return jax.lax.scan(body, state, actions)[1]

    return env, jax.jit(run)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.lists(st.tuples(st.integers(-1, 4), st.integers(-1, 4)), min_size=STEPS, max_size=STEPS),
)
def test_no_disk_on_a_smaller_one_and_disks_conserved(rollout, seed, moves):
    """After every step, under any actions (format errors and out-of-range codes too):
    each tower lists strictly decreasing disks, every disk 1..n is on exactly one
    tower and the padding stays off the board; and GEM's board, stepped with the
    same moves, is the same."""
    env, run = rollout
    key, actions = jax.random.key(seed), jnp.asarray(moves, jnp.int32)
    pegs, timesteps, (disks, heights) = jax.device_get(run(key, actions))
    n = int(timesteps.observation["num_disks"][0])
    gem = TowerofHanoiEnv(num_disks=n, max_turns=int(timesteps.observation["max_turns"][0]))
    for t, (source, target) in enumerate(moves):
        towers = [disks[t, p, : heights[t, p]].tolist() for p in range(3)]
        for tower in towers:
            assert all(low > high for low, high in itertools.pairwise(tower)), towers
        assert sorted(d for tower in towers for d in tower) == list(range(1, n + 1))
        assert (pegs[t, n:] == -1).all() and set(pegs[t, :n].tolist()) <= {0, 1, 2}
        text = env.grammar.render(np.asarray([source, target]))
        obs = gem.step(text)[0]
        assert towers == [gem.board[name] for name in "ABC"], (t, text)
        assert bool(timesteps.info["success"][t]) is obs.startswith("Congratulations"), (t, obs)


# --- GEM parity on solving and adversarial streams ------------------------------------------

SEPARATORS = ("", " ", ",", ", ", " , ", "\t", "\n", "\u3000", ",\xa0", "\x85 ,\n")
BAD_SEPARATORS = (",,", ";", " - ", "to")
EPISODES = {EASY: 300, HARD: 120, RANDOM: 200}


def next_move(pegs: list[int], disks: int, target: int) -> tuple[int, int] | None:
    """The first move of the shortest way to stack disks ``1..disks`` on ``target``
    (``pegs[d - 1]`` is disk ``d``'s tower), or None when they are there."""
    if disks == 0:
        return None
    where = pegs[disks - 1]
    if where == target:
        return next_move(pegs, disks - 1, target)
    first = next_move(pegs, disks - 1, 3 - where - target)
    return first if first is not None else (where, target)


class HanoiStream(testing.ActionStream):
    """Adversarial responses for one Tower of Hanoi episode: the solving move, other
    legal and illegal moves, S == D, every separator GEM's ``\\s*,?\\s*`` allows and
    some it does not, lower case, several boxes; plus the base kinds. Moves read the
    public board of our mirror (equal to GEM's)."""

    def __init__(self, rng: random.Random, gem_env, ours: gg.TextEnv, careful: bool) -> None:
        super().__init__(rng, gem_env, ours)
        self.kinds = (
            [(self.solving, 90), (self.legal, 5), (self.illegal, 5)]
            if careful
            else [
                (self.solving, 30),
                (self.legal, 15),
                (self.illegal, 15),
                (self.same, 6),
                (self.badly_separated, 5),
                (self.two_moves, 4),
                *self.kinds,
            ]
        )

    def pegs(self) -> list[int]:
        state = self.ours.state
        towers = np.asarray(state.towers).tolist()
        return [
            next(t for t in range(3) if towers[t] >> d & 1) for d in range(int(state.num_disks))
        ]

    def tops(self) -> list[int | None]:
        pegs = self.pegs()
        return [min((d + 1 for d, p in enumerate(pegs) if p == t), default=None) for t in range(3)]

    def move(self, source: int, target: int, separator: str | None = None) -> str:
        letters = ["ABC"[i] if self.rng.random() < 0.7 else "abc"[i] for i in (source, target)]
        sep = self.rng.choice(SEPARATORS) if separator is None else separator
        return self.boxed(letters[0] + sep + letters[1], prose=0.2)

    def solving(self) -> str:
        pegs = self.pegs()
        found = next_move(pegs, len(pegs), 2)
        return self.move(*found) if found is not None else self.same()

    def legal(self) -> str:
        tops = self.tops()
        moves = [
            (s, d)
            for s in range(3)
            for d in range(3)
            if tops[s] is not None and (tops[d] is None or tops[s] <= tops[d])
        ]
        return self.move(*self.rng.choice(moves))

    def illegal(self) -> str:
        tops = self.tops()
        moves = [
            (s, d)
            for s in range(3)
            for d in range(3)
            if tops[s] is None or (tops[d] is not None and tops[s] > tops[d])
        ]
        return self.move(*self.rng.choice(moves)) if moves else self.legal()

    def same(self) -> str:
        tower = self.rng.randrange(3)
        return self.move(tower, tower)

    def badly_separated(self) -> str:
        source, target = self.rng.randrange(3), self.rng.randrange(3)
        return self.move(source, target, self.rng.choice(BAD_SEPARATORS))

    def two_moves(self) -> str:
        first, second = self.illegal(), self.solving()
        return self.rng.choice([f"{first} then {second}", f"{second} \\boxed{{A}} {first}"])


@pytest.mark.parametrize(
    ("env_id", "stream_seed"),
    [(EASY, 1), pytest.param(HARD, 2, marks=SLOW), pytest.param(RANDOM, 3, marks=SLOW)],
)
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    import gem

    configs: Counter = Counter()
    seen = testing.check_gem_parity(
        gem.make(env_id),
        env_id,
        EPISODES[env_id],
        stream_seed,
        stream=lambda rng, gem_env, ours: HanoiStream(
            rng, gem_env, ours, careful=rng.random() < 0.4
        ),
        on_reset=lambda gem_env: configs.update([(gem_env.num_disks, gem_env.max_turns)]),
        extra_turns=(3, 4),  # GEM does not freeze
        turns_past_limit=5,
        describe=lambda gem_env: f"board {gem_env.board} turn {gem_env.turn_count}",
    )
    names = {name.split("[")[0] for name in seen}
    assert names == set(gemjax.make(env_id).messages.names) - {"instructions"}, seen
    if env_id == RANDOM:
        assert set(configs) == set(RANDOM_CONFIGS), configs
