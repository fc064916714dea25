"""WordSearch (GEM's ``gem/envs/game_env/word_search.py``).

The player finds the hidden words of a letter grid by naming each word's first and
last cells. GEM's rules, branch by branch (spec section 12):

1. no ``\\boxed{sr sc er ec}`` (four ``\\d+`` numbers, one or more ``\\s`` between
   them): format error, -0.1, terminated, truncated only when ``turn == max_turns``;
2. a coordinate outside ``0 .. side - 1``: invalid (0);
3. the exact 4-tuple was tried before: invalid (0);
4. neither the rows nor the columns equal (a diagonal): invalid (0);
5. the span is a listed word's, from its first cell to its last **or the other way
   round**: its cells are highlighted, the word counts as found, and the step pays
   ``1 / listed words``; so a found word entered again reversed is a new 4-tuple and
   is paid again (GEM's quirk: up to twice the episode's words);
6. otherwise: incorrect (0);
7. the 4-tuple is recorded (after 2-6, even out of bounds); then, when every listed
   word is found: success, terminated, not truncated; else when ``turn >=
   max_turns``: "You have reached the maximum number of turns.", terminated and
   truncated; the step's reward either way.

Grids: ``num_words`` distinct entries sampled from NLTK's raw ``en-basic`` list
(``-easy``) or ``en`` list (``-hard``: capitalised and hyphenated entries too),
upper-cased, longest first, each across or down, placed as GEM places them
(:mod:`gemjax.envs.word_grid`) on a ``round(1.5 * longest)`` grid, the other cells
filled with uniform letters. ``-random`` draws easy or hard at every reset.

Kernel action: int32[5] ``[ok, start_row, start_col, end_row, end_col]`` (the
grammar's :class:`~gemjax.text.grammar.BoxedInts`): ``ok == 0`` is a format error;
numbers are clamped to ``2**31 - 1`` (any number beyond the grid is out of bounds
alike).

Observation (what the player sees), a dict of:
    ``grid``: int8[S, S] letter codes (``A = 1 .. Z = 26``, ``-`` = 27; 0 outside the
    ``side x side`` board);
    ``highlighted``: bool[S, S] the cells of found words;
    ``side``, ``turn``, ``max_turns``, ``words_found``, ``num_words``: int32[].
"""

from __future__ import annotations

import functools
import string
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
    check_int_action,
    gem_ending,
)
from gemjax.envs.word_grid import (
    GridWordsConfig,
    grid_side,
    longest_first,
    place_words,
    sample_distinct,
)
from gemjax.envs.words import word_list
from gemjax.rng import below, bits, mixed_words
from gemjax.spaces import MultiDiscrete
from gemjax.text.grammar import BoxedInts
from gemjax.text.templates import Board, Choice, Int, MessageTable, SymbolList, Template

#: The characters of GEM's upper-cased word lists; code ``i + 1`` is ``SYMBOLS[i]``.
SYMBOLS = string.ascii_uppercase + "-"
LISTS = ("en-basic", "en")  # GEM: words("en-basic") unless hardcore
RANDOM_NUM_WORDS, RANDOM_MAX_TURNS = 5, 20  # GEM's -random: hardcore drawn, these fixed
#: Attempts recorded beyond ``max_turns`` (GEM keeps stepping after the end; later
#: attempts are not recorded, so "already tried" cannot fire for them).
HISTORY_SLACK = 32
SLOTS = ("start_row", "start_col", "end_row", "end_col")
GRAMMAR = BoxedInts(SLOTS, separator=r"\s+")
#: Bits of one coordinate in a recorded attempt (grid sides are at most 36).
COORD_BITS = 6


