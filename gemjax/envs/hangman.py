"""Hangman (GEM's ``gem/envs/game_env/hangman.py``).

The player uncovers a secret ``L``-letter word (NLTK's ``en-basic``, or ``en`` with
``hardcore=True``) by guessing letters or the whole word. GEM's rules, branch by
branch (spec section 9):

1. no ``\\boxed{letters}`` (one run of ``[a-zA-Z]`` with ``re.IGNORECASE``, so ``ı``,
   ``ſ``, ``İ`` and the Kelvin sign match too; upper-cased with ``str.upper()``):
   "You did not provide a valid guess." (no turn number), -0.1, terminated,
   truncated only when ``turn == max_turns``;
2. several letters equal to the secret: success, ``0.5 * hidden / L + 0.5`` where
   ``hidden`` counts the cells not revealed yet (terminated, never truncated);
3. several letters of another length: invalid (0);
4. several letters of the right length: incorrect (``step``, 0);
5. one letter guessed before (letters only are remembered): invalid (0);
6. one letter in the secret: every occurrence is revealed, ``0.5 * occurrences / L``;
7. one letter not in the secret: ``step`` (0). There are no lives, and revealing
   every letter does not win: only typing the word does;
8. after 2-7 without success, when ``turn >= max_turns``: "You have reached the
   maximum number of turns.", terminated and truncated, the step's reward unchanged.

GEM's instructions swap their examples: one-letter guesses are shown as a random pool
word and whole-word guesses as a random letter (reproduced). The suffix shows the grid
(``C00 C01 ...`` over ``"  _ "`` or ``"  A "`` cells); a correct whole-word guess does
not reveal it.

The ``-random`` variant draws ``(L, max_turns)`` from ``(3, 10), (5, 15), (7, 20)`` at
every reset; arrays are sized for the largest (7 letters).

Kernel action: int32[C + 1], ``[num_letters, c_0, ..., c_{C-1}]`` with ``C`` the
largest word length (see :class:`~gemjax.text.grammar.BoxedLetters`):
codes ``1..26`` are ``A..Z``, ``27`` is ``İ`` and ``28`` the Kelvin sign
(:data:`ALPHABET`); ``num_letters <= 0`` is a format error, 1 a letter guess.

Observation (what the player has seen, never the secret), a dict of:
    ``board``: int32[C], the revealed letters' codes (0: hidden or beyond ``L``);
    ``guessed_letters``: bool[28], the letters guessed so far (index = code - 1);
    ``turn``, ``word_length``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import Event, TimeStep, gem_ending
from gemjax.envs.words import LETTER_SYMBOLS, LETTERS, WordGame, WordGameParams
from gemjax.rng import random_words
from gemjax.text.grammar import IGNORECASE_EXTRA_LETTERS, BoxedLetters
from gemjax.text.templates import Choice, Int, MessageTable, SymbolList, Template

# Every character a parsed guess can hold: code = 1 + index.
ALPHABET = LETTERS + IGNORECASE_EXTRA_LETTERS
PATTERN = r"\\boxed{([a-zA-Z]+)}"


@functools.cache
def messages_for(size: int) -> MessageTable:
    """Hangman's messages with word slots of ``size`` letters (the longest word)."""
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
            "You are playing Hangman.\n"
            "The objective of the game is to guess the {word_length}-letter word by "
            "providing one letter guesses or the entire word.\n"
            "The cells that need to be populated with letters are represented by '_'.\n\n"
            "There are two ways you can answer. You can provide one letter guesses in the "
            "format of \\boxed{{{example}}}, or you can guess the entire word in the format "
            "of \\boxed{{{example_letter}}}.\n"
            "If the given letter is in the word, it will be revealed in the grid.\n"
            "If the given word is correct, you win.\n"
            "As you play, the history of your choices will be appended below. Use the "
            "information to figure out the word and win.\n"
            "Some rules:\n"
            "1. You can only guess one letter/word at a time.\n"
            "2. You have to win within {max_turns} turns.\n\n",
            example=word("example"),
            example_letter=Choice("example_letter", LETTER_SYMBOLS),
        ),
        format_error=Template("You did not provide a valid guess."),
        success=Template(
            "Congratulations! You guessed the word '{secret}' correctly!", secret=word("secret")
        ),
        wrong_length=Template(
            "At turn {turn}, You guessed '{guess}' which is of length {letters}, but the "
            "secret word is of length {word_length}.",
            guess=guess,
            letters=Int("letters", echo=True),
        ),
        wrong_word=Template(
            "At turn {turn}, You guessed '{guess}' which is incorrect.", guess=guess
        ),
        duplicate=Template(
            "At turn {turn}, you guessed '{guess}', which has been already guessed before.",
            guess=guess,
        ),
        hit=Template(
            "At turn {turn}, you successfully guessed a letter '{guess}' that is in the "
            "secret word.",
            guess=guess,
        ),
        miss=Template(
            "At turn {turn}, you guessed a letter '{guess}' that is not in the secret word.",
            guess=guess,
        ),
        max_turns=Template("You have reached the maximum number of turns."),
    )


