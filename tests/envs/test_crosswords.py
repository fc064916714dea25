"""Crosswords kernel: step parity with gem-llm on adversarial response streams (every
message: right and wrong letters in either case, filled and black cells, cells out
of bounds, huge and non-ASCII numbers, whitespace runs), GEM's intended ``-random``
variant, the word bank against GEM's file, the grid generator against GEM's own
resets (statistically), and grid properties (hypothesis)."""

from __future__ import annotations

import json
import random
import string
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.crosswords import CrosswordsEnv
from gem.envs.registration import ENV_REGISTRY
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from tiers import seeded

import gemjax
from gemjax import testing
from gemjax.envs.crosswords import LETTERS, clue_options, word_bank
from gemjax.testing.parity import SEPARATORS

EASY, HARD, RANDOM = (f"game:Crosswords-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
EPISODES = {EASY: 200, HARD: 80, RANDOM: 100}


def gem_env_for(env_id: str) -> CrosswordsEnv:
    """GEM's env of ``env_id``; for ``-random`` (whose registered constructor
    crashes) the env GEM's reset was written for: any None makes it draw the mode, 3
    words and 20 turns at every reset."""
    import gem

    if env_id == RANDOM:
        return CrosswordsEnv(hardcore=False, max_turns=None, num_words=None)
    return gem.make(env_id)


def test_registered_ids_match_gem_registry():
    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Crosswords")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in (EASY, HARD):
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        assert env.hardcore == kwargs["hardcore"] and env.num_words == kwargs["num_words"]
        assert int(env.default_params.max_turns) == kwargs["max_turns"]
    assert (gemjax.make(EASY).max_side, gemjax.make(HARD).max_side) == (16, 24)
    env = gemjax.make(RANDOM)
    assert env.randomize and env.num_words == 3 and env.max_side == 24
    with pytest.raises(ValueError, match="No words found"):
        CrosswordsEnv(hardcore=None)  # GEM's registered -random
    for bad in (dict(num_words=0), dict(num_words=13), dict(max_turns=0)):
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)
    with pytest.raises(ValueError, match="capacity"):
        env = gemjax.make(EASY)
        env.validate_params(env.default_params.replace(max_turns=jnp.int32(31)))


def test_word_bank_is_gems_file():
    bank = word_bank()
    gem_env = CrosswordsEnv(hardcore=False)
    easy = [row["word"] for row in gem_env.word_data]
    gem_env._load_words(hardcore=True)
    hard = [row["word"] for row in gem_env.word_data]
    assert [bank.words[i] for i in bank.modes[0]] == easy
    assert [bank.words[i] for i in bank.modes[1]] == hard
    clues = {row["word"]: next(iter(row["clues"].values())) for row in gem_env.word_data}
    for i in bank.modes[1]:
        assert bank.clues[i] == clues[bank.words[i]]
        word = "".join(LETTERS[c - 1] for c in bank.codes[i, : bank.lengths[i]])
        assert word == bank.words[i]
    assert any(w != w.lower() for w in hard)  # capitals stay (placement is case-sensitive)
    options = clue_options(1)
    assert options[0] == "" and options[2 * 3 + 2].startswith("\n2. ")
    assert options[2 * 3 + 2].endswith(f"(down): {bank.lengths[3]} letters")


@pytest.fixture(scope="module")
def kernel_resets():
    """Per id, 400 kernel resets (host arrays)."""

    return {env_id: testing.batched_resets(gemjax.make(env_id), 400, 5) for env_id in IDS}


FEATURES = ("side", "listed", "hardcore", "crossed", "letter_cells", "first_down")


def gem_features(env_id: str, count: int) -> dict[str, list[float]]:
    """Grid side, listed words, mode, crossing cells, letter cells and the first
    word's direction of ``count`` GEM resets."""
    env = gem_env_for(env_id)
    features: dict[str, list[float]] = {name: [] for name in FEATURES}
    for seed in range(count):
        with testing.preserved_global_rng():
            env.reset(seed=seed)
        cells: Counter = Counter()
        for word, (r, c, d) in env.placed_words.items():
            cells.update((r + i, c) if d == "down" else (r, c + i) for i in range(len(word)))
        first = next(iter(env.clues))
        features["side"].append(len(env.board))
        features["listed"].append(len(env.placed_words))
        features["hardcore"].append(float(env.hardcore))
        features["crossed"].append(sum(n > 1 for n in cells.values()))
        features["letter_cells"].append(env.total_letter_cells)
        features["first_down"].append(float(env.placed_words[first][2] == "down"))
    return features


