"""Text parity of ``gemjax.gem`` with gem-llm's Mastermind, byte for byte.

Every episode starts by copying a freshly reset GEM env into ours (``from_gem``);
both are then stepped with the same adversarial action stream (valid, wrong
length, out of range, repeated, malformed, several boxes, odd whitespace,
non-ASCII digits, 40-digit and over-the-limit entries) and every 5-tuple must be
equal (rewards as float32). The streams come from a fixed seed, so a failure
reproduces.
"""

from __future__ import annotations

import random
import re
from collections import Counter

import gem
import pytest
from gem.wrappers.observation_wrapper import ObservationWrapper as GemObservationWrapper

import gemjax
import gemjax.gem as gg
from gemjax import testing
from gemjax.testing import DIGIT_ZEROS, SEPARATORS, check_step

SLOW = pytest.mark.slow  # left out of the quick tier (-m "not slow"), run in CI

EASY, HARD, RANDOM = (f"game:Mastermind-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
EPISODES = 200
STEP_INFO = {"suffix": "Enter your guess."}
EXAMPLE = re.compile(r"for example, \\boxed\{(\d+(?: \d+)*)\}\.\n")


def mask_example(obs: str) -> str:
    return EXAMPLE.sub(r"for example, \\boxed{N}.\n", obs)


class ActionStream(testing.ActionStream):
    """Adversarial responses for one Mastermind episode."""

    def __init__(self, rng: random.Random, gem_env, ours: gg.TextEnv) -> None:
        super().__init__(rng, gem_env, ours)
        self.rng, self.gem_env, self.ours = rng, gem_env, ours
        self.kinds = [
            (self.valid, 30),
            (self.code, 5),
            (self.near_code, 10),
            (self.repeat, 10),
            (self.wrong_length, 8),
            (self.out_of_range, 8),
            (self.malformed, 6),
            (self.multi_box, 5),
            (self.non_ascii, 5),
            (self.too_many_digits, 1),
            (self.sampled, 3),
            (self.garbage, 3),
        ]
        self.valid_guesses: list[list[int]] = []

    @property
    def length(self) -> int:
        return self.gem_env.code_length

    @property
    def numbers(self) -> int:
        return self.gem_env.num_numbers

    def box(self, entries: list[str]) -> str:
        body = entries[0]
        for entry in entries[1:]:
            body += self.rng.choice(SEPARATORS) + entry
        text = "\\boxed{" + body + "}"
        if self.rng.random() < 0.3:
            text = f"Let me think.\n\nMy guess: {text}."
        return text

    def guess(self) -> list[int]:
        return [self.rng.randint(1, self.numbers) for _ in range(self.length)]

    def valid(self) -> str:
        guess = self.guess()
        self.valid_guesses.append(guess)
        return self.box([self.digits(v) for v in guess])

    def code(self) -> str:
        return self.box([self.digits(v) for v in self.gem_env.game_code])

    def near_code(self) -> str:
        guess = list(self.gem_env.game_code)
        if self.rng.random() < 0.5:
            self.rng.shuffle(guess)
        else:
            guess[self.rng.randrange(self.length)] = self.rng.randint(1, self.numbers)
        return self.box([str(v) for v in guess])

    def repeat(self) -> str:
        if not self.valid_guesses:
            return self.valid()
        return self.box([self.digits(v) for v in self.rng.choice(self.valid_guesses)])

    def wrong_length(self) -> str:
        n = self.rng.choice([n for n in range(1, 8) if n != self.length])
        entries = [str(self.rng.randint(1, self.numbers)) for _ in range(n)]
        if self.rng.random() < 0.2:
            entries = ["".join(entries)]  # \boxed{1234}: one entry
        if self.rng.random() < 0.1:
            entries[0] = "9" * 40
        return self.box(entries)

    def out_of_range(self) -> str:
        guess = [str(v) for v in self.guess()]
        bad = [0, self.numbers + 1, 9, 10, 99, 2**31 - 1, 2**31, 2**32 + 5, 10**39 + 7]
        guess[self.rng.randrange(self.length)] = str(self.rng.choice(bad))
        if self.rng.random() < 0.3:
            guess[self.rng.randrange(self.length)] = "0" * 5 + "9" * 40
        return self.box(guess)

    def malformed(self) -> str:
        g = " ".join(map(str, self.guess()))
        return self.rng.choice(
            [
                "\\boxed{ " + g + "}",
                "\\boxed{" + g + " }",
                "\\boxed{" + g.replace(" ", ",") + "}",
                "\\boxed{" + g.replace(" ", ", ") + "}",
                "\\boxed{-" + g + "}",
                "\\boxed{[" + g + "]}",
                "\\boxed {" + g + "}",
                "\\boxed{" + g,
                "boxed{" + g + "}",
                "\\boxed{}",
                g,
                "",
            ]
        )

    def multi_box(self) -> str:
        a = " ".join(map(str, self.guess()))
        b = " ".join(map(str, self.guess()))
        return self.rng.choice(
            [
                f"\\boxed{{{a}}} or \\boxed{{{b}}}",
                f"\\boxed{{{a}}} \\boxed{{x}}",
                f"\\boxed{{x}} \\boxed{{{a}}}",
                f"\\boxed{{\\boxed{{{a}}}}}",
                f"\\boxed{{{a}}}\\boxed{{ {b}}}",
            ]
        )

    def non_ascii(self) -> str:
        zero = self.rng.choice(DIGIT_ZEROS)
        return self.box(["".join(chr(zero + int(c)) for c in str(v)) for v in self.guess()])

    def too_many_digits(self) -> str:
        guess = [str(v) for v in self.guess()]
        guess[-1] = self.rng.choice(["0" * 4299 + "1", "0" * 4300 + "1", "7" * 4301])
        return self.box(guess)


# The quick tier (-m "not slow") replays the easy id; CI all three.
@pytest.mark.parametrize(
    ("env_id", "stream_seed"),
    [(EASY, 1), pytest.param(HARD, 2, marks=SLOW), pytest.param(RANDOM, 3, marks=SLOW)],
)
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    configs: Counter = Counter()
    seen = testing.check_gem_parity(
        gem.make(env_id),
        env_id,
        EPISODES,
        stream_seed,
        stream=ActionStream,
        on_reset=lambda gem_env: configs.update(
            [(gem_env.code_length, gem_env.num_numbers, gem_env.max_turns)]
        ),
        extra_turns=(2, 4),
        turns_past_limit=6,
        describe=lambda gem_env: f"code {gem_env.game_code}",
    )
    expected = {"format_error", "wrong_length", "out_of_range", "duplicate", "pegs", "success"}
    assert expected | {"max_turns"} >= set(seen) >= expected, seen
    assert "other" not in seen
    if env_id == RANDOM:
        assert set(configs) == {(2, 4, 10), (4, 6, 20), (4, 8, 30)}
    else:
        assert seen["max_turns"] > 0, seen


def test_max_turn_reached_on_every_id() -> None:
    """Play valid non-winning guesses to the limit, with a last-turn wrong length."""
    for env_id in IDS:
        gem_env = gem.make(env_id)
        gem_env.reset(seed=5)
        ours = gg.from_gem(gem_env)
        code = gem_env.game_code
        for turn in range(gem_env.max_turns + 2):
            guess = [(v % gem_env.num_numbers) + 1 for v in code]  # no black pegs
            guess[0] = (guess[0] + turn // gem_env.num_numbers) % gem_env.num_numbers + 1
            action = "\\boxed{" + " ".join(map(str, guess)) + "}"
            if turn == gem_env.max_turns - 1:
                action = "\\boxed{1}"
            theirs, mine = gem_env.step(action), ours.step(action)
            assert not check_step(mine, theirs), (env_id, turn, mine, theirs)
        assert theirs[0] == "You have reached the maximum number of turns."


@pytest.mark.parametrize("env_id", IDS)
def test_reset_text_info_and_concat_wrapper(env_id: str) -> None:
    gem_env = gem.make(env_id)
    ours = gg.make(env_id, seed=0)
    examples = set()
    for seed in range(25):
        g_obs, g_info = gem_env.reset(seed=seed)
        o_obs, o_info = ours.reset(seed=seed)
        assert g_info == o_info == {}
        # Same text for our configuration (the random variant draws its own).
        state = ours.state
        gem_env.code_length = int(state.code_length)
        gem_env.num_numbers = int(state.num_numbers)
        gem_env.max_turns = int(state.max_turns)
        gem_text = gem_env._get_instructions()
        assert mask_example(o_obs) == mask_example(gem_text) != o_obs
        example = [int(v) for v in EXAMPLE.search(o_obs)[1].split()]
        assert len(set(example)) == len(example) == int(state.code_length)
        assert all(1 <= v <= int(state.num_numbers) for v in example)
        examples.add(tuple(example))
    assert len(examples) > 5
    # GEM's concat wrapper: the first observation has no suffix; later ones do.
    gem_env = gem.make(env_id)
    g_obs, _ = gem_env.reset(seed=1)
    wrapped_gem = GemObservationWrapper(gem_env, include_action=True, include_chat_template=False)
    g_first, _ = wrapped_gem.reset(seed=1)
    ours = gg.from_gem(gem_env)
    wrapped = gg.WRAPPER_FACTORY["concat_with_action"](ours)
    o_first, _ = wrapped.reset(seed=1)
    # Both are the bare reset observation: no suffix appended.
    assert g_first == g_obs and o_first == ours.reset(seed=1)[0]
    if env_id != RANDOM:  # (the random variant draws its own configuration)
        assert mask_example(o_first) == mask_example(g_first)
    gem_env.reset(seed=2)
    ours.state = ours.kernel.state_from_gem(gem_env)
    for action in ["\\boxed{1 2}", "\\boxed{1 2 3 4}", "nothing"]:
        g_step, o_step = wrapped_gem.step(action), wrapped.step(action)
        # The history after the (configuration-dependent) first observation.
        assert o_step[0][len(o_first) :] == g_step[0][len(g_first) :]
        assert o_step[0].endswith("Enter your guess.") and o_step[1:] == g_step[1:]


@SLOW
def test_vector_env_reset_infos_and_autoreset() -> None:
    vec = gg.make_vec([EASY, HARD, "game:GuessTheNumber-v0-easy"], seed=3)
    obs, infos = vec.reset(seed=3)
    assert infos[:2] == [{}, {}] and infos[2] == {"suffix": "Enter your next guess."}
    obs, rewards, terms, truncs, infos = vec.step(["nothing", "\\boxed{1 2 3 4}", "\\boxed{3}"])
    assert terms[0] and not truncs[0] and rewards[0] == -0.1
    assert obs[0].startswith("You are playing Mastermind.")
    assert infos[0] == {}  # same-step auto-reset: the info of the new episode's reset
    assert infos[1] == STEP_INFO


def test_from_gem_mirrors_configuration_and_state() -> None:
    for env_id in IDS:
        gem_env = gem.make(env_id)
        gem_env.reset(seed=11)
        for action in ["\\boxed{1 2}", "\\boxed{1 2 3 4}", "\\boxed{2 1}", "\\boxed{4 3 2 1}"]:
            gem_env.step(action)
        ours = gg.from_gem(gem_env)
        assert ours.env_id == env_id and ours.kernel == gemjax.make(env_id)
        state = ours.state
        assert state.code[: gem_env.code_length].tolist() == gem_env.game_code
        assert int(state.turn) == 4 and int(state.milestone) == gem_env.milestone
        assert int(state.num_guesses) == len(gem_env.previous_guesses) > 0
    custom = gem.envs.game_env.mastermind.MastermindEnv(
        code_length=3, num_numbers=5, max_turns=7, duplicate_numbers=True
    )
    ours = gg.from_gem(custom)
    assert ours.kernel == gemjax.make(
        EASY, code_length=3, num_numbers=5, max_turns=7, duplicate_numbers=True
    )
    assert ours.kernel.config == (3, 5, 7, True)
    for action in ["\\boxed{1 1 1}", "\\boxed{1 1 1}", "\\boxed{5 4 3}"]:
        assert not check_step(ours.step(action), custom.step(action))
