"""Crosswords (GEM's ``gem/envs/game_env/crosswords/crosswords.py``).

The player fills a grid of hidden words one letter at a time, helped by one clue
per word. GEM's rules, branch by branch (spec section 11):

1. no ``\\boxed{row col letter}`` (two ``\\d+`` numbers and one ASCII letter, one or
   more ``\\s`` between them): format error, -0.1, terminated, truncated only when
   ``turn == max_turns`` (nothing else is checked);
2. a cell outside the ``side x side`` grid: invalid (0);
3. a black cell (``.``): invalid (0);
4. a cell already filled: invalid (0);
5. a letter (upper-cased) other than the solution's: incorrect (0);
6. otherwise the cell is filled and the step pays ``1 / letter cells``;
7. then, after any of 2-6: when no cell is left to fill, success (terminated, not
   truncated); else when ``turn >= max_turns``: "You have reached the maximum number
   of turns.", terminated and truncated; the step's reward either way.

Grids: ``num_words`` distinct entries of GEM's 100 words with clues
(``data/crosswords/words_clues.jsonl``: 50 everyday ones for ``-easy``, 50 rare
ones for ``-hard``), longest first, each across or down, placed as GEM places them
(:mod:`gemjax.envs.word_grid`; letters match case-sensitively, so the ``L`` of
``Lahontan`` crosses no ``l``) on a ``round(1.5 * longest)`` grid. The suffix lists
the clue of each placed word (GEM's first clue, verbatim), its direction and its
length. ``-random`` (whose GEM constructor crashes) draws easy or hard at every
reset, with 3 words and 20 turns (docs/gem_differences.md).

Kernel action: int32[4] ``[ok, row, col, letter]`` (the grammar's
:class:`~gemjax.text.grammar.BoxedInts` with a letter): ``ok == 0`` or a letter
outside ``1..26`` (``A..Z``) is a format error; numbers are clamped to ``2**31 - 1``.

Observation (what the player sees), a dict of:
    ``board``: int8[S, S] cell codes (0 a black cell, ``A = 1 .. Z = 26`` a filled
    letter, 27 a cell to fill; 0 outside the ``side x side`` grid);
    ``clues``: int32[W] the listed words' entries in the word file (the clue shown),
    -1 for a word GEM dropped; ``down``: bool[W] their directions; ``lengths``:
    int32[W] their lengths;
    ``side``, ``turn``, ``max_turns``: int32[].
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import string
from collections.abc import Mapping
from typing import Any, NamedTuple

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
    pick_weighted,
    place_words,
    sample_distinct,
)
from gemjax.rng import below, bits, mixed_words
from gemjax.spaces import MultiDiscrete
from gemjax.text.grammar import BoxedInts
from gemjax.text.templates import Board, Choice, Int, MessageTable, Slot, Template

WORDS_FILE = "data/crosswords/words_clues.jsonl"
#: Letter codes of the word file: ``a..z`` are 1..26, ``A..Z`` 27..52 (placement
#: matches letters case-sensitively, as GEM does).
LETTERS = string.ascii_lowercase + string.ascii_uppercase
ALPHABET = len(string.ascii_uppercase)
BLANK = ALPHABET + 1  # the code of a cell to fill in the board
RANDOM_NUM_WORDS, RANDOM_MAX_TURNS = 3, 20  # GEM's intended -random: hardcore drawn
GRAMMAR = BoxedInts(("row", "col"), separator=r"\s+", letter=True)


class WordBank(NamedTuple):
    """GEM's word file as arrays (host numpy, read-only).

    Attributes:
        words: the 100 words, in file order.
        clues: each word's first clue, verbatim.
        codes: int8[100, L] case-sensitive letter codes (:data:`LETTERS`), 0 beyond
            each word.
        lengths: int32[100] word lengths.
        modes: int32[2, 50] the entries of each mode in file order (row 0 everyday
            words, row 1 hardcore), the list GEM samples from.
    """

    words: tuple[str, ...]
    clues: tuple[str, ...]
    codes: np.ndarray
    lengths: np.ndarray
    modes: np.ndarray


@functools.cache
def word_bank() -> WordBank:
    """The shipped word file (:data:`WORDS_FILE`) as a :class:`WordBank`.

    Raises:
        ValueError: a word holds a character outside ``a-zA-Z``, or the two modes
            differ in size.
    """
    text = importlib.resources.files("gemjax.envs").joinpath(WORDS_FILE).read_text("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    words = tuple(row["word"] for row in rows)
    longest = max(map(len, words))
    codes = np.zeros((len(words), longest), np.int8)
    for i, word in enumerate(words):
        if not (word.isascii() and word.isalpha()):
            raise ValueError(f"crossword word {word!r} is not ASCII letters")
        codes[i, : len(word)] = [1 + LETTERS.index(ch) for ch in word]
    hardcore = np.asarray([bool(row["hardcore"]) for row in rows])
    if hardcore.sum() * 2 != len(rows):
        raise ValueError("the word file must hold as many hardcore words as everyday ones")
    arrays = (
        codes,
        np.asarray([len(w) for w in words], np.int32),
        np.stack([np.flatnonzero(~hardcore), np.flatnonzero(hardcore)]).astype(np.int32),
    )
    for array in arrays:
        array.setflags(write=False)
    clues = tuple(next(iter(row["clues"].values())) for row in rows)
    return WordBank(words, clues, *arrays)


def clue_options(slot: int) -> tuple[str, ...]:
    """The texts of clue line ``slot`` (0-based): option 0 is empty (the word was not
    placed), option ``1 + 2 * entry + down`` GEM's ``"{slot + 1}. {clue}
    ({direction}): {length} letters"``, after a newline unless it is the first line."""
    bank = word_bank()
    newline = "\n" if slot else ""
    options = [""]
    for word, clue in zip(bank.words, bank.clues, strict=True):
        for direction in ("across", "down"):
            options.append(f"{newline}{slot + 1}. {clue} ({direction}): {len(word)} letters")
    return tuple(options)


