"""GuessTheNumber (GEM's ``gem/envs/game_env/guess_the_number.py``).

The player guesses an integer in ``[min_number, max_number]`` and is told whether
the target is higher or lower. GEM's rules, branch by branch (spec section 4):

1. no ``\\boxed{digits}`` or the guess 0: format error, -0.1, terminated,
   truncated only when ``turn == max_turns``;
2. out of range: invalid (0), the game goes on;
3. already guessed: invalid (0), the game goes on;
4. correct: success, 1.0, terminated (never truncated, even on the last turn);
5. otherwise a higher/lower hint;
6. after 2, 3 or 5, when ``turn >= max_turns``: "You have reached the maximum
   number of turns.", terminated and truncated, reward ``1 - |g - target| /
   (max - min)`` for an in-range last guess (a duplicate included), 0 otherwise.

The ``-random`` variant draws ``min in 1..10``, ``max in min+5..min+50`` and
``max_turns = ceil(sqrt(max - min)) + 1`` at every reset.

Kernel action: an int32 scalar, the guessed number (``0``, and anything negative,
is a format error; the host parser clamps huge numbers to ``2**31 - 1``).

Observation (what the player has seen), a dict of:
    ``hints``: int8[capacity], per number ``n``: 0 not yet guessed validly,
        1 "higher" (the target is above ``n``), 2 "lower", 3 correct;
    ``turn``, ``min_number``, ``max_number``, ``max_turns``: int32[].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from gemjax import bitset
from gemjax.core import (
    Environment,
    Event,
    GemMirror,
    Rewards,
    TimeStep,
    Variant,
    check_int_action,
    gem_ending,
)
from gemjax.rng import below, bits, random_words
from gemjax.spaces import Discrete
from gemjax.text.grammar import BoxedInt
from gemjax.text.templates import Choice, Int, MessageTable, Template

RANDOM_MIN_RANGE = (1, 10)  # GEM: min = randint(1, 10)
RANDOM_SPAN_RANGE = (5, 50)  # GEM: max = randint(min + 5, min + 50)
RANDOM_MAX_NUMBER = RANDOM_MIN_RANGE[1] + RANDOM_SPAN_RANGE[1]

GUESS = Int("guess", echo=True)

MESSAGES = MessageTable(
    instructions=Template(
        "You are playing Guess The Number.\n"
        "You have to guess the number between {min_number} and {max_number} (inclusive) "
        "within {max_turns} turns.\n"
        "As you enter your guess, the game will provide you with hints such as the target "
        "number is 'higher' or 'lower'.\n"
        "You may provide your response in any manner. Only the number that is wrapped "
        "inside \\boxed{{}} will be considered as your guess, for example, "
        "\\boxed{{{example}}}.\n"
        "As you play, the history of your guesses will be appended below. Use the "
        "information to complete the game before you run out of guesses.\n"
        "Enter your first guess to start the game.\n"
    ),
    format_error=Template("At turn {turn}, you did not provide a valid guess."),
    out_of_range=Template(
        "At turn {turn}, you guessed {guess}, which is outside the range specified.",
        guess=GUESS,
    ),
    duplicate=Template(
        "At turn {turn}, you guessed {guess}, which has been already guessed before.",
        guess=GUESS,
    ),
    hint=Template(
        "At turn {turn}, you guessed {guess}, and the target number is {hint} than {guess}.",
        guess=GUESS,
        hint=Choice("hint", ("higher", "lower")),
    ),
    success=Template("Congratulations! You guessed the correct number {target} in {turn} turns."),
    max_turns=Template("You have reached the maximum number of turns."),
)

SUFFIX = Template("Enter your next guess.")

HINT_NONE, HINT_HIGHER, HINT_LOWER, HINT_CORRECT = 0, 1, 2, 3


class GuessTheNumberParams(struct.PyTreeNode):
    """Dynamic parameters (sweepable without recompiling).

    Attributes:
        min_number, max_number: int32[] the range (ignored by ``-random``, which
            draws its range at every reset as GEM does).
        max_turns: int32[] the turn limit (also drawn by ``-random``).
        rewards: GEM's reward constants.
    """

    min_number: jax.Array
    max_number: jax.Array
    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class GuessTheNumberState(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said):
        min_number, max_number, max_turns: this episode's configuration.
        target: the hidden number.
        example: the number shown in the instructions' example action.
        turn: turns taken so far (GEM's ``turn_count``; it keeps counting after the end).
        guessed_bits: uint32[ceil(capacity / 32)], the set of numbers guessed validly
            (in range, first time) as a bitset; :attr:`guessed` unpacks it.
    """

    min_number: jax.Array
    max_number: jax.Array
    max_turns: jax.Array
    target: jax.Array
    example: jax.Array
    turn: jax.Array
    guessed_bits: jax.Array

    @property
    def guessed(self) -> jax.Array:
        """bool[..., 32 * words]: number ``n`` was guessed validly."""
        return bitset.to_mask(self.guessed_bits, self.guessed_bits.shape[-1] * bitset.WORD_BITS)


