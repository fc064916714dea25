"""Wordle kernel: word pools, the feedback rule, rewards, the letter grammar, and the
JAX contract (GEM's texts and branches are checked against ``gem-llm`` in
tests/gem/test_gem_word_games.py)."""

from __future__ import annotations

import importlib.resources
import itertools
import re
import sys
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gem.envs.game_env.wordle import WordleEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from word_game_contract import (
    check_contract_on_secret_guesses,
    check_observation_layout,
    check_reset_uniform,
)

import gemjax
from gemjax.envs.wordle import ALPHABET, PATTERN, Wordle, evaluate, pack_guess
from gemjax.envs.words import WordBank, decode, word_list, word_pool
from gemjax.text.grammar import WHITESPACE_BUT_SPACE

EASY, HARD, RANDOM = (f"game:Wordle-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
OBS_KEYS = {"guesses", "feedback", "num_guesses", "turn", "word_length", "max_turns"}


def random_actions(rng: np.random.Generator, env: Wordle, batch: int) -> np.ndarray:
    """Format errors, wrong lengths, pool words, words of secret-ish letters, repeats."""
    c = env.size
    counts = rng.choice([0, -3, 1, c + 1, 3, 4, 5, 5, 5], size=batch)
    letters = rng.integers(1, 27, size=(batch, c))
    letters[:, 0] = np.where(rng.random(batch) < 0.1, 27, letters[:, 0])  # a tab
    pool = np.asarray(env.bank.words[-1]).astype(np.int32)
    words = pool[rng.integers(0, int(env.bank.num_words[-1]), size=batch)]
    use_word = rng.random(batch) < 0.5
    letters = np.where(use_word[:, None], words, letters)
    actions = np.concatenate([np.minimum(counts, c + 1)[:, None], letters], 1)
    actions[1::4] = actions[0]  # repeats
    return actions.astype(np.int32)


@pytest.fixture(scope="module", params=IDS)
def kit(request, kits):
    return kits(request.param)


@pytest.fixture(scope="module")
def evaluate_fn():
    return jax.jit(jax.vmap(evaluate))


def gem_marks(secret: str, guess: str) -> list[int]:
    """GEM's ``_evaluate_guess`` as 0/1/2 (without constructing the env: no NLTK)."""
    gem = object.__new__(WordleEnv)
    gem.word_length, gem.secret_word = len(secret), secret
    return ["XYG".index(m) for m in gem._evaluate_guess(guess)]


def codes(word: str, size: int) -> list[int]:
    return [1 + ALPHABET.index(ch) for ch in word] + [0] * (size - len(word))


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Wordle")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        if kwargs["word_length"] is None:
            assert env.randomize and env.configs == ((3, 15), (4, 20), (5, 25))
            assert (env.size, env.history) == (5, 25)
        else:
            assert env.configs == ((kwargs["word_length"], kwargs["max_turns"]),)
    # only_real_words is accepted and ignored, as in GEM.
    assert gemjax.make(HARD, only_real_words=False) == gemjax.make(HARD)
    for bad in [dict(word_length=0), dict(word_length=30), dict(max_turns=0)]:
        with pytest.raises(ValueError):
            gemjax.make(HARD, **bad)
    with pytest.raises(ValueError, match=r"capacity|letter"):
        gemjax.make(EASY).validate_params(gemjax.make(HARD).default_params)


def test_word_data_ships_with_the_package_and_pools_follow_gems_filter():
    folder = importlib.resources.files("gemjax.envs").joinpath("data", "nltk_words")
    assert {p.name for p in folder.iterdir()} >= {"en", "en-basic", "README"}
    basic, en = word_list("en-basic"), word_list("en")
    assert (len(basic), len(en)) == (850, 235_886)
    sizes = {L: len(word_pool("en-basic", L)) for L in (3, 4, 5, 7)}
    assert sizes == {3: 90, 4: 241, 5: 192, 7: 81}
    assert [len(word_pool("en", L)) for L in (3, 4, 5, 7)] == [1135, 4347, 8497, 20552]
    expected = [w.upper() for w in basic if len(w) == 4 and w.isalpha() and w.islower()]
    assert [decode(row) for row in word_pool("en-basic", 4)] == expected
    assert "I" in basic and "I" not in {decode(r) for r in word_pool("en-basic", 1)}
    with pytest.raises(ValueError):
        word_pool("en-basic", 20)
    bank = WordBank.build("en-basic", ((3, 15), (5, 25)))
    assert bank.words.shape == (2, 192, 5) and bank.words.dtype == jnp.uint8
    assert bank.num_words.tolist() == [90, 192]
    assert not np.asarray(bank.words)[0, 90:].any() and not np.asarray(bank.words)[0, :, 3:].any()


def test_letter_alphabet_covers_every_character_gem_can_keep():
    """Every Unicode character ``\\s`` matches, the ASCII space aside, stays in a guess;
    the grammar codes each of them (and nothing else besides A-Z)."""
    space = re.compile(r"\s")
    kept = {chr(c) for c in range(sys.maxunicode + 1) if space.match(chr(c))} - {" "}
    assert kept == set(WHITESPACE_BUT_SPACE)
    assert ALPHABET == "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + WHITESPACE_BUT_SPACE
    grammar = gemjax.make(HARD).grammar
    parsed = grammar.parse("\\boxed{ab\u3000c d\te}")
    assert parsed.ok and parsed.echoes == {"guess": "AB\u3000CD\tE", "letters": "7"}
    assert parsed.action.tolist() == [6, 1, 2, 1 + ALPHABET.index("\u3000"), 3, 4]
    assert grammar.pattern.pattern == PATTERN
    for text in ["\\boxed{é}", "\\boxed{}", "\\boxed{ab1}", "\\boxed{ abc}", "abc", "\\boxed{ß}"]:
        assert not grammar.parse(text).ok and not grammar.parse(text).action.any()
    # The last well-formed box wins, and long guesses clamp their count.
    assert grammar.parse("\\boxed{abc} \\boxed{x1}").action.tolist() == [3, 1, 2, 3, 0, 0]
    long = grammar.parse("\\boxed{" + "z" * 40 + "}")
    assert long.action.tolist() == [6] + [26] * 5 and long.echoes["letters"] == "40"
    assert grammar.render(long.action) == "\\boxed{ZZZZZA}"
    assert grammar.parse(grammar.render(long.action)).action.tolist() == long.action.tolist()


SECRETS = st.text("ABCDE", min_size=5, max_size=5)
GUESSES = st.text("ABCDEF\t", min_size=5, max_size=5)


@settings(max_examples=150, deadline=None)
@given(SECRETS, GUESSES, st.integers(1, 5))
def test_feedback_follows_the_multiset_rule(evaluate_fn, secret, guess, length):
    """Greens are equal positions; greens + yellows = sum_v min(count_guess(v),
    count_secret(v)); yellows only on letters of the secret; equal to GEM's marks."""
    secret, guess = secret[:length], guess[:length]
    marks = np.asarray(
        evaluate_fn(
            jnp.asarray([codes(secret, 5)]),
            jnp.asarray([codes(guess, 5)]),
            jnp.asarray([length]),
        )
    )[0]
    greens, yellows = int((marks == 2).sum()), int((marks == 1).sum())
    assert greens == sum(s == g for s, g in zip(secret, guess, strict=True))
    common = Counter(secret) & Counter(guess)
    assert greens + yellows == sum(common.values())
    assert all(guess[i] in secret for i in range(length) if marks[i] == 1)
    assert not marks[length:].any()
    assert marks[:length].tolist() == gem_marks(secret, guess)


def test_feedback_exhaustive_small(evaluate_fn):
    """Every secret and guess of 3 letters over A, B, C (repeats included) vs GEM."""
    words = ["".join(w) for w in itertools.product("ABC", repeat=3)]
    pairs = [(s, g) for s in words for g in words]
    marks = np.asarray(
        evaluate_fn(
            jnp.asarray([codes(s, 5) for s, _ in pairs]),
            jnp.asarray([codes(g, 5) for _, g in pairs]),
            jnp.full((len(pairs),), 3),
        )
    )
    assert marks[:, :3].tolist() == [gem_marks(s, g) for s, g in pairs]
    assert len({tuple(m) for m in marks.tolist()}) > 10


def test_rewards_are_float32_of_gems():
    """GEM sums 1/L*0.5 per new green in float64 (then + 0.5); the kernel divides."""
    for length in range(1, 25):
        for k in range(length + 1):
            total = 0
            for _ in range(k):
                total += 1 / length * 0.5
            half = np.float32(2 * length)
            assert np.float32(k) / half == np.float32(total)
            assert (np.float32(k) + np.float32(length)) / half == np.float32(total + 0.5)


def play(kit, words: list[str], key: int = 0, secret: str | None = None):
    """Step a fresh episode (secret forced when given) through ``words``."""
    env, params = kit.env, kit.params
    state, _ = kit.reset(jax.random.key(key), params)
    if secret is not None:
        state = state.replace(
            secret=jnp.asarray(codes(secret, env.size), jnp.int32),
            word_length=jnp.int32(len(secret)),
        )
    out = []
    for word in words:
        parsed = env.grammar.parse(word)
        state, ts = kit.step(jax.random.key(0), state, jnp.asarray(parsed.action), params)
        text = env.messages.render_event(ts.event, parsed.echoes)
        out.append((text, float(ts.reward), bool(ts.terminated), bool(ts.truncated)))
    return state, out


def test_branches_by_hand(kits):
    kit = kits(HARD)
    state, out = play(
        kit,
        [
            "\\boxed{crane}",
            "\\boxed{c r a n e}",
            "\\boxed{cran}",
            "\\boxed{cr\tne}",
            "\\boxed{slate}",
            "no box",
        ],
        secret="SLATE",
    )
    assert out[0] == (
        "At turn 1, you guessed CRANE\nFeedback:\nCRANE\n['X', 'X', 'G', 'X', 'G']",
        np.float32(0.2),
        False,
        False,
    )
    assert out[1][0] == "At turn 2, you guessed CRANE, which has been already guessed before."
    assert out[2][0] == (
        "At turn 3, you guessed CRAN which has 4 letters but the secret word has 5 letters."
    )
    # A tab between letter groups stays in the guess: a valid 5-character guess.
    assert out[3][0].startswith("At turn 4, you guessed CR\tNE\nFeedback:")
    assert out[3][0].endswith("['X', 'X', 'X', 'X', 'G']") and out[3][1] == 0.0
    assert out[4] == (
        "Congratulations! You guessed the secret word SLATE in 5 turns.",
        np.float32(0.8),
        True,
        False,
    )
    assert out[5] == (
        "At turn 6, you did not provide a valid guess.",
        np.float32(-0.1),
        True,
        False,
    )
    assert int(state.num_guesses) == 3 and bool(state.milestones.all())
    assert decode(np.asarray(state.guesses[0])) == "CRANE"
    assert np.asarray(state.feedback[0]).tolist() == [0, 0, 2, 0, 2]


def test_long_words_detect_duplicates_across_key_words(kits):
    """Seven letters need two packed key words: a guess that differs only in its
    last letters is new, its exact repeat is a duplicate."""
    kit = kits(Wordle(word_length=7, max_turns=10))
    _, out = play(kit, ["\\boxed{ability}", "\\boxed{abilitz}", "\\boxed{ABILITY}"])
    assert out[0][0].startswith("At turn 1, you guessed ABILITY\nFeedback:\nABILITY\n")
    assert out[1][0].startswith("At turn 2, you guessed ABILITZ\nFeedback:\nABILITZ\n")
    assert out[2][0] == "At turn 3, you guessed ABILITY, which has been already guessed before."


def test_guess_keys_are_injective():
    rng = np.random.default_rng(0)
    for size in (1, 4, 5, 6, 11):
        rows = rng.integers(0, len(ALPHABET) + 1, (400, size)).astype(np.int32)
        rows[200:] = rows[:200]
        rows[300:, -1] = (rows[300:, -1] + 1) % (len(ALPHABET) + 1)
        keys = np.asarray(pack_guess(jnp.asarray(rows)))
        assert keys.shape == (400, -(-size // 5)) and keys.dtype == np.int32
        same_rows = (rows[:, None] == rows[None]).all(-1)
        np.testing.assert_array_equal((keys[:, None] == keys[None]).all(-1), same_rows)


def test_max_turns_and_last_turn_flags(kits):
    kit = kits(EASY)  # 3 letters, 15 turns
    words = [f"\\boxed{{{a}zx}}" for a in "qwertyuiopasdf"]
    _, out = play(kit, [*words, "\\boxed{zz}", "\\boxed{zq}", "\\boxed{1}"], secret="SEA")
    assert out[13][2:] == (False, False)
    assert out[14] == ("You have reached the maximum number of turns.", 0.0, True, True)
    assert out[15][2:] == (True, True)  # GEM keeps going past the end
    assert out[16] == (
        "At turn 17, you did not provide a valid guess.",
        np.float32(-0.1),
        True,
        False,
    )
    _, out = play(kit, ["\\boxed{ab}"] * 14 + ["oops"], secret="SEA")
    assert out[14] == (
        "At turn 15, you did not provide a valid guess.",
        np.float32(-0.1),
        True,
        True,
    )
    _, out = play(kit, ["\\boxed{ab}"] * 14 + ["\\boxed{SEA}"], secret="SEA")
    assert out[14][1:] == (np.float32(1.0), True, False)  # success on the last turn


# Slow: the quick tier checks each game's contract in tests/test_contract.py.
@pytest.mark.slow
def test_contract_on_secret_guesses(kit):
    check_contract_on_secret_guesses(kit, random_actions)


def test_observation_layout(kit):
    check_observation_layout(kit, OBS_KEYS)
    ts = kit.reset(jax.random.key(0), kit.params)[1]
    assert ts.observation["guesses"].shape == (kit.env.history, kit.env.size)


@pytest.mark.parametrize("env_id", [EASY, RANDOM])
def test_reset_draws_uniformly(kits, env_id):
    counts = check_reset_uniform(kits(env_id), 9000, 5)
    assert (counts[3] > 0).all()  # every 3-letter word occurs


def test_random_action_draws_pool_words(kits):
    kit = kits(RANDOM)
    states, _ = kit.vreset(jax.random.split(jax.random.key(3), 64), kit.params)
    sample = jax.jit(jax.vmap(kit.env.random_action))
    actions = np.asarray(sample(jax.random.split(jax.random.key(4), 64), states))
    lengths = np.asarray(states.word_length)
    np.testing.assert_array_equal(actions[:, 0], lengths)
    pools = {L: {decode(r) for r in word_pool("en-basic", L)} for L in (3, 4, 5)}
    words = [decode(row[1 : 1 + L]) for row, L in zip(actions, lengths, strict=True)]
    assert all(w in pools[L] for w, L in zip(words, lengths, strict=True))
    assert len(set(words)) > 40
    assert bool(kit.env.action_space(kit.params).contains(actions).all())
