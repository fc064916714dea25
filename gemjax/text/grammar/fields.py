"""Grammars of fixed fields: one number, a few numbers, or a command word and numbers
(:class:`BoxedInt`, :class:`BoxedInts`, :class:`BoxedCommand`), with their device
reader (:class:`FieldsReader`)."""

from __future__ import annotations

import re
import string
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.grammar.base import (
    INT32_MAX_DIGITS,
    Grammar,
    ParsedAction,
    clamp_decimal,
    normalise_digits,
)
from gemjax.text.grammar.reader import (
    Feature,
    Reader,
    Write,
    echo_write,
    int_digit_limit,
    no_write,
    numbers_init,
    numbers_step,
)


class BoxedInt(Grammar):
    """``\\boxed{(\\d+)}``: a non-negative integer (GuessTheNumber).

    The kernel action is an int32 scalar: the number, clamped to ``2**31 - 1``;
    ``0`` when there is no match (GEM treats a missing number and ``0`` alike).
    """

    pattern = re.compile(r"\\boxed{(\d+)}")

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def parse(self, text: str) -> ParsedAction:
        digits = self.last_groups(text)
        if digits is not None and len(digits) < INT32_MAX_DIGITS and digits.isascii():
            value = int(digits)  # the common case: a short ASCII number
            return ParsedAction(
                value, True, {self.slot: digits if digits[0] != "0" else str(value)}
            )
        value_text = normalise_digits(digits) if digits is not None else None
        if value_text is None:
            return ParsedAction(0, False, {})
        return ParsedAction(clamp_decimal(value_text), True, {self.slot: value_text})

    def render(self, action: np.ndarray) -> str:
        return "\\boxed{" + str(int(action)) + "}"

    def device_reader(self) -> Reader:
        return FieldsReader((self.slot,), scalar=True)


def read_numbers(groups: tuple[str, ...]) -> list[str] | None:
    """Normalised ASCII text of each ``\\d+`` group, or None if ``int()`` refuses one."""
    numbers = [normalise_digits(g) for g in groups]
    read = [n for n in numbers if n is not None]
    return read if len(read) == len(numbers) else None


class NumberFields(Grammar):
    """A grammar whose kernel action is ``[head, n_0, n_1, ...]``, one number per
    entry of ``int_slots`` after a head code (:class:`BoxedInts`,
    :class:`BoxedCommand`)."""

    int_slots: tuple[str, ...]

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(1 + len(self.int_slots), np.int32)


