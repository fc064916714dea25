"""Wordle (GEM's ``gem/envs/game_env/wordle.py``).

The player guesses a secret ``L``-letter word from NLTK's ``en-basic`` list and gets,
per position, G (right letter, right place), Y (in the word elsewhere) or X. GEM's
rules, branch by branch (spec section 8):

1. no ``\\boxed{letters}`` (``[a-zA-Z]+`` groups separated by ``\\s+``): format error,
   -0.1, terminated, truncated only when ``turn == max_turns``;
2. a guess whose length (after upper-casing and removing ``" "`` only: a tab between
   groups stays and counts) is not ``L``: invalid (0), the game goes on;
3. a guess made before (only valid guesses are remembered): invalid (0);
4. otherwise feedback, by the two-pass multiset rule (greens first; then a yellow for
   each other position whose letter is among the secret letters not yet used, first
   occurrences first). Each position green for the first time in the episode pays
   ``0.5 / L``; all green is a success and adds ``0.5`` (terminated, never truncated).
   Any letter string is accepted: GEM's ``only_real_words`` is ignored;
5. after 2-4 without success, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, the step's reward unchanged.

The ``-random`` variant draws ``L`` from 3..5 with ``max_turns = 5 L`` at every reset;
arrays are sized for the largest (5 letters, 25 turns).

Kernel action: int32[C + 1], ``[num_letters, c_0, ..., c_{C-1}]`` with ``C`` the
largest word length (see :class:`~gemjax.text.grammar.BoxedLetters`):
codes ``1..26`` are ``A..Z`` and ``27..54`` the whitespace characters a guess can keep
(:data:`ALPHABET`); ``num_letters <= 0`` is a format error.

Observation (what the player has seen, never the secret), a dict of:
    ``guesses``: int32[H, C], the valid guesses in order (zeros after the last and
        beyond ``L``), ``H`` = the largest ``max_turns``;
    ``feedback``: int32[H, C], their marks: 0 = X, 1 = Y, 2 = G (0 in padding);
    ``num_guesses``: int32[], valid guesses so far (past the turn limit GEM keeps
        going; guesses beyond ``H`` are counted but not stored);
    ``turn``, ``word_length``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import Event, TimeStep, gem_ending
from gemjax.envs.words import LETTER_SYMBOLS, LETTERS, WordGame, WordGameParams
from gemjax.rng import random_words
from gemjax.text.grammar import WHITESPACE_BUT_SPACE, BoxedLetters
from gemjax.text.templates import Int, MessageTable, SymbolList, Template

# Every character a parsed guess can hold: code = 1 + index.
ALPHABET = LETTERS + WHITESPACE_BUT_SPACE
PATTERN = r"\\boxed{([a-zA-Z]+(?:\s+[a-zA-Z]+)*)}"
MARKS = ("'X'", "'Y'", "'G'")
X, Y, G = range(3)


@functools.cache
def messages_for(size: int) -> MessageTable:
    """Wordle's messages with word slots of ``size`` letters (the longest word)."""
    guess = SymbolList(
        "guess",
        size,
        length="letters",
        symbols=("", *ALPHABET),
        brackets=("", ""),
        separator="",
        echo=True,
    )

    def word(name: str) -> SymbolList:
        return SymbolList(
            name,
            size,
            length="word_length",
            symbols=LETTER_SYMBOLS,
            brackets=("", ""),
            separator="",
        )

    return MessageTable(
        instructions=Template(
            "You are playing Wordle.\n"
            "You have to guess the secret {word_length}-letter word within {max_turns} turns.\n"
            "After you enter your guess, I will say mark your guess as follows:\n"
            "  - G (green): correct letter in the correct position\n"
            "  - Y (yellow): letter exists in the word but in the wrong position\n"
            "  - X (wrong): letter is not in the word\n"
            "After thinking, format your final answer inside \\boxed{{...}}, "
            "for example, \\boxed{{{example}}}.\n"
            "As you play, the history of your guesses will be appended below. Use the "
            "information to complete the game before you run out of guesses.\n",
            example=word("example"),
        ),
        format_error=Template("At turn {turn}, you did not provide a valid guess."),
        wrong_length=Template(
            "At turn {turn}, you guessed {guess} which has {letters} letters but the "
            "secret word has {word_length} letters.",
            guess=guess,
            letters=Int("letters", echo=True),
        ),
        duplicate=Template(
            "At turn {turn}, you guessed {guess}, which has been already guessed before.",
            guess=guess,
        ),
        feedback=Template(
            "At turn {turn}, you guessed {guess}\nFeedback:\n{guess}\n{feedback}",
            guess=guess,
            feedback=SymbolList("feedback", size, length="word_length", symbols=MARKS),
        ),
        success=Template(
            "Congratulations! You guessed the secret word {secret} in {turn} turns.",
            secret=word("secret"),
        ),
        max_turns=Template("You have reached the maximum number of turns."),
    )


