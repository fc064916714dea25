"""The device parser agrees with the host grammars on every input (issue 5).

For every grammar configuration of every registered game (and ``BoxedInts``), with
``qwen3`` and ``bytes``: adversarial strings, rendered valid actions, random strings,
random token ids and broken UTF-8, compared batched (one jit per grammar and
tokenizer) with ``grammar.parse(tokenizer.decode(ids[:length]))``: action, ok and echo
texts; plus hypothesis over Unicode text, the overflow window, and the UTF-8 decoder
against Python's on random bytes.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fuzz_cases import (
    PIECES,
    Vocabulary,
    disagreements,
    game_grammars,
    pad,
    random_action,
    random_text,
    token_cases,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import quick_first

from gemjax.lanes import DEFAULT_SHARE
from gemjax.text.grammar import BoxedInt, BoxedLetters
from gemjax.text.grammar.reader import decimal_text
from gemjax.tokenizer_bridge.parse import TokenParser, compile_grammar
from gemjax.tokenizer_bridge.parse.utf8 import utf8_init, utf8_step, utf8_whole

GRAMMARS = game_grammars()
WIDTH = 48  # token ids per case
MAX_BYTES = 160
CASES = 256  # random cases per grammar and tokenizer


def adversarial_texts() -> list[str]:
    """Hand-written attacks: nesting, unclosed and repeated boxes, Unicode digits and
    spaces, huge numbers, control characters, case, the last-match rule."""
    big = "9" * 60
    return [
        "", "\\boxed{}", "\\boxed{5}", "\\boxed{05}", "\\boxed{0000}", "\\boxed{ 5}",
        "\\boxed{5 }", "\\boxed{\\boxed{7}}", "\\boxed{1\\boxed{2}", "\\boxed{3}}", "\\boxed{{4}",
        "\\boxed{12", "\\boxed{1} \\boxed{x}", "\\boxed{x} \\boxed{2}", "\\boxed{1}\\boxed{2}",
        "\\boxed{" + big + "}", "\\boxed{" + "0" * 30 + big + "}", "\\boxed{2147483647}",
        "\\boxed{2147483648}", "\\boxed{4294967297}", "\\boxed{\u0667\u0663}",
        "\\boxed{\uff11\uff12}", "\\boxed{\U0001d7ce\U0001d7d7}", "\\boxed{\u00b2}",
        "\\boxed{1\u00a02}", "\\boxed{1\u30002}", "\\boxed{1\x1c2}", "\\boxed{1\x852}",
        "\\boxed{1\t\n2}", "\\boxed{1\x002}", "\\boxed{\x7f}", "\\boxed{reveal 3 4}",
        "\\boxed{REVEAL 3 4}", "\\boxed{Flag 0 07}", "\\boxed{dig 1 2}", "\\boxed{reveal 3  4}",
        "\\boxed{reveal\u00a0\u0663 4}", "\\boxed{reveal 3 " + big + "}", "\\boxed{flagg 1 1}",
        "\\boxed{fla 1 1}", "\\boxed{1 2 3}", "\\boxed{1 2 3 4 5 6}", "\\boxed{1  2\u3000\u30003}",
        "\\boxed{" + " ".join([big] * 3) + "}", "\\boxed{crane}", "\\boxed{CRANE}",
        "\\boxed{c r a n e}", "\\boxed{cr\tane}", "\\boxed{cr\u00a0ane}", "\\boxed{\u0131\u017f}",
        "\\boxed{\u0130\u212a}", "\\BOXED{abc}", "\\Boxed{q}", "\\boxed{abcdefghij}",
        "\\boxed{e}", "\\boxed{\u00e9}", "\\boxed{\u00df}", "\\boxed{\ufb05}", "\\boxed{\ufffd}",
        "\\boxed{1}\ufffd", "\\\\boxed{3}", "\\boxed{7} trailing \\boxed{", "\\boxed{7} \\boxed{}",
        "\\boxed{up}", "\\boxed{Up}", "\\boxed{RIGHT}", "\\boxed{r\u0130ght}",
        "\\boxed{r\u0131ght}", "\\boxed{left} \\boxed{Down}", "\\boxed{down} \\boxed{upp}",
        "\\boxed{ up}", "\\boxed{\\boxed{left}}",
        "\\boxed{UP}", "\\boxed{leftt}", "\\boxed{r\u0130GHT} \\boxed{}", "\\boxed{LEFT\u0130}",
        "\\boxed{0 0 d}", "\\boxed{1 2 G}", "\\boxed{1  2\tz}", "\\boxed{1 2 dd}",
        "\\boxed{1 2 \u0131}", "\\boxed{1 2 \u212a}", "\\boxed{\u0663 2\u3000K}",
        "\\boxed{1 2 7}", "\\boxed{12 a}", "\\boxed{1 2 3 q}", "\\boxed{1 2  }",
    ]  # fmt: skip


# The quick tier (-m "not slow") reads with qwen3; CI with both.
@pytest.fixture(scope="module", params=["qwen3", pytest.param("bytes", marks=pytest.mark.slow)])
def vocab(request: pytest.FixtureRequest) -> Vocabulary:
    name = "byte_tokenizer" if request.param == "bytes" else "qwen3"
    return Vocabulary(request.getfixturevalue(name))


_COMPILED: dict[tuple[str, int], tuple[TokenParser, Callable[..., Any]]] = {}


def batched(name: str, vocab: Vocabulary) -> tuple[TokenParser, Callable[..., Any]]:
    """The parser of grammar ``name`` and its jitted, vmapped ``parse_full`` (once)."""
    key = (name, id(vocab.tokenizer))
    if key not in _COMPILED:
        parser = TokenParser(GRAMMARS[name], vocab.tokenizer, max_bytes=MAX_BYTES)
        _COMPILED[key] = parser, jax.jit(jax.vmap(parser.parse_full))
    return _COMPILED[key]


def check(name: str, vocab: Vocabulary, cases: list[list[int]]) -> None:
    """Parse ``cases`` on device in one batch and compare with the host oracle."""
    parser, parse = batched(name, vocab)
    ids, lengths = pad(cases, WIDTH)
    texts = [
        vocab.window_text(list(row[:n]), MAX_BYTES) for row, n in zip(ids, lengths, strict=True)
    ]
    for row, n in enumerate(lengths):
        if not bool(parser.overflow(ids[row], n)):
            assert vocab.tokenizer.decode(list(ids[row, :n])) == texts[row]
    expected = [parser.grammar.parse(text) for text in texts]
    parsed = jax.tree.map(np.asarray, parse(ids, lengths))
    problems = disagreements(parser, parsed, expected, texts)
    assert not problems, f"{len(problems)} disagreements, first: " + "\n".join(problems[:5])


@pytest.mark.parametrize("name", quick_first(sorted(GRAMMARS)))
def test_agrees_with_host(name: str, vocab: Vocabulary) -> None:
    grammar = GRAMMARS[name]
    rng = random.Random(hash(name) % 1000)
    texts = adversarial_texts() + [grammar.render(random_action(grammar, rng)) for _ in range(32)]
    cases = [vocab.encode(t) for t in texts] + [vocab.raw(t.encode()) for t in texts[:40]]
    stream = token_cases(vocab, grammar, rng)
    cases += [next(stream) for _ in range(CASES)]
    check(name, vocab, cases)


@pytest.mark.parametrize("name", quick_first(sorted(GRAMMARS)))
def test_token_pass_and_fallbacks(name: str, qwen3: Any) -> None:
    """The token pass reads every lane it vouches for as the host does; batches with
    none, a few, many and nearly all lanes it does not vouch for (tokens that are
    pieces of a character, matches longer than the window) agree with the host,
    whether the hard lanes are re-read in one chunk, in several, or with every lane."""
    vocab = Vocabulary(qwen3)
    parser, parse = batched(name, vocab)
    grammar = parser.grammar
    rng = random.Random(7)
    pool = [vocab.encode(grammar.render(random_action(grammar, rng))) for _ in range(64)]
    stream = token_cases(vocab, grammar, rng)
    pool += [next(stream) for _ in range(448)]
    ids, lengths = pad(pool, WIDTH)
    texts = [vocab.window_text(list(r[:n]), MAX_BYTES) for r, n in zip(ids, lengths, strict=True)]
    expected = [grammar.parse(text) for text in texts]
    located, hard = jax.jit(parser._token_pass)(ids, lengths)
    fast = jax.tree.map(np.asarray, jax.jit(parser._read_windows)(located))
    hard = np.asarray(hard)
    easy = np.flatnonzero(~hard)
    fast_easy = jax.tree.map(lambda x: x[easy], fast)
    problems = disagreements(parser, fast_easy, [expected[i] for i in easy], texts)
    assert not problems, problems[:5]
    assert len(easy) >= 64 and hard.sum() >= 64
    few = -(-64 // DEFAULT_SHARE)
    for count in (0, few // 2, 40, 64 - few // 2):  # none, one chunk, many, all re-read
        rows = np.concatenate([np.flatnonzero(hard)[:count], easy[: 64 - count]])
        parsed = jax.tree.map(np.asarray, parse(ids[rows], lengths[rows]))
        chosen = [expected[i] for i in rows]
        problems = disagreements(parser, parsed, chosen, [texts[i] for i in rows])
        assert not problems, f"{count} hard lanes: {problems[:5]}"


def test_every_game_grammar_is_covered() -> None:
    names = {type(g).__name__ for g in GRAMMARS.values()}
    assert {
        "BoxedInt",
        "BoxedIntList",
        "BoxedCommand",
        "BoxedLetters",
        "BoxedInts",
        "BoxedWord",
    } <= names


def test_overflow_reads_the_last_bytes(qwen3: Any) -> None:
    vocab = Vocabulary(qwen3)
    grammar = BoxedInt("guess")
    parser = TokenParser(grammar, qwen3, max_bytes=24, echo_capacity=8)
    texts = [
        "\\boxed{1} " + "x" * 40 + " \\boxed{2}",  # the last box is in the window
        "\\boxed{1}" + "y" * 40,  # the only box fell out of the window
        "\\boxed{3}" + "\u6f22" * 8 + "\\boxed{4}",  # cut inside a character
        "\\boxed{" + "9" * 12 + "}",  # fits; its echo does not
    ]
    ids, lengths = pad([vocab.encode(t) for t in texts], 40)
    parsed = jax.jit(jax.vmap(parser.parse_full))(ids, lengths)
    overflow = jax.jit(jax.vmap(parser.overflow))(ids, lengths)
    assert np.asarray(overflow).tolist() == [True, True, True, False]
    assert np.asarray(parsed.action).tolist() == [2, 0, 4, 2**31 - 1]
    windows = [vocab.window_text(list(row[:n]), 24) for row, n in zip(ids, lengths, strict=True)]
    assert [grammar.parse(w).action for w in windows] == np.asarray(parsed.action).tolist()
    echo = parsed.echoes["guess"]
    assert np.asarray(echo.truncated).tolist() == [False, False, False, True]
    assert int(echo.length[3]) == 8


def test_int_digit_limit_is_a_format_error() -> None:
    """``int()`` refuses more than ``sys.get_int_max_str_digits()`` digits (read when
    the grammar is compiled); 640 is the smallest limit Python allows."""
    saved = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        grammar = BoxedInt("guess")
        parse = jax.jit(compile_grammar(grammar).parse_chars)
        for digits in ("7" * 640, "7" * 641, "0" * 641 + "5"):
            text = "\\boxed{" + digits + "}"
            parsed = parse(jnp.asarray([ord(c) for c in text] + [0] * 8), len(text))
            host = grammar.parse(text)
            assert (int(parsed.action), bool(parsed.ok)) == (host.action, host.ok), len(digits)
    finally:
        sys.set_int_max_str_digits(saved)


_CHAR_GRAMMARS = ("Minesweeper", "Wordle", "Game2048")


@pytest.fixture(scope="module")
def char_parsers() -> dict[str, Callable[..., Any]]:
    return {
        name: jax.jit(compile_grammar(GRAMMARS[name]).parse_chars)
        for name in GRAMMARS
        if name.startswith(_CHAR_GRAMMARS)
    }


@settings(max_examples=100, deadline=None)
@given(
    text=st.lists(
        st.one_of(st.sampled_from(PIECES), st.characters(), st.text(max_size=3)), max_size=12
    ).map("".join)
)
def test_hypothesis_text(char_parsers: dict[str, Callable[..., Any]], text: str) -> None:
    chars = np.zeros(96, np.int32)
    codes = [ord(c) for c in text[:96]]
    chars[: len(codes)] = codes
    for name, parse in char_parsers.items():
        parser = _CharAdapter(name)
        parsed = jax.tree.map(lambda x: np.asarray(x)[None], parse(chars, len(codes)))
        host = GRAMMARS[name].parse(text[:96])
        assert not disagreements(parser, parsed, [host], [text]), text  # type: ignore[arg-type]


class _CharAdapter:
    """Lets :func:`disagreements` read a grammar program's slots and capacity."""

    def __init__(self, name: str) -> None:
        self.program = compile_grammar(GRAMMARS[name])


