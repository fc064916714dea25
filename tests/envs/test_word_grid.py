"""GEM's word placement on device (``gemjax.envs.word_grid``) against gem-llm's own
``WordSearchEnv._generate_word_search``, replayed with the device's draws: the same
sampled words and directions, and GEM's shuffle made to put the device's chosen
overlap candidate first. Every grid, start and listed word must be equal, and the
device's per-start candidate counts must equal GEM's candidate list (fitting entries,
counted with multiplicity) at every placement."""

from __future__ import annotations

import random
import string
from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env import word_search
from gem.envs.game_env.word_search import WordSearchEnv

from gemjax import bitset
from gemjax.envs.word_grid import (
    cover_planes,
    draw_start,
    first_fit,
    grid_side,
    place_words,
    search_starts,
    second_start,
)
from gemjax.envs.words import word_list

WORDS = 5
MAX_LENGTH = 24
MAX_SIDE = 36
SYMBOLS = string.ascii_uppercase + "-"
CODE_BITS = len(SYMBOLS).bit_length()
TALLY: Counter[str] = Counter()


def codes(word: str) -> np.ndarray:
    """int8[MAX_LENGTH] the upper-cased word's codes (A = 1, ..., Z = 26, '-' = 27)."""
    out = np.zeros(MAX_LENGTH, np.int8)
    out[: len(word)] = [SYMBOLS.index(ch) + 1 for ch in word.upper()]
    return out


def grid_codes(grid: list[list[str]]) -> np.ndarray:
    """int8[MAX_SIDE, MAX_SIDE] of GEM's grid ('.' is 0)."""
    out = np.zeros((MAX_SIDE, MAX_SIDE), np.int8)
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            out[r, c] = 0 if ch == "." else SYMBOLS.index(ch) + 1
    return out


@pytest.fixture(scope="module")
def place():
    return jax.jit(jax.vmap(lambda w, n, d, p: place_words(w, n, d, p, MAX_SIDE, CODE_BITS)))


def dense_start_weights(
    frame: jax.Array, crossing: jax.Array, word: jax.Array, length: jax.Array, side: jax.Array
) -> jax.Array:
    """int32[S, S]: per start (line, position) of a word laid across the dense
    ``frame`` (int8[S, S] codes, rows are lines) with ``crossing`` (int8[S, S] cover
    counts), GEM's listing count from :func:`search_starts` on the frame's bit planes
    (every entry's lines, weighted ``2**c``; -1 everywhere if the search's counts
    are not its entries' numbers of lines)."""
    cells = frame.T.astype(jnp.int32)  # [position, line]
    planes = [cells > 0] + [((cells >> bit) & 1) == 1 for bit in range(CODE_BITS)]
    counts = crossing.T.astype(jnp.int32)
    cover = [((counts >> c) & 1) == 1 for c in range(cover_planes(WORDS))]
    search = search_starts(
        bitset.from_mask(jnp.stack(planes)), bitset.from_mask(jnp.stack(cover)), word, length, side
    )
    planes_, size = search.counts.shape
    longest = search.letters.shape[0]
    offset, plane, position = (
        jnp.asarray(a.reshape(-1)) for a in np.indices((longest, planes_, size))
    )
    entries = jax.vmap(search.entry)(offset, plane, position)  # [L * C * S, N]
    bits = bitset.to_mask(entries, MAX_SIDE).astype(jnp.int32)  # [.., line]
    lines = jnp.sum(bits, axis=-1).reshape(longest, planes_, size).sum(axis=0)
    scaled = bits << plane[:, None]
    weights = jnp.zeros((size, MAX_SIDE), jnp.int32).at[position].add(scaled)  # [position, line]
    return jnp.where(jnp.all(lines == search.counts), weights.T, -1)


@pytest.fixture(scope="module")
def weights_of():
    return jax.jit(dense_start_weights)


def draw_cases(count: int, seed: int) -> list[tuple[list[str], list[bool]]]:
    """Sampled words (GEM's order: sampled, then stably longest first) and directions,
    from both lists, with some cases forced to hold a word twice (two copies, or
    ``Bob``/``bob``-like pairs that upper-case equal)."""
    rng = random.Random(seed)
    lists = (word_list("en-basic"), word_list("en"))
    cases = []
    for index in range(count):
        words = rng.sample(lists[index % 2], WORDS)
        if index % 7 == 3:
            words[rng.randrange(1, WORDS)] = words[0].swapcase()
        words = sorted((w.upper() for w in words), key=len, reverse=True)
        cases.append((words, [rng.random() < 0.5 for _ in words]))
    return cases