def clue_option(entries: jax.Array, down: jax.Array, listed: jax.Array) -> jax.Array:
    """int32[W]: each clue line's option in :func:`clue_options`."""
    return jnp.where(listed, 1 + 2 * entries + down.astype(jnp.int32), 0).astype(jnp.int32)


def cell_texts() -> tuple[str, ...]:
    """GEM's text of a board cell code: ``" {ch}  "`` for ``.``, the letters, ``_``."""
    return tuple(f" {ch}  " for ch in "." + string.ascii_uppercase + "_")


INSTRUCTIONS = Template(
    "You are playing Crosswords.\n"
    "Here is the current state of the Crosswords grid. Each row and column are numbered.\n"
    "The cells that need to be populated with letters are represented by '_', and those "
    "that do not need words are represented by '.'.\n\n"
    "You can only provide one response per turn. Hence, plan your approach and risk "
    "appetite.\n"
    "Only guesses in the format of \\boxed{{row column letter}} will be fetched from your "
    "response, e.g. \\boxed{{0 0 d}}, \\boxed{{1 2 G}}.\n"
    "you have to finish the game in a maximum of {max_turns} turns.\n"
    "As you play, the history of your choices will be appended below. Use the information "
    "to complete the game."
)


@functools.cache
def messages() -> MessageTable:
    """Crosswords' messages."""
    place = "At turn {turn}, you tried to place {letter} at ({row}, {col})"
    slots: dict[str, Slot] = {
        "letter": Choice("letter", ("", *string.ascii_uppercase)),
        "row": Int("row", echo=True),
        "col": Int("col", echo=True),
    }
    return MessageTable(
        instructions=INSTRUCTIONS,
        format_error=Template(
            "At turn {turn}, you did not provide a valid guess in "
            "\\boxed{{row column letter}} format."
        ),
        out_of_bounds=Template(place + ", which is out of bounds.", **slots),
        black=Template(place + ", which is a black dot and cannot be filled.", **slots),
        filled=Template(place + ", but the cell is already filled.", **slots),
        incorrect=Template(place + ", but it is incorrect.", **slots),
        correct=Template(
            "At turn {turn}, you placed {letter} at ({row}, {col}) correctly.", **slots
        ),
        success=Template("Congratulations! You completed the Crosswords puzzle!"),
        max_turns=Template("You have reached the maximum number of turns."),
    )


