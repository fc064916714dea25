"""Offline tokenizers: qwen3 against tiktoken, the byte tokenizer, byte tables."""

from __future__ import annotations

import random

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe

from gemjax.tokenizer_bridge.tokenizers import (
    CHAT_SPECIALS,
    QWEN_PATTERN,
    QWEN_SPECIAL_START,
    _save_atomically,
    load_tokenizer,
    qwen_tiktoken_file,
    token_byte_matrix,
    token_bytes,
)


@pytest.fixture(scope="module")
def reference() -> tiktoken.Encoding:
    """Qwen's BPE straight from tiktoken: the reference encoder."""
    specials = {s: QWEN_SPECIAL_START + i for i, s in enumerate(CHAT_SPECIALS)}
    return tiktoken.Encoding(
        "qwen",
        pat_str=QWEN_PATTERN,
        mergeable_ranks=load_tiktoken_bpe(str(qwen_tiktoken_file())),
        special_tokens=specials,
    )


def random_texts(count: int, seed: int) -> list[str]:
    """Game-like text, digits, whitespace runs, punctuation and random Unicode."""
    rng = random.Random(seed)
    alphabet = (
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,!?'\"{}[]\\()-_:"
        "é漢字٣０\u00a0\u3000\U0001f600"
    )
    words = ["\\boxed{", "}", "You", " guessed", "'s", "'LL", "  ", "\n\n", "R1 C2", "1234567"]
    texts = []
    for _ in range(count):
        parts = [
            rng.choice(words) if rng.random() < 0.3 else rng.choice(alphabet)
            for _ in range(rng.randrange(0, 60))
        ]
        texts.append("".join(parts))
    return texts


def tiktoken_ids(reference: tiktoken.Encoding, text: str) -> list[int]:
    """The reference ids: a special token's text inside ``text`` is that special token,
    as in a Hugging Face tokenizer (``<|im_end|>`` is one id, not seven)."""
    return reference.encode(text, allowed_special="all")


def test_qwen3_matches_tiktoken_on_random_text(qwen3, reference):
    for text in random_texts(500, seed=0):
        assert qwen3.encode(text, add_special_tokens=False) == tiktoken_ids(reference, text), text
    for text in ("<|im_end|>", "a<|im_start|>user\n<|endoftext|>b"):
        assert qwen3.encode(text, add_special_tokens=False) == tiktoken_ids(reference, text), text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_qwen3_matches_tiktoken_on_any_unicode(qwen3, reference, text):
    assert qwen3.encode(text, add_special_tokens=False) == tiktoken_ids(reference, text)


def test_qwen3_specials_and_digits(qwen3):
    ids = qwen3.convert_tokens_to_ids(list(CHAT_SPECIALS))
    assert ids == [151643, 151644, 151645]
    assert len(qwen3.encode("1234567890", add_special_tokens=False)) == 10
    text = "<|im_start|>user\nhi<|im_end|>"
    ids = qwen3.encode(text, add_special_tokens=False)
    assert ids[0] == 151644 and ids[-1] == 151645
    assert qwen3.decode(ids) == text


def test_qwen3_is_loaded_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMJAX_CACHE_DIR", str(tmp_path))
    built = load_tokenizer("qwen3")
    assert any(tmp_path.rglob("tokenizer.json"))
    loaded = load_tokenizer("qwen3")
    text = "At turn 3, you guessed 25. Too high!\n\\boxed{12}"
    assert loaded.encode(text) == built.encode(text)


def test_cache_saves_are_all_or_nothing(tmp_path, monkeypatch):
    """A save never leaves a half-written folder, keeps a complete copy that another
    process saved first, and replaces a partial one (left by older versions)."""
    monkeypatch.setenv("GEMJAX_CACHE_DIR", str(tmp_path))
    load_tokenizer("bytes")
    (folder,) = [p.parent for p in tmp_path.rglob("tokenizer.json")]
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # no staging left
    marker = folder / "saved-first"
    marker.write_text("")
    _save_atomically(load_tokenizer("bytes", cache=False), folder)
    assert marker.exists()  # the complete copy was kept
    (folder / "tokenizer.json").unlink()
    _save_atomically(load_tokenizer("bytes", cache=False), folder)
    assert (folder / "tokenizer.json").is_file() and not marker.exists()
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]


def test_bytes_tokenizer_is_one_token_per_byte():
    tokenizer = load_tokenizer("bytes", cache=False)
    text = "R1 é 漢 \\boxed{7}\n"
    assert tokenizer.encode(text, add_special_tokens=False) == list(text.encode("utf-8"))
    assert tokenizer.decode(list(text.encode("utf-8"))) == text
    assert tokenizer.convert_tokens_to_ids(list(CHAT_SPECIALS)) == [256, 257, 258]


def test_local_folder_and_unknown_names(tmp_path):
    load_tokenizer("bytes", cache=False).save_pretrained(str(tmp_path))
    assert load_tokenizer(str(tmp_path)).encode("ab", add_special_tokens=False) == [97, 98]
    with pytest.raises(ValueError, match="unknown tokenizer"):
        load_tokenizer("qwen-does-not-exist")


@pytest.mark.parametrize("name", ["qwen3", "bytes"])
def test_token_bytes_reproduce_decode(name, qwen3, byte_tokenizer):
    tokenizer = qwen3 if name == "qwen3" else byte_tokenizer
    table = token_bytes(tokenizer)
    matrix, lengths = token_byte_matrix(tokenizer)
    assert matrix.shape[0] == len(table) == lengths.shape[0]
    rng = random.Random(1)
    for text in random_texts(200, seed=2):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert b"".join(table[i] for i in ids).decode("utf-8") == text
    # Random id sequences (split UTF-8 sequences included) decode as the lossy join.
    for _ in range(200):
        ids = [rng.randrange(len(table)) for _ in range(rng.randrange(0, 20))]
        joined = b"".join(bytes(matrix[i, : lengths[i]]) for i in ids)
        assert tokenizer.decode(ids) == joined.decode("utf-8", errors="replace")
