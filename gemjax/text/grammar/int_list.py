"""The grammar of a whitespace-separated list of numbers (:class:`BoxedIntList`,
Mastermind), with its device reader (:class:`ListReader`)."""

from __future__ import annotations

import functools
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.text.grammar.base import Grammar, ParsedAction, clamp_decimal, normalise_digits
from gemjax.text.grammar.reader import (
    Feature,
    Reader,
    Write,
    decimal_text,
    echo_write,
    int_digit_limit,
    numbers_init,
    numbers_step,
)


class BoxedIntList(Grammar):
    """``\\boxed{(\\d+(?:\\s+\\d+)*)}``: whitespace-separated non-negative integers
    (Mastermind). GEM splits the match with ``str.split()`` and reads each entry with
    ``int()``; ``\\s`` and ``split()`` both mean Unicode whitespace.

    The kernel action is int32[size + 1]: ``[count, e_0, ..., e_{size-1}]`` where
    ``count`` is the number of entries clamped to ``size + 1`` (more entries than
    ``size`` can only be a wrong length), the first ``size`` entries clamped to
    ``2**31 - 1`` and zeros after the last entry. ``count == 0`` is a format error
    (no match, or an entry ``int()`` refuses).

    Echoes: ``slot`` is the list as GEM prints it (``[1, 2, 3]``, every entry in full)
    and ``count_slot`` the exact number of entries.
    """

    pattern = re.compile(r"\\boxed{(\d+(?:\s+\d+)*)}")

    def __init__(self, slot: str, size: int, count_slot: str) -> None:
        if size < 1:
            raise ValueError(f"BoxedIntList needs size >= 1, got {size}")
        self.slot = slot
        self.size = size
        self.count_slot = count_slot

    def format_error(self) -> np.ndarray:
        """The kernel action of a format error (all zeros)."""
        return np.zeros(self.size + 1, np.int32)

    def parse(self, text: str) -> ParsedAction:
        group = self.last_groups(text)
        if group is None:
            return ParsedAction(self.format_error(), False, {})
        entries = []
        for token in group.split():
            value_text = normalise_digits(token)
            if value_text is None:
                return ParsedAction(self.format_error(), False, {})
            entries.append(value_text)
        action = np.zeros(self.size + 1, np.int32)
        action[0] = min(len(entries), self.size + 1)
        head = entries[: self.size]
        action[1 : 1 + len(head)] = [clamp_decimal(t) for t in head]
        echoes = {self.slot: "[" + ", ".join(entries) + "]", self.count_slot: str(len(entries))}
        return ParsedAction(action, True, echoes)

    def render(self, action: np.ndarray) -> str:
        """``\\boxed{e_0 e_1 ...}``; a count of ``size + 1`` adds an entry ``0`` (so the
        text parses back to the same action); a count <= 0 gives ``\\boxed{}``."""
        action = np.asarray(action)
        count = min(int(action[0]), self.size + 1)
        entries = [str(int(v)) for v in action[1 : 1 + min(count, self.size)]]
        entries += ["0"] * (count - self.size)
        return "\\boxed{" + " ".join(entries) + "}"

    def device_reader(self) -> Reader:
        return ListReader(self)


class ListReader(Reader):
    """Whitespace-separated numbers (:class:`BoxedIntList`): the list echo as GEM
    prints it (``[1, 2, 3]``) and the entry count."""

    def __init__(self, grammar: BoxedIntList) -> None:
        self.size = grammar.size
        self.scatter_slots = (grammar.slot,)
        self.slots = (grammar.slot, grammar.count_slot)
        self.limit = int_digit_limit()

    def init(self) -> Any:
        """(:class:`Numbers`, int32 where the current entry starts in the echo)."""
        return numbers_init(self.size), jnp.int32(1)

    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        old, base = carry
        numbers, _, digit_pos = numbers_step(old, feat, 0, self.limit)
        ends = (feat.space != 0) & old.in_run  # a space right after an entry: ", "
        comma = base + jnp.maximum(old.run_sig, 1)
        is_digit = feat.digit >= 0
        digit = echo_write(jnp.int32(0), base + digit_pos, 48 + feat.digit, is_digit)
        sep = echo_write(jnp.int32(0), comma, jnp.int32(ord(",")), ends)
        base = jnp.where(ends, comma + 2, base)
        space = echo_write(jnp.int32(0), base - 1, jnp.int32(ord(" ")), ends)
        write = jax.tree.map(functools.partial(jnp.where, is_digit), digit, sep)
        return (numbers, base), (write, space)

    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        numbers, base = carry
        ok = found & ~numbers.too_long
        count = numbers.field + 1
        length = base + jnp.maximum(numbers.run_sig, 1) + 1
        index = jnp.arange(rows.shape[1])
        chars = jnp.where(index == 0, ord("["), jnp.where(index == length - 1, ord("]"), rows[0]))
        head = jnp.minimum(count, self.size + 1)[None]
        action = jnp.where(ok, jnp.concatenate([head, numbers.values]), 0).astype(jnp.int32)
        slot, count_slot = self.slots
        echoes = {slot: (chars, length), count_slot: decimal_text(count, rows.shape[1])}
        return action, ok, echoes