@functools.cache
def word_pool(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(int8[P, L] codes of NLTK's raw list ``name`` upper-cased, in file order, 0
    beyond each word; int32[P] lengths), ``L`` its longest word.

    Raises:
        ValueError: an entry holds a character outside :data:`SYMBOLS`.
    """
    entries = [w.upper() for w in word_list(name)]
    longest = max(map(len, entries))
    codes = np.zeros((len(entries), longest), np.int8)
    lookup = {ch: i + 1 for i, ch in enumerate(SYMBOLS)}
    for row, entry in enumerate(entries):
        try:
            codes[row, : len(entry)] = [lookup[ch] for ch in entry]
        except KeyError as error:
            raise ValueError(
                f"{name!r} entry {entry!r} has a character outside {SYMBOLS}"
            ) from error
    lengths = np.asarray([len(e) for e in entries], np.int32)
    codes.setflags(write=False)
    lengths.setflags(write=False)
    return codes, lengths


def cell_texts() -> tuple[str, ...]:
    """GEM's text of a cell code: ``" {ch}  "``, or ``"[{ch}] "`` for code + 28 (a
    highlighted cell); code 0 is an empty cell (``.``, never shown on a filled grid)."""
    chars = "." + SYMBOLS
    return tuple(f" {ch}  " for ch in chars) + tuple(f"[{ch}] " for ch in chars)


HIGHLIGHT = len(SYMBOLS) + 1


@functools.cache
def messages_for(longest: int) -> MessageTable:
    """WordSearch's messages with a word slot of ``longest`` letters."""
    coords = "({start_row}, {start_col}) to ({end_row}, {end_col})"
    echo = {name: Int(name, echo=True) for name in SLOTS}
    word = SymbolList(
        "word",
        longest,
        length="word_length",
        symbols=("", *SYMBOLS),
        brackets=("", ""),
        separator="",
    )
    return MessageTable(
        instructions=Template(
            "You are participating in a Word Search challenge ({mode}).\n"
            "The objective is to find and highlight hidden words on the grid below.\n"
            "The rows and columns are numbered for your reference.\n\n"
            "Words you have already found are marked in square brackets [ ].\n"
            "Each row and column is numbered for clarity.\n\n"
            "To locate a word, specify the row and column of its start and end letters.\n"
            "Note that words are either across (horizontal) or down (vertical).\n"
            "Use the format \\boxed{{start_row start_col end_row end_col}} for submission.\n"
            "For instance: \\boxed{{1 1 1 5}} to find a word from row 1, col 1 to row 1, "
            "col 5.\n\n"
            "Guidelines:\n"
            "- you have a maximum of {max_turns} turns to find all the words.\n"
            "- Each guess must be unique; you cannot repeat the same guess.\n"
            "- The history of your attempts will be recorded below.\n"
            "- Make your guesses carefully and strategically!",
            mode=Choice("mode", ("Basic", "Hardcore")),
        ),
        format_error=Template(
            "At turn {turn}, you did not provide a valid guess in "
            "\\boxed{{start_row start_col end_row end_col}} format."
        ),
        out_of_bounds=Template(
            f"At turn {{turn}}, your tried coordinates {coords} are out of bounds.", **echo
        ),
        tried=Template(
            f"At turn {{turn}}, you have already tried the coordinates {coords}.", **echo
        ),
        diagonal=Template(
            f"At turn {{turn}}, you tried {coords}, which is not valid because words must "
            "be either across (horizontal) or down (vertical).",
            **echo,
        ),
        correct=Template(
            f"At turn {{turn}}, correct! You found the word '{{word}}' at coordinates {coords}.",
            word=word,
            **echo,
        ),
        incorrect=Template(
            f"At turn {{turn}}, incorrect attempt. No word found at coordinates {coords}.",
            **echo,
        ),
        success=Template("Congratulations! You completed the Word Search puzzle!"),
        max_turns=Template("You have reached the maximum number of turns."),
    )


@functools.cache
def suffix_for(max_side: int) -> Template:
    """GEM's suffix: the ``side x side`` board under its ``C00 C01 ...`` header, each
    row ``R00 `` and its cells, then the words found."""
    board = Board(
        "board",
        (max_side, max_side),
        cell_texts(),
        rows="side",
        cols="side",
        header=("   ", "C{:02}", " ", "\n"),
        row_label="R{:02} ",
    )
    return Template(
        "Current Board:\n{board}Words Found: {found}/{placed}\nEnter your guess.", board=board
    )


