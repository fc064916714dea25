"""UTF-8 decoding on device, as ``bytes.decode("utf-8", "replace")`` (HF's lossy
decode) does it: a broken sequence becomes one U+FFFD for its maximal valid prefix
and decoding resumes at the offending byte, so an invalid byte never swallows the
character after it. :func:`utf8_step` decodes any bytes one at a time (the byte
scan); :func:`utf8_whole` decodes bytes known to be well formed all at once (the
window after the token pass).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gemjax.lanes import tree_where

REPLACEMENT = 0xFFFD


class CharEvent(NamedTuple):
    """What one scan step decoded.

    Attributes:
        broken: bool[] a U+FFFD comes first (a sequence cut short).
        present: bool[] a character follows (its code point in ``code``).
        code: int32[] its code point.
    """

    broken: jax.Array
    present: jax.Array
    code: jax.Array


class Utf8(NamedTuple):
    """UTF-8 decoder state (int32[] each): continuation bytes still needed, the code
    point so far, and the range the next continuation byte must lie in."""

    need: jax.Array
    code: jax.Array
    low: jax.Array
    high: jax.Array


def utf8_init() -> Utf8:
    return Utf8(jnp.int32(0), jnp.int32(0), jnp.int32(0x80), jnp.int32(0xBF))


def utf8_step(dec: Utf8, byte: jax.Array, present: jax.Array) -> tuple[Utf8, CharEvent]:
    """Decode one byte (int32[]; ignored where ``present`` is False) as
    ``bytes.decode("utf-8", "replace")`` does: a sequence broken by this byte yields
    one U+FFFD and the byte is then read afresh; an invalid lead byte yields U+FFFD."""
    fits = (dec.need > 0) & (byte >= dec.low) & (byte <= dec.high)
    broken = present & (dec.need > 0) & ~fits
    is_ascii = byte < 0x80
    need = jnp.where(
        (byte >= 0xC2) & (byte <= 0xDF), 1, jnp.where((byte >= 0xE0) & (byte <= 0xEF), 2, 0)
    )
    need = jnp.where((byte >= 0xF0) & (byte <= 0xF4), 3, need)
    lead = jnp.where(need == 1, byte & 0x1F, jnp.where(need == 2, byte & 0x0F, byte & 0x07))
    low = jnp.where(byte == 0xE0, 0xA0, jnp.where(byte == 0xF0, 0x90, 0x80))
    high = jnp.where(byte == 0xED, 0x9F, jnp.where(byte == 0xF4, 0x8F, 0xBF))
    continued = (dec.code << 6) | (byte & 0x3F)
    start = Utf8(need, jnp.where(is_ascii, byte, lead), low, high)
    cont = Utf8(dec.need - 1, continued, jnp.int32(0x80), jnp.int32(0xBF))
    new = tree_where(fits, cont, start)
    done = jnp.where(fits, new.need == 0, need == 0)
    code = jnp.where(fits, continued, jnp.where(is_ascii, byte, REPLACEMENT))
    event = CharEvent(broken, present & done, code.astype(jnp.int32))
    return tree_where(present, new, dec), event


def utf8_whole(data: jax.Array, has_byte: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Decode valid UTF-8 all at once: int32[W] bytes, bool[W] which slots hold one.

    Returns ``(present, codes)``: bool[W] a character starts at that slot (its bytes
    all present), int32[W] its code point. Only for bytes that are well-formed UTF-8
    (:func:`utf8_step` decodes anything, one byte at a time).
    """
    width = data.shape[0]
    ahead = [jnp.concatenate([data[k:], jnp.zeros(k, jnp.int32)]) for k in (1, 2, 3)]
    held = [jnp.concatenate([has_byte[k:], jnp.zeros(k, jnp.bool_)]) for k in (1, 2, 3)]
    need = jnp.where(data >= 0xF0, 3, jnp.where(data >= 0xE0, 2, jnp.where(data >= 0xC0, 1, 0)))
    lead = jnp.where(need == 3, data & 0x07, jnp.where(need == 2, data & 0x0F, data & 0x1F))
    codes, complete = jnp.where(need == 0, data, lead), jnp.ones(width, jnp.bool_)
    for k in range(3):
        more = need > k
        codes = jnp.where(more, (codes << 6) | (ahead[k] & 0x3F), codes)
        complete = complete & (~more | held[k])
    is_lead = (data & 0xC0) != 0x80
    return has_byte & is_lead & complete, codes.astype(jnp.int32)
