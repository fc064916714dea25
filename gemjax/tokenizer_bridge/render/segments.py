"""Canonical tokenization of rendered text on device, by segments.

Byte-level BPE tokenizers split text into pre-tokens with a regex and run BPE inside
each. The text of a game message is cut, on device, at positions that are pre-token
boundaries *whatever the text around them* (for Qwen-style patterns, checked at
construction): on both sides of every ASCII digit (``\\p{N}`` is a pre-token of its
own), after a line break followed by a non-space character, after an ASCII letter
followed by an ASCII non-letter (no pre-token runs on past the end of a letter run),
at a space followed by a printable ASCII character (a run of spaces gives its last
one to the pre-token after it, and nothing else runs on past a space), and around
special tokens. The tokens of a *segment* (the text between two cuts) then depend
only on its own text and on the class of the character after it (a digit, another
non-space character, or the end of the text; a segment followed by such a space
tokenizes as at the end), so they are looked up in a table built on the host from
the segments that rendered text can contain. The space cut keeps the rows of a board
(``" _   .   A  "``) short segments that repeat, rather than one per row pattern. The table
is keyed by two 32-bit polynomial hashes of the segment's code points, its length and
that class.

A segment missing from the table (a word the player typed, a letter string never
seen at construction) is written as one byte token per UTF-8 byte: the decoded text
is still exact, and the render's ``canonical`` flag is False. Tokenizers without
merges (the byte tokenizer) cut everywhere and are canonical by construction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from transformers import PreTrainedTokenizerBase

from gemjax.tokenizer_bridge.device_types import TokenText
from gemjax.tokenizer_bridge.tokenizers import is_byte_level, per_tokenizer, token_bytes

SPECIAL_BASE = (
    0x10FF00  # private-use code points >= this stand for special token ``i - SPECIAL_BASE``
)
END, DIGIT_NEXT, OTHER_NEXT = 0, 1, 2  # what follows a segment
_PRIMES = (0x01000193, 0x9E3779B1)
_MIX = (0x27D4EB2F, 0x165667B1, 0x85EBCA6B, 0xC2B2AE35)  # length and follower into each key
_LINE_BREAKS = (ord("\n"), ord("\r"))
_SPACES = tuple(i for i in range(0x3001) if chr(i).isspace())
_FOLLOWER = {DIGIT_NEXT: "0", OTHER_NEXT: "A"}


def follow_text(text: str, follower: int) -> str:
    """The character that stands for ``follower`` (a follower class) after ``text``
    when a segment is tokenized ("" at the end)."""
    if follower == END:
        return ""
    return "." if follower == OTHER_NEXT and text[-1:].isalpha() else _FOLLOWER[follower]


def encode_followed(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], follower: str
) -> list[list[int] | None]:
    """Token ids of each text as it tokenizes when ``follower`` comes next: the ids of
    ``text + follower`` without the follower's own (``follower == ""``: the end of the
    text). None where the follower does not start a token of its own there (the
    text's ids depend on what follows). One batched tokenizer call (host)."""
    if not texts:
        return []
    encoded = tokenizer([t + follower for t in texts], add_special_tokens=False)["input_ids"]
    if not follower:
        return [list(ids) for ids in encoded]
    tail = tokenizer.encode(follower, add_special_tokens=False)
    return [ids[: -len(tail)] if ids[-len(tail) :] == tail else None for ids in encoded]


@per_tokenizer
def has_merges(tokenizer: PreTrainedTokenizerBase) -> bool:
    """The tokenizer merges bytes (BPE with merges); without, every byte is a token."""
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    return bool(model.get("merges"))


def _powers(base: int, count: int) -> np.ndarray:
    out = np.ones(count, np.uint64)
    for i in range(1, count):
        out[i] = (out[i - 1] * base) % 2**32
    return out.astype(np.uint32)


def segment_keys(codepoints: Iterable[int], follower: int) -> tuple[int, int]:
    """The two uint32 keys of a segment (host twin of the device computation)."""
    chars = list(codepoints)
    first = second = 0
    for position, char in enumerate(chars):
        first = (first + char * pow(_PRIMES[0], position, 2**32)) % 2**32
        second = (second + char * pow(_PRIMES[1], position, 2**32)) % 2**32
    first = (first + len(chars) * _MIX[0] + follower * _MIX[1]) % 2**32
    second = (second + len(chars) * _MIX[2] + follower * _MIX[3]) % 2**32
    return first, second


class SegmentTokenizer:
    """Tokenizes code-point buffers on device (see the module docstring).

    Args:
        tokenizer: a byte-level transformers tokenizer.
        specials: the special tokens texts may contain, as strings (index ``i`` is
            code point ``SPECIAL_BASE + i`` in rendered text).

    Attributes:
        merges: the tokenizer merges bytes (else every position is a cut).
        cuts_verified: the tokenizer's pre-tokenizer isolates digits and starts a
            pre-token after a line break (checked on probes); if not, only specials
            and the text's end cut, and most segments fall back to bytes.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, specials: tuple[str, ...] = ()) -> None:
        if not is_byte_level(tokenizer):
            raise NotImplementedError("the device bridge needs a byte-level BPE tokenizer")
        self.tokenizer = tokenizer
        self.specials = specials
        self.special_ids = [_token_id(tokenizer, s) for s in specials]
        self.merges = has_merges(tokenizer)
        self.cuts_verified = not self.merges or self._verify_cuts()
        vocab_bytes = token_bytes(tokenizer)
        byte_ids = {piece[0]: index for index, piece in enumerate(vocab_bytes) if len(piece) == 1}
        self.byte_ids = jnp.asarray(np.asarray([byte_ids[b] for b in range(256)], np.int32))
        self._segments: dict[tuple[tuple[int, ...], int], list[int]] = {}
        self._arrays: dict[str, jax.Array] = {}
        followers = (END, DIGIT_NEXT, OTHER_NEXT)
        self.add_segments(
            [((SPECIAL_BASE + i,), f) for i in range(len(specials)) for f in followers]
        )

    # --- host: the table ----------------------------------------------------------

    def _verify_cuts(self) -> bool:
        """Digits are single pre-tokens and a line break ends one, on probe texts."""
        pre = self.tokenizer.backend_tokenizer.pre_tokenizer
        probes = [
            "'SAND' x",
            "you're.",
            "\\boxed{APPLE}.",
            "A\tB C\n",
            "a1b",
            " 12 ",
            "x.3.",
            "'7'",
            "\n4\n",
            "  5",
            "é9ü",
            "R1 C2",
            ",1]",
            "a\nb",
            ".\nc",
            " \n[",
            "\t\nX",
            "R00  _   .   A  \nR01  .   _  \n",
            "x _",
            "a  .",
            "\n _",
            "\r\n  \t [",
            "._ _",
            "' 's",
            "é  .",
            "、 \\boxed",
            "7 ) ",
        ]
        for probe in probes:
            pieces = pre.pre_tokenize_str(probe)
            starts = {start for _, (start, _) in pieces} | {len(probe)}
            for i, ch in enumerate(probe):
                cut = ch.isdigit() or (i and probe[i - 1].isdigit())
                cut = cut or (i and probe[i - 1] in "\r\n" and not ch.isspace())
                word_end = i and probe[i - 1].isascii() and probe[i - 1].isalpha()
                cut = cut or (word_end and ch.isascii() and not ch.isalpha())
                if cut and i not in starts:
                    return False
                if _space_cut(probe, i) and not _ends_as_alone(pre, pieces, probe, i):
                    return False
        return True

    def add_segments(self, segments: Iterable[tuple[tuple[int, ...], int]]) -> int:
        """Add segments ``(code points, follower class)`` to the table (host); returns
        how many were new. Call :meth:`freeze` before rendering."""
        before = len(self._segments)
        by_follow: dict[str, list[tuple[tuple[int, ...], int]]] = {}
        for chars, follower in dict.fromkeys(segments):
            if (chars, follower) in self._segments:
                continue
            if chars and chars[0] >= SPECIAL_BASE:
                self._segments[(chars, follower)] = [self.special_ids[chars[0] - SPECIAL_BASE]]
                continue
            follow = follow_text("".join(map(chr, chars)), follower)
            by_follow.setdefault(follow, []).append((chars, follower))
        for follow, keys in by_follow.items():
            texts = ["".join(map(chr, chars)) for chars, _ in keys]
            for key, ids in zip(keys, encode_followed(self.tokenizer, texts, follow), strict=True):
                if ids is not None:
                    self._segments[key] = ids
        self._arrays = {}
        return len(self._segments) - before

    @property
    def known(self) -> set[tuple[tuple[int, ...], int]]:
        """The segments the table holds (what tokenizes canonically), as added; every
        segment when the tokenizer has no merges is canonical anyway."""
        return set(self._segments)

    def freeze(self) -> None:
        """Build the device table from the segments added so far."""
        entries = sorted(
            (segment_keys(chars, f), ids) for (chars, f), ids in self._segments.items()
        )
        first = np.asarray([k[0] for k, _ in entries], np.uint32)
        if len(first) > 2 and np.any(first[2:] == first[:-2]):  # lookups check two slots
            raise RuntimeError("three segments share a hash key; use other primes")
        lengths = np.asarray([len(ids) for _, ids in entries], np.int32)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
        tokens = np.asarray([i for _, ids in entries for i in ids] or [0], np.int32)
        self._arrays = {
            "first": jnp.asarray(first),
            "second": jnp.asarray(np.asarray([k[1] for k, _ in entries], np.uint32)),
            "starts": jnp.asarray(starts),
            "lengths": jnp.asarray(lengths),
            "tokens": jnp.asarray(tokens),
        }

    @property
    def token_ids(self) -> np.ndarray:
        """int32[n]: every token id the table can emit (sorted)."""
        return np.unique(np.asarray([i for ids in self._segments.values() for i in ids], np.int32))

    # --- device ---------------------------------------------------------------------

    def cuts(self, chars: jax.Array, length: jax.Array) -> jax.Array:
        """bool[C]: where segments start (unbatched; position 0 always, none past ``length``)."""
        position = jnp.arange(chars.shape[0])
        if not self.merges:
            return position < length
        special = chars >= SPECIAL_BASE
        previous = jnp.concatenate([jnp.zeros((1,), chars.dtype), chars[:-1]])
        cut = (position == 0) | special | jnp.roll(special, 1)
        if self.cuts_verified:
            digit = (chars >= ord("0")) & (chars <= ord("9"))
            after_break = jnp.isin(previous, jnp.asarray(_LINE_BREAKS)) & ~jnp.isin(
                chars, jnp.asarray(_SPACES)
            )
            after_word = _ascii_letter(previous) & (chars < 0x80) & ~_ascii_letter(chars)
            cut = cut | digit | jnp.roll(digit, 1) | after_break | after_word
            cut = cut | _space_before_printable(chars, length)
        return cut & (position < length)

    def _scan(self, chars: jax.Array, length: jax.Array) -> dict[str, jax.Array]:
        """Segment bounds and per-position prefix sums (one stacked ``cumsum``, which
        is costly to compile on CPU): ``starts``, ``ends``, ``followers`` int32[C];
        ``bytes`` int32[C + 1] (UTF-8 bytes before each position); ``hashes``
        uint32[2, C + 1] (the two polynomial hash prefixes)."""
        size = chars.shape[0]
        cut = self.cuts(chars, length)
        terms = jnp.stack(
            [
                cut.astype(jnp.uint32),
                utf8_length(chars).astype(jnp.uint32),
                *(chars.astype(jnp.uint32) * jnp.asarray(_powers(p, size)) for p in _PRIMES),
            ]
        )
        prefix = jnp.concatenate([jnp.zeros((4, 1), jnp.uint32), jnp.cumsum(terms, axis=1)], 1)
        index = prefix[0, 1:].astype(jnp.int32) - 1  # the segment of each position
        position = jnp.arange(size, dtype=jnp.int32)
        starts = jnp.full((size,), length, jnp.int32)
        starts = starts.at[jnp.where(cut, index, size)].set(position, mode="drop")
        ends = jnp.concatenate([starts[1:], jnp.reshape(length, (1,))]).astype(jnp.int32)
        ends = jnp.where(starts >= length, length, ends)
        following = chars[jnp.minimum(ends, size - 1)]
        digit = (following >= ord("0")) & (following <= ord("9"))
        space_cut = _space_before_printable(chars, length)[jnp.minimum(ends, size - 1)]
        at_end = (ends >= length) | (following >= SPECIAL_BASE) | space_cut
        followers = jnp.where(at_end, END, jnp.where(digit, DIGIT_NEXT, OTHER_NEXT))
        return {
            "starts": starts,
            "ends": ends,
            "followers": followers.astype(jnp.int32),
            "bytes": prefix[1].astype(jnp.int32),
            "hashes": prefix[2:],
        }

    def segments(
        self, chars: jax.Array, length: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(starts, ends, followers)`` int32[C] of each segment (padding: empty
        segments at ``length``)."""
        scan = self._scan(chars, length)
        return scan["starts"], scan["ends"], scan["followers"]

    def tokenize(
        self, chars: jax.Array, length: jax.Array, capacity: int, end_follower: int = END
    ) -> TokenText:
        """Token ids of the first ``length`` code points of ``chars`` (unbatched).

        Args:
            chars: int32[C] code points (``SPECIAL_BASE + i`` for special ``i``).
            length: int32[] number of valid code points.
            capacity: token ids in the output buffer.
            end_follower: the class of what will follow the text (``END``; or
                ``OTHER_NEXT`` for a line that another message will follow).
        """
        if not self._arrays:
            self.freeze()
        t = self._arrays
        size = chars.shape[0]
        scan = self._scan(chars, length)
        starts, ends, byte_prefix = scan["starts"], scan["ends"], scan["bytes"]
        valid = starts < length
        follower = jnp.where((ends >= length) & valid, end_follower, scan["followers"])
        first, second = self._keys(scan["hashes"], starts, ends, follower)
        slot = jnp.minimum(sorted_search(t["first"], first, side="left"), t["first"].shape[0] - 1)
        candidates = jnp.stack([slot, jnp.minimum(slot + 1, t["first"].shape[0] - 1)])
        match = (t["first"][candidates] == first) & (t["second"][candidates] == second)
        hit = jnp.any(match, axis=0) & valid
        entry = jnp.where(match[0], candidates[0], candidates[1])
        segment_bytes = jnp.where(valid, byte_prefix[ends] - byte_prefix[starts], 0)
        count = jnp.where(hit, t["lengths"][entry], segment_bytes)
        count_ends = jnp.cumsum(count)
        total = count_ends[-1]
        out = jnp.arange(capacity)
        segment = jnp.minimum(sorted_search(count_ends, out, side="right"), size - 1)
        offset = out - (count_ends[segment] - count[segment])
        table_id = t["tokens"][
            jnp.clip(t["starts"][entry[segment]] + offset, 0, t["tokens"].shape[0] - 1)
        ]
        byte_position = byte_prefix[starts[segment]] + offset
        char_index = jnp.minimum(
            sorted_search(byte_prefix[1:], byte_position, side="right"), size - 1
        )
        byte = _utf8_byte(chars[char_index], byte_position - byte_prefix[char_index])
        ids = jnp.where(hit[segment], table_id, self.byte_ids[byte])
        ids = jnp.where(out < total, ids, 0).astype(jnp.int32)
        canonical = jnp.all(hit | ~valid) if self.merges else jnp.bool_(True)
        return TokenText(
            ids, jnp.minimum(total, capacity).astype(jnp.int32), total > capacity, canonical
        )

    def _keys(
        self, hashes: jax.Array, starts: jax.Array, ends: jax.Array, follower: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """uint32 keys of each segment (see :func:`segment_keys`) from the hash prefixes."""
        size = hashes.shape[1] - 1
        keys = [
            (hashes[i][ends] - hashes[i][starts])
            * jnp.asarray(_powers(pow(prime, -1, 2**32), size))[jnp.minimum(starts, size - 1)]
            for i, prime in enumerate(_PRIMES)
        ]
        length, follower = (ends - starts).astype(jnp.uint32), follower.astype(jnp.uint32)
        return tuple(
            key + length * jnp.uint32(_MIX[2 * i]) + follower * jnp.uint32(_MIX[2 * i + 1])
            for i, key in enumerate(keys)
        )


def sorted_search(sorted_values: jax.Array, queries: jax.Array, side: str = "left") -> jax.Array:
    """``jnp.searchsorted``: by all-pairs comparison when both are small, else a binary
    search. All pairs cost ``N * M`` compares per lane against ``M * log2(N)``
    dependent gathers; all pairs is used up to 4096 pairs, the crossover found on a
    CPU (docs/performance.md)."""
    small = sorted_values.size * queries.size <= 1 << 12
    return jnp.searchsorted(
        sorted_values, queries, side=side, method="compare_all" if small else "scan"
    )


def _printable(char: str) -> bool:
    """A printable ASCII character other than the space."""
    return "!" <= char <= "~"


def _space_cut(text: str, i: int) -> bool:
    """Position ``i`` of ``text`` is a space followed by a printable ASCII character
    (host twin of :func:`_space_before_printable`)."""
    return text[i] == " " and i + 1 < len(text) and _printable(text[i + 1])


def _ends_as_alone(pre: Any, pieces: list[tuple[str, tuple[int, int]]], text: str, i: int) -> bool:
    """A pre-token of ``text`` starts at ``i`` and the pre-tokens before it are
    those of ``text[:i]`` alone (so the segment before ``i`` tokenizes as at the end)."""
    before = [(piece, span) for piece, span in pieces if span[1] <= i]
    alone = pre.pre_tokenize_str(text[:i])
    return bool(i == 0 or (before and before[-1][1][1] == i)) and [span for _, span in before] == [
        span for _, span in alone
    ]


def _space_before_printable(chars: jax.Array, length: jax.Array) -> jax.Array:
    """bool[C]: a space (inside ``length``) whose next code point is a printable ASCII
    character other than the space."""
    following = jnp.concatenate([chars[1:], jnp.zeros((1,), chars.dtype)])
    inside = jnp.arange(chars.shape[0]) + 1 < length
    return (chars == ord(" ")) & inside & (following >= ord("!")) & (following <= ord("~"))


def _ascii_letter(chars: jax.Array) -> jax.Array:
    """bool: the code point is an ASCII letter."""
    upper = chars & ~0x20
    return (upper >= ord("A")) & (upper <= ord("Z"))


def utf8_length(chars: jax.Array) -> jax.Array:
    """int32[C]: UTF-8 bytes of each code point (specials and 0 padding: 0)."""
    size = 1 + (chars >= 0x80).astype(jnp.int32) + (chars >= 0x800) + (chars >= 0x10000)
    return jnp.where((chars > 0) & (chars < SPECIAL_BASE), size, 0).astype(jnp.int32)


def most_tokens(chars: jax.Array, length: jax.Array) -> jax.Array:
    """int32[]: the most token ids the first ``length`` code points of ``chars``
    (int32[C]) can take: a token is one special or at least one UTF-8 byte (a NUL
    counts one)."""
    inside = jnp.arange(chars.shape[0]) < length
    return jnp.sum(jnp.where(inside, jnp.maximum(utf8_length(chars), 1), 0)).astype(jnp.int32)


def _utf8_byte(char: jax.Array, index: jax.Array) -> jax.Array:
    """int32: byte ``index`` of the UTF-8 encoding of code point ``char``."""
    size = utf8_length(char)
    shift = 6 * (size - 1 - index)
    lead = jnp.asarray([0, 0, 0xC0, 0xE0, 0xF0], jnp.int32)[size] | (char >> (6 * (size - 1)))
    continuation = 0x80 | ((char >> jnp.maximum(shift, 0)) & 0x3F)
    return jnp.clip(jnp.where(index == 0, jnp.where(size == 1, char, lead), continuation), 0, 255)


def _token_id(tokenizer: PreTrainedTokenizerBase, token: str) -> int:
    """The id of one token of the tokenizer's vocabulary."""
    found = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(found, int):
        raise ValueError(f"{token!r} is not one token of the tokenizer")
    return found
