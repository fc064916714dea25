"""Inputs and the host oracle for the device parser's agreement tests and fuzz script.

Every case is a token-id sequence; the oracle is the host grammar applied to
``tokenizer.decode`` of it (or of its last ``max_bytes`` byte slots on overflow, the
device parser's documented window rule).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

import gemjax
from gemjax.text.grammar import (
    BoxedInts,
    BoxedLetters,
    BoxedWord,
    Grammar,
    ParsedAction,
)
from gemjax.tokenizer_bridge.parse import TokenParser
from gemjax.tokenizer_bridge.tokenizers import token_bytes

# Pieces GEM-like responses and attacks are made of.
PIECES = (
    "\\boxed{", "\\BOXED{", "\\Boxed{", "\\boxed", "{", "}", "\\", "boxed{", " ", "  ", "\t", "\n",
    "\u00a0", "\u3000", "\u2009", "\x85", "\x1c", "\x00", "\x7f", "\x0b", "0", "00", "7", "12",
    "2147483647", "2147483648", "9" * 60, "0" * 12, "\u0667", "\u0663\u0660", "\uff11\uff12",
    "\u0e53", "\U0001d7ce", "\u00b2", "\u2155", "reveal", "flag", "REVEAL", "Flag", "dig",
    "a", "Z", "crane", "CRANE", "\u0131", "\u017f", "\u0130", "\u212a", "\u00e9", "\u00df",
    "\ufb05", "\ufffd", "\U0001f600", "\u6f22", "x", ".", ",", "-1", "+3", "\\boxed{}",
    "\\boxed{\\boxed{1}}", "I guess ", "Answer: ", "up", "Up", "down", "LEFT", "left", "right",
    "r\u0130ght", "r\u0131ght", "upp", "Down", "\\boxed{up}", "\\boxed{rIGHT}",
)  # fmt: skip


def grammar_key(grammar: Grammar) -> tuple[Any, ...]:
    """Grammars with one key parse alike up to their sizes (type, regex, flags)."""
    return (type(grammar).__name__, grammar.pattern.pattern, grammar.pattern.flags)


def game_grammars() -> dict[str, Grammar]:
    """One grammar per distinct regex used by the registered games (the largest size
    where sizes differ), plus :class:`BoxedInts` and a case-insensitive
    :class:`BoxedWord` directly; keyed by a readable name."""
    found: dict[tuple[Any, ...], tuple[str, Grammar]] = {}
    for env_id in gemjax.list_envs():
        grammar = gemjax.make(env_id).grammar
        key = grammar_key(grammar)
        if key not in found or getattr(grammar, "size", 0) > getattr(found[key][1], "size", 0):
            found[key] = (env_id.removeprefix("game:"), grammar)
    for grammar in (BoxedInts(("row", "col", "value")), BoxedInts(("n",))):
        found.setdefault(grammar_key(grammar), (f"BoxedInts{len(grammar.int_slots)}", grammar))
    directions = BoxedWord(("up", "down", "left", "right"), case_sensitive=False)
    found.setdefault(grammar_key(directions), ("BoxedWord-ignorecase", directions))
    return dict(found.values())


def random_action(grammar: Grammar, rng: random.Random) -> np.ndarray:
    """A random kernel action (including out-of-range and format-error ones)."""
    probe = np.asarray(grammar.parse("").action)
    if probe.ndim == 0:
        return np.asarray(rng.choice([0, 1, rng.randrange(100), rng.randrange(2**31)]))
    action = np.asarray([rng.randrange(-1, 60) for _ in range(probe.shape[0])], np.int64)
    action[0] = rng.randrange(-1, probe.shape[0] + 1)
    if isinstance(grammar, BoxedLetters):
        action[1:] = [rng.randrange(0, len(grammar.alphabet) + 2) for _ in action[1:]]
    return action


def random_text(rng: random.Random, grammar: Grammar) -> str:
    """A response: pieces, a rendered valid action now and then, random characters."""
    parts = []
    for _ in range(rng.randrange(0, 14)):
        roll = rng.random()
        if roll < 0.15:
            parts.append(grammar.render(random_action(grammar, rng)))
        elif roll < 0.25:
            parts.append(chr(rng.randrange(0x20, 0x3100)))
        else:
            parts.append(rng.choice(PIECES))
    return "".join(parts)


class Vocabulary:
    """A tokenizer's byte table and a way to write any bytes as token ids."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.table = token_bytes(tokenizer)
        singles = {piece: i for i, piece in enumerate(self.table) if len(piece) == 1}
        self.byte_ids = [singles[bytes([b])] for b in range(256)]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def raw(self, data: bytes) -> list[int]:
        """One single-byte token per byte (any byte string, valid UTF-8 or not)."""
        return [self.byte_ids[b] for b in data]

    def window_text(self, ids: list[int], max_bytes: int) -> str:
        """The text the device reads: the last ``max_bytes`` byte slots, decoded."""
        slots: list[int | None] = []
        for index in ids:
            piece = self.table[index] if 0 <= index < len(self.table) else b""
            slots.extend(piece if piece else [None])
        window = bytes(b for b in slots[-max_bytes:] if b is not None)
        return window.decode("utf-8", errors="replace")