def kernel_features(states: object) -> dict[str, list[float]]:
    """The same features of kernel states."""
    bank = word_bank()
    features: dict[str, list[float]] = {name: [] for name in FEATURES}
    for i in range(len(states.side)):
        cells: Counter = Counter()
        for k in np.flatnonzero(states.listed[i]):
            r, c = np.argwhere(cell_words(states, i)[k])[0]
            n, down = bank.lengths[states.entries[i, k]], states.down[i, k]
            cells.update((r + j, c) if down else (r, c + j) for j in range(n))
        features["side"].append(int(states.side[i]))
        features["listed"].append(int(states.listed[i].sum()))
        features["hardcore"].append(float(states.hardcore[i]))
        features["crossed"].append(sum(n > 1 for n in cells.values()))
        features["letter_cells"].append(int(states.letter_cells[i]))
        features["first_down"].append(float(states.down[i, 0]))
    return features


def cell_words(states: object, i: int) -> np.ndarray:
    """bool[W, S, S]: the start cells where each listed word of lane ``i`` is spelled
    in its direction on the solution grid (upper-cased)."""
    bank = word_bank()
    solution = states.solution[i]
    size = solution.shape[0]
    starts = np.zeros((len(states.entries[i]), size, size), bool)
    for k, entry in enumerate(states.entries[i]):
        word = bank.words[entry].upper()
        codes = np.asarray([1 + string.ascii_uppercase.index(ch) for ch in word])
        frame = solution.T if states.down[i, k] else solution
        for r in range(size):
            for c in range(size - len(word) + 1):
                if np.array_equal(frame[r, c : c + len(word)], codes):
                    row, col = (c, r) if states.down[i, k] else (r, c)
                    starts[k, row, col] = True
    return starts


@pytest.mark.parametrize("env_id", IDS)
def test_generated_grids_match_gems_statistically(kernel_resets, env_id):
    """Two-sample tests of grid features against GEM's own resets."""
    ours = kernel_features(kernel_resets[env_id])
    theirs = gem_features(env_id, 300)
    for feature in ("side", "crossed", "letter_cells"):
        result = stats.ks_2samp(ours[feature], theirs[feature])
        assert result.pvalue > 1e-3, (feature, result)
    for feature in ("listed", "hardcore", "first_down"):
        assert abs(np.mean(ours[feature]) - np.mean(theirs[feature])) < 0.12, feature


def test_random_draws_easy_and_hard_evenly(kernel_resets):
    states = kernel_resets[RANDOM]
    hard = np.asarray(states.hardcore)
    assert 0.4 < hard.mean() < 0.6
    modes = word_bank().modes
    for i in range(len(hard)):
        assert set(states.entries[i].tolist()) <= set(modes[int(hard[i])].tolist())


def test_grids_hold_every_listed_word_and_nothing_else(kernel_resets):
    """Every listed word is spelled on the solution where its cells are, and every
    letter cell belongs to a placed word: the grid is the union of the words."""
    for env_id in IDS:
        s = kernel_resets[env_id]
        for i in range(len(s.side)):
            side = int(s.side[i])
            assert not s.solution[i, side:].any() and not s.solution[i, :, side:].any()
            assert s.listed[i, 0]  # the first word is always placed
            assert len(set(s.entries[i].tolist())) == len(s.entries[i])
            covered = np.zeros_like(s.solution[i], bool)
            starts = cell_words(s, i)
            for k in np.flatnonzero(s.listed[i]):
                assert starts[k].any(), (env_id, i, k)
                n = word_bank().lengths[s.entries[i, k]]
                for r, c in np.argwhere(starts[k]):
                    cells = (slice(r, r + n), c) if s.down[i, k] else (r, slice(c, c + n))
                    covered[cells] = True
            assert np.array_equal(covered, s.solution[i] > 0), (env_id, i)
            assert int(s.letter_cells[i]) == int((s.solution[i] > 0).sum())


