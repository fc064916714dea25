"""The device-reader protocol of a grammar, and the pieces readers share.

The token bridge's parser (:mod:`gemjax.tokenizer_bridge.parse`) finds the last
well-formed match of a grammar's pattern on device; a :class:`Reader` says how the
content characters of a match become the kernel action and the echo texts: the scan
calls :meth:`Reader.step` on each content character (seen as a :class:`Feature`),
and :meth:`Reader.finish` on the carry of the last match that closed. Each grammar
module (``fields``, ``int_list``, ``letters``) holds its host parser and its reader
side by side; :class:`Numbers` and :func:`numbers_step` read ``int()``-style numbers
(clamped to ``2**31 - 1``) for any of them.
"""

from __future__ import annotations

import abc
import sys
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

INT32_MAX = 2**31 - 1


class Write(NamedTuple):
    """One echo character a content character produces (int32[] each).

    Attributes:
        slot: index into the reader's :attr:`Reader.scatter_slots`, -1 for none.
        pos: position in that echo text.
        char: the code point written (scattered with ``max``: a later leading zero
            never hides a digit at the same place).
    """

    slot: jax.Array
    pos: jax.Array
    char: jax.Array


def no_write() -> Write:
    """A :class:`Write` that writes nothing."""
    minus = jnp.int32(-1)
    return Write(minus, minus, jnp.int32(0))


class Feature(NamedTuple):
    """What a reader sees of one character (int32[] each; the device parser's symbol
    tables hold these columns per symbol, computed with Python's own ``\\d``, ``\\s``
    and ``unicodedata.decimal``).

    Attributes:
        digit: its decimal value for a ``\\d`` character, else -1.
        space: 1 for a ``\\s`` character.
        ascii_space: 1 for ``" "``.
        mapped: the character after the reader's case map.
        code: the mapped character's code in the reader's alphabet (0: none).
    """

    digit: jax.Array
    space: jax.Array
    ascii_space: jax.Array
    mapped: jax.Array
    code: jax.Array


class Reader(abc.ABC):
    """How one grammar reads the content of a well-formed match.

    The scan calls :meth:`step` on every content character of the current candidate
    (a fresh :meth:`init` carry at each opener); the carry of the last closed
    candidate goes to :meth:`finish`. Carries are pytrees of int32/bool arrays.
    """

    #: Echo slots whose text is written by :class:`Write` s, in order.
    scatter_slots: tuple[str, ...] = ()
    #: Every slot :meth:`finish` returns, in order.
    slots: tuple[str, ...] = ()
    #: The reader takes the whole content as the pattern's one group (the device
    #: parser refuses a pattern whose content is anything else).
    reads_one_group: bool = False

    def case_map(self, char: str) -> str:
        """The character a content character stands for (``str.lower`` ...)."""
        return char

    @property
    def alphabet(self) -> str:
        """Characters with a code (``1 + index``) in :attr:`Feature.code`."""
        return ""

    @abc.abstractmethod
    def init(self) -> Any:
        """The carry of a fresh candidate."""

    @abc.abstractmethod
    def step(self, carry: Any, feat: Feature) -> tuple[Any, tuple[Write, Write]]:
        """Fold one content character into ``carry``; return up to two echo writes."""

    @abc.abstractmethod
    def finish(
        self, carry: Any, found: jax.Array, rows: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, tuple[jax.Array, jax.Array]]]:
        """The action, ``ok`` and echoes of the committed candidate.

        Args:
            carry: the last closed candidate's carry (``init()`` if none).
            found: bool[] some candidate closed.
            rows: int32[len(scatter_slots), capacity] the scattered echo characters.

        Returns:
            ``(action, ok, echoes)``; ``echoes[slot] = (chars int32[capacity], length)``
            with the full (unclamped) length.
        """