class WordPool(struct.PyTreeNode):
    """One word list, as arrays (params, not constants of the compiled code).

    Attributes:
        codes: int8[P, L] upper-cased letter codes (0 beyond each word).
        lengths: int32[P] word lengths.
    """

    codes: jax.Array
    lengths: jax.Array

    @classmethod
    def of(cls, name: str, longest: int) -> WordPool:
        """NLTK's list ``name`` (:func:`word_pool`), padded to ``longest`` letters."""
        codes, lengths = word_pool(name)
        padded = np.zeros((codes.shape[0], longest), np.int8)
        padded[:, : codes.shape[1]] = codes
        return cls(codes=jnp.asarray(padded), lengths=jnp.asarray(lengths))


class WordSearchParams(struct.PyTreeNode):
    """Dynamic parameters.

    Attributes:
        max_turns: int32[] the turn limit (ignored by ``-random``, which uses GEM's 20);
            at most the env's ``max_turns``.
        pools: the word lists the env draws from: ``(en-basic,)``, ``(en,)``, or both
            for ``-random``.
        rewards: GEM's reward constants (``format_error``, ``invalid`` for branches
            2-4, ``step`` for an incorrect span; a found word pays its share).
    """

    max_turns: jax.Array
    pools: tuple[WordPool, ...]
    rewards: Rewards = struct.field(default_factory=Rewards)


