"""Hangman kernel: GEM's branches by hand, the reveal property, rewards, the letter
grammar's case rules, and the JAX contract (texts against ``gem-llm`` in
tests/gem/test_gem_word_games.py)."""

from __future__ import annotations

import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from word_game_contract import (
    check_contract_on_secret_guesses,
    check_observation_layout,
    check_reset_uniform,
)

import gemjax
from gemjax.envs.hangman import ALPHABET, Hangman
from gemjax.envs.words import decode, word_pool
from gemjax.text.grammar import IGNORECASE_EXTRA_LETTERS

EASY, HARD, RANDOM = (f"game:Hangman-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
OBS_KEYS = {"board", "guessed_letters", "turn", "word_length", "max_turns"}


def random_actions(rng: np.random.Generator, env: Hangman, batch: int) -> np.ndarray:
    """Format errors, letters (often repeated), words of every length, pool words."""
    c = env.size
    counts = rng.choice([0, -1, 1, 1, 1, 1, 2, 3, c, c + 1], size=batch)
    letters = rng.integers(1, 27, size=(batch, c))
    letters[:, 0] = np.where(rng.random(batch) < 0.3, rng.integers(1, 6, size=batch), letters[:, 0])
    letters[:, 0] = np.where(rng.random(batch) < 0.05, 28, letters[:, 0])  # the Kelvin sign
    pool = np.asarray(env.bank.words[0]).astype(np.int32)
    words = pool[rng.integers(0, int(env.bank.num_words[0]), size=batch)]
    use_word = rng.random(batch) < 0.2
    letters = np.where(use_word[:, None], words, letters)
    counts = np.where(use_word, int(env.bank.word_length[0]), counts)
    actions = np.concatenate([np.minimum(counts, c + 1)[:, None], letters], 1)
    return actions.astype(np.int32)


@pytest.fixture(scope="module", params=IDS)
def kit(request, kits):
    return kits(request.param)


def codes(word: str, size: int) -> list[int]:
    return [1 + ALPHABET.index(ch) for ch in word] + [0] * (size - len(word))


def play(kit, actions: list[str], secret: str):
    env, params = kit.env, kit.params
    state, _ = kit.reset(jax.random.key(0), params)
    state = state.replace(
        secret=jnp.asarray(codes(secret, env.size), jnp.int32), word_length=jnp.int32(len(secret))
    )
    out, states = [], []
    for text in actions:
        parsed = env.grammar.parse(text)
        state, ts = kit.step(jax.random.key(0), state, jnp.asarray(parsed.action), params)
        rendered = env.messages.render_event(ts.event, parsed.echoes)
        out.append((rendered, float(ts.reward), bool(ts.terminated), bool(ts.truncated)))
        states.append(state)
    return states, out


def suffix(env, state) -> str:
    values = jax.device_get(dict(env.suffix_values(state)))
    return env.suffix.render(
        {k: np.asarray(v).reshape(-1).tolist() if np.ndim(v) else int(v) for k, v in values.items()}
    )


def test_registered_ids_match_gem_registry():
    from gem.envs.registration import ENV_REGISTRY

    gem_ids = {i for i in ENV_REGISTRY if i.startswith("game:Hangman")}
    assert gem_ids == set(IDS) <= set(gemjax.list_envs())
    for env_id in IDS:
        env, kwargs = gemjax.make(env_id), ENV_REGISTRY[env_id].kwargs
        assert kwargs["hardcore"] is False and env.list_name == "en-basic"
        if kwargs["word_length"] is None:
            assert env.configs == ((3, 10), (5, 15), (7, 20)) and env.size == 7
        else:
            assert env.configs == ((kwargs["word_length"], kwargs["max_turns"]),)
    hardcore = gemjax.make(HARD, hardcore=True)
    assert hardcore.list_name == "en" and hardcore != gemjax.make(HARD)
    assert hardcore.bank.words.shape == (1, 20552, 7)


def test_case_rules_cover_every_character_gem_can_keep():
    """``[a-zA-Z]`` with IGNORECASE matches four non-ASCII letters; two upper-case to
    ASCII (``ı`` -> I, ``ſ`` -> S), two stay themselves and get their own codes."""
    letter = re.compile(r"[a-zA-Z]", re.IGNORECASE)
    matched = {chr(c) for c in range(sys.maxunicode + 1) if letter.match(chr(c))}
    kept = {ch.upper() for ch in matched} - set(ALPHABET[:26])
    assert kept == set(IGNORECASE_EXTRA_LETTERS) and len(matched) == 56
    grammar = gemjax.make(HARD).grammar
    assert grammar.parse("\\boxed{ı}").action.tolist()[:2] == [1, 9]
    assert grammar.parse("\\boxed{ſ}").action.tolist()[:2] == [1, 19]
    kelvin = grammar.parse("\\boxed{\u212a}")
    assert kelvin.action.tolist()[:2] == [1, 28] and kelvin.echoes["guess"] == "\u212a"
    for text in ["\\boxed{a b}", "\\boxed{é}", "\\boxed{ß}", "\\boxed{ａ}", "\\boxed{}", "x"]:
        assert not grammar.parse(text).ok
    assert grammar.parse("\\boxed{aPpLe}").echoes == {"guess": "APPLE", "letters": "5"}


def test_branches_by_hand(kits):
    kit = kits(HARD)  # 7 letters, 20 turns
    env = kit.env
    states, out = play(
        kit,
        [
            "\\boxed{e}",
            "\\boxed{E}",
            "\\boxed{z}",
            "\\boxed{\u212a}",
            "\\boxed{\u212a}",
            "\\boxed{abc}",
            "\\boxed{example}",
            "\\boxed{b}",
            "\\boxed{t}",
            "\\boxed{w}",
            "\\boxed{ı}",
            "\\boxed{n}",
            "\\boxed{s}",
            "\\boxed{BETWEEN}",
            "nothing",
        ],
        secret="BETWEEN",
    )
    assert out[0] == (
        "At turn 1, you successfully guessed a letter 'E' that is in the secret word.",
        np.float32(3 / 14),
        False,
        False,
    )
    assert out[1][0] == "At turn 2, you guessed 'E', which has been already guessed before."
    assert out[2][:2] == ("At turn 3, you guessed a letter 'Z' that is not in the secret word.", 0)
    assert out[3][0] == "At turn 4, you guessed a letter '\u212a' that is not in the secret word."
    assert out[4][0].endswith("'\u212a', which has been already guessed before.")
    assert out[5] == (
        "At turn 6, You guessed 'ABC' which is of length 3, but the secret word is of length 7.",
        0.0,
        False,
        False,
    )
    assert out[6][0] == "At turn 7, You guessed 'EXAMPLE' which is incorrect."
    assert out[10][0].startswith("At turn 11, you guessed a letter 'I' that is not")
    # Every letter revealed: no win, the game goes on.
    assert bool(states[11].revealed.all()) and out[11][2:] == (False, False)
    assert suffix(env, states[11]) == (
        "Here is the current state of the Hangman grid:\n"
        "C00 C01 C02 C03 C04 C05 C06\n  B   E   T   W   E   E   N \n\nEnter your guess."
    )
    assert out[13] == (
        "Congratulations! You guessed the word 'BETWEEN' correctly!",
        np.float32(0.5),
        True,
        False,
    )
    assert out[14] == ("You did not provide a valid guess.", np.float32(-0.1), True, False)
    board = np.asarray(states[0].revealed).tolist()
    assert board == [False, True, False, False, True, True, False]
    guessed = np.asarray(states[4].guessed)
    assert guessed[[4, 25, 27]].all() and guessed.sum() == 3


def test_whole_word_pays_for_hidden_cells_and_flags_at_the_limit(kits):
    kit = kits(EASY)  # 3 letters, 10 turns
    states, out = play(kit, ["\\boxed{o}", "\\boxed{ADD}", "\\boxed{ODD}"], secret="ODD")
    assert out[0][1] == np.float32(1 / 6) and out[2][1] == np.float32(2 / 3 * 0.5 + 0.5)
    assert not bool(states[2].revealed[1])  # a correct word does not reveal the grid
    _, out = play(kit, ["\\boxed{q}"] * 9 + ["\\boxed{x}", "\\boxed{ODD}"], secret="ODD")
    assert out[8][0].endswith("already guessed before.") and out[8][2:] == (False, False)
    assert out[9] == ("You have reached the maximum number of turns.", 0.0, True, True)
    assert out[10] == ("Congratulations! You guessed the word 'ODD' correctly!", 1.0, True, False)
    _, out = play(kit, ["\\boxed{q}"] * 9 + ["\\boxed{}"], secret="ODD")
    assert out[9] == ("You did not provide a valid guess.", np.float32(-0.1), True, True)


def test_rewards_are_float32_of_gems():
    for length in range(1, 25):
        half = np.float32(2 * length)
        for n in range(length + 1):
            assert np.float32(n) / half == np.float32((n / length) * 0.5)
            assert (np.float32(n) + np.float32(length)) / half == np.float32(n / length * 0.5 + 0.5)


@pytest.fixture(scope="module")
def rollout():
    """A jitted scan of steps over a batch of episodes."""
    env = gemjax.make(RANDOM)
    params = env.default_params

    def run(key, actions):
        state, _ = env.reset(key, params)

        def body(state, action):
            state, ts = env.step(key, state, action, params)
            return state, (state.revealed, state.guessed, ts.reward, ts.event.kind)

        return jax.lax.scan(body, state, actions)

    return env, jax.jit(jax.vmap(run))


ACTION_TEXT = st.one_of(
    st.sampled_from("abcdeilnorstuzKıſİ"),
    st.text("abcdeilnorst", min_size=2, max_size=8),
    st.sampled_from(["", "1", "a b", "é"]),
)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.lists(ACTION_TEXT, min_size=12, max_size=12))
def test_revealed_letters_never_unreveal(rollout, seed, texts):
    """Cells and guessed letters only ever turn on; a cell is revealed iff its letter
    has been guessed; rewards stay in GEM's range."""
    env, run = rollout
    actions = np.stack([env.grammar.parse("\\boxed{" + t + "}").action for t in texts])
    final, (revealed, guessed, rewards, _) = run(
        jax.random.key(seed)[None], jnp.asarray(actions)[None]
    )
    revealed, guessed, rewards = (np.asarray(x)[0] for x in (revealed, guessed, rewards))
    assert (revealed[1:] >= revealed[:-1]).all() and (guessed[1:] >= guessed[:-1]).all()
    secret = np.asarray(final.secret)[0]
    for r, g in zip(revealed, guessed, strict=True):
        letters_guessed = g[np.maximum(secret - 1, 0)] & (secret > 0)
        np.testing.assert_array_equal(r, letters_guessed)
    assert ((rewards >= -0.1 - 1e-7) & (rewards <= 1.0)).all()


