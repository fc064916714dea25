"""WordSearch kernel: step parity with gem-llm on adversarial response streams (every
message, found words forwards and backwards, GEM's repaid reversed word, repeats,
diagonals, huge and non-ASCII numbers, whitespace runs), the grid generator against
GEM's own resets (statistically), the distinct sampling, and grid properties."""

from __future__ import annotations

import random
from collections import Counter
from itertools import permutations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.registration import ENV_REGISTRY
from scipy import stats
from tiers import seeded

import gemjax
from gemjax import testing
from gemjax.envs.word_grid import longest_first, sample_distinct
from gemjax.envs.word_search import SYMBOLS, word_pool
from gemjax.testing.parity import SEPARATORS

EASY, HARD, RANDOM = (f"game:WordSearch-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
EPISODES = {EASY: 200, HARD: 100, RANDOM: 120}


@pytest.fixture(autouse=True)
def _offline_words(nltk_words):
    """GEM's WordSearch reads NLTK's lists at every reset (never downloading them)."""


def test_registered_ids_match_gem_registry():
    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:WordSearch")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        if kwargs["hardcore"] is None:
            assert env.randomize and env.lists == ("en-basic", "en") and env.max_side == 36
            continue
        assert env.lists == (("en",) if kwargs["hardcore"] else ("en-basic",))
        assert env.num_words == kwargs["num_words"]
        assert int(env.default_params.max_turns) == kwargs["max_turns"]
    assert gemjax.make(EASY).max_side == 21  # round(1.5 * 14): en-basic's longest
    for bad in (dict(num_words=0), dict(num_words=13), dict(max_turns=0)):
        with pytest.raises(ValueError):
            gemjax.make(EASY, **bad)
    with pytest.raises(ValueError, match="capacity"):
        env = gemjax.make(EASY)
        env.validate_params(env.default_params.replace(max_turns=jnp.int32(21)))


def test_word_pools_are_nltks_raw_lists_upper_cased():
    for name in ("en-basic", "en"):
        codes, lengths = word_pool(name)
        from gemjax.envs.words import word_list

        words = word_list(name)
        assert len(words) == len(codes)
        for i in (0, 1, len(words) // 2, len(words) - 1):
            text = "".join(SYMBOLS[c - 1] for c in codes[i, : lengths[i]])
            assert text == words[i].upper()
    assert any("-" in w for w in word_list("en"))


def test_sample_distinct_is_pythons_sample_law():
    """Every ordered 3-tuple of distinct indices below 5 comes up (60 of them), none
    repeats an index, and the counts are uniform (chi-square)."""
    draw = jax.jit(jax.vmap(lambda w: sample_distinct(w, jnp.int32(5))))
    words = jax.random.bits(jax.random.key(0), (30_000, 3), jnp.uint32)
    tuples = Counter(map(tuple, np.asarray(draw(words)).tolist()))
    assert set(tuples) == set(permutations(range(5), 3))
    assert stats.chisquare(list(tuples.values())).pvalue > 1e-3


def test_longest_first_is_pythons_stable_sort():
    rng = random.Random(0)
    order = jax.jit(longest_first)
    for _ in range(50):
        lengths = [rng.randint(1, 4) for _ in range(5)]
        expected = sorted(range(5), key=lambda k: lengths[k], reverse=True)
        assert np.asarray(order(jnp.asarray(lengths, jnp.int32))).tolist() == expected


@pytest.fixture(scope="module")
def kernel_resets():
    """Per id, 400 kernel resets (host arrays)."""

    return {env_id: testing.batched_resets(gemjax.make(env_id), 400, 7) for env_id in IDS}


def gem_features(env_id: str, count: int) -> dict[str, list[float]]:
    """Grid side, listed words, hardcore flag and overlapping cells of ``count`` GEM
    resets."""
    import gem

    env = gem.make(env_id)
    features: dict[str, list[float]] = {"side": [], "listed": [], "hardcore": [], "crossed": []}
    for seed in range(count):
        with testing.preserved_global_rng():
            env.reset(seed=seed)
        cells: Counter = Counter()
        for word, (r, c, d) in env.placed_words.items():
            cells.update((r + i, c) if d == "down" else (r, c + i) for i in range(len(word)))
        features["side"].append(len(env.game_board))
        features["listed"].append(len(env.placed_words))
        features["hardcore"].append(float(env.hardcore))
        features["crossed"].append(sum(n > 1 for n in cells.values()))
    return features


def kernel_features(states: object) -> dict[str, list[float]]:
    """The same features of kernel states."""
    features: dict[str, list[float]] = {"side": [], "listed": [], "hardcore": [], "crossed": []}
    for i in range(len(states.side)):
        cells: Counter = Counter()
        for k in np.flatnonzero(states.listed[i]):
            r, c, n = states.rows[i, k], states.cols[i, k], states.lengths[i, k]
            down = states.down[i, k]
            cells.update((r + j, c) if down else (r, c + j) for j in range(n))
        features["side"].append(int(states.side[i]))
        features["listed"].append(int(states.listed[i].sum()))
        features["hardcore"].append(float(states.hardcore[i]))
        features["crossed"].append(sum(n > 1 for n in cells.values()))
    return features


@pytest.mark.parametrize("env_id", [EASY, pytest.param(HARD, marks=pytest.mark.slow)])
def test_generated_grids_match_gems_statistically(kernel_resets, env_id):
    """Grid sides, listed words and crossing cells: two-sample tests against GEM's own
    resets (GEM's -hard reads the 236k-word list at every reset: fewer samples)."""
    ours = kernel_features(kernel_resets[env_id])
    theirs = gem_features(env_id, 300 if env_id == EASY else 120)
    for feature in ("side", "crossed"):
        result = stats.ks_2samp(ours[feature], theirs[feature])
        assert result.pvalue > 1e-3, (feature, result)
    assert abs(np.mean(ours["listed"]) - np.mean(theirs["listed"])) < 0.1


def test_random_draws_easy_and_hard_evenly(kernel_resets):
    hard = np.asarray(kernel_resets[RANDOM].hardcore)
    assert 0.4 < hard.mean() < 0.6
    sides = np.asarray(kernel_resets[RANDOM].side)
    assert sides[~hard].max() <= 21 < sides[hard].max()


def test_grids_hold_every_listed_word_where_the_key_says(kernel_resets):
    for env_id in IDS:
        s = kernel_resets[env_id]
        for i in range(len(s.side)):
            side = int(s.side[i])
            grid = s.grid[i]
            assert (grid[:side, :side] >= 1).all() and not grid[side:].any()
            assert not grid[:, side:].any()
            assert s.listed[i, 0]  # the first word is always placed
            for k in np.flatnonzero(s.listed[i]):
                r, c, n = s.rows[i, k], s.cols[i, k], s.lengths[i, k]
                cells = grid[r : r + n, c] if s.down[i, k] else grid[r, c : c + n]
                assert np.array_equal(cells, s.words[i, k, :n])


class WordSearchStream(testing.ActionStream):
    """Adversarial responses for one WordSearch episode: listed words' spans forwards
    and backwards (the reversed re-entry GEM pays again), repeats of earlier
    attempts, wrong spans across and down, diagonals, coordinates out of bounds (huge
    ones too), whitespace runs GEM's ``\\s+`` reads, separators it does not; plus the
    base kinds. Spans read our mirror's state (equal to GEM's)."""

    def __init__(self, rng: random.Random, gem_env, ours) -> None:
        super().__init__(rng, gem_env, ours)
        self.tried: list[tuple[int, int, int, int]] = []
        self.kinds = [
            (self.word_span, 30),
            (self.repeat, 8),
            (self.wrong_span, 12),
            (self.diagonal, 5),
            (self.out_of_bounds, 6),
            (self.badly_separated, 4),
            *self.kinds,
        ]

    def spans(self) -> list[tuple[int, int, int, int]]:
        s = self.ours.state
        out = []
        for k in np.flatnonzero(np.asarray(s.listed)):
            r, c, n = int(s.rows[k]), int(s.cols[k]), int(s.lengths[k])
            end = (r + n - 1, c) if bool(s.down[k]) else (r, c + n - 1)
            out.append((r, c, *end))
        return out

    def write(self, coords: tuple[int, ...], separators: tuple[str, ...] | None = None) -> str:
        self.tried.append(tuple(coords))
        seps = separators or tuple(
            self.rng.choice(SEPARATORS) * self.rng.choice((1, 1, 1, 2)) for _ in range(3)
        )
        parts = [self.digits(v) for v in coords]
        body = parts[0] + "".join(sep + part for sep, part in zip(seps, parts[1:], strict=True))
        return self.boxed(body, prose=0.2)

    def word_span(self) -> str:
        r, c, er, ec = self.rng.choice(self.spans())
        return self.write((er, ec, r, c) if self.rng.random() < 0.4 else (r, c, er, ec))

    def repeat(self) -> str:
        return self.write(self.rng.choice(self.tried)) if self.tried else self.word_span()

    def side(self) -> int:
        return int(self.ours.state.side)

    def wrong_span(self) -> str:
        n, r, c = self.side(), self.rng.randrange(self.side()), self.rng.randrange(self.side())
        if self.rng.random() < 0.5:
            return self.write((r, c, r, self.rng.randrange(n)))
        return self.write((r, c, self.rng.randrange(n), c))

    def diagonal(self) -> str:
        n = self.side()
        r, c = self.rng.randrange(n - 1), self.rng.randrange(n - 1)
        return self.write((r, c, r + 1 + self.rng.randrange(n - 1 - r), c + 1))

    def out_of_bounds(self) -> str:
        coords = [self.rng.randrange(self.side()) for _ in range(4)]
        coords[self.rng.randrange(4)] = self.rng.choice(
            (self.side(), self.side() + 3, 64, 2**31 - 1, 2**31, 10**30)
        )
        return self.write(tuple(coords))

    def badly_separated(self) -> str:
        r, c, er, ec = self.rng.choice(self.spans())
        sep = self.rng.choice((",", ", ", "", "-", ";"))
        return self.write((r, c, er, ec), (sep, " ", " "))


@pytest.mark.parametrize(("env_id", "stream_seed"), seeded(IDS))
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    import gem

    hardcore: Counter = Counter()
    seen = testing.check_gem_parity(
        gem.make(env_id),
        env_id,
        EPISODES[env_id],
        stream_seed,
        stream=WordSearchStream,
        on_reset=lambda gem_env: hardcore.update([gem_env.hardcore]),
        extra_turns=(3, 4),  # GEM does not freeze
        turns_past_limit=5,
        describe=lambda gem_env: f"words {gem_env.placed_words} attempts {gem_env.attempts}",
    )
    names = {name.split("[")[0] for name in seen}
    assert names == set(gemjax.make(env_id).messages.names) - {"instructions"}, seen
    if env_id == RANDOM:
        assert set(hardcore) == {False, True}, hardcore


def test_reversed_word_is_paid_again_as_in_gem():
    """GEM's quirk: a found word entered again with its ends swapped pays again."""
    import gem

    env = gem.make(EASY)
    with testing.preserved_global_rng():
        env.reset(seed=11)
    ours = gemjax.gem.from_gem(env)
    word, (r, c, d) = next(iter(env.placed_words.items()))
    end = (r + len(word) - 1, c) if d == "down" else (r, c + len(word) - 1)
    rewards = []
    for coords in ((r, c, *end), (*end, r, c), (r, c, *end)):
        text = "\\boxed{" + " ".join(map(str, coords)) + "}"
        theirs, mine = env.step(text), ours.step(text)
        assert testing.check_step(mine, theirs) == []
        rewards.append(mine[1])
    share = np.float32(1 / len(env.placed_words))
    assert np.float32(rewards).tolist() == [share, share, 0.0]  # the repeat is "tried"