def test_random_action_guesses_a_cell_left_to_fill():
    """Each cell left to fill is drawn about equally often, never another cell, with
    letters uniform over ``A..Z``; a grid with nothing left draws ``0 0``."""
    env = gemjax.make(EASY)
    state, _ = jax.jit(env.reset)(jax.random.key(3), env.default_params)
    solution = np.asarray(state.solution)
    filled = np.zeros_like(solution, bool)
    filled[tuple(np.argwhere(solution > 0)[:2].T)] = True
    state = state.replace(filled=jnp.asarray(filled))
    keys = jax.random.split(jax.random.key(4), 6000)
    draw = jax.jit(jax.vmap(env.random_action, in_axes=(0, None)))
    actions = np.asarray(draw(keys, state))
    assert (actions[:, 0] == 1).all()
    assert ((actions[:, 3] >= 1) & (actions[:, 3] <= 26)).all()
    to_fill = {tuple(c) for c in np.argwhere((solution > 0) & ~filled).tolist()}
    counts = Counter(map(tuple, actions[:, 1:3].tolist()))
    assert set(counts) == to_fill
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4
    assert stats.chisquare(np.bincount(actions[:, 3], minlength=27)[1:]).pvalue > 1e-4
    done = state.replace(filled=jnp.asarray(solution > 0))
    assert (np.asarray(draw(keys[:50], done))[:, 1:3] == 0).all()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), moves=st.lists(st.integers(0, 2**31 - 1), max_size=40))
def test_filled_cells_are_solution_letters_and_pay_their_share(seed, moves):
    """Filled cells are always letter cells; a right letter pays ``1 / letter cells``,
    so a completed grid has paid exactly 1; the episode succeeds exactly when every
    letter cell is filled."""
    env = crosswords_kernel()
    state, _ = env.jit_reset(jax.random.key(seed), env.params)
    cells = np.argwhere(np.asarray(state.solution) > 0)
    paid = 0.0
    for move in moves:
        r, c = cells[move % len(cells)]
        letter = int(state.solution[r, c]) if move % 3 else 1 + move % 26
        action = jnp.asarray([1, r, c, letter], jnp.int32)
        state, ts = env.jit_step(jax.random.key(0), state, action, env.params)
        paid += float(ts.reward)
        assert not (np.asarray(state.filled) & (np.asarray(state.solution) == 0)).any()
        assert bool(ts.info["success"]) == bool(np.asarray(state.filled).sum() == len(cells))
    filled = int(np.asarray(state.filled).sum())
    assert paid == pytest.approx(filled / len(cells), abs=1e-5)


class _Kernel:
    """One compiled ``-hard`` kernel shared by the property test's examples."""

    def __init__(self) -> None:
        self.env = gemjax.make(HARD)
        self.params = self.env.default_params
        self.jit_reset = jax.jit(self.env.reset)
        self.jit_step = jax.jit(self.env.step)


_KERNEL: list[_Kernel] = []


def crosswords_kernel() -> _Kernel:
    if not _KERNEL:
        _KERNEL.append(_Kernel())
    return _KERNEL[0]