# Slow: the quick tier checks each game's contract in tests/test_contract.py.
@pytest.mark.slow
def test_contract_on_secret_guesses(kit):
    check_contract_on_secret_guesses(kit, random_actions)


def test_observation_layout(kit):
    check_observation_layout(kit, OBS_KEYS)
    ts = kit.reset(jax.random.key(0), kit.params)[1]
    assert ts.observation["guessed_letters"].shape == (28,)
    assert ts.observation["guessed_letters"].dtype == jnp.bool_


@pytest.mark.parametrize("env_id", [EASY, RANDOM])
def test_reset_draws_uniformly(kits, env_id):
    counts = check_reset_uniform(kits(env_id), 9000, 6)
    assert (counts[3] > 0).all()


def test_random_action_follows_gems_sampler(kits):
    kit = kits(RANDOM)
    states, _ = kit.vreset(jax.random.split(jax.random.key(3), 256), kit.params)
    sample = jax.jit(jax.vmap(kit.env.random_action))
    actions = np.asarray(sample(jax.random.split(jax.random.key(4), 256), states))
    lengths = np.asarray(states.word_length)
    single = actions[:, 0] == 1
    assert 0.35 < single.mean() < 0.65  # a word or a letter, 50/50
    np.testing.assert_array_equal(actions[~single, 0], lengths[~single])
    assert ((actions[single, 1] >= 1) & (actions[single, 1] <= 26)).all()
    assert not actions[single, 2:].any()
    pools = {L: {decode(r) for r in word_pool("en-basic", L)} for L in (3, 5, 7)}
    for row, L in zip(actions[~single], lengths[~single], strict=True):
        assert decode(row[1 : 1 + L]) in pools[L]