class Replay:
    """``random`` for gem's word_search module: it replays one case's draws and
    checks the device's candidate counts at every shuffle."""

    def __init__(self, env: WordSearchEnv, case: Any, chosen: Any, weights_of: Any) -> None:
        self.env, self.chosen, self.weights_of = env, chosen, weights_of
        self.words, self.down = case
        self.directions = iter(["down" if d else "across" for d in self.down])
        self.placing = 0
        self.capture: dict[str, Any] = {}
        original = env._find_overlaps

        def find_overlaps(word, grid, placed, directions):
            self.capture.update(word=word, grid=grid, placed=dict(placed), directions=directions)
            return original(word, grid, placed, directions)

        env._find_overlaps = find_overlaps

    def sample(self, population: list[str], k: int) -> list[str]:
        return list(self.words)

    def choice(self, options: Any) -> Any:
        if list(options) == ["across", "down"]:
            return next(self.directions)
        return "."  # the fill: leave empty cells empty, to compare placements

    def shuffle(self, candidates: list[tuple[int, int, str]]) -> None:
        self.placing += 1
        self.check_counts(candidates)
        row, col, down = self.chosen[self.placing]
        target = (row, col, "down" if down else "across")
        if target in candidates:
            candidates.remove(target)
            candidates.insert(0, target)

    def check_counts(self, candidates: list[tuple[int, int, str]]) -> None:
        env, cap = self.env, self.capture
        word, grid, placed = cap["word"], cap["grid"], cap["placed"]
        down = cap["directions"][word] == "down"
        fitting = Counter(
            (r, c) for r, c, d in candidates if env._can_place_word(grid, word, d, r, c)
        )
        crossing = np.zeros((MAX_SIDE, MAX_SIDE), np.int8)
        for other, (r, c, d) in placed.items():
            if (d == "down") != down:
                for i in range(len(other)):
                    crossing[(r + i, c) if d == "down" else (r, c + i)] += 1
        frame = grid_codes(grid)
        if down:
            frame, crossing = frame.T, crossing.T
        weights = self.weights_of(
            jnp.asarray(frame),
            jnp.asarray(crossing),
            jnp.asarray(codes(word)),
            jnp.int32(len(word)),
            jnp.int32(len(grid)),
        )
        weights = np.asarray(weights)
        if down:
            weights = weights.T
        ours = Counter({(int(r), int(c)): int(weights[r, c]) for r, c in np.argwhere(weights)})
        assert ours == fitting, (word, self.words)
        TALLY[
            "choices among overlaps"
            if len(fitting) > 1
            else "one overlap"
            if fitting
            else "fallback scans"
        ] += 1


def test_placement_equals_gems_generator(place, weights_of, monkeypatch):
    cases = draw_cases(160, seed=5)
    words = np.stack([np.stack([codes(w) for w in ws]) for ws, _ in cases])
    lengths = np.asarray([[len(w) for w in ws] for ws, _ in cases], np.int32)
    down = np.asarray([d for _, d in cases])
    picks = np.asarray(jax.random.bits(jax.random.key(3), (len(cases), WORDS), jnp.uint32))
    out = jax.device_get(place(words, lengths, down, picks))
    duplicates = 0
    for index, case in enumerate(cases):
        env = WordSearchEnv.__new__(WordSearchEnv)
        env.word_list, env.num_words = case[0], WORDS
        chosen = [
            (int(out.rows[index, k]), int(out.cols[index, k]), bool(out.down[index, k]))
            for k in range(WORDS)
        ]
        monkeypatch.setattr(word_search, "random", Replay(env, case, chosen, weights_of))
        grid, placed = env._generate_word_search()
        side = len(grid)
        assert side == int(grid_side(jnp.int32(len(case[0][0]))))
        assert np.array_equal(grid_codes(grid), out.grid[index]), case
        listed = {
            case[0][k]: (chosen[k][0], chosen[k][1], "down" if chosen[k][2] else "across")
            for k in range(WORDS)
            if out.live[index, k]
        }
        assert listed == placed, case
        duplicates += len(set(case[0])) < WORDS
    # Every branch was exercised: the copies' rule, weighted and single overlaps, the
    # fallback scan.
    assert duplicates > 0
    assert min(TALLY[k] for k in ("choices among overlaps", "one overlap", "fallback scans")) > 0


