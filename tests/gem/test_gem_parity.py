"""Text parity of ``gemjax.gem`` with gem-llm's GuessTheNumber, byte for byte.

GEM draws from the process-global ``random``, which cannot be reproduced, so every
episode starts by copying a freshly reset GEM env into ours (``from_gem``); both are
then stepped with the same adversarial action stream and every 5-tuple must be
equal: observations byte for byte, flags and infos exactly, rewards as float32
(the documented difference: kernel rewards are float32).

The streams come from a fixed ``random.Random`` seed, so a failure reproduces; the
first mismatch is reported with the episode's whole action history.
"""

from __future__ import annotations

import math
import random
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable

import gem
import numpy as np
import pytest
from gem.envs.game_env.guess_the_number import GuessTheNumberEnv
from gem.wrappers.observation_wrapper import ObservationWrapper
from tiers import seeded

import gemjax
import gemjax.gem as gg
from gemjax import testing
from gemjax.envs.guess_the_number import MESSAGES
from gemjax.testing import check_step

SLOW = pytest.mark.slow  # left out of the quick tier (-m "not slow"), run in CI

EASY = "game:GuessTheNumber-v0-easy"
HARD = "game:GuessTheNumber-v0-hard"
RANDOM = "game:GuessTheNumber-v0-random"
NO_MAX_TURN = "game:GuessTheNumber-v0-hard-no-max-turn"

# Our id -> a factory of the GEM env it mirrors (GEM has no "-no-max-turn" id).
GEM_FACTORIES: dict[str, Callable[[], GuessTheNumberEnv]] = {
    EASY: lambda: gem.make(EASY),
    HARD: lambda: gem.make(HARD),
    RANDOM: lambda: gem.make(RANDOM),
    NO_MAX_TURN: lambda: GuessTheNumberEnv(min_number=1, max_number=50, max_turns=50),
}

EXAMPLE = re.compile(r"for example, \\boxed\{(\d+)\}\.\n")
INSTRUCTIONS = re.compile(
    r"You are playing Guess The Number\.\n"
    r"You have to guess the number between (?P<lo>\d+) and (?P<hi>\d+) \(inclusive\) "
    r"within (?P<turns>\d+) turns\.\n"
    r"As you enter your guess, the game will provide you with hints such as the target "
    r"number is 'higher' or 'lower'\.\n"
    r"You may provide your response in any manner\. Only the number that is wrapped "
    r"inside \\boxed\{\} will be considered as your guess, for example, "
    r"\\boxed\{(?P<example>\d+)\}\.\n"
    r"As you play, the history of your guesses will be appended below\. Use the "
    r"information to complete the game before you run out of guesses\.\n"
    r"Enter your first guess to start the game\.\n"
)
SUFFIX_INFO = {"suffix": "Enter your next guess."}
classify = testing.message_classifier(MESSAGES)

# The zero of every Unicode decimal-digit block (Arabic-Indic, fullwidth, ...):
# Python's \d matches all of them and int() reads them.
DIGIT_ZEROS = [
    c
    for c in range(0x110000)
    if unicodedata.category(chr(c)) == "Nd" and unicodedata.decimal(chr(c)) == 0
]


def mask_example(obs: str) -> str:
    """``obs`` with the instructions' random example number replaced by ``N``."""
    return EXAMPLE.sub(r"for example, \\boxed{N}.\n", obs)


def boxed(text: str) -> str:
    return "\\boxed{" + text + "}"


def in_script(number: int, rng: random.Random, mixed: bool) -> str:
    """``number``'s decimal digits written in random Unicode digit blocks."""
    zero = rng.choice(DIGIT_ZEROS)
    out = []
    for ch in str(number):
        if mixed:
            zero = rng.choice(DIGIT_ZEROS)
        out.append(chr(zero + int(ch)))
    return "".join(out)


def random_unicode(rng: random.Random, n: int) -> str:
    return "".join(chr(rng.randrange(0x110000)) for _ in range(n))


def random_bytes_text(rng: random.Random, n: int) -> str:
    raw = bytes(rng.getrandbits(8) for _ in range(n))
    return raw.decode("utf-8", errors=rng.choice(["surrogateescape", "replace"]))