class WordSearchState(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said; ``W`` words of at most ``L`` letters, grid ``S``):
        hardcore: bool[] the ``en`` list (the instructions say "Hardcore").
        max_turns, turn, side: the turn limit, turns taken (GEM's ``turn_count``, it
            keeps counting after the end), the board's side.
        grid: int8[S, S] letter codes, 0 outside the board.
        highlighted: bool[S, S] cells of found words.
        words: int8[W, L] the sampled words, longest first; lengths: int32[W].
        rows, cols: int32[W] each word's first cell; down: bool[W] its direction.
        listed: bool[W] GEM lists the word (placed, and no later copy replaced it).
        found: bool[W] the listed word was found.
        attempts: int32[H] the 4-tuples tried (GEM's ``attempts``), in order, packed
            (:func:`pack_attempt`); -1 for one out of bounds (it can never be tried
            again: the bounds come first) and for none.
        attempted: how many 4-tuples were tried (``len(attempts)`` in GEM; those
            beyond ``H`` are not recorded).
    """

    hardcore: jax.Array
    max_turns: jax.Array
    turn: jax.Array
    side: jax.Array
    grid: jax.Array
    highlighted: jax.Array
    words: jax.Array
    lengths: jax.Array
    rows: jax.Array
    cols: jax.Array
    down: jax.Array
    listed: jax.Array
    found: jax.Array
    attempts: jax.Array
    attempted: jax.Array


def pack_attempt(coords: jax.Array) -> jax.Array:
    """int32: four in-bounds coordinates (int32[..., 4], each below 64) as one int."""
    shifts = jnp.asarray([0, COORD_BITS, 2 * COORD_BITS, 3 * COORD_BITS], jnp.int32)
    return jnp.sum(jnp.left_shift(coords, shifts), axis=-1).astype(jnp.int32)


class WordSearch(
    GridWordsConfig,
    Environment[WordSearchState, WordSearchParams],
    GemMirror[WordSearchState],
):
    """WordSearch as a kernel. See the module docstring for rules and shapes.

    Args:
        hardcore, max_turns, num_words: the registered configuration (GEM's
            defaults); any of them None gives GEM's ``-random`` variant (easy or hard
            at every reset, 5 words, 20 turns).
    """

    gem_class_name = "WordSearchEnv"
    step_uses_key = False
    # A reset places words on a whole grid (dozens of passes over it): resetting only
    # the lanes that ended pays.
    sparse_resets = True

    def __init__(
        self, hardcore: bool | None = False, max_turns: int | None = 20, num_words: int | None = 5
    ) -> None:
        hard = self.configure(hardcore, max_turns, num_words, RANDOM_MAX_TURNS, RANDOM_NUM_WORDS)
        self.lists = LISTS if self.randomize else (LISTS[hard],)
        self.longest = max(word_pool(name)[0].shape[1] for name in self.lists)
        self.max_side = int(grid_side(jnp.int32(self.longest)))
        self.messages = messages_for(self.longest)
        self.suffix = suffix_for(self.max_side)
        self.grammar = GRAMMAR

    @property
    def default_params(self) -> WordSearchParams:
        return WordSearchParams(
            max_turns=jnp.int32(self.turn_capacity),
            pools=tuple(WordPool.of(name, self.longest) for name in self.lists),
        )

    def validate_params(self, params: WordSearchParams) -> None:
        self.check_max_turns(params.max_turns)
        if len(params.pools) != len(self.lists):
            raise ValueError(f"params.pools must hold {len(self.lists)} pools ({self.lists})")
        for pool in params.pools:
            codes, lengths = np.asarray(pool.codes), np.asarray(pool.lengths)
            if codes.ndim != 2 or codes.shape[1] != self.longest or len(lengths) != len(codes):
                raise ValueError(f"a pool holds [P, {self.longest}] codes and [P] lengths")
            if len(codes) < self.num_words:
                raise ValueError(f"a pool needs at least {self.num_words} words")
            if (lengths < 1).any() or (lengths > self.longest).any():
                raise ValueError(f"pool word lengths must be in 1..{self.longest}")
            inside = np.arange(self.longest)[None, :] < lengths[:, None]
            if ((codes < 1) | (codes > len(SYMBOLS)))[inside].any() or codes[~inside].any():
                raise ValueError(f"pool words must be codes 1..{len(SYMBOLS)}, then zeros")

    def action_space(self, params: WordSearchParams) -> MultiDiscrete:
        """``[ok in 0..1, 4 coordinates in 0..S]``: ``ok == 0`` is a format error;
        ``S`` (and anything beyond the episode's side) is out of bounds."""
        return MultiDiscrete((2,) + (self.max_side + 1,) * 4)

    # --- reset ---------------------------------------------------------------------

    def reset(self, key: jax.Array, params: WordSearchParams) -> tuple[WordSearchState, TimeStep]:
        seed = bits(key, 2)
        count, size = self.num_words, self.max_side

        def words(start: int, number: int) -> jax.Array:
            return mixed_words(seed, jnp.arange(start, start + number, dtype=jnp.uint32))

        if self.randomize:
            hardcore = below(words(0, 1)[0], 2) == 1
            max_turns = jnp.int32(RANDOM_MAX_TURNS)
        else:
            hardcore = jnp.bool_(self.lists == ("en",))
            max_turns = params.max_turns
        sampled = [self._sample(pool, words(1, count)) for pool in params.pools]
        codes, lengths = sampled[0]
        if len(sampled) > 1:
            codes, lengths = (
                jnp.where(hardcore, hard, easy)
                for easy, hard in zip(sampled[0], sampled[1], strict=True)
            )
        order = longest_first(lengths)
        codes, lengths = codes[order], lengths[order]
        down = below(words(1 + count, count), 2) == 1
        placement = place_words(
            codes, lengths, down, words(1 + 2 * count, count), size, len(SYMBOLS).bit_length()
        )
        side = grid_side(lengths[0])
        index = jnp.arange(size, dtype=jnp.int32)
        inside = (index[:, None] < side) & (index[None, :] < side)
        fill = 1 + below(words(1 + 3 * count, size * size), len(string.ascii_uppercase))
        grid = jnp.where(
            inside & (placement.grid == 0), fill.reshape(size, size), placement.grid
        ).astype(jnp.int8)
        state = WordSearchState(
            hardcore=hardcore,
            max_turns=max_turns,
            turn=jnp.int32(0),
            side=side,
            grid=grid,
            highlighted=jnp.zeros((size, size), jnp.bool_),
            words=codes,
            lengths=lengths,
            rows=placement.rows,
            cols=placement.cols,
            down=placement.down,
            listed=placement.live,
            found=jnp.zeros(count, jnp.bool_),
            attempts=jnp.full(self.turn_capacity + HISTORY_SLACK, -1, jnp.int32),
            attempted=jnp.int32(0),
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    def _sample(self, pool: WordPool, words: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(int8[W, L], int32[W]): ``W`` distinct entries of ``pool`` in sampled order."""
        rows = sample_distinct(words, jnp.int32(pool.lengths.shape[0]))
        return pool.codes[rows], pool.lengths[rows]

    # --- step ----------------------------------------------------------------------

    def step(
        self,
        key: jax.Array,
        state: WordSearchState,
        action: jax.Array,
        params: WordSearchParams,
    ) -> tuple[WordSearchState, TimeStep]:
        action = check_int_action(action, (5,))
        rewards = params.rewards
        turn = state.turn + 1
        coords = action[1:]
        start_row, start_col, end_row, end_col = (coords[i] for i in range(4))
        format_error = action[0] <= 0
        out_of_bounds = ~format_error & jnp.any((coords < 0) | (coords >= state.side))
        in_bounds = ~format_error & ~out_of_bounds
        packed = jnp.where(in_bounds, pack_attempt(jnp.clip(coords, 0, 63)), -1)
        tried = in_bounds & jnp.any(state.attempts == packed)
        diagonal = in_bounds & ~tried & (start_row != end_row) & (start_col != end_col)
        last_row = state.rows + jnp.where(state.down, state.lengths - 1, 0)
        last_col = state.cols + jnp.where(state.down, 0, state.lengths - 1)
        forwards = (start_row == state.rows) & (start_col == state.cols)
        forwards &= (end_row == last_row) & (end_col == last_col)
        backwards = (end_row == state.rows) & (end_col == state.cols)
        backwards &= (start_row == last_row) & (start_col == last_col)
        matches = state.listed & (forwards | backwards)
        correct = in_bounds & ~tried & ~diagonal & jnp.any(matches)
        which = jnp.argmax(matches)
        found = state.found | (correct & matches)
        highlighted = state.highlighted | (
            correct & self._span(start_row, start_col, end_row, end_col)
        )
        listed = jnp.sum(state.listed, dtype=jnp.int32)
        slot = jnp.arange(state.attempts.shape[0]) == state.attempted
        attempts = jnp.where(~format_error & slot, packed, state.attempts)
        complete = ~format_error & (jnp.sum(found, dtype=jnp.int32) == listed)
        out_of_turns = turn >= state.max_turns

        share = jnp.float32(1.0) / jnp.maximum(listed, 1).astype(jnp.float32)
        reward = jnp.select(
            [format_error, correct, out_of_bounds | tried | diagonal],
            [rewards.format_error, share, rewards.invalid],
            rewards.step,
        ).astype(jnp.float32)
        kind = self.messages.select(
            (format_error, "format_error"),
            (complete, "success"),
            (out_of_turns, "max_turns"),
            (out_of_bounds, "out_of_bounds"),
            (tried, "tried"),
            (diagonal, "diagonal"),
            (correct, "correct"),
            default="incorrect",
        )
        terminated, truncated = gem_ending(
            format_error, complete, out_of_turns, turn, state.max_turns
        )
        new_state = state.replace(
            turn=turn,
            found=found,
            highlighted=highlighted,
            attempts=attempts,
            attempted=state.attempted + (~format_error).astype(jnp.int32),
        )
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=self.messages.event(
                kind,
                turn=turn,
                start_row=start_row,
                start_col=start_col,
                end_row=end_row,
                end_col=end_col,
                word=state.words[which].astype(jnp.int32),
                word_length=state.lengths[which],
            ),
            info={"success": complete},
        )
        return new_state, ts

    def _span(
        self, start_row: jax.Array, start_col: jax.Array, end_row: jax.Array, end_col: jax.Array
    ) -> jax.Array:
        """bool[S, S]: the cells from one corner to the other of an across or down span
        (in bounds)."""
        index = jnp.arange(self.max_side, dtype=jnp.int32)
        rows = (index >= jnp.minimum(start_row, end_row)) & (
            index <= jnp.maximum(start_row, end_row)
        )
        cols = (index >= jnp.minimum(start_col, end_col)) & (
            index <= jnp.maximum(start_col, end_col)
        )
        return rows[:, None] & cols[None, :]

    def random_action(self, key: jax.Array, state: WordSearchState) -> jax.Array:
        """int32[5] ``[1, sr, sc, er, ec]``, each coordinate uniform on the board: a
        well-formed guess (GEM's sampler wraps its numbers in brackets, so it never
        parses; see docs/gem_differences.md)."""
        coords = below(bits(key, 4), state.side.astype(jnp.uint32))
        return jnp.concatenate([jnp.ones((1,), jnp.int32), coords.astype(jnp.int32)])

    # --- text ----------------------------------------------------------------------

    def printed_words(self, params: WordSearchParams) -> tuple[str, ...]:
        """Every word a "correct" message can print: the pools' entries, upper-cased
        (the token bridge tokenizes them ahead of time)."""
        words: set[str] = set()
        for pool in params.pools:
            codes, lengths = np.asarray(pool.codes), np.asarray(pool.lengths)
            words.update(
                "".join(SYMBOLS[c - 1] for c in row[:n])
                for row, n in zip(codes, lengths, strict=True)
            )
        return tuple(sorted(words))

    def instructions_event(self, state: WordSearchState) -> Event:
        return self.messages.event(
            "instructions", mode=state.hardcore.astype(jnp.int32), max_turns=state.max_turns
        )

    def suffix_values(self, state: WordSearchState) -> Mapping[str, jax.Array]:
        board = state.grid.astype(jnp.int32) + HIGHLIGHT * state.highlighted
        return {
            "board": board,
            "side": state.side,
            "found": jnp.sum(state.found, dtype=jnp.int32),
            "placed": jnp.sum(state.listed, dtype=jnp.int32),
        }

    def _observation(self, state: WordSearchState) -> dict[str, jax.Array]:
        return {
            "grid": state.grid,
            "highlighted": state.highlighted,
            "side": state.side,
            "turn": state.turn,
            "max_turns": state.max_turns,
            "words_found": jnp.sum(state.found, dtype=jnp.int32),
            "num_words": jnp.sum(state.listed, dtype=jnp.int32),
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` WordSearchEnv."""
        return cls.gem_kwargs(gem_env, ("hardcore", "max_turns", "num_words"))

    def state_from_gem(self, gem_env: Any) -> WordSearchState:
        """The kernel state equal to a live GEM env's: its grid, listed words (as the
        words, since GEM keeps no sampled list), found words, highlights and attempts.

        Raises:
            ValueError: the env's grid or words do not fit this kernel's arrays.
        """
        size, count = self.max_side, self.num_words
        board = gem_env.game_board
        side = len(board)
        placed = list(gem_env.placed_words.items())
        if side > size or len(placed) > count:
            raise ValueError(f"GEM's {side}x{side} grid or {len(placed)} words exceed this env")
        lookup = {ch: i + 1 for i, ch in enumerate(SYMBOLS)}
        grid = np.zeros((size, size), np.int8)
        grid[:side, :side] = [[lookup[ch] for ch in row] for row in board]
        highlighted = np.zeros((size, size), bool)
        for r, c in gem_env.highlighted_positions:
            highlighted[r, c] = True
        codes = np.zeros((count, self.longest), np.int8)
        lengths = np.ones(count, np.int32)
        rows, cols = np.zeros(count, np.int32), np.zeros(count, np.int32)
        down, listed, found = (np.zeros(count, bool) for _ in range(3))
        for k, (word, (row, col, direction)) in enumerate(placed):
            codes[k, : len(word)] = [lookup[ch] for ch in word]
            lengths[k], rows[k], cols[k] = len(word), row, col
            down[k], listed[k] = direction == "down", True
            found[k] = word in gem_env.correct_words
        attempts = np.full(self.turn_capacity + HISTORY_SLACK, -1, np.int32)
        for i, attempt in enumerate(gem_env.attempts[: len(attempts)]):
            if all(0 <= v < side for v in attempt):
                attempts[i] = sum(int(v) << (COORD_BITS * j) for j, v in enumerate(attempt))
        return WordSearchState(
            hardcore=jnp.bool_(gem_env.hardcore),
            max_turns=jnp.int32(gem_env.max_turns),
            turn=jnp.int32(gem_env.turn_count),
            side=jnp.int32(side),
            grid=jnp.asarray(grid),
            highlighted=jnp.asarray(highlighted),
            words=jnp.asarray(codes),
            lengths=jnp.asarray(lengths),
            rows=jnp.asarray(rows),
            cols=jnp.asarray(cols),
            down=jnp.asarray(down),
            listed=jnp.asarray(listed),
            found=jnp.asarray(found),
            attempts=jnp.asarray(attempts),
            attempted=jnp.int32(len(gem_env.attempts)),
        )