def test_utf8_decoder_matches_python() -> None:
    rng = np.random.default_rng(0)
    interesting = np.asarray([0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xA0, 0xED,
                              0x9F, 0xEF, 0xF0, 0x90, 0xF4, 0x8F, 0xF5, 0xFF])  # fmt: skip
    data = np.where(
        rng.random((512, 12)) < 0.7,
        rng.choice(interesting, (512, 12)),
        rng.integers(0, 256, (512, 12)),
    ).astype(np.int32)

    def decode(row: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        def step(dec: Any, byte: jax.Array) -> tuple[Any, Any]:
            dec, event = utf8_step(dec, byte, jnp.bool_(True))
            return dec, (event.broken, event.present, event.code)

        final, out = jax.lax.scan(step, utf8_init(), row)
        return (*out, final.need > 0)  # type: ignore[return-value]

    broken, present, code, pending = map(np.asarray, jax.jit(jax.vmap(decode))(data))
    for i, row in enumerate(data):
        chars = []
        for j in range(row.shape[0]):
            chars += ["\ufffd"] * bool(broken[i, j]) + [chr(code[i, j])] * bool(present[i, j])
        chars += ["\ufffd"] * bool(pending[i])
        assert "".join(chars) == bytes(row.tolist()).decode("utf-8", "replace"), row


def test_whole_utf8_decoder_matches_python() -> None:
    """The all-at-once decoder of well-formed UTF-8 (the window of the token pass):
    characters at their lead bytes, one cut by the end of the bytes left out."""
    rng = np.random.default_rng(1)
    alphabet = ["a", "{", "7", "\u00e9", "\u0663", "\u3000", "\u20ac", "\U0001d7d9", "\n"]
    width = 12
    rows, held, expected = [], [], []
    for _ in range(256):
        data = "".join(rng.choice(alphabet, 8)).encode("utf-8")
        count = int(rng.integers(0, width + 1))
        rows.append(list(data[:width]) + [0] * max(width - len(data), 0))
        held.append([j < min(count, len(data)) for j in range(width)])
        expected.append(data[: min(count, len(data))].decode("utf-8", "ignore"))
    present, codes = jax.jit(jax.vmap(utf8_whole))(
        jnp.asarray(rows, jnp.int32), jnp.asarray(held, jnp.bool_)
    )
    for row_present, row_codes, text in zip(
        np.asarray(present), np.asarray(codes), expected, strict=True
    ):
        assert "".join(chr(c) for c, p in zip(row_codes, row_present, strict=True) if p) == text


def test_decimal_text() -> None:
    for value in (0, 7, 10, 99, 123456, 2**31 - 1):
        chars, length = decimal_text(jnp.int32(value), 12)
        assert "".join(map(chr, np.asarray(chars)[: int(length)])) == str(value)


def test_letters_pattern_must_be_one_group() -> None:
    grammar = BoxedLetters(r"\\boxed{([a-z]+)!}", "abc", 3, "guess", "letters")
    with pytest.raises(NotImplementedError):
        compile_grammar(grammar)


def test_text_oracle_is_the_tokenizer(qwen3: Any) -> None:
    vocab = Vocabulary(qwen3)
    rng = random.Random(1)
    for _ in range(50):
        text = random_text(rng, BoxedInt("guess"))
        assert vocab.window_text(vocab.encode(text), 10**6) == qwen3.decode(vocab.encode(text))