class ActionStream(testing.ActionStream):
    """Adversarial responses for one episode (weights favour reaching deep states)."""

    def __init__(self, rng: random.Random, gem_env: GuessTheNumberEnv, ours: gg.TextEnv) -> None:
        super().__init__(rng, gem_env, ours)
        self.kinds: list[tuple[Callable[[], str], int]] = [
            (self.in_range, 30),
            (self.target, 6),
            (self.duplicate, 8),
            (self.out_of_range, 6),
            (self.zero, 3),
            (self.leading_zeros, 4),
            (self.multiple_boxes, 5),
            (self.malformed_box, 5),
            (self.signed, 2),
            (self.forty_digits, 2),
            (self.huge, 1),
            (self.at_digit_limit, 1),
            (self.non_ascii_digits, 6),
            (lambda: "", 2),
            (self.unicode_text, 3),
            (self.byte_text, 3),
            (self.sampled, 3),
        ]
        self.guesses: list[int] = []

    @property
    def lo(self) -> int:
        return self.gem_env.min_number

    @property
    def hi(self) -> int:
        return self.gem_env.max_number

    def decorate(self, box: str) -> str:
        r = self.rng.random()
        if r < 0.6:
            return box
        if r < 0.8:
            return f"Let me think. My guess is {box}."
        return f"{random_unicode(self.rng, 5)}{box}\n"

    def in_range(self) -> str:
        guess = self.rng.randint(self.lo, self.hi)
        self.guesses.append(guess)
        return self.decorate(boxed(str(guess)))

    def target(self) -> str:
        return self.decorate(boxed(str(self.gem_env.game_number)))

    def duplicate(self) -> str:
        if not self.guesses:
            return self.in_range()
        return boxed(str(self.rng.choice(self.guesses)))

    def out_of_range(self) -> str:
        choices = [self.hi + 1, self.hi + self.rng.randint(1, 1000), 2**31 - 1, 2**31, 2**32 + 3]
        if self.lo > 1:
            choices.append(self.rng.randint(1, self.lo - 1))
        return self.decorate(boxed(str(self.rng.choice(choices))))

    def zero(self) -> str:
        return boxed(self.rng.choice(["0", "00", "0000000"]))

    def leading_zeros(self) -> str:
        guess = self.rng.randint(self.lo, self.hi)
        return boxed("0" * self.rng.randint(1, 5) + str(guess))

    def multiple_boxes(self) -> str:
        a, b = (self.rng.randint(self.lo, self.hi) for _ in range(2))
        return self.rng.choice(
            [
                f"{boxed(str(a))} or maybe {boxed(str(b))}",
                boxed(boxed(str(a))),
                f"{boxed(str(a))} {boxed('abc')}",
                f"{boxed('abc')} {boxed(str(a))}",
                f"{boxed(str(a))} {boxed(' ' + str(b))}",
                f"{boxed(str(a))}{boxed('')}",
                f"{boxed(str(a))} \\boxed{{{b}",
            ]
        )

    def malformed_box(self) -> str:
        n = str(self.rng.randint(self.lo, self.hi))
        return self.rng.choice(
            [
                boxed(" " + n),
                boxed(n + " "),
                boxed("\t" + n),
                "\\boxed {" + n + "}",
                "\\boxed{{" + n + "}}",
                "\\\\boxed{" + n + "}",
                "boxed{" + n + "}",
                "\\boxed{" + n,
                "\\Boxed{" + n + "}",
                boxed(n + ".0"),
                boxed(n[0] + "_" + n[1:]) if len(n) > 1 else boxed(n + "_0"),
                n,
            ]
        )

    def signed(self) -> str:
        return boxed(self.rng.choice(["-", "+"]) + str(self.rng.randint(self.lo, self.hi)))

    def forty_digits(self) -> str:
        return boxed(str(self.rng.randrange(10**39, 10**40)))

    def huge(self) -> str:
        return boxed("1" + "0" * 4999)

    def at_digit_limit(self) -> str:
        limit = sys.get_int_max_str_digits()
        guess = str(self.rng.randint(self.lo, self.hi))
        length = limit + self.rng.choice([0, 1])
        return boxed("0" * (length - len(guess)) + guess)

    def non_ascii_digits(self) -> str:
        r = self.rng.random()
        if r < 0.3:
            return self.rng.choice([boxed("٣"), boxed("７"), boxed("１０"), boxed("𝟓")])
        guess = self.rng.randint(self.lo, self.hi) if r < 0.9 else self.rng.randint(0, 10**6)
        return self.decorate(boxed(in_script(guess, self.rng, mixed=self.rng.random() < 0.3)))

    def unicode_text(self) -> str:
        text = random_unicode(self.rng, self.rng.randint(0, 40))
        if self.rng.random() < 0.5:
            cut = self.rng.randint(0, len(text))
            text = text[:cut] + boxed(str(self.rng.randint(self.lo, self.hi))) + text[cut:]
        return text

    def byte_text(self) -> str:
        text = random_bytes_text(self.rng, self.rng.randint(0, 60))
        if self.rng.random() < 0.5:
            text += boxed(str(self.rng.randint(self.lo, self.hi)))
        return text