@functools.cache
def suffix_for(max_side: int, num_words: int) -> Template:
    """GEM's suffix: the ``side x side`` board under its ``C00 C01 ...`` header, each
    row ``R00 `` and its cells, then one line per placed word's clue."""
    board = Board(
        "board",
        (max_side, max_side),
        cell_texts(),
        rows="side",
        cols="side",
        header=("   ", "C{:02}", " ", "\n"),
        row_label="R{:02} ",
    )
    clue_slots = {f"clue_{k}": Choice(f"clue_{k}", clue_options(k)) for k in range(num_words)}
    return Template(
        "Current Board:\n{board}Here are the clues for the words you need to find:\n"
        + "".join("{" + name + "}" for name in clue_slots)
        + "\nEnter your guess.",
        board=board,
        **clue_slots,
    )


class CrosswordsParams(struct.PyTreeNode):
    """Dynamic parameters.

    Attributes:
        max_turns: int32[] the turn limit (ignored by ``-random``, which uses 20); at
            most the env's ``max_turns``.
        rewards: GEM's reward constants (``format_error``, ``invalid`` for branches
            2-4, ``step`` for a wrong letter; a right letter pays its share).
    """

    max_turns: jax.Array
    rewards: Rewards = struct.field(default_factory=Rewards)


class CrosswordsState(struct.PyTreeNode):
    """One episode.

    Attributes (int32[] unless said; ``W`` words, grid ``S``):
        hardcore: bool[] the rare words.
        max_turns, turn, side: the turn limit, turns taken (GEM's ``turn_count``, it
            keeps counting after the end), the grid's side.
        solution: int8[S, S] each letter cell's letter (``A = 1 .. Z = 26``), 0 for a
            black cell and outside the grid.
        filled: bool[S, S] letter cells the player filled.
        letter_cells: the number of letter cells (GEM's ``total_letter_cells``).
        entries: int32[W] the sampled words' entries in the word file, longest first.
        down: bool[W] their directions; listed: bool[W] placed (GEM lists the clue).
    """

    hardcore: jax.Array
    max_turns: jax.Array
    turn: jax.Array
    side: jax.Array
    solution: jax.Array
    filled: jax.Array
    letter_cells: jax.Array
    entries: jax.Array
    down: jax.Array
    listed: jax.Array


def upper_codes(codes: jax.Array) -> jax.Array:
    """int8: case-sensitive codes (:data:`LETTERS`) as upper-case letters (1..26)."""
    return jnp.where(codes > ALPHABET, codes - ALPHABET, codes).astype(jnp.int8)