class CrosswordsStream(testing.ActionStream):
    """Adversarial responses for one Crosswords episode: the right letter of a cell
    still to fill (in either case), wrong letters, filled and black cells, cells
    out of bounds (huge ones too), whitespace runs GEM's ``\\s+`` reads, separators
    and letters it does not; plus the base kinds. Cells read our mirror's state
    (equal to GEM's)."""

    def __init__(self, rng: random.Random, gem_env, ours) -> None:
        super().__init__(rng, gem_env, ours)
        self.kinds = [
            (self.right_letter, 40),
            (self.wrong_letter, 8),
            (self.filled_cell, 5),
            (self.black_cell, 5),
            (self.out_of_bounds, 5),
            (self.badly_formed, 4),
            *self.kinds,
        ]

    def cells(self, which: str) -> np.ndarray:
        s = self.ours.state
        solution, filled = np.asarray(s.solution), np.asarray(s.filled)
        side = int(s.side)
        mask = {"blank": (solution > 0) & ~filled, "filled": filled, "black": solution == 0}
        cells = np.argwhere(mask[which][:side, :side])
        return cells if len(cells) else np.argwhere(solution[:side, :side] >= 0)

    def write(self, row: int, col: int, letter: str) -> str:
        seps = [self.rng.choice(SEPARATORS) * self.rng.choice((1, 1, 1, 2)) for _ in range(2)]
        letter = letter.lower() if self.rng.random() < 0.4 else letter
        body = self.digits(row) + seps[0] + self.digits(col) + seps[1] + letter
        return self.boxed(body, prose=0.2)

    def pick(self, which: str) -> tuple[int, int]:
        r, c = self.rng.choice(list(self.cells(which)))
        return int(r), int(c)

    def solution_letter(self, r: int, c: int) -> str:
        code = int(self.ours.state.solution[r, c])
        return string.ascii_uppercase[code - 1] if code else self.rng.choice("QXZ")

    def right_letter(self) -> str:
        r, c = self.pick("blank")
        return self.write(r, c, self.solution_letter(r, c))

    def wrong_letter(self) -> str:
        r, c = self.pick("blank")
        right = self.solution_letter(r, c)
        return self.write(r, c, self.rng.choice(string.ascii_uppercase.replace(right, "")))

    def filled_cell(self) -> str:
        r, c = self.pick("filled")
        return self.write(r, c, self.rng.choice((self.solution_letter(r, c), "E")))

    def black_cell(self) -> str:
        r, c = self.pick("black")
        return self.write(r, c, self.rng.choice(string.ascii_uppercase))

    def out_of_bounds(self) -> str:
        side = int(self.ours.state.side)
        far = self.rng.choice((side, side + 2, 64, 2**31 - 1, 2**31, 10**30))
        near = self.rng.randrange(side)
        row, col = (far, near) if self.rng.random() < 0.5 else (near, far)
        return self.write(row, col, self.rng.choice(string.ascii_uppercase))

    def badly_formed(self) -> str:
        r, c = self.pick("blank")
        letter = self.solution_letter(r, c)
        return self.rng.choice(
            (
                f"\\boxed{{{r},{c},{letter}}}",
                f"\\boxed{{{r} {c} {letter}{letter}}}",
                f"\\boxed{{{r} {c}{letter}}}",
                f"\\boxed{{{r} {c} é}}",
                f"\\boxed{{[{r} {c} {letter}]}}",
                f"\\boxed{{{r} {c} 7}}",
            )
        )


@pytest.mark.parametrize(("env_id", "stream_seed"), seeded(IDS))
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    modes: Counter = Counter()
    seen = testing.check_gem_parity(
        gem_env_for(env_id),
        env_id,
        EPISODES[env_id],
        stream_seed,
        stream=CrosswordsStream,
        on_reset=lambda gem_env: modes.update([gem_env.hardcore]),
        extra_turns=(3, 4),  # GEM does not freeze
        turns_past_limit=5,
        describe=lambda gem_env: f"words {gem_env.placed_words} board {gem_env.board}",
    )
    names = {name.split("[")[0] for name in seen}
    expected = set(gemjax.make(env_id).messages.names) - {"instructions"}
    assert names == expected if env_id != HARD else names >= expected - {"success"}, seen
    if env_id == RANDOM:
        assert set(modes) == {False, True}, modes


def test_shipped_file_is_gems():
    """The packaged word file is byte-identical to gem-llm's."""
    import importlib.resources

    ours = importlib.resources.files("gemjax.envs").joinpath("data/crosswords/words_clues.jsonl")
    theirs = importlib.resources.files("gem.envs.game_env.crosswords").joinpath("words_clues.jsonl")
    assert ours.read_bytes() == theirs.read_bytes()
    rows = [json.loads(line) for line in ours.read_text().splitlines()]
    assert len(rows) == 100