def describe(action: str) -> str:
    text = repr(action)
    return text if len(text) <= 300 else f"{text[:300]}... ({len(action)} chars)"


def run_episodes(env_id: str, episodes: int, stream_seed: int) -> Counter:
    """Step ``episodes`` episodes of GEM and ours side by side; returns which
    observation kinds were seen (to check that the streams reach every branch)."""
    rng = random.Random(stream_seed)
    gem_env = GEM_FACTORIES[env_id]()
    seen: Counter = Counter()
    for episode in range(episodes):
        seed = stream_seed * 100_000 + episode
        gem_env.reset(seed=seed)
        ours = gg.from_gem(gem_env, seed=seed)
        stream = ActionStream(rng, gem_env, ours)
        # A third stop at the end, a third go on a few steps past the end (GEM's games
        # do not freeze), a third take a fixed number of steps whatever happens, a few
        # play 55 turns (past the 50 turns of the "-no-max-turn" variant).
        mode = rng.choices(["stop", "past_end", "fixed", "long"], [10, 10, 10, 1])[0]
        budget = {"fixed": rng.randint(8, 20), "long": 55}.get(mode, 60)
        mode = "fixed" if mode == "long" else mode
        history: list[str] = []
        for step in range(budget):
            action = stream()
            history.append(action)
            theirs = gem_env.step(action)
            mine = ours.step(action)
            problems = check_step(mine, theirs)
            if problems:
                pytest.fail(
                    f"{env_id}: episode {episode} (GEM reset seed {seed}, stream seed "
                    f"{stream_seed}), step {step}: {', '.join(problems)} differ\n"
                    f"GEM state: min={gem_env.min_number} max={gem_env.max_number} "
                    f"max_turns={gem_env.max_turns} target={gem_env.game_number}\n"
                    f"actions so far:\n  " + "\n  ".join(map(describe, history)) + "\n"
                    f"gemjax: {mine!r}\nGEM:    {theirs!r}"
                )
            seen[classify(theirs[0])] += 1
            if (theirs[2] or theirs[3]) and mode != "fixed":
                if mode == "stop":
                    break
                mode, budget = "fixed", step + 1 + rng.randint(1, 5)
            if step + 1 >= budget:
                break
    return seen


@pytest.mark.parametrize(
    ("env_id", "stream_seed"),
    # The quick tier (-m "not slow") replays the easy id; CI all four.
    seeded((EASY, HARD, RANDOM, NO_MAX_TURN)),
)
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    seen = run_episodes(env_id, episodes=300, stream_seed=stream_seed)
    # The streams must exercise every branch of GEM's step (else the test is weak).
    expected = {
        "format_error",
        "out_of_range",
        "duplicate",
        "hint[lower]",
        "hint[higher]",
        "success",
        "max_turns",
    }
    assert expected <= set(seen), seen
    assert "other" not in seen, seen