def ceil_sqrt(n: jax.Array) -> jax.Array:
    """int32 ``ceil(sqrt(n))`` for small non-negative int32 ``n``, exact."""
    root = jnp.floor(jnp.sqrt(n.astype(jnp.float32))).astype(jnp.int32)
    return root + (root * root < n)


class GuessTheNumber(
    Environment[GuessTheNumberState, GuessTheNumberParams], GemMirror[GuessTheNumberState]
):
    """GuessTheNumber as a kernel. See the module docstring for rules and shapes.

    Args:
        min_number, max_number, max_turns: the registered configuration; all three
            None for GEM's ``-random`` variant.
    """

    gem_class_name = "GuessTheNumberEnv"
    step_uses_key = False

    def __init__(
        self,
        min_number: int | None = 1,
        max_number: int | None = 20,
        max_turns: int | None = 20,
    ) -> None:
        self.variant = Variant.of(
            {"min_number": min_number, "max_number": max_number, "max_turns": max_turns},
            random_values=(RANDOM_MIN_RANGE[0], RANDOM_MAX_NUMBER, 9),
            check=self._check_range,
            all_or_none=True,
        )
        self.randomize, self._defaults = self.variant.randomize, self.variant.values
        # Numbers 0..capacity-1 can be marked as guessed.
        self.capacity = self._defaults[1] + 1
        self.messages = MESSAGES
        self.suffix = SUFFIX
        self.grammar = BoxedInt("guess")

    @staticmethod
    def _check_range(min_number: int, max_number: int, max_turns: int) -> None:
        if min_number < 1:
            raise ValueError(
                f"min_number must be >= 1 (0 is a format error in GEM), got {min_number}"
            )
        if max_number < min_number:
            raise ValueError(f"min_number ({min_number}) must not exceed max_number ({max_number})")
        if max_number > 1_000_000:
            raise ValueError(f"max_number above 1,000,000 is not supported, got {max_number}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    @property
    def default_params(self) -> GuessTheNumberParams:
        lo, hi, turns = (jnp.int32(v) for v in self._defaults)
        return GuessTheNumberParams(min_number=lo, max_number=hi, max_turns=turns)

    def validate_params(self, params: GuessTheNumberParams) -> None:
        lo, hi, turns = (int(v) for v in (params.min_number, params.max_number, params.max_turns))
        self._check_range(lo, hi, turns)
        if hi >= self.capacity:
            raise ValueError(
                f"max_number {hi} exceeds this env's capacity ({self.capacity - 1}); "
                f"make the env with max_number={hi}"
            )

    def action_space(self, params: GuessTheNumberParams) -> Discrete:
        """Guesses ``0..capacity-1``: 0 is a format error, numbers below
        ``min_number`` are out of range, as an LLM could write them."""
        return Discrete(self.capacity)

    def reset(
        self, key: jax.Array, params: GuessTheNumberParams
    ) -> tuple[GuessTheNumberState, TimeStep]:
        if self.randomize:
            words = random_words(key, 4)
            lo = RANDOM_MIN_RANGE[0] + (words[2] % (RANDOM_MIN_RANGE[1] - RANDOM_MIN_RANGE[0] + 1))
            span = RANDOM_SPAN_RANGE[0] + (
                words[3] % (RANDOM_SPAN_RANGE[1] - RANDOM_SPAN_RANGE[0] + 1)
            )
            lo, hi = lo.astype(jnp.int32), (lo + span).astype(jnp.int32)
            turns = ceil_sqrt(hi - lo) + 1
        else:
            words = bits(key, 2)
            lo, hi, turns = params.min_number, params.max_number, params.max_turns
        size = (hi - lo + 1).astype(jnp.uint32)
        state = GuessTheNumberState(
            min_number=lo,
            max_number=hi,
            max_turns=turns,
            target=lo + below(words[0], size),
            example=lo + below(words[1], size),
            turn=jnp.int32(0),
            guessed_bits=bitset.empty(self.capacity),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: GuessTheNumberState,
        action: jax.Array,
        params: GuessTheNumberParams,
    ) -> tuple[GuessTheNumberState, TimeStep]:
        guess = check_int_action(action, ())
        rewards = params.rewards
        turn = state.turn + 1
        format_error = guess <= 0
        in_range = (guess >= state.min_number) & (guess <= state.max_number)
        duplicate = in_range & bitset.contains(state.guessed_bits, guess)
        valid = ~format_error & in_range & ~duplicate
        correct = valid & (guess == state.target)
        out_of_turns = turn >= state.max_turns

        span = jnp.maximum(state.max_number - state.min_number, 1)
        distance = jnp.abs(guess - state.target)
        closeness = (span - distance).astype(jnp.float32) / span.astype(jnp.float32)
        reward = jnp.select(
            [format_error, correct, out_of_turns, in_range & ~duplicate],
            [
                rewards.format_error,
                rewards.success,
                jnp.where(in_range, closeness, rewards.invalid),
                rewards.step,
            ],
            rewards.invalid,
        ).astype(jnp.float32)
        kind = MESSAGES.select(
            (format_error, "format_error"),
            (correct, "success"),
            (out_of_turns, "max_turns"),
            (~in_range, "out_of_range"),
            (duplicate, "duplicate"),
            default="hint",
        )
        terminated, truncated = gem_ending(
            format_error, correct, out_of_turns, turn, state.max_turns
        )

        new_state = state.replace(
            turn=turn, guessed_bits=bitset.insert(state.guessed_bits, guess, valid)
        )
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=MESSAGES.event(
                kind, turn=turn, guess=guess, hint=guess > state.target, target=state.target
            ),
            info={"success": correct},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: GuessTheNumberState) -> jax.Array:
        """A guess uniform in ``[min_number, max_number]`` (GEM's sampler)."""
        size = (state.max_number - state.min_number + 1).astype(jnp.uint32)
        return state.min_number + below(bits(key, 1)[0], size)

    def valid_action_mask(self, state: GuessTheNumberState) -> jax.Array:
        """bool[capacity]: the guesses that are neither a format error (0), out of
        ``[min_number, max_number]`` nor already guessed (an optional env method,
        used by ``gemjax.train``'s masking ablation)."""
        numbers = jnp.arange(self.capacity, dtype=jnp.int32)
        in_range = (numbers >= state.min_number) & (numbers <= state.max_number)
        return in_range & ~bitset.to_mask(state.guessed_bits, self.capacity)

    def instructions_event(self, state: GuessTheNumberState) -> Event:
        return MESSAGES.event(
            "instructions",
            min_number=state.min_number,
            max_number=state.max_number,
            max_turns=state.max_turns,
            example=state.example,
        )

    def suffix_values(self, state: GuessTheNumberState) -> Mapping[str, jax.Array]:
        return {}

    def _observation(self, state: GuessTheNumberState) -> dict[str, jax.Array]:
        numbers = jnp.arange(self.capacity, dtype=jnp.int32)
        hint = jnp.select(
            [numbers < state.target, numbers > state.target],
            [HINT_HIGHER, HINT_LOWER],
            HINT_CORRECT,
        )
        return {
            "hints": jnp.where(
                bitset.to_mask(state.guessed_bits, self.capacity), hint, HINT_NONE
            ).astype(jnp.int8),
            "turn": state.turn,
            "min_number": state.min_number,
            "max_number": state.max_number,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` GuessTheNumberEnv."""
        return cls.gem_kwargs(gem_env, ("min_number", "max_number", "max_turns"))

    def state_from_gem(self, gem_env: Any) -> GuessTheNumberState:
        """The kernel state equal to a live GEM env's (the instructions' example,
        which GEM does not keep, is set to ``min_number``)."""
        previous = [g for g in gem_env.previous_guesses if 0 <= g < self.capacity]
        return GuessTheNumberState(
            min_number=jnp.int32(gem_env.min_number),
            max_number=jnp.int32(gem_env.max_number),
            max_turns=jnp.int32(gem_env.max_turns),
            target=jnp.int32(gem_env.game_number),
            example=jnp.int32(gem_env.min_number),
            turn=jnp.int32(gem_env.turn_count),
            guessed_bits=jnp.asarray(bitset.from_indices(previous, self.capacity)),
        )