def token_cases(vocab: Vocabulary, grammar: Grammar, rng: random.Random) -> Iterator[list[int]]:
    """An endless mix of id sequences: encoded responses, random ids, broken UTF-8."""
    size = len(vocab.table)
    while True:
        roll = rng.random()
        text = random_text(rng, grammar)
        if roll < 0.4:
            yield vocab.encode(text)
        elif roll < 0.6:
            yield [rng.randrange(size) for _ in range(rng.randrange(0, 40))]
        elif roll < 0.8:  # valid text with its bytes cut and spliced with junk
            data = bytearray(text.encode("utf-8"))
            for _ in range(rng.randrange(1, 4)):
                at = rng.randrange(len(data) + 1)
                junk = bytes(rng.choice([0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xFF]))
                data[at:at] = junk * rng.randrange(1, 3)
            if data and rng.random() < 0.5:
                del data[rng.randrange(len(data))]
            yield vocab.raw(bytes(data))
        else:  # encoded text with random ids spliced in
            ids = vocab.encode(text)
            for _ in range(rng.randrange(1, 4)):
                ids.insert(rng.randrange(len(ids) + 1), rng.randrange(size))
            yield ids


def pad(cases: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """int32[n, width] ids (cut to ``width``) and int32[n] lengths."""
    ids = np.zeros((len(cases), width), np.int32)
    lengths = np.zeros(len(cases), np.int32)
    for row, case in enumerate(cases):
        case = case[:width]
        ids[row, : len(case)] = case
        lengths[row] = len(case)
    return ids, lengths


def disagreements(
    parser: TokenParser, parsed: Any, expected: list[ParsedAction], texts: list[str]
) -> list[str]:
    """Descriptions of the rows where the device parse (batched ``DeviceParsed`` as
    numpy) differs from the host parse: action, ok, and every echo (a truncated
    echo must be a prefix of the host text)."""
    capacity = parser.program.echo_capacity
    problems = []
    for row, host in enumerate(expected):
        action = np.asarray(parsed.action[row])
        issues = []
        if not np.array_equal(action, np.asarray(host.action)) or bool(parsed.ok[row]) != host.ok:
            issues.append(f"action {action} ok {bool(parsed.ok[row])} vs {host.action} {host.ok}")
        for slot in parser.program.reader.slots:
            echo = parsed.echoes[slot]
            present, truncated = bool(echo.present[row]), bool(echo.truncated[row])
            text = "".join(map(chr, echo.chars[row][: int(echo.length[row])]))
            want = host.echoes.get(slot)
            if present != (want is not None):
                issues.append(f"{slot} present {present} vs {want!r}")
            elif want is not None and (
                (text, truncated) != (want[:capacity], len(want) > capacity)
                or any(echo.chars[row][int(echo.length[row]) :])
            ):
                issues.append(f"{slot} {text!r} (truncated {truncated}) vs {want!r}")
        if issues:
            problems.append(f"{texts[row]!r}: " + "; ".join(issues))
    return problems
