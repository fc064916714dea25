"""The token bridge: a game's text (declared in :mod:`gemjax.text`) as token ids.

The text layer's names are re-exported here. On device: ``bridge``
(:class:`TokenBridge`: observations, suffixes and prompts rendered to token ids,
actions parsed from token ids, inside ``jit``), built on ``device_render``,
``segments`` and ``device_parse``; ``tokenizers`` loads tokenizers offline. Those
need transformers and are imported on first use.
"""

import importlib
from typing import Any

from gemjax.text import (
    Board,
    BoxedCommand,
    BoxedInt,
    BoxedIntList,
    BoxedInts,
    BoxedLetters,
    Choice,
    Echo,
    Grammar,
    Int,
    IntList,
    MessageTable,
    ParsedAction,
    SymbolList,
    Template,
)

_LAZY = {
    "Prompt": "gemjax.tokenizer_bridge.bridge",
    "TokenBridge": "gemjax.tokenizer_bridge.bridge",
    "TokenParser": "gemjax.tokenizer_bridge.device_parse",
    "load_tokenizer": "gemjax.tokenizer_bridge.tokenizers",
}


def __getattr__(name: str) -> Any:
    """The device bridge's names, imported on first use (they load transformers)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Board",
    "BoxedCommand",
    "BoxedInt",
    "BoxedIntList",
    "BoxedInts",
    "BoxedLetters",
    "Choice",
    "Echo",
    "Grammar",
    "Int",
    "IntList",
    "MessageTable",
    "ParsedAction",
    "Prompt",
    "SymbolList",
    "Template",
    "TokenBridge",
    "TokenParser",
    "load_tokenizer",
]