@functools.cache
def suffix_for(size: int) -> Template:
    """The grid suffix for words of up to ``size`` letters."""
    return Template(
        "Here is the current state of the Hangman grid:\n{columns}\n{board}\n\nEnter your guess.",
        columns=SymbolList(
            "columns",
            size,
            length="word_length",
            symbols=tuple(f"C{i:02}" for i in range(size)),
            brackets=("", ""),
            separator=" ",
        ),
        board=SymbolList(
            "board",
            size,
            length="word_length",
            symbols=tuple(f"  {cell} " for cell in "_" + LETTERS),
            brackets=("", ""),
            separator="",
        ),
    )


class HangmanState(struct.PyTreeNode):
    """One episode.

    Attributes (int32 unless said):
        word_length, max_turns: []: this episode's configuration.
        secret: [C] the secret's letter codes (zeros beyond ``word_length``).
        example: [C] the instructions' example word; example_letter: [] its letter.
        turn: [] turns taken (GEM's ``turn_count``; it keeps counting after the end).
        revealed: bool[C] the revealed cells.
        guessed: bool[A] the guessed letters (index = code - 1).
    """

    word_length: jax.Array
    max_turns: jax.Array
    secret: jax.Array
    example: jax.Array
    example_letter: jax.Array
    turn: jax.Array
    revealed: jax.Array
    guessed: jax.Array