class BoxedInts(NumberFields):
    """``\\boxed{(\\d+)\\s(\\d+)...}``: ``len(int_slots)`` non-negative integers, each
    after **exactly one** whitespace character (Sudoku's ``\\boxed{1 2 5}``), or after
    one or more with ``separator=r"\\s+"`` (WordSearch's ``\\boxed{0 1  0 5}``); GEM
    reads them with ``int()``. With ``letter=True`` one ASCII letter ``[a-zA-Z]``
    follows the numbers after the same separator (Crosswords' ``\\boxed{0 3 d}``),
    upper-cased as GEM reads it.

    The kernel action is int32[1 + len(int_slots) (+ 1)]: ``[1, n_0, n_1, ...]`` with
    numbers clamped to ``2**31 - 1`` (then the letter's code, ``A = 1 .. Z = 26``), or
    all zeros for a format error (no match, or a number ``int()`` refuses). Echoes:
    each of ``int_slots`` its number as ``int()`` read it.
    """

    SEPARATORS = (r"\s", r"\s+")
    LETTERS = string.ascii_uppercase

    def __init__(
        self, int_slots: tuple[str, ...], separator: str = r"\s", letter: bool = False
    ) -> None:
        if not int_slots:
            raise ValueError("BoxedInts needs at least one number")
        if separator not in self.SEPARATORS:
            raise ValueError(f"separator must be one of {self.SEPARATORS}, got {separator!r}")
        self.int_slots = tuple(int_slots)
        self.letter = bool(letter)
        fields = [r"(\d+)"] * len(int_slots) + ([r"([a-zA-Z])"] if letter else [])
        self.pattern = re.compile(r"\\boxed{" + separator.join(fields) + "}")

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(1 + len(self.int_slots) + self.letter, np.int32)

    def parse(self, text: str) -> ParsedAction:
        groups = self.last_groups(text)
        if groups is None:
            return ParsedAction(self.format_error(), False, {})
        groups = groups if isinstance(groups, tuple) else (groups,)
        letters = [1 + self.LETTERS.index(groups[-1].upper())] if self.letter else []
        numbers = read_numbers(groups[: len(self.int_slots)])
        if numbers is None:
            return ParsedAction(self.format_error(), False, {})
        action = np.asarray([1, *(clamp_decimal(n) for n in numbers), *letters], np.int32)
        return ParsedAction(action, True, dict(zip(self.int_slots, numbers, strict=True)))

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{n_0 n_1 ...}`` (negative numbers written as 0; then the letter); a
        format-error action (first entry <= 0) gives ``\\boxed{}``."""
        action = np.asarray(action)
        if int(action[0]) <= 0:
            return "\\boxed{}"
        count = len(self.int_slots)
        fields = [str(max(int(v), 0)) for v in action[1 : 1 + count]]
        if self.letter:
            fields.append(self.LETTERS[min(max(int(action[-1]), 1), 26) - 1])
        return "\\boxed{" + " ".join(fields) + "}"

    def device_reader(self) -> Reader:
        return FieldsReader(self.int_slots, letters=self.LETTERS if self.letter else "")


class BoxedCommand(NumberFields):
    """``\\boxed{([a-zA-Z]+)\\s(\\d+)\\s(\\d+)...}``: an ASCII command word and
    ``len(int_slots)`` non-negative integers, each after **exactly one** whitespace
    character (Minesweeper's ``\\boxed{reveal 3 2}``). GEM lower-cases the word with
    ``str.lower()`` (so ``REVEAL`` is ``reveal``) and reads the numbers with ``int()``.

    The kernel action is int32[1 + len(int_slots)]: ``[command, n_0, n_1, ...]`` where
    ``command`` is ``1 + i`` for ``commands[i]``, ``len(commands) + 1`` for any other
    word, and ``0`` for a format error (no match, or a number ``int()`` refuses,
    which GEM's ``except`` turns into a format error); numbers are clamped to
    ``2**31 - 1``.

    Echoes: ``word_slot`` is the lower-cased word, each of ``int_slots`` its number
    as ``int()`` read it (normalised ASCII digits).
    """

    def __init__(
        self, commands: tuple[str, ...], word_slot: str, int_slots: tuple[str, ...]
    ) -> None:
        if not commands or not int_slots:
            raise ValueError("BoxedCommand needs at least one command and one number")
        if any(not (c.isascii() and c.isalpha() and c.islower()) for c in commands):
            raise ValueError(f"commands must be lower-case ASCII words, got {commands}")
        self.commands = tuple(commands)
        self.word_slot = word_slot
        self.int_slots = tuple(int_slots)
        self.pattern = re.compile(r"\\boxed{([a-zA-Z]+)" + r"\s(\d+)" * len(int_slots) + "}")

    @property
    def unknown(self) -> int:
        """The command code of a word that is none of :attr:`commands`."""
        return len(self.commands) + 1

    def parse(self, text: str) -> ParsedAction:
        groups = self.last_groups(text)
        if groups is None:
            return ParsedAction(self.format_error(), False, {})
        word = groups[0].lower()
        numbers = read_numbers(groups[1:])
        if numbers is None:
            return ParsedAction(self.format_error(), False, {})
        code = self.commands.index(word) + 1 if word in self.commands else self.unknown
        action = np.asarray([code, *(clamp_decimal(n) for n in numbers)], np.int32)
        echoes = {self.word_slot: word, **dict(zip(self.int_slots, numbers, strict=True))}
        return ParsedAction(action, True, echoes)

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{word n_0 n_1 ...}``; an unknown command is written ``unknown`` and
        a format-error code gives ``\\boxed{}``; negative numbers are written as 0."""
        action = np.asarray(action)
        code = int(action[0])
        if code <= 0:
            return "\\boxed{}"
        word = self.commands[code - 1] if code <= len(self.commands) else "unknown"
        numbers = " ".join(str(max(int(v), 0)) for v in action[1:])
        return "\\boxed{" + word + " " + numbers + "}"

    def device_reader(self) -> Reader:
        return FieldsReader(self.int_slots, self.commands, self.word_slot)


def _codes(text: str, width: int) -> np.ndarray:
    """int32[width] code points of ``text`` padded with -1."""
    out = np.full(width, -1, np.int32)
    out[: len(text)] = [ord(c) for c in text]
    return out


class FieldsReader(Reader):
    """An optional command word, then a fixed count of numbers, then an optional
    letter (:class:`BoxedInt`, :class:`BoxedInts`, :class:`BoxedCommand`); the word
    and each number are one echo slot, the letter (upper-cased, one of ``letters``)
    is its code in the action."""

    def __init__(
        self,
        int_slots: tuple[str, ...],
        commands: tuple[str, ...] = (),
        word_slot: str | None = None,
        scalar: bool = False,
        letters: str = "",
    ) -> None:
        self.int_slots = int_slots
        self.commands = commands
        self.word_slot = word_slot
        self.scalar = scalar
        self.letters = letters
        self.offset = int(word_slot is not None)
        self.scatter_slots = ((word_slot,) if word_slot is not None else ()) + int_slots
        self.slots = self.scatter_slots
        width = max((len(c) for c in commands), default=0) + 1
        self.command_table = np.stack([_codes(c, width) for c in commands] or [_codes("", 1)])
        self.limit = int_digit_limit()

    def case_map(self, char: str) -> str:
        if self.word_slot is not None:
            return char.lower()
        return char.upper() if self.letters else char

    @property
    def alphabet(self) -> str:
        return self.letters

    def init(self) -> Any:
        """(:class:`Numbers`, bool[C] the word still spells command ``c``, int32 word
        length, int32 the letter's code)."""
        matches = jnp.zeros(len(self.commands), jnp.bool_)
        return numbers_init(len(self.int_slots)), matches, jnp.int32(0), jnp.int32(0)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        numbers, matches, word_len, letter = carry
        numbers, run_pos, digit_pos = numbers_step(numbers, feat, self.offset, self.limit)
        in_word = (numbers.field < self.offset) & (feat.space == 0)
        table = jnp.asarray(self.command_table)
        expected = table[:, jnp.clip(run_pos, 0, table.shape[1] - 1)]
        spelled = ((run_pos == 0) | matches) & (expected == feat.mapped)
        matches = jnp.where(in_word, spelled, matches)
        word_len = jnp.where(in_word, run_pos + 1, word_len)
        in_letter = (numbers.field == self.offset + len(self.int_slots)) & (feat.space == 0)
        letter = jnp.where(in_letter, feat.code, letter)
        is_digit = feat.digit >= 0
        write = echo_write(
            numbers.field,
            jnp.where(is_digit, digit_pos, run_pos),
            jnp.where(is_digit, 48 + feat.digit, feat.mapped),
            is_digit | in_word,
        )
        return (numbers, matches, word_len, letter), (write, no_write())

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        numbers, matches, word_len, letter = carry
        ok = found & ~numbers.too_long
        echoes: dict[str, tuple[jax.Array, jax.Array]] = {}
        head: list[jax.Array] = []
        if self.word_slot is not None:
            echoes[self.word_slot] = (rows[0], word_len)
            lengths = jnp.asarray([len(c) for c in self.commands])
            known = matches & (lengths == word_len)
            unknown = len(self.commands) + 1
            head.append(jnp.where(jnp.any(known), jnp.argmax(known) + 1, unknown))
        elif not self.scalar:
            head.append(jnp.int32(1))
        sig = jnp.maximum(numbers.sig, 1)
        for i, slot in enumerate(self.int_slots):
            echoes[slot] = (rows[self.offset + i], sig[i])
        tail = [letter[None]] if self.letters else []
        action = (
            jnp.concatenate([jnp.stack(head).astype(jnp.int32), numbers.values, *tail])
            if head
            else numbers.values
        )
        action = jnp.where(ok, action, 0).astype(jnp.int32)
        return (action[0] if self.scalar else action), ok, echoes
