"""Word data and what the word games share (Wordle, Hangman).

The secret words come from NLTK's ``words`` corpus, shipped in
``gemjax/envs/data/nltk_words`` (see its README for provenance). GEM reads a list with
``nltk.corpus.words.words(name)`` (the file's non-blank lines) and keeps, for a word
length ``L``, the words with ``len(w) == L and w.isalpha() and w.islower()``, in file
order; :func:`word_pool` does the same and returns them as letter codes.

Letters are coded ``A = 1 ... Z = 26`` (:data:`LETTERS`); 0 pads. The pools of a game
travel in its params as a :class:`WordBank` (arrays, not constants closed over by
jitted code), which also holds the game's configurations: one for a fixed id, several
for ``-random`` (drawn uniformly at every reset).
"""

from __future__ import annotations

import functools
import importlib.resources
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gemjax.core import Environment, GemMirror, Rewards, TState, Variant, counted_action
from gemjax.rng import below, random_words
from gemjax.spaces import MultiDiscrete

LETTERS = string.ascii_uppercase
# Symbols of letter codes for ``SymbolList`` slots: code 0 prints nothing.
LETTER_SYMBOLS = ("", *LETTERS)
WORD_LISTS = ("en", "en-basic")


def write_nltk_data(root: Path) -> Path:
    """Lay out the shipped lists as NLTK data (``root/corpora/words/{en,en-basic,README}``)
    and return ``root``: with ``NLTK_DATA=root``, ``gem-llm``'s word games run offline."""
    target = root / "corpora" / "words"
    target.mkdir(parents=True, exist_ok=True)
    source = importlib.resources.files("gemjax.envs").joinpath("data/nltk_words")
    for name in (*WORD_LISTS, "README"):
        (target / name).write_bytes(source.joinpath(name).read_bytes())
    return root


@functools.cache
def word_list(name: str) -> tuple[str, ...]:
    """The NLTK ``words`` list ``name`` (``"en"`` or ``"en-basic"``), as NLTK reads it."""
    if name not in WORD_LISTS:
        raise ValueError(f"unknown word list {name!r}; known: {WORD_LISTS}")
    path = importlib.resources.files("gemjax.envs").joinpath(f"data/nltk_words/{name}")
    text = path.read_text(encoding="utf-8")
    # NLTK's WordListCorpusReader: line_tokenize (blank lines discarded).
    return tuple(line for line in text.split("\n") if line.strip())


@functools.cache
def word_pool(name: str, length: int) -> np.ndarray:
    """uint8[n, length]: letter codes of GEM's pool of ``length``-letter words.

    Raises:
        ValueError: the pool is empty (GEM's ``random.choice`` would raise).
    """
    words = [w for w in word_list(name) if len(w) == length and w.isalpha() and w.islower()]
    if not words:
        raise ValueError(f"NLTK's {name!r} list has no {length}-letter words")
    if not all(w.isascii() for w in words):
        raise ValueError(f"non-ASCII words in {name!r}")
    codes = np.frombuffer("".join(words).upper().encode("ascii"), np.uint8) - (ord("A") - 1)
    pool = codes.reshape(len(words), length)
    pool.setflags(write=False)
    return pool


def decode(codes: Sequence[int]) -> str:
    """The upper-case word of letter codes (zeros end it)."""
    out = []
    for code in codes:
        if int(code) == 0:
            break
        out.append(LETTERS[int(code) - 1])
    return "".join(out)


