"""The game text, declared once: message templates and action grammars.

``templates`` holds the slots, :class:`Template`, :class:`MessageTable` and the host
renderer; ``grammar`` the action grammars, each module a host parser with GEM's exact
regex semantics and the device reader the token bridge runs for it. The token bridge
(:mod:`gemjax.tokenizer_bridge`) compiles both for the device. Of gemjax, this layer
imports only :mod:`gemjax.types`.
"""

from gemjax.text.grammar import (
    BoxedCommand,
    BoxedInt,
    BoxedIntList,
    BoxedInts,
    BoxedLetters,
    Grammar,
    ParsedAction,
)
from gemjax.text.templates import (
    Board,
    Choice,
    Echo,
    Int,
    IntList,
    MessageTable,
    SymbolList,
    Template,
)

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
    "SymbolList",
    "Template",
]
