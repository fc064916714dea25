"""Mastermind (GEM's ``gem/envs/game_env/mastermind.py``).

The player guesses a secret code of ``code_length`` numbers from ``1..num_numbers``
and is told how many entries are right and in place (black pegs) and right but
misplaced (white pegs). GEM's rules, branch by branch (spec section 5):

1. no ``\\boxed{d d ...}`` (or an entry ``int()`` refuses): format error, -0.1,
   terminated, truncated only when ``turn == max_turns``;
2. a guess with the wrong number of entries: invalid (0), the game goes on;
3. an entry outside ``1..num_numbers``: invalid (0);
4. a guess made before (only full-length, in-range guesses are remembered): invalid;
5. otherwise pegs, by the multiset rule: ``black`` = positions equal, ``white`` =
   ``sum_v min(count_guess(v), count_code(v)) - black``. The reward is the
   milestone increment ``(black - best) / code_length`` when ``black`` beats the best
   so far, else 0; ``black == code_length`` is a success (terminated, never
   truncated, even on the last turn);
6. after 2-5 without success, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, the step's reward unchanged.

GEM's reset returns the info ``{}`` (no suffix), unlike every other game; steps
return ``{"suffix": "Enter your guess."}``. The instructions' example is
``code_length`` distinct numbers (GEM's ``sample_random_action``), even when the
code may repeat numbers.

The ``-random`` variant draws ``(code_length, num_numbers, max_turns)`` from GEM's
candidates ``(2, 4, 10), (4, 6, 20), (4, 8, 30)`` at every reset; arrays are sized
for the largest (4 entries, numbers up to 8, 30 turns).

Kernel action: int32[K + 1], ``[num_entries, e_0, ..., e_{K-1}]`` with ``K`` the
largest code length (see :class:`~gemjax.text.grammar.BoxedIntList`):
``num_entries <= 0`` is a format error and any count other than the code length is
a wrong length (the host parser clamps counts to ``K + 1`` and entries to
``2**31 - 1``).

Observation (what the player has seen, never the code), a dict of:
    ``guesses``: int32[H, K], the valid guesses in order (zeros after the last and
        beyond the code length), ``H`` = the largest ``max_turns``;
    ``black``, ``white``: int32[H], their pegs;
    ``num_guesses``: int32[], valid guesses so far (past the turn limit GEM keeps
        going; guesses beyond ``H`` are counted but not stored);
    ``turn``, ``code_length``, ``num_numbers``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import (
    Environment,
    Event,
    GemMirror,
    Rewards,
    TimeStep,
    Variant,
    counted_action,
    gem_ending,
)
from gemjax.rng import below, random_words
from gemjax.spaces import MultiDiscrete
from gemjax.text.grammar import BoxedIntList
from gemjax.text.templates import Choice, Int, IntList, MessageTable, Template

# GEM's -random candidates: (code_length, num_numbers, max_turns).
RANDOM_CONFIGS = ((2, 4, 10), (4, 6, 20), (4, 8, 30))
# The duplicate-guess set is a bitset over all codes: num_numbers ** code_length bits.
MAX_CODES = 2**16


@functools.cache
def messages_for(size: int) -> MessageTable:
    """Mastermind's messages with list slots of ``size`` entries (the largest code)."""
    guess = IntList("guess", size, length="entries", echo=True)
    return MessageTable(
        instructions=Template(
            "You are playing Mastermind.\n"
            "You have to guess the secret {code_length} digit code within {max_turns} turns.\n"
            "The code consists of digits from 1 to {num_numbers} (inclusive). "
            "Duplicate numbers are {duplicates}.\n"
            "After you enter your guess, I will say mark your guess with black and white "
            "pegs, where a black peg indicates a correct digit in the correct position, "
            "while a white peg indicates a correct digit in the wrong position.\n"
            "After thinking, format your final answer inside \\boxed{{...}}, "
            "for example, \\boxed{{{example}}}.\n"
            "As you play, the history of your guesses will be appended below. Use the "
            "information to complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n",
            duplicates=Choice("duplicates", ("not allowed", "allowed")),
            example=IntList(
                "example", size, length="code_length", brackets=("", ""), separator=" "
            ),
        ),
        format_error=Template("At turn {turn}, you did not provide a valid guess."),
        wrong_length=Template(
            "At turn {turn}, you guessed {guess} which has {entries} entries but the "
            "code has length {code_length}.",
            guess=guess,
            entries=Int("entries", echo=True),
        ),
        out_of_range=Template(
            "At turn {turn}, you guessed {guess}, which has numbers outside the range "
            "1 to {num_numbers}.",
            guess=guess,
        ),
        duplicate=Template(
            "At turn {turn}, you guessed {guess}, which has been already guessed before.",
            guess=guess,
        ),
        pegs=Template(
            "At turn {turn}, you guessed {guess}. This guess receives {black} black peg(s) "
            "and {white} white peg(s).",
            guess=guess,
        ),
        success=Template(
            "Congratulations! You guessed the correct code {code} in {turn} turns.",
            code=IntList("code", size, length="code_length"),
        ),
        max_turns=Template("You have reached the maximum number of turns."),
    )