class Hangman(WordGame[HangmanState]):
    """Hangman as a kernel. See the module docstring for rules and shapes.

    Args:
        word_length, max_turns: the registered configuration; either None gives GEM's
            ``-random`` variant (as in GEM).
        hardcore: draw from NLTK's full ``en`` list instead of ``en-basic``.
    """

    gem_class_name = "HangmanEnv"
    step_uses_key = False
    random_configs = ((3, 10), (5, 15), (7, 20))

    def __init__(
        self,
        word_length: int | None = 5,
        hardcore: bool | None = False,
        max_turns: int | None = 20,
    ) -> None:
        self.hardcore = bool(hardcore)
        self._setup("en" if self.hardcore else "en-basic", word_length, max_turns)
        self.messages = messages_for(self.size)
        self.suffix = suffix_for(self.size)
        self.grammar = BoxedLetters(
            PATTERN, ALPHABET, self.size, "guess", "letters", flags=re.IGNORECASE
        )

    def reset(self, key: jax.Array, params: WordGameParams) -> tuple[HangmanState, TimeStep]:
        bits = random_words(key, 4)
        length, turns, secret, example = params.bank.draw_from(bits[:3])
        letter = 1 + (bits[3] % 26).astype(jnp.int32)
        state = HangmanState(
            word_length=length,
            max_turns=turns,
            secret=secret,
            example=example,
            example_letter=letter,
            turn=jnp.int32(0),
            revealed=jnp.zeros((self.size,), jnp.bool_),
            guessed=jnp.zeros((len(ALPHABET),), jnp.bool_),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def step(
        self, key: jax.Array, state: HangmanState, action: jax.Array, params: WordGameParams
    ) -> tuple[HangmanState, TimeStep]:
        count, codes = self._split_action(action, len(ALPHABET))
        rewards, length, secret = params.rewards, state.word_length, state.secret
        turn = state.turn + 1
        used = jnp.arange(self.size) < length

        format_error = count <= 0
        word = ~format_error & (count > 1)
        success = word & (count == length) & jnp.all(~used | (codes == secret))
        wrong_length = word & (count != length)
        wrong_word = word & ~success & ~wrong_length
        letter = ~format_error & (count == 1)
        one_hot = jnp.arange(1, len(ALPHABET) + 1) == codes[0]
        duplicate = letter & jnp.any(one_hot & state.guessed)
        occurrences = used & (secret == codes[0])
        hits = jnp.sum(occurrences, dtype=jnp.int32)
        hit = letter & ~duplicate & (hits > 0)
        out_of_turns = turn >= state.max_turns

        # GEM's 0.5 * n / L (+ 0.5) in float64; one float32 division of exact integers
        # rounds it correctly.
        half = (2 * length).astype(jnp.float32)
        hidden = jnp.sum(used & ~state.revealed, dtype=jnp.int32).astype(jnp.float32)
        win = (hidden + length.astype(jnp.float32) * rewards.success) / half
        reward = jnp.select(
            [format_error, success, hit, wrong_length | duplicate],
            [rewards.format_error, win, hits.astype(jnp.float32) / half, rewards.invalid],
            rewards.step,
        ).astype(jnp.float32)
        kind = self.messages.select(
            (format_error, "format_error"),
            (success, "success"),
            (out_of_turns, "max_turns"),
            (wrong_length, "wrong_length"),
            (wrong_word, "wrong_word"),
            (duplicate, "duplicate"),
            (hit, "hit"),
            default="miss",
        )
        terminated, truncated = gem_ending(
            format_error, success, out_of_turns, turn, state.max_turns
        )

        new_state = state.replace(
            turn=turn,
            revealed=state.revealed | (hit & occurrences),
            guessed=state.guessed | (letter & one_hot),
        )
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=self.messages.event(
                kind, turn=turn, guess=codes, letters=count, word_length=length, secret=secret
            ),
            info={"success": success},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: HangmanState) -> jax.Array:
        """GEM's sampler: with probability 1/2 a uniform word of the episode's length
        from the default pool, else a uniform letter ``A..Z``."""
        bits = random_words(key, 3)
        word = self.bank.random_word(bits[0], state.word_length)
        letter = 1 + (bits[1] % 26).astype(jnp.int32)
        single = jnp.zeros((self.size,), jnp.int32).at[0].set(letter)
        pick_word = (bits[2] & 1) == 1
        count = jnp.where(pick_word, state.word_length, 1)
        return jnp.concatenate([count[None], jnp.where(pick_word, word, single)]).astype(jnp.int32)

    def instructions_event(self, state: HangmanState) -> Event:
        return self.messages.event(
            "instructions",
            word_length=state.word_length,
            max_turns=state.max_turns,
            example=state.example,
            example_letter=state.example_letter,
        )

    def suffix_values(self, state: HangmanState) -> Mapping[str, jax.Array]:
        return {
            "columns": jnp.arange(self.size, dtype=jnp.int32),
            "board": self._board(state),
            "word_length": state.word_length,
        }

    def _board(self, state: HangmanState) -> jax.Array:
        return jnp.where(state.revealed, state.secret, 0).astype(jnp.int32)

    def _observation(self, state: HangmanState) -> dict[str, jax.Array]:
        return {
            "board": self._board(state),
            "guessed_letters": state.guessed,
            "turn": state.turn,
            "word_length": state.word_length,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` HangmanEnv."""
        return cls.gem_kwargs(
            gem_env, ("word_length", "max_turns"), hardcore=bool(gem_env.hardcore)
        )

    def state_from_gem(self, gem_env: Any) -> HangmanState:
        """The kernel state equal to a live GEM env's. The instructions' examples,
        which GEM does not keep, are the pool's first word and ``A``."""

        def encode(text: str) -> np.ndarray:
            row = np.zeros(self.size, np.int32)
            row[: len(text)] = [1 + ALPHABET.index(ch) for ch in text]
            return row

        length = gem_env.word_length
        revealed = np.zeros(self.size, np.bool_)
        revealed[:length] = [cell != "_" for cell in gem_env.board]
        guessed = np.zeros(len(ALPHABET), np.bool_)
        for ch in gem_env.guessed_letters:
            guessed[ALPHABET.index(ch)] = True
        return HangmanState(
            word_length=jnp.int32(length),
            max_turns=jnp.int32(gem_env.max_turns),
            secret=jnp.asarray(encode(gem_env.secret_word)),
            example=jnp.asarray(encode(gem_env.available_words[0].upper())),
            example_letter=jnp.int32(1),
            turn=jnp.int32(gem_env.turn_count),
            revealed=jnp.asarray(revealed),
            guessed=jnp.asarray(guessed),
        )
