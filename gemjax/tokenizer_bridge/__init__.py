"""The token bridge: a game's text (declared in :mod:`gemjax.text`) as token ids.

The text layer's names are re-exported here. On device: ``bridge``
(:class:`TokenBridge`: observations, suffixes and prompts rendered to token ids,
actions parsed from token ids, inside ``jit``), built on ``render`` (message
programs, segments, token programs) and ``parse`` (the regex compiler, UTF-8
decoding, the token pass and :class:`TokenParser`); ``tokenizers`` loads tokenizers
offline. Those need transformers and are imported on first use.
"""

import importlib
from typing import Any

from gemjax import text

_LAZY = {
    "Prompt": "gemjax.tokenizer_bridge.bridge",
    "TokenBridge": "gemjax.tokenizer_bridge.bridge",
    "TokenParser": "gemjax.tokenizer_bridge.parse",
    "load_tokenizer": "gemjax.tokenizer_bridge.tokenizers",
}


def __getattr__(name: str) -> Any:
    """The device bridge's names, imported on first use (they load transformers), and
    the text layer's (:mod:`gemjax.text`), re-exported."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in text.__all__:
        return getattr(text, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [*text.__all__, "Prompt", "TokenBridge", "TokenParser", "load_tokenizer"]
