"""Text parity of ``gemjax.gem`` with gem-llm's Wordle and Hangman, byte for byte.

Every episode starts by copying a freshly reset GEM env into ours (``from_gem``);
both are then stepped with the same adversarial action stream (valid words, the
secret, letters of the secret, repeats, wrong lengths, malformed boxes, several
boxes, odd whitespace, mixed case, non-ASCII letters such as ``é``, ``ß``,
fullwidth letters, the dotless ``ı``, ``ſ``, ``İ`` and the Kelvin sign) and every
5-tuple must be equal (rewards as float32). GEM reads NLTK's word lists from the
copy shipped in gemjax (the ``nltk_words`` fixture), so it runs offline.
"""

from __future__ import annotations

import random
import re
from collections import Counter

import gem
import numpy as np
import pytest
from gem.envs.game_env.hangman import HangmanEnv
from gem.envs.game_env.wordle import WordleEnv

import gemjax
import gemjax.gem as gg
from gemjax import testing
from gemjax.envs.words import decode, word_pool
from gemjax.testing import check_step

pytestmark = pytest.mark.usefixtures("nltk_words")

WORDLE = tuple(f"game:Wordle-v0-{v}" for v in ("easy", "hard", "random"))
HANGMAN = tuple(f"game:Hangman-v0-{v}" for v in ("easy", "hard", "random"))
EPISODES = 200
ODD_SPACES = ["\t", "\n", "\xa0", "\u3000", "\u2003", "\x1c", "\x85", "  ", " \t "]
NON_ASCII = ["é", "ß", "ａ", "Ｚ", "ı", "ſ", "İ", "\u212a", "ö", "ñ", "ø", "и"]
EXAMPLES = re.compile(r"\\boxed\{[A-Z]+\}")


class ActionStream(testing.ActionStream):
    """Adversarial responses for one word-game episode."""

    def __init__(self, rng: random.Random, gem_env, ours: gg.TextEnv) -> None:
        super().__init__(rng, gem_env, ours)
        self.rng, self.gem_env, self.ours = rng, gem_env, ours
        self.hangman = isinstance(gem_env, HangmanEnv)
        self.previous: list[str] = []
        kinds = [
            (self.pool_word, 18),
            (self.secret, 4),
            (self.near_secret, 12),
            (self.repeat, 8),
            (self.wrong_length, 8),
            (self.malformed, 6),
            (self.multi_box, 5),
            (self.odd_whitespace, 6),
            (self.non_ascii, 6),
            (self.sampled, 3),
            (self.garbage, 2),
        ]
        if self.hangman:
            kinds += [(self.letter, 40), (self.secret_letter, 20)]
        self.kinds = [k for k, _ in kinds]
        self.weights = [w for _, w in kinds]

    def __call__(self) -> str:
        action = self.rng.choices(self.kinds, self.weights)[0]()
        self.previous.append(action)
        return action

    def case(self, word: str) -> str:
        mode = self.rng.random()
        if mode < 0.4:
            return word.upper()
        if mode < 0.7:
            return word.lower()
        return "".join(c.upper() if self.rng.random() < 0.5 else c.lower() for c in word)

    def box(self, word: str) -> str:
        prefix = self.rng.choice(["", "", "My guess: ", "Thinking...\n\n", "I'd say "])
        return prefix + "\\boxed{" + self.case(word) + "}"

    def pool_word(self) -> str:
        return self.box(self.rng.choice(self.gem_env.available_words))

    def secret(self) -> str:
        return self.box(self.gem_env.secret_word)

    def near_secret(self) -> str:
        """The secret with a few letters changed or shuffled (greens and yellows)."""
        letters = list(self.gem_env.secret_word)
        if self.rng.random() < 0.5:
            self.rng.shuffle(letters)
        for _ in range(self.rng.randint(0, 2)):
            letters[self.rng.randrange(len(letters))] = self.rng.choice(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            )
        return self.box("".join(letters))

    def repeat(self) -> str:
        return self.rng.choice(self.previous) if self.previous else self.pool_word()

    def wrong_length(self) -> str:
        n = self.rng.choice([1, 2, 2, 3, 4, 6, 7, 8, 12, 40])
        return self.box("".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)))

    def letter(self) -> str:
        return self.box(self.rng.choice("abcdefghijklmnopqrstuvwxyz"))

    def secret_letter(self) -> str:
        return self.box(self.rng.choice(self.gem_env.secret_word))

    def malformed(self) -> str:
        w = self.rng.choice(self.gem_env.available_words)
        return self.rng.choice(
            [
                "\\boxed{ " + w + "}",
                "\\boxed{" + w + " }",
                "\\boxed{" + w[:2] + "1" + w[2:] + "}",
                "\\boxed{" + w[:2] + "-" + w[2:] + "}",
                "\\boxed{'" + w + "'}",
                "\\boxed {" + w + "}",
                "\\boxed{" + w,
                "boxed{" + w + "}",
                "\\boxed{}",
                "\\boxed{\\text{" + w + "}}",
                w,
                "",
            ]
        )

    def multi_box(self) -> str:
        a = self.rng.choice(self.gem_env.available_words)
        b = self.rng.choice([self.gem_env.secret_word, "x", "zz"])
        return self.rng.choice(
            [
                f"\\boxed{{{a}}} or \\boxed{{{b}}}",
                f"\\boxed{{{a}}} \\boxed{{1}}",
                f"\\boxed{{{b}}} \\boxed{{{a} }}",
                f"\\boxed{{\\boxed{{{a}}}}}",
                f"\\boxed{{{a}}}\\boxed{{{b}}}",
            ]
        )

    def odd_whitespace(self) -> str:
        w = self.rng.choice(
            [self.gem_env.secret_word, self.rng.choice(self.gem_env.available_words)]
        )
        cut = self.rng.randrange(1, len(w))
        sep = self.rng.choice([*ODD_SPACES, " ", " "])
        return self.box(w[:cut] + sep + w[cut:])

    def non_ascii(self) -> str:
        w = list(self.rng.choice([self.gem_env.secret_word, self.gem_env.available_words[0]]))
        if self.hangman and self.rng.random() < 0.5:
            w = []
        w.insert(self.rng.randint(0, len(w)), self.rng.choice(NON_ASCII))
        return "\\boxed{" + "".join(w) + "}"