class Numbers(NamedTuple):
    """Carry of a candidate's fields (runs of non-space characters), int32 unless noted.

    Attributes:
        field: index of the current field, -1 before the first.
        in_run: bool[] the previous content character was not a space.
        run_len: characters of the current field so far.
        run_sig: significant digits of the current field (leading zeros dropped).
        too_long: bool[] some number has more digits than ``int()`` accepts.
        values: int32[K] the numbers of fields ``offset .. offset + K - 1``, clamped
            to ``2**31 - 1``.
        sig: int32[K] their significant digit counts.
    """

    field: jax.Array
    in_run: jax.Array
    run_len: jax.Array
    run_sig: jax.Array
    too_long: jax.Array
    values: jax.Array
    sig: jax.Array


def int_digit_limit() -> int:
    """The most digits ``int()`` reads (``sys.get_int_max_str_digits()``; 0: none)."""
    return sys.get_int_max_str_digits() or INT32_MAX


def numbers_init(count: int) -> Numbers:
    """A fresh :class:`Numbers` carry tracking ``count`` numbers."""
    zeros = jnp.zeros(count, jnp.int32)
    false = jnp.bool_(False)
    return Numbers(jnp.int32(-1), false, jnp.int32(0), jnp.int32(0), false, zeros, zeros)


def clamped_append(value: jax.Array, digit: jax.Array) -> jax.Array:
    """``min(value * 10 + digit, 2**31 - 1)`` for ``0 <= value <= 2**31 - 1`` without
    overflow (int32 arrays of one shape)."""
    limit = INT32_MAX // 10
    over = (value > limit) | ((value == limit) & (digit > INT32_MAX % 10))
    return jnp.where(over, jnp.int32(INT32_MAX), value * 10 + digit)


def numbers_step(
    carry: Numbers, feat: Feature, offset: int, limit: int
) -> tuple[Numbers, jax.Array, jax.Array]:
    """Fold one content character into the fields; field ``f`` is number ``f - offset``.

    Returns:
        ``(carry, run_pos, digit_pos)``: the new carry, the character's index in its
        field, and a digit's place in its number as ``int()`` prints it (leading
        zeros all at 0, the k-th significant digit at ``k - 1``).
    """
    is_field = feat.space == 0
    starts = is_field & ~carry.in_run
    field = carry.field + starts.astype(jnp.int32)
    run_pos = jnp.where(starts, 0, carry.run_len)
    is_digit = feat.digit >= 0
    run_sig = jnp.where(starts, 0, carry.run_sig)
    run_sig = run_sig + (is_digit & ((feat.digit > 0) | (run_sig > 0))).astype(jnp.int32)
    update = is_digit & (jnp.arange(carry.values.shape[0]) == field - offset)
    digit = jnp.maximum(feat.digit, 0)
    new = Numbers(
        field=field,
        in_run=is_field,
        run_len=jnp.where(is_field, run_pos + 1, carry.run_len),
        run_sig=run_sig,
        too_long=carry.too_long | (is_digit & (run_pos + 1 > limit)),
        values=jnp.where(update, clamped_append(carry.values, digit), carry.values),
        sig=jnp.where(update, run_sig, carry.sig),
    )
    return new, run_pos, jnp.maximum(run_sig - 1, 0)


def decimal_text(value: jax.Array, capacity: int) -> tuple[jax.Array, jax.Array]:
    """ASCII decimal text of ``value >= 0`` (int32[]): int32[capacity] code points
    (zero padded, cut at ``capacity``) and the full length (int32[])."""
    powers = jnp.asarray([10**k for k in range(9, -1, -1)], jnp.int32)
    digits = (value // powers) % 10
    length = jnp.maximum(jnp.sum(value >= powers), 1).astype(jnp.int32)
    index = jnp.arange(capacity)
    chars = jnp.where(index < length, 48 + digits[jnp.clip(index + 10 - length, 0, 9)], 0)
    return chars.astype(jnp.int32), length


def echo_write(slot: jax.Array, pos: jax.Array, char: jax.Array, keep: jax.Array) -> Write:
    """A :class:`Write` that happens only where ``keep``."""
    return Write(jnp.where(keep, slot, -1).astype(jnp.int32), pos.astype(jnp.int32), char)
