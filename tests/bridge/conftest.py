"""Shared tokenizers for the bridge tests (built once per session, cached on disk)."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerBase

from gemjax.tokenizer_bridge.tokenizers import load_tokenizer


@pytest.fixture(scope="session")
def qwen3() -> PreTrainedTokenizerBase:
    """The offline Qwen3 tokenizer."""
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def byte_tokenizer() -> PreTrainedTokenizerBase:
    """The byte tokenizer."""
    return load_tokenizer("bytes")