class MastermindParams(struct.PyTreeNode):
    """Dynamic parameters (ignored by ``-random``, which draws them at every reset).

    Attributes:
        code_length: int32[] entries in the code (at most the env's capacity).
        num_numbers: int32[] entries range over ``1..num_numbers``.
        max_turns: int32[] the turn limit.
        rewards: GEM's reward constants (``step`` is paid for a valid guess that
            does not beat the best black-peg count; ``invalid`` and
            ``format_error`` as named).
    """

    code_length: jax.Array
    num_numbers: jax.Array
    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class MastermindState(struct.PyTreeNode):
    """One episode.

    Attributes (int32 unless said):
        code_length, num_numbers, max_turns: []: this episode's configuration.
        code: [K] the secret (zeros beyond ``code_length``).
        example: [K] the instructions' example guess.
        turn: [] turns taken (GEM's ``turn_count``; it keeps counting after the end).
        milestone: [] the best black-peg count so far.
        num_guesses: [] valid guesses so far.
        guesses, black, white: [H, K], [H], [H]: the valid guesses and their pegs.
        seen: [W] bitset of the valid guesses (GEM's ``previous_guesses``), bit
            ``sum_i (g_i - 1) * N**i`` with ``N`` the largest ``num_numbers``.
    """

    code_length: jax.Array
    num_numbers: jax.Array
    max_turns: jax.Array
    code: jax.Array
    example: jax.Array
    turn: jax.Array
    milestone: jax.Array
    num_guesses: jax.Array
    guesses: jax.Array
    black: jax.Array
    white: jax.Array
    seen: jax.Array


def pegs(code: jax.Array, guess: jax.Array, length: jax.Array, num_numbers: int) -> jax.Array:
    """int32[2] ``(black, white)`` of ``guess`` against ``code`` over their first
    ``length`` entries (values in ``1..num_numbers``; others never match a code entry
    in ``1..num_numbers``), by the multiset rule."""
    used = jnp.arange(code.shape[-1]) < length
    black = jnp.sum(used & (guess == code), dtype=jnp.int32)
    values = jnp.arange(1, num_numbers + 1, dtype=jnp.int32)[:, None]
    in_guess = jnp.sum(used & (guess == values), axis=-1, dtype=jnp.int32)
    in_code = jnp.sum(used & (code == values), axis=-1, dtype=jnp.int32)
    common = jnp.sum(jnp.minimum(in_guess, in_code), dtype=jnp.int32)
    return jnp.stack([black, common - black])


