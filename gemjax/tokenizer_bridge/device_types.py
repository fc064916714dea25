"""Fixed-shape values that the on-device bridge passes around (all jittable pytrees).

The device parser (``parse``) produces :class:`DeviceParsed`, whose echoes the
device renderer (``render``) prints where a message repeats what the player typed;
rendered text is a :class:`TokenText`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax


class EchoText(NamedTuple):
    """Text a parsed action carries for messages that repeat it.

    Attributes:
        chars: int32[capacity] Unicode code points of the text, zero padded; the same
            string the host grammar puts in ``ParsedAction.echoes[slot]``.
        length: int32[] number of code points (clamped to ``capacity``).
        present: bool[] the host parser would echo this slot (False on format errors).
        truncated: bool[] the text was longer than ``capacity`` (the rendering of
            such an echo cannot equal the host text).
    """

    chars: jax.Array
    length: jax.Array
    present: jax.Array
    truncated: jax.Array


class DeviceParsed(NamedTuple):
    """A response parsed on device, as the host grammar would parse its decoded text.

    Attributes:
        action: int32[...] the kernel action (the grammar's action shape).
        ok: bool[] a well-formed action was found.
        echoes: the echo text per slot name the grammar can echo.
    """

    action: jax.Array
    ok: jax.Array
    echoes: dict[str, EchoText]


class TokenText(NamedTuple):
    """Token ids of a rendered text in a fixed-capacity buffer.

    Attributes:
        ids: int32[capacity] token ids, padded with the bridge's pad id.
        length: int32[] number of valid ids (at most ``capacity``).
        overflow: bool[] the ids are not exactly the host text: it needed more than
            ``capacity`` tokens, or it repeats an echo the parser cut
            (:attr:`EchoText.truncated`). :attr:`exact` is its negation.
        canonical: bool[] the ids are ``tokenizer.encode(text)`` (else some piece
            of the text, typically letters the player typed, was written as one
            token per UTF-8 byte: it still decodes to the exact text).
    """

    ids: jax.Array
    length: jax.Array
    overflow: jax.Array
    canonical: jax.Array

    @property
    def exact(self) -> jax.Array:
        """bool[]: ``tokenizer.decode(ids[:length])`` is exactly the host text."""
        return ~self.overflow