@pytest.mark.parametrize("limit", [640, 0])
def test_step_parity_with_other_int_digit_limits(limit: int) -> None:
    """GEM's format error for long numbers follows ``sys.get_int_max_str_digits()``;
    so must ours, whatever the limit is (0 means unlimited)."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        gem_env = gem.make(HARD)
        for seed, digits in enumerate([639, 640, 641, 700, 5000]):
            gem_env.reset(seed=seed)
            ours = gg.from_gem(gem_env)
            for action in [boxed("0" * (digits - 1) + "7"), boxed("9" * digits)]:
                theirs, mine = gem_env.step(action), ours.step(action)
                assert not check_step(mine, theirs), (limit, digits, mine, theirs)
    finally:
        sys.set_int_max_str_digits(old)


def test_non_string_action_raises_like_gem() -> None:
    gem_env = gem.make(EASY)
    gem_env.reset(seed=0)
    ours = gg.from_gem(gem_env)
    for bad in [b"\\boxed{3}", 3, None]:
        with pytest.raises(TypeError):
            gem_env.step(bad)
        with pytest.raises(TypeError):
            ours.step(bad)


def test_from_gem_mirrors_configuration_and_state() -> None:
    for env_id, factory in GEM_FACTORIES.items():
        gem_env = factory()
        gem_env.reset(seed=11)
        for action in ["\\boxed{3}", "\\boxed{5}", "\\boxed{3}"]:
            gem_env.step(action)
        ours = gg.from_gem(gem_env)
        if env_id != NO_MAX_TURN:
            assert ours.env_id == env_id
        assert ours.kernel == gemjax.make(env_id), env_id
        state = ours.state
        assert int(state.min_number) == gem_env.min_number
        assert int(state.max_number) == gem_env.max_number
        assert int(state.max_turns) == gem_env.max_turns
        assert int(state.target) == gem_env.game_number
        assert int(state.turn) == gem_env.turn_count == 3
        guessed = {int(i) for i in np.flatnonzero(np.asarray(state.guessed))}
        assert guessed == gem_env.previous_guesses


@pytest.mark.parametrize("env_id", [EASY, HARD, NO_MAX_TURN])
def test_reset_text_and_info(env_id: str) -> None:
    gem_env = GEM_FACTORIES[env_id]()
    ours = gg.make(env_id)
    examples = set()
    for seed in range(40):
        g_obs, g_info = gem_env.reset(seed=seed)
        o_obs, o_info = ours.reset(seed=seed)
        assert type(o_obs) is str
        assert mask_example(o_obs) == mask_example(g_obs)
        assert mask_example(o_obs) != o_obs  # the example was there to mask
        assert o_info == g_info == SUFFIX_INFO
        match = INSTRUCTIONS.fullmatch(o_obs)
        assert match, o_obs
        example = int(match["example"])
        assert gem_env.min_number <= example <= gem_env.max_number
        examples.add(example)
    assert len(examples) > 3  # the example is drawn, as GEM draws it


def test_random_variant_reset_draws_gem_ranges() -> None:
    """Ours cannot match GEM's draws, so check the reset against GEM's distribution:
    min in 1..10, max in min+5..min+50, max_turns = ceil(sqrt(max-min)) + 1."""
    ours = gg.make(RANDOM, seed=5)
    gem_env = gem.make(RANDOM)
    lows, spans = set(), set()
    for i in range(400):
        obs, info = ours.reset()
        assert info == SUFFIX_INFO
        match = INSTRUCTIONS.fullmatch(obs)
        assert match, obs
        lo, hi, turns, example = (int(match[k]) for k in ("lo", "hi", "turns", "example"))
        assert 1 <= lo <= 10 and lo + 5 <= hi <= lo + 50, (lo, hi)
        assert turns == math.ceil(math.sqrt(hi - lo)) + 1
        assert lo <= example <= hi
        state = ours.state
        assert (int(state.min_number), int(state.max_number)) == (lo, hi)
        assert lo <= int(state.target) <= hi
        lows.add(lo)
        spans.add(hi - lo)
        if i < 40:  # the same text as GEM's for the same range and example
            gem_env.reset(seed=i)
            gem_env.min_number, gem_env.max_number, gem_env.max_turns = lo, hi, turns
            gem_text = gem_env._get_instructions()
            assert mask_example(gem_text) == mask_example(obs)
    assert lows == set(range(1, 11))
    assert len(spans) > 40


@pytest.mark.parametrize("env_id", [EASY, HARD, RANDOM, NO_MAX_TURN])
def test_sample_random_action_is_an_in_range_guess(env_id: str) -> None:
    ours = gg.make(env_id, seed=123)
    counts: Counter = Counter()
    for episode in range(10):
        ours.reset()
        lo, hi = int(ours.state.min_number), int(ours.state.max_number)
        for _ in range(60):
            action = ours.sample_random_action()
            match = re.fullmatch(r"\\boxed\{([1-9]\d*)\}", action)
            assert match, action
            assert lo <= int(match[1]) <= hi, (action, lo, hi)
            if episode == 0:
                counts[int(match[1])] += 1
        # What GEM makes of it: never a format error nor out of range.
        gem_env = GEM_FACTORIES[env_id]()
        gem_env.reset(seed=episode)
        gem_env.min_number, gem_env.max_number = lo, hi
        gem_env.max_turns = 100
        obs = gem_env.step(action)[0]
        assert classify(obs) in ("hint[lower]", "hint[higher]", "success"), obs
    if env_id in (EASY, HARD, NO_MAX_TURN):  # 60 draws cover much of the range
        assert len(counts) >= min(10, int(ours.state.max_number)) * 0.6, counts


@pytest.mark.parametrize("env_id", [EASY, HARD, RANDOM])
def test_seeded_reset_is_deterministic(env_id: str) -> None:
    first, second = gg.make(env_id), gg.make(env_id)
    targets = set()
    for seed in [0, 1, 7, 2**40 + 3]:
        a, b = first.reset(seed=seed), second.reset(seed=seed)
        assert a == b
        assert int(first.state.target) == int(second.state.target)
        targets.add(int(first.state.target))
        assert first.sample_random_action() == second.sample_random_action()
        for action in ["\\boxed{5}", "\\boxed{12}", "\\boxed{x}", "\\boxed{5}"]:
            assert first.step(action) == second.step(action)
    # seed= at construction too
    assert gg.make(env_id, seed=9).reset() == gg.make(env_id, seed=9).reset()
    # and different seeds do give different games
    more = {int((first.reset(seed=s), first.state.target)[1]) for s in range(20)}
    assert len(targets | more) > 2


def test_last_turn_closeness_reward_for_every_span_and_distance() -> None:
    """The max-turn reward ``1 - d / (max - min)`` for every span the registered ids
    can have (1..59) and every distance, on the last turn: float32-equal to GEM's."""
    gem_env = gem.make(RANDOM)
    gem_env.reset(seed=0)
    ours = gg.from_gem(gem_env)
    checked = 0
    for span in range(1, 60):
        for distance in range(span + 1):
            lo = 1 + distance % 2
            gem_env.min_number, gem_env.max_number, gem_env.max_turns = lo, lo + span, 1
            gem_env.game_number, gem_env.previous_guesses, gem_env.turn_count = lo, set(), 0
            ours.state = ours.kernel.state_from_gem(gem_env)
            action = boxed(str(lo + distance))
            theirs, mine = gem_env.step(action), ours.step(action)
            assert not check_step(mine, theirs), (span, distance, mine, theirs)
            checked += theirs[0] == "You have reached the maximum number of turns."
    assert checked == sum(range(1, 60))  # every non-zero distance took that branch


def test_from_gem_unwraps_gem_wrappers() -> None:
    gem_env = gem.make(HARD)
    gem_env.reset(seed=4)
    gem_env.step("\\boxed{20}")
    wrapped = ObservationWrapper(gem_env, include_action=True, include_chat_template=False)
    ours = gg.from_gem(wrapped)
    assert int(ours.state.turn) == 1 and int(ours.state.target) == gem_env.game_number
    assert not check_step(ours.step("\\boxed{21}"), gem_env.step("\\boxed{21}"))