class Crosswords(
    GridWordsConfig,
    Environment[CrosswordsState, CrosswordsParams],
    GemMirror[CrosswordsState],
):
    """Crosswords as a kernel. See the module docstring for rules and shapes.

    Args:
        hardcore, max_turns, num_words: the registered configuration (GEM's
            defaults); any of them None gives the ``-random`` variant (easy or hard at
            every reset, 3 words, 20 turns).
    """

    gem_class_name = "CrosswordsEnv"
    step_uses_key = False
    # A reset places words on a whole grid: resetting only the lanes that ended pays.
    sparse_resets = True

    def __init__(
        self, hardcore: bool | None = False, max_turns: int | None = 100, num_words: int | None = 5
    ) -> None:
        hard = self.configure(hardcore, max_turns, num_words, RANDOM_MAX_TURNS, RANDOM_NUM_WORDS)
        bank = word_bank()
        self.hardcore = bool(hard)  # the fixed mode (unused by -random)
        self.modes = bank.modes if self.randomize else bank.modes[hard : hard + 1]
        # The longest word of the modes in use: placement loops over its letters.
        self.longest = int(bank.lengths[self.modes.reshape(-1)].max())
        self.max_side = int(grid_side(jnp.int32(self.longest)))
        self.messages = messages()
        self.suffix = suffix_for(self.max_side, self.num_words)
        self.grammar = GRAMMAR

    @property
    def default_params(self) -> CrosswordsParams:
        return CrosswordsParams(max_turns=jnp.int32(self.turn_capacity))

    def validate_params(self, params: CrosswordsParams) -> None:
        self.check_max_turns(params.max_turns)

    def action_space(self, params: CrosswordsParams) -> MultiDiscrete:
        """``[ok in 0..1, row and col in 0..S, letter in 0..26]``: ``ok == 0`` or
        letter 0 is a format error; ``S`` (and anything beyond the episode's side) is
        out of bounds."""
        return MultiDiscrete((2, self.max_side + 1, self.max_side + 1, ALPHABET + 1))

    # --- reset ---------------------------------------------------------------------

    def reset(self, key: jax.Array, params: CrosswordsParams) -> tuple[CrosswordsState, TimeStep]:
        seed = bits(key, 2)
        count, size = self.num_words, self.max_side
        bank = word_bank()

        def words(start: int, number: int) -> jax.Array:
            return mixed_words(seed, jnp.arange(start, start + number, dtype=jnp.uint32))

        if self.randomize:
            hardcore = below(words(0, 1)[0], 2) == 1
            mode = jnp.asarray(self.modes)[hardcore.astype(jnp.int32)]
            max_turns = jnp.int32(RANDOM_MAX_TURNS)
        else:
            hardcore = jnp.bool_(self.hardcore)
            mode = jnp.asarray(self.modes[0])
            max_turns = params.max_turns
        entries = mode[sample_distinct(words(1, count), jnp.int32(self.modes.shape[1]))]
        entries = entries[longest_first(jnp.asarray(bank.lengths)[entries])]
        codes = jnp.asarray(bank.codes[:, : self.longest])[entries]
        lengths = jnp.asarray(bank.lengths)[entries]
        down = below(words(1 + count, count), 2) == 1
        placement = place_words(
            codes, lengths, down, words(1 + 2 * count, count), size, len(LETTERS).bit_length()
        )
        solution = upper_codes(placement.grid)
        state = CrosswordsState(
            hardcore=hardcore,
            max_turns=max_turns,
            turn=jnp.int32(0),
            side=grid_side(lengths[0]),
            solution=solution,
            filled=jnp.zeros((size, size), jnp.bool_),
            letter_cells=jnp.sum(solution > 0, dtype=jnp.int32),
            entries=entries,
            down=placement.down,
            listed=placement.live,
        )
        ts = TimeStep.first(self._observation(state), self.instructions_event(state))
        return state, ts

    # --- step ----------------------------------------------------------------------

    def step(
        self,
        key: jax.Array,
        state: CrosswordsState,
        action: jax.Array,
        params: CrosswordsParams,
    ) -> tuple[CrosswordsState, TimeStep]:
        action = check_int_action(action, (4,))
        rewards = params.rewards
        turn = state.turn + 1
        row, col, letter = action[1], action[2], action[3]
        format_error = (action[0] <= 0) | (letter < 1) | (letter > ALPHABET)
        out_of_bounds = ~format_error & ((row < 0) | (row >= state.side))
        out_of_bounds |= ~format_error & ((col < 0) | (col >= state.side))
        in_bounds = ~format_error & ~out_of_bounds
        cell_row = jnp.clip(row, 0, self.max_side - 1)
        cell_col = jnp.clip(col, 0, self.max_side - 1)
        answer = state.solution[cell_row, cell_col].astype(jnp.int32)
        black = in_bounds & (answer == 0)
        filled = in_bounds & ~black & state.filled[cell_row, cell_col]
        playable = in_bounds & ~black & ~filled
        correct = playable & (answer == letter)
        index = jnp.arange(self.max_side, dtype=jnp.int32)
        cell = (index[:, None] == cell_row) & (index[None, :] == cell_col)
        now_filled = state.filled | (correct & cell)
        complete = ~format_error & (jnp.sum(now_filled, dtype=jnp.int32) == state.letter_cells)
        out_of_turns = turn >= state.max_turns

        share = jnp.float32(1.0) / jnp.maximum(state.letter_cells, 1).astype(jnp.float32)
        reward = jnp.select(
            [format_error, correct, out_of_bounds | black | filled],
            [rewards.format_error, share, rewards.invalid],
            rewards.step,
        ).astype(jnp.float32)
        kind = self.messages.select(
            (format_error, "format_error"),
            (complete, "success"),
            (out_of_turns, "max_turns"),
            (out_of_bounds, "out_of_bounds"),
            (black, "black"),
            (filled, "filled"),
            (correct, "correct"),
            default="incorrect",
        )
        terminated, truncated = gem_ending(
            format_error, complete, out_of_turns, turn, state.max_turns
        )
        new_state = state.replace(turn=turn, filled=now_filled)
        ts = TimeStep(
            observation=self._observation(new_state),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            event=self.messages.event(
                kind, turn=turn, letter=jnp.clip(letter, 0, ALPHABET), row=row, col=col
            ),
            info={"success": complete},
        )
        return new_state, ts

    def random_action(self, key: jax.Array, state: CrosswordsState) -> jax.Array:
        """int32[4] ``[1, row, col, letter]`` as GEM's sampler means it: a cell uniform
        among those left to fill (``0 0`` when none is left) and a letter uniform in
        ``A..Z``. GEM's own sampler wraps the fields in brackets, so its guesses never
        parse (docs/gem_differences.md); this one plays."""
        words = bits(key, 2)
        to_fill = (state.solution > 0) & ~state.filled
        cell = pick_weighted(to_fill.astype(jnp.int32), words[0])
        cell = jnp.where(jnp.any(to_fill), cell, 0)
        letter = 1 + below(words[1:], ALPHABET)
        return jnp.concatenate([jnp.ones((1,), jnp.int32), cell, letter]).astype(jnp.int32)

    # --- text ----------------------------------------------------------------------

    def instructions_event(self, state: CrosswordsState) -> Event:
        return self.messages.event("instructions", max_turns=state.max_turns)

    def board_codes(self, state: CrosswordsState) -> jax.Array:
        """int8[S, S] the board as the player sees it (the observation's ``board``)."""
        shown = jnp.where(state.filled, state.solution, BLANK)
        return jnp.where(state.solution > 0, shown, 0).astype(jnp.int8)

    def suffix_values(self, state: CrosswordsState) -> Mapping[str, jax.Array]:
        options = clue_option(state.entries, state.down, state.listed)
        return {
            "board": self.board_codes(state).astype(jnp.int32),
            "side": state.side,
            **{f"clue_{k}": options[k] for k in range(self.num_words)},
        }

    def _observation(self, state: CrosswordsState) -> dict[str, jax.Array]:
        lengths = jnp.asarray(word_bank().lengths)[state.entries]
        return {
            "board": self.board_codes(state),
            "clues": jnp.where(state.listed, state.entries, -1).astype(jnp.int32),
            "down": state.down,
            "lengths": lengths,
            "side": state.side,
            "turn": state.turn,
            "max_turns": state.max_turns,
        }

    # --- GEM interop -------------------------------------------------------------

    @classmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """Constructor kwargs matching a live ``gem-llm`` CrosswordsEnv."""
        return cls.gem_kwargs(gem_env, ("hardcore", "max_turns", "num_words"))

    def state_from_gem(self, gem_env: Any) -> CrosswordsState:
        """The kernel state equal to a live GEM env's: its solution, filled cells, the
        clue words (GEM's ``clues`` order) and where they are placed.

        Raises:
            ValueError: the env's grid, words or letters do not fit this kernel.
        """
        size, count = self.max_side, self.num_words
        bank = word_bank()
        solution, board = gem_env.solution, gem_env.board
        side = len(solution)
        words = list(gem_env.clues)
        if side > size or len(words) > count:
            raise ValueError(f"GEM's {side}x{side} grid or {len(words)} words exceed this env")
        grid = np.zeros((size, size), np.int8)
        filled = np.zeros((size, size), bool)
        for r in range(side):
            for c in range(side):
                if solution[r][c] != ".":
                    grid[r, c] = 1 + string.ascii_uppercase.index(solution[r][c].upper())
                    filled[r, c] = board[r][c] not in ("_", ".")
        entries = np.zeros(count, np.int32)
        down, listed = np.zeros(count, bool), np.zeros(count, bool)
        for k, word in enumerate(words):
            entries[k] = bank.words.index(word)
            if word in gem_env.placed_words:
                listed[k] = True
                down[k] = gem_env.placed_words[word][2] == "down"
        return CrosswordsState(
            hardcore=jnp.bool_(gem_env.hardcore),
            max_turns=jnp.int32(gem_env.max_turns),
            turn=jnp.int32(gem_env.turn_count),
            side=jnp.int32(side),
            solution=jnp.asarray(grid),
            filled=jnp.asarray(filled),
            letter_cells=jnp.int32(gem_env.total_letter_cells),
            entries=jnp.asarray(entries),
            down=jnp.asarray(down),
            listed=jnp.asarray(listed),
        )