class WordBank(struct.PyTreeNode):
    """A word game's configurations and their pools.

    Attributes:
        word_length: int32[R] the word length of each configuration.
        max_turns: int32[R] its turn limit.
        words: uint8[R, P, C] its pool's letter codes (rows beyond ``num_words`` and
            columns beyond ``word_length`` are 0).
        num_words: int32[R] its pool size.
    """

    word_length: jax.Array
    max_turns: jax.Array
    words: jax.Array
    num_words: jax.Array

    @classmethod
    def build(cls, list_name: str, configs: Sequence[tuple[int, int]]) -> WordBank:
        """The bank of ``configs`` (``(word_length, max_turns)`` pairs) over NLTK's
        ``list_name``, sized to the longest word and the largest pool."""
        pools = [word_pool(list_name, length) for length, _ in configs]
        capacity = max(length for length, _ in configs)
        words = np.zeros((len(configs), max(len(p) for p in pools), capacity), np.uint8)
        for i, pool in enumerate(pools):
            words[i, : pool.shape[0], : pool.shape[1]] = pool
        return cls(
            word_length=jnp.asarray([c[0] for c in configs], jnp.int32),
            max_turns=jnp.asarray([c[1] for c in configs], jnp.int32),
            words=jnp.asarray(words),
            num_words=jnp.asarray([len(p) for p in pools], jnp.int32),
        )

    @property
    def capacity(self) -> int:
        """The longest word the bank holds (``C``)."""
        return self.words.shape[-1]

    def validate(self, capacity: int, max_turns_cap: int) -> None:
        """Raise ``ValueError`` unless the bank is consistent and fits an env whose
        arrays hold ``capacity`` letters and ``max_turns_cap`` turns (host-side)."""
        length = np.asarray(self.word_length)
        turns = np.asarray(self.max_turns)
        words = np.asarray(self.words)
        sizes = np.asarray(self.num_words)
        if not (length.ndim == turns.ndim == sizes.ndim == 1 and words.ndim == 3):
            raise ValueError("a WordBank holds [R] configurations and [R, P, C] words")
        if not len(length) == len(turns) == len(sizes) == words.shape[0] >= 1:
            raise ValueError("the WordBank's arrays disagree on the number of configurations")
        if words.shape[2] != capacity:
            raise ValueError(f"the WordBank holds {words.shape[2]}-letter rows, the env {capacity}")
        if (length < 1).any() or (length > capacity).any():
            raise ValueError(f"word lengths {length.tolist()} must be in 1..{capacity}")
        if (turns < 1).any() or (turns > max_turns_cap).any():
            raise ValueError(
                f"max_turns {turns.tolist()} must be in 1..{max_turns_cap} (this env's "
                "capacity; make the env with a larger max_turns)"
            )
        if (sizes < 1).any() or (sizes > words.shape[1]).any():
            raise ValueError(f"pool sizes {sizes.tolist()} must be in 1..{words.shape[1]}")
        for i, (n, L) in enumerate(zip(sizes, length, strict=True)):
            rows = words[i, :n]
            if ((rows[:, :L] < 1) | (rows[:, :L] > 26)).any() or rows[:, L:].any():
                raise ValueError(f"configuration {i}: pool words must be {L} letter codes")

    def draw(self, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """A configuration, a secret and an independent example word, uniformly.

        Returns ``(word_length, max_turns, secret, example)``: int32[] scalars and
        int32[C] letter codes. Only the two rows are gathered (cheap under ``vmap``).
        """
        return self.draw_from(random_words(key, 3))

    def draw_from(self, bits: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """:meth:`draw` from three random words (uint32[3])."""
        config = (bits[0] % self.word_length.shape[0]).astype(jnp.int32)
        size = self.num_words[config]
        secret = self.words[config, below(bits[1], size)].astype(jnp.int32)
        example = self.words[config, below(bits[2], size)].astype(jnp.int32)
        return self.word_length[config], self.max_turns[config], secret, example

    def random_word(self, bits: jax.Array, length: jax.Array) -> jax.Array:
        """int32[C]: a uniform word of the first configuration of word length ``length``,
        picked by the random word ``bits`` (uint32[])."""
        config = jnp.argmax(self.word_length == length).astype(jnp.int32)
        size = self.num_words[config]
        return self.words[config, below(bits, size)].astype(jnp.int32)


class WordGameParams(struct.PyTreeNode):
    """Dynamic parameters of a word game.

    Attributes:
        bank: the configurations and pools (a ``-random`` id holds several, drawn
            uniformly at every reset). Swap in another bank (:meth:`WordBank.build`)
            to change the turn limit or the words without recompiling; its shapes
            must match the env's (``validate_params`` checks).
        rewards: GEM's reward constants (``invalid`` and ``format_error`` as named;
            ``success`` scales the success bonus; see each game for ``step``).
    """

    bank: WordBank
    rewards: Rewards = struct.field(default_factory=Rewards)


def _check_config(word_length: int, max_turns: int) -> None:
    """Raise ``ValueError`` on an impossible word game configuration."""
    if word_length < 1:
        raise ValueError(f"word_length must be >= 1, got {word_length}")
    if not 1 <= max_turns <= 10_000:
        raise ValueError(f"max_turns must be in 1..10000, got {max_turns}")


class WordGame(Environment[TState, WordGameParams], GemMirror[TState]):
    """What Wordle and Hangman share: configurations, pools, params and GEM interop.

    Subclasses set ``random_configs`` (GEM's ``-random`` candidates, ``(word_length,
    max_turns)`` pairs) and call :meth:`_setup` from their constructor.
    """

    random_configs: tuple[tuple[int, int], ...]

    def _setup(self, list_name: str, word_length: int | None, max_turns: int | None) -> None:
        self.variant = Variant.of(
            {"word_length": word_length, "max_turns": max_turns},
            random_values=tuple(max(column) for column in zip(*self.random_configs, strict=True)),
            check=_check_config,
        )
        self.randomize = self.variant.randomize
        length, turns = self.variant.values
        configs = self.random_configs if self.randomize else ((length, turns),)
        self.list_name = list_name
        self.configs = configs
        self.size = max(c[0] for c in configs)  # letters per word (C)
        self.history = max(c[1] for c in configs)  # the turn capacity
        self.bank = WordBank.build(list_name, configs)  # raises on an empty pool

    @property
    def config(self) -> tuple[Any, ...]:
        return ("random" if self.randomize else "fixed", self.list_name, self.configs)

    @property
    def default_params(self) -> WordGameParams:
        return WordGameParams(bank=self.bank)

    def validate_params(self, params: WordGameParams) -> None:
        params.bank.validate(self.size, self.history)

    def _split_action(self, action: jax.Array, alphabet_size: int) -> tuple[jax.Array, jax.Array]:
        """``(count int32[], codes int32[C])`` of a kernel action ``int32[C + 1]``
        ``[count, c_0, ..., c_{C-1}]``: the count clamped to ``C + 1``
        (:func:`~gemjax.core.counted_action`), each code to ``0..alphabet_size`` (0
        prints nothing)."""
        count, codes = counted_action(action, self.size)
        return count, jnp.clip(codes, 0, alphabet_size)

    def printed_words(self, params: WordGameParams) -> tuple[str, ...]:
        """Every word of the bank's pools, upper case as the game prints them."""
        words = np.asarray(params.bank.words)
        counts = np.asarray(params.bank.num_words)
        return tuple(
            sorted({decode(row) for pool, n in zip(words, counts, strict=True) for row in pool[:n]})
        )

    def action_space(self, params: WordGameParams) -> MultiDiscrete:
        """``[num_letters in 0..C+1, c_i in 0..26]``: 0 letters is a format error, any
        count other than the word length a wrong length (Hangman: 1 is a letter
        guess); codes are ``A..Z`` or 0, a non-letter that matches nothing (the
        grammar's extra codes are left to parsed text)."""
        return MultiDiscrete((self.size + 2,) + (27,) * self.size)