def run_parity(gem_env, env_id: str, stream_seed: int, episodes: int) -> tuple[Counter, Counter]:
    configs: Counter = Counter()
    seen = testing.check_gem_parity(
        gem_env,
        env_id,
        episodes,
        stream_seed,
        stream=ActionStream,
        on_reset=lambda gem_env: configs.update([(gem_env.word_length, gem_env.max_turns)]),
        turns_past_limit=4,
        describe=lambda gem_env: f"secret {gem_env.secret_word}",
    )
    return seen, configs


@pytest.mark.parametrize(("env_id", "stream_seed"), list(zip(WORDLE, (1, 2, 3), strict=True)))
def test_wordle_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    seen, configs = run_parity(gem.make(env_id), env_id, stream_seed, EPISODES)
    expected = {"format_error", "wrong_length", "duplicate", "feedback", "success", "max_turns"}
    assert set(seen) == expected, seen
    assert sum(configs.values()) == EPISODES
    if env_id.endswith("random"):
        assert set(configs) == {(3, 15), (4, 20), (5, 25)}


@pytest.mark.parametrize(("env_id", "stream_seed"), list(zip(HANGMAN, (4, 5, 6), strict=True)))
def test_hangman_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    seen, configs = run_parity(gem.make(env_id), env_id, stream_seed, EPISODES)
    expected = {
        "format_error",
        "wrong_length",
        "duplicate",
        "wrong_word",
        "hit",
        "miss",
        "success",
        "max_turns",
    }
    assert set(seen) == expected, seen
    if env_id.endswith("random"):
        assert set(configs) == {(3, 10), (5, 15), (7, 20)}


def test_hardcore_hangman_and_custom_configurations() -> None:
    """Hardcore Hangman draws from NLTK's ``en``; other lengths and limits work too."""
    hardcore = HangmanEnv(word_length=5, hardcore=True, max_turns=12)
    assert gg.from_gem(hardcore).kernel.list_name == "en"
    pool = {decode(r) for r in word_pool("en", 5)}
    assert {w.upper() for w in hardcore.available_words} == pool
    for gem_env, stream_seed, episodes in [
        (hardcore, 7, 30),
        (WordleEnv(word_length=6, max_turns=8), 9, 40),
    ]:
        ours = gg.from_gem(gem_env)
        assert ours.kernel.configs == ((gem_env.word_length, gem_env.max_turns),)
        seen, _ = run_parity(gem_env, "custom", stream_seed, episodes)
        assert {"success", "format_error", "max_turns"} <= set(seen), seen


