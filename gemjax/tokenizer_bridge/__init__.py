"""The text bridge: game messages and action grammars, declared once.

``templates`` holds the message declarations and their host renderer; ``grammar``
the host parsers with GEM's exact regex semantics.
"""

from gemjax.tokenizer_bridge.grammar import (
    BoxedCommand,
    BoxedInt,
    BoxedIntList,
    BoxedInts,
    BoxedLetters,
    Grammar,
    ParsedAction,
)
from gemjax.tokenizer_bridge.templates import (
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