class WordleState(struct.PyTreeNode):
    """One episode.

    Attributes (int32 unless said):
        word_length, max_turns: []: this episode's configuration.
        secret: [C] the secret's letter codes (zeros beyond ``word_length``).
        example: [C] the instructions' example word.
        turn: [] turns taken (GEM's ``turn_count``; it keeps counting after the end).
        milestones: bool[C] positions that have been green.
        num_guesses: [] valid guesses so far.
        guesses, feedback: [H, C]: the valid guesses and their marks.
        guess_keys: [H, K]: the valid guesses packed by :func:`pack_guess` (the
            duplicate check compares one or two words per guess, not ``C`` letters).
    """

    word_length: jax.Array
    max_turns: jax.Array
    secret: jax.Array
    example: jax.Array
    turn: jax.Array
    milestones: jax.Array
    num_guesses: jax.Array
    guesses: jax.Array
    feedback: jax.Array
    guess_keys: jax.Array


LETTERS_PER_KEY = 5  # 6-bit codes (ALPHABET has 54) in a non-negative int32


def packed_size(size: int) -> int:
    """The int32 words :func:`pack_guess` makes of ``size`` letter codes."""
    return -(-size // LETTERS_PER_KEY)


def pack_guess(codes: jax.Array) -> jax.Array:
    """int32[..., K]: letter codes int32[..., C] (each ``0..63``) packed 6 bits a code,
    :data:`LETTERS_PER_KEY` codes a word; equal keys iff equal codes."""
    size = codes.shape[-1]
    padded = jnp.pad(
        codes, [(0, 0)] * (codes.ndim - 1) + [(0, packed_size(size) * LETTERS_PER_KEY - size)]
    )
    groups = padded.reshape(*codes.shape[:-1], packed_size(size), LETTERS_PER_KEY)
    shifts = 6 * jnp.arange(LETTERS_PER_KEY, dtype=jnp.int32)
    return jnp.sum(jnp.left_shift(groups, shifts), axis=-1, dtype=jnp.int32)


def evaluate(secret: jax.Array, guess: jax.Array, length: jax.Array) -> jax.Array:
    """int32[C] marks (0 = X, 1 = Y, 2 = G) of ``guess`` against ``secret`` over their
    first ``length`` positions (X beyond), by GEM's two passes: greens; then, left to
    right, a yellow where the letter is among the secret's non-green letters not yet
    used by an earlier yellow. Position ``i`` is yellow iff its rank among the non-green
    guess positions with its letter is at most that letter's non-green count in the
    secret. Codes that are not secret letters (whitespace, 0) are never yellow.

    Written per position (Python loops over the ``C`` positions): under ``vmap`` every
    operation is then one vector over the batch, where the ``[C, C]`` array form
    reduces along short axes, which XLA's CPU backend vectorises badly."""
    size = secret.shape[-1]
    g = [guess[i] for i in range(size)]
    s = [secret[i] for i in range(size)]
    used = [length > i for i in range(size)]
    green = [used[i] & (g[i] == s[i]) & (s[i] > 0) for i in range(size)]
    open_ = [used[i] & ~green[i] for i in range(size)]
    marks = []
    for i in range(size):
        rank = sum((open_[j] & (g[j] == g[i])).astype(jnp.int32) for j in range(i + 1))
        available = sum((open_[j] & (s[j] == g[i])).astype(jnp.int32) for j in range(size))
        yellow = open_[i] & (rank <= available)
        marks.append(jnp.where(green[i], G, jnp.where(yellow, Y, X)))
    return jnp.stack(marks).astype(jnp.int32)


class Wordle(WordGame[WordleState]):
    """Wordle as a kernel. See the module docstring for rules and shapes.

    Args:
        word_length, max_turns: the registered configuration; either None gives GEM's
            ``-random`` variant (as in GEM).
        only_real_words: accepted for GEM compatibility and ignored, as in GEM.
    """

    gem_class_name = "WordleEnv"
    step_uses_key = False
    random_configs = ((3, 15), (4, 20), (5, 25))

    def __init__(
        self,
        word_length: int | None = 5,
        only_real_words: bool | None = True,
        max_turns: int | None = 20,
    ) -> None:
        self._setup("en-basic", word_length, max_turns)
        self.messages = messages_for(self.size)
        self.suffix = Template("Enter your guess.")
        self.grammar = BoxedLetters(PATTERN, ALPHABET, self.size, "guess", "letters")

    def reset(self, key: jax.Array, params: WordGameParams) -> tuple[WordleState, TimeStep]:
        length, turns, secret, example = params.bank.draw(key)
        state = WordleState(
            word_length=length,
            max_turns=turns,
            secret=secret,
            example=example,
            turn=jnp.int32(0),
            milestones=jnp.zeros((self.size,), jnp.bool_),
            num_guesses=jnp.int32(0),
            guesses=jnp.zeros((self.history, self.size), jnp.int32),
            feedback=jnp.zeros((self.history, self.size), jnp.int32),
            guess_keys=jnp.zeros((self.history, packed_size(self.size)), jnp.int32),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self, key: jax.Array, state: WordleState, action: jax.Array, params: WordGameParams
    ) -> tuple[WordleState, TimeStep]:
        count, codes = self._split_action(action, len(ALPHABET))
        rewards, length = params.rewards, state.word_length
        turn = state.turn + 1
        used = jnp.arange(self.size) < length
        guess = jnp.where(used, codes, 0)

        format_error = count <= 0
        wrong_length = ~format_error & (count != length)
        stored = jnp.arange(self.history) < state.num_guesses
        key = pack_guess(guess)
        seen = jnp.any(stored & jnp.all(state.guess_keys == key, axis=1))
        duplicate = ~format_error & ~wrong_length & seen
        valid = ~format_error & ~wrong_length & ~duplicate

        marks = evaluate(state.secret, guess, length)
        green = used & (marks == G)
        new_green = valid & green & ~state.milestones
        success = valid & jnp.all(green | ~used)
        out_of_turns = turn >= state.max_turns
        # GEM adds 0.5 / L per new green (then 0.5 on success) in float64; one float32
        # division of exact integers rounds that sum correctly.
        half = (2 * length).astype(jnp.float32)
        progress = jnp.sum(new_green, dtype=jnp.int32).astype(jnp.float32)
        bonus = jnp.where(success, length.astype(jnp.float32) * rewards.success, 0.0)
        reward = jnp.select(
            [format_error, valid],
            [rewards.format_error, (progress + bonus) / half],
            rewards.invalid,
        ).astype(jnp.float32)
        kind = self.messages.select(
            (format_error, "format_error"),
            (success, "success"),
            (out_of_turns, "max_turns"),
            (wrong_length, "wrong_length"),
            (duplicate, "duplicate"),
            default="feedback",
        )
        terminated, truncated = gem_ending(
            format_error, success, out_of_turns, turn, state.max_turns
        )

        row = valid & (jnp.arange(self.history) == state.num_guesses)
        new_state = state.replace(
            turn=turn,
            milestones=state.milestones | new_green,
            num_guesses=state.num_guesses + valid.astype(jnp.int32),
            guesses=jnp.where(row[:, None], guess, state.guesses),
            feedback=jnp.where(row[:, None], marks, state.feedback),
            guess_keys=jnp.where(row[:, None], key, state.guess_keys),
        )
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=self.messages.event(
                kind,
                turn=turn,
                guess=codes,
                letters=count,
                word_length=length,
                feedback=marks,
                secret=state.secret,
            ),
            info={"success": success},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: WordleState) -> jax.Array:
        """A uniform word of the episode's length from the default pool (GEM's
        sampler)."""
        word = self.bank.random_word(random_words(key, 1)[0], state.word_length)
        return jnp.concatenate([state.word_length[None], word]).astype(jnp.int32)

    def instructions_event(self, state: WordleState) -> Event:
        return self.messages.event(
            "instructions",
            word_length=state.word_length,
            max_turns=state.max_turns,
            example=state.example,
        )

    def suffix_values(self, state: WordleState) -> Mapping[str, jax.Array]:
        return {}

    def _observation(self, state: WordleState) -> dict[str, jax.Array]:
        return {
            "guesses": state.guesses,
            "feedback": state.feedback,
            "num_guesses": state.num_guesses,
            "turn": state.turn,
            "word_length": state.word_length,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` WordleEnv."""
        return cls.gem_kwargs(gem_env, ("word_length", "max_turns"))

    def state_from_gem(self, gem_env: Any) -> WordleState:
        """The kernel state equal to a live GEM env's. GEM keeps its valid guesses as
        an unordered set, so the history lists them sorted; the instructions'
        example, which GEM does not keep, is the first word of the pool."""
        length = gem_env.word_length
        codes = {ch: i + 1 for i, ch in enumerate(ALPHABET)}

        def encode(word: str) -> np.ndarray:
            row = np.zeros(self.size, np.int32)
            row[: len(word)] = [codes[ch] for ch in word]
            return row

        previous = sorted(gem_env.previous_guesses)
        guesses = np.zeros((self.history, self.size), np.int32)
        feedback = np.zeros((self.history, self.size), np.int32)
        for i, guess in enumerate(previous[: self.history]):
            guesses[i] = encode(guess)
            feedback[i, :length] = ["XYG".index(m) for m in gem_env._evaluate_guess(guess)]
        milestones = np.zeros(self.size, np.bool_)
        milestones[:length] = np.asarray(gem_env.milestones, bool)
        return WordleState(
            word_length=jnp.int32(length),
            max_turns=jnp.int32(gem_env.max_turns),
            secret=jnp.asarray(encode(gem_env.secret_word)),
            example=jnp.asarray(encode(gem_env.available_words[0].upper())),
            turn=jnp.int32(gem_env.turn_count),
            milestones=jnp.asarray(milestones),
            num_guesses=jnp.int32(len(previous)),
            guesses=jnp.asarray(guesses),
            feedback=jnp.asarray(feedback),
            guess_keys=pack_guess(jnp.asarray(guesses)),
        )
