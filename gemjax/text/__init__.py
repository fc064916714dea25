"""The game text, declared once: message templates and action grammars.

``templates`` holds the slots, :class:`Template`, :class:`MessageTable` and the host
renderer; ``grammar`` the host action parsers with GEM's exact regex semantics. The
token bridge (:mod:`gemjax.tokenizer_bridge`) compiles both for the device. This
layer imports only :mod:`gemjax.types`.
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