def sample_distinct(bits: jax.Array, n: jax.Array, k: jax.Array, cap: int) -> jax.Array:
    """int32[size]: ``k`` distinct numbers from ``1..n`` in random order, then zeros
    (``random.sample``'s distribution), ``n <= cap``.

    A partial Fisher-Yates shuffle of ``1..cap`` driven by one random word per
    position (``bits``: uint32[size]), written on scalars (Python lists over the
    positions and the deck) so that under ``vmap`` every operation is one vector over
    the batch.
    """
    deck = [jnp.int32(value) for value in range(1, cap + 1)]
    drawn = []
    for i in range(bits.shape[0]):
        j = i + below(bits[i], jnp.maximum(n - i, 1))
        drawn.append(sum(jnp.where(j == m, deck[m], 0) for m in range(i, cap)))
        deck = [jnp.where(j == m, deck[i], deck[m]) for m in range(cap)]
    return jnp.where(jnp.arange(bits.shape[0]) < k, jnp.stack(drawn), 0).astype(jnp.int32)


class Mastermind(Environment[MastermindState, MastermindParams], GemMirror[MastermindState]):
    """Mastermind as a kernel. See the module docstring for rules and shapes.

    Args:
        code_length, num_numbers, max_turns: the registered configuration; any of
            them None gives GEM's ``-random`` variant (as in GEM).
        duplicate_numbers: codes are drawn with replacement (static: it changes the
            draw and the instructions).
    """

    gem_class_name = "MastermindEnv"
    step_uses_key = False
    reset_info_has_suffix = False

    def __init__(
        self,
        code_length: int | None = 4,
        num_numbers: int | None = 6,
        max_turns: int | None = 20,
        duplicate_numbers: bool = False,
    ) -> None:
        self.variant = Variant.of(
            {"code_length": code_length, "num_numbers": num_numbers, "max_turns": max_turns},
            random_values=tuple(max(column) for column in zip(*RANDOM_CONFIGS, strict=True)),
            check=self._check,
        )
        self.randomize, self._defaults = self.variant.randomize, self.variant.values
        self.duplicate_numbers = bool(duplicate_numbers)
        self.size, self.max_number, self.history = self._defaults
        self.num_words = -(-(self.max_number**self.size) // 32)
        self.messages = messages_for(self.size)
        self.suffix = Template("Enter your guess.")
        self.grammar = BoxedIntList("guess", self.size, count_slot="entries")

    @staticmethod
    def _check(code_length: int, num_numbers: int, max_turns: int) -> None:
        if code_length < 1:
            raise ValueError(f"code_length must be >= 1, got {code_length}")
        if num_numbers < code_length:
            raise ValueError(
                f"num_numbers ({num_numbers}) must be >= code_length ({code_length}): "
                "the instructions' example has distinct entries"
            )
        if num_numbers**code_length > MAX_CODES:
            raise ValueError(
                f"num_numbers ** code_length must be at most {MAX_CODES}, "
                f"got {num_numbers}**{code_length}"
            )
        if not 1 <= max_turns <= 10_000:
            raise ValueError(f"max_turns must be in 1..10000, got {max_turns}")

    @property
    def config(self) -> tuple[Any, ...]:
        return (*self.variant.config, self.duplicate_numbers)

    @property
    def default_params(self) -> MastermindParams:
        length, numbers, turns = (jnp.int32(v) for v in self._defaults)
        return MastermindParams(code_length=length, num_numbers=numbers, max_turns=turns)

    def validate_params(self, params: MastermindParams) -> None:
        values = tuple(int(v) for v in (params.code_length, params.num_numbers, params.max_turns))
        self._check(*values)
        for name, value, cap in zip(
            ("code_length", "num_numbers", "max_turns"), values, self._defaults, strict=True
        ):
            if value > cap:
                raise ValueError(
                    f"{name} {value} exceeds this env's capacity ({cap}); "
                    f"make the env with {name}={value}"
                )

    def action_space(self, params: MastermindParams) -> MultiDiscrete:
        """``[num_entries in 0..K+1, e_i in 0..N+1]``: 0 entries is a format error,
        ``K + 1`` a wrong length, entries 0 and ``N + 1`` out of range, as an LLM could
        write them (``K``, ``N``: this env's largest code length and number)."""
        return MultiDiscrete((self.size + 2,) + (self.max_number + 2,) * self.size)

    def reset(self, key: jax.Array, params: MastermindParams) -> tuple[MastermindState, TimeStep]:
        cap, size = self.max_number, self.size
        words = random_words(key, 2 * size + 1)
        if self.randomize:
            pick = jnp.arange(len(RANDOM_CONFIGS)) == (words[-1] % len(RANDOM_CONFIGS))
            length, numbers, turns = (
                jnp.sum(jnp.where(pick, jnp.asarray(column, jnp.int32), 0))
                for column in zip(*RANDOM_CONFIGS, strict=True)
            )
        else:
            length, numbers, turns = params.code_length, params.num_numbers, params.max_turns
        if self.duplicate_numbers:
            drawn = 1 + below(words[:size], numbers)
            code = jnp.where(jnp.arange(size) < length, drawn.astype(jnp.int32), 0)
        else:
            code = sample_distinct(words[:size], numbers, length, cap)
        state = MastermindState(
            code_length=length,
            num_numbers=numbers,
            max_turns=turns,
            code=code,
            example=sample_distinct(words[size : 2 * size], numbers, length, cap),
            turn=jnp.int32(0),
            milestone=jnp.int32(0),
            num_guesses=jnp.int32(0),
            guesses=jnp.zeros((self.history, size), jnp.int32),
            black=jnp.zeros((self.history,), jnp.int32),
            white=jnp.zeros((self.history,), jnp.int32),
            seen=jnp.zeros((self.num_words,), jnp.int32),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self,
        key: jax.Array,
        state: MastermindState,
        action: jax.Array,
        params: MastermindParams,
    ) -> tuple[MastermindState, TimeStep]:
        count, entries = counted_action(action, self.size)
        rewards, length, numbers = params.rewards, state.code_length, state.num_numbers
        turn = state.turn + 1
        used = jnp.arange(self.size) < length

        format_error = count <= 0
        wrong_length = ~format_error & (count != length)
        out_of_range = (
            ~format_error & ~wrong_length & jnp.any(used & ((entries < 1) | (entries > numbers)))
        )
        # Bit of the guess in the seen-set, its word read and written by index: one
        # word a lane (a one-hot over all words cost 1.2x more with 128 of them).
        powers = jnp.asarray([self.max_number**i for i in range(self.size)], jnp.int32)
        index = jnp.sum(jnp.where(used, (jnp.clip(entries, 1, self.max_number) - 1) * powers, 0))
        word_index = index >> 5
        bit = index & 31
        word = jax.lax.dynamic_index_in_dim(state.seen, word_index, keepdims=False)
        seen = ((word >> bit) & 1) == 1
        duplicate = ~format_error & ~wrong_length & ~out_of_range & seen
        valid = ~format_error & ~wrong_length & ~out_of_range & ~duplicate

        guess = jnp.where(used, entries, 0)
        black, white = pegs(state.code, guess, length, self.max_number)
        success = valid & (black == length)
        improves = valid & (black > state.milestone)
        out_of_turns = turn >= state.max_turns
        increment = (black - state.milestone).astype(jnp.float32) / length.astype(jnp.float32)
        reward = jnp.select(
            [format_error, improves, valid],
            [rewards.format_error, increment, rewards.step],
            rewards.invalid,
        ).astype(jnp.float32)
        kind = self.messages.select(
            (format_error, "format_error"),
            (success, "success"),
            (out_of_turns, "max_turns"),
            (wrong_length, "wrong_length"),
            (out_of_range, "out_of_range"),
            (duplicate, "duplicate"),
            default="pegs",
        )
        terminated, truncated = gem_ending(
            format_error, success, out_of_turns, turn, state.max_turns
        )

        row = valid & (jnp.arange(self.history) == state.num_guesses)
        new_state = state.replace(
            turn=turn,
            milestone=jnp.where(improves, black, state.milestone),
            num_guesses=state.num_guesses + valid.astype(jnp.int32),
            guesses=jnp.where(row[:, None], guess, state.guesses),
            black=jnp.where(row, black, state.black),
            white=jnp.where(row, white, state.white),
            seen=jax.lax.dynamic_update_index_in_dim(
                state.seen,
                word | jnp.where(valid, jnp.left_shift(jnp.int32(1), bit), 0),
                word_index,
                0,
            ),
        )
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=self.messages.event(
                kind,
                turn=turn,
                guess=entries,
                entries=count,
                code_length=length,
                num_numbers=numbers,
                black=black,
                white=white,
                code=state.code,
            ),
            info={"success": success},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: MastermindState) -> jax.Array:
        """``code_length`` distinct numbers from ``1..num_numbers`` (GEM's sampler)."""
        bits = random_words(key, self.size)
        entries = sample_distinct(bits, state.num_numbers, state.code_length, self.max_number)
        return jnp.concatenate([state.code_length[None], entries]).astype(jnp.int32)

    def instructions_event(self, state: MastermindState) -> Event:
        return self.messages.event(
            "instructions",
            code_length=state.code_length,
            max_turns=state.max_turns,
            num_numbers=state.num_numbers,
            duplicates=jnp.int32(self.duplicate_numbers),
            example=state.example,
        )

    def suffix_values(self, state: MastermindState) -> Mapping[str, jax.Array]:
        return {}

    def _observation(self, state: MastermindState) -> dict[str, jax.Array]:
        return {
            "guesses": state.guesses,
            "black": state.black,
            "white": state.white,
            "num_guesses": state.num_guesses,
            "turn": state.turn,
            "code_length": state.code_length,
            "num_numbers": state.num_numbers,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` MastermindEnv."""
        return cls.gem_kwargs(
            gem_env,
            ("code_length", "num_numbers", "max_turns"),
            duplicate_numbers=bool(gem_env.duplicate_numbers),
        )

    def state_from_gem(self, gem_env: Any) -> MastermindState:
        """The kernel state equal to a live GEM env's. GEM keeps its valid guesses as
        an unordered set, so the history lists them sorted; the instructions'
        example, which GEM does not keep, is ``1, 2, ..., code_length``."""
        length, numbers = gem_env.code_length, gem_env.num_numbers
        code = np.zeros(self.size, np.int32)
        code[:length] = gem_env.game_code
        previous = sorted(gem_env.previous_guesses)
        guesses = np.zeros((self.history, self.size), np.int32)
        black = np.zeros(self.history, np.int32)
        white = np.zeros(self.history, np.int32)
        seen = np.zeros(self.num_words, np.uint32)
        for i, guess in enumerate(previous):
            index = sum((g - 1) * self.max_number**j for j, g in enumerate(guess))
            seen[index >> 5] |= np.uint32(1 << (index & 31))
            if i < self.history:
                guesses[i, :length] = guess
                black[i], white[i] = gem_env._evaluate_guess(list(guess))
        example = np.zeros(self.size, np.int32)
        example[:length] = np.arange(1, length + 1)
        return MastermindState(
            code_length=jnp.int32(length),
            num_numbers=jnp.int32(numbers),
            max_turns=jnp.int32(gem_env.max_turns),
            code=jnp.asarray(code),
            example=jnp.asarray(example),
            turn=jnp.int32(gem_env.turn_count),
            milestone=jnp.int32(gem_env.milestone),
            num_guesses=jnp.int32(len(previous)),
            guesses=jnp.asarray(guesses),
            black=jnp.asarray(black),
            white=jnp.asarray(white),
            seen=jnp.asarray(seen.view(np.int32)),
        )