def test_grid_side_is_pythons_round_half_even():
    longest = jnp.arange(1, 40, dtype=jnp.int32)
    expected = [round(1.5 * n) for n in range(1, 40)]
    assert np.asarray(jax.vmap(grid_side)(longest)).tolist() == expected


def searched_second_start(
    words: jax.Array, lengths: jax.Array, down: jax.Array, pick: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(line, position, placed) of the second word by the grid search of every later
    word (:func:`search_starts`, then a drawn candidate or the first fit), on a dense
    grid that holds only the centred first word."""
    side = grid_side(lengths[0])
    index = jnp.arange(MAX_SIDE, dtype=jnp.int32)
    centre, lo = side >> 1, (side - lengths[0]) >> 1
    # The first word in the second word's frame ([line, position]): along it on line
    # `centre` from position `lo`, across it at position `centre` over lines from `lo`.
    spans = (index[None, :] >= lo) & (index[None, :] < lo + lengths[0])
    along = (index[:, None] == centre) & spans
    letters = words[0][jnp.clip(index - lo, 0, MAX_LENGTH - 1)].astype(jnp.int32)
    crossing = down[0] != down[1]
    cells = jnp.where(crossing, along.T, along)
    codes_ = jnp.where(cells, jnp.where(crossing, letters[:, None], letters[None, :]), 0)
    planes = [codes_.T > 0] + [((codes_.T >> bit) & 1) == 1 for bit in range(CODE_BITS)]
    cover = jnp.stack([cells.T & crossing] + [jnp.zeros_like(cells)] * (cover_planes(WORDS) - 1))
    search = search_starts(
        bitset.from_mask(jnp.stack(planes)), bitset.from_mask(cover), words[1], lengths[1], side
    )
    drawn_line, drawn_position = draw_start(search, pick)
    first_line, first_position, any_fit = first_fit(search.fits, down[1])
    overlap = jnp.any(search.counts > 0)
    return (
        jnp.where(overlap, drawn_line, first_line),
        jnp.where(overlap, drawn_position, first_position),
        overlap | any_fit,
    )


def test_second_start_equals_the_grid_search():
    """The closed-form second word (every branch: drawn overlaps, and each first fit
    beside a short first word) is where the search would put it, for the same draw."""
    rng = np.random.default_rng(11)
    count = 3000
    first_lengths = rng.integers(1, 9, count)
    second_lengths = np.minimum(first_lengths, rng.integers(1, 9, count))
    words = np.zeros((count, 2, MAX_LENGTH), np.int8)
    for i, lengths in enumerate(zip(first_lengths, second_lengths, strict=True)):
        for k, length in enumerate(lengths):  # three letters: many crossings, some none
            words[i, k, :length] = rng.integers(1, 4, length)
    lengths = np.stack([first_lengths, second_lengths], axis=1).astype(np.int32)
    down = rng.random((count, 2)) < 0.5
    picks = rng.integers(0, 2**32, count, dtype=np.uint32)
    closed = jax.jit(jax.vmap(lambda w, n, d, p: second_start(w, n, d, grid_side(n[0]), p)))(
        words, lengths, down, picks
    )
    searched = jax.jit(jax.vmap(searched_second_start))(words, lengths, down, picks)
    for ours, theirs in zip(closed, searched, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    # Which branches ran: overlaps drawn, first fits along and across the first word,
    # including those beside a first word that starts at the grid's edge.
    line, position, _ = (np.asarray(a) for a in closed)
    side = np.asarray(jax.vmap(grid_side)(jnp.asarray(first_lengths, jnp.int32)))
    edge = (side - first_lengths) // 2 == 0
    crossing = down[:, 0] != down[:, 1]
    moved = (line != 0) | (position != 0)
    assert moved[crossing].mean() > 0.5  # mostly drawn overlaps
    assert (edge & crossing & moved).any() and (edge & crossing & ~moved).any()
    assert not moved[~crossing].any()