@pytest.mark.parametrize("env_id", WORDLE + HANGMAN)
def test_pools_reset_text_and_suffix(env_id: str) -> None:
    gem_env = gem.make(env_id)
    ours = gg.make(env_id, seed=0)
    list_name = ours.kernel.list_name
    examples = set()
    for seed in range(12):
        _, g_info = gem_env.reset(seed=seed)
        o_obs, o_info = ours.reset(seed=seed)
        state = ours.state
        # GEM's text for our configuration, examples masked.
        gem_env.word_length, gem_env.max_turns = int(state.word_length), int(state.max_turns)
        expected = gem_env._get_instructions()
        assert EXAMPLES.sub("EX", o_obs) == EXAMPLES.sub("EX", expected) != o_obs
        pool = {decode(r) for r in word_pool(list_name, int(state.word_length))}
        found = EXAMPLES.findall(o_obs)
        assert found[0][7:-1] in pool
        if "Hangman" in env_id:
            assert len(found) == 2 and len(found[1]) == 9  # \boxed{X}: the swapped examples
        examples.add(found[0])
        gem_env.secret_word = decode(np.asarray(state.secret))
        gem_env.board = ["_"] * len(gem_env.secret_word)
        assert o_info == {"suffix": gem_env.get_task_suffix()}
        if not gem_env._is_random:  # same length: the same all-hidden grid
            assert g_info == o_info
    assert len(examples) > 4


def test_from_gem_mirrors_state_mid_episode() -> None:
    wordle = gem.make(WORDLE[1])
    wordle.reset(seed=3)
    for action in ["\\boxed{crane}", "\\boxed{slate}", "\\boxed{ab}", "\\boxed{crane}"]:
        wordle.step(action)
    ours = gg.from_gem(wordle)
    assert ours.kernel == gemjax.make(WORDLE[1]) and ours.env_id == WORDLE[1]
    state = ours.state
    assert int(state.turn) == 4 and int(state.num_guesses) == 2
    assert {decode(np.asarray(r)) for r in state.guesses[:2]} == {"CRANE", "SLATE"}
    assert np.asarray(state.milestones).tolist() == [bool(m) for m in wordle.milestones]
    for action in ["\\boxed{slate}", "\\boxed{" + wordle.secret_word + "}"]:
        assert not check_step(ours.step(action), wordle.step(action))

    hangman = gem.make(HANGMAN[1])
    hangman.reset(seed=4)
    for action in ["\\boxed{e}", "\\boxed{\u212a}", "\\boxed{ı}", "\\boxed{s}"]:
        hangman.step(action)
    ours = gg.from_gem(hangman)
    state = ours.state
    assert np.asarray(state.guessed).sum() == len(hangman.guessed_letters) == 4
    board = "".join(
        c if r else "_" for c, r in zip(hangman.secret_word, state.revealed.tolist(), strict=True)
    )
    assert board == "".join(hangman.board)
    assert ours.get_task_suffix() == hangman.get_task_suffix()
    for action in ["\\boxed{\u212a}", "\\boxed{E}", "\\boxed{" + hangman.secret_word + "}"]:
        assert not check_step(ours.step(action), hangman.step(action))


def test_vector_env_renders_the_grid_suffix() -> None:
    """The batched path (one kernel call per group) gives the single env's texts."""
    ids = [HANGMAN[0], HANGMAN[2], WORDLE[0]]
    vec = gg.make_vec(ids, seed=3)
    singles = [gg.make(env_id, seed=3 + i) for i, env_id in enumerate(ids)]
    obs, infos = vec.reset(seed=3)
    expected = [env.reset(seed=3 + i) for i, env in enumerate(singles)]
    assert list(zip(obs, infos, strict=True)) == expected
    assert infos[0]["suffix"].startswith("Here is the current state of the Hangman grid:\nC00")
    for actions in (
        ["\\boxed{e}", "\\boxed{a}", "\\boxed{abc}"],
        ["\\boxed{E}", "\\boxed{b}", "\\boxed{abcd}"],
    ):
        got = vec.step(actions)
        for i, env in enumerate(singles):
            assert tuple(part[i] for part in got) == env.step(actions[i])
