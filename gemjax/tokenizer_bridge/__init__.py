"""The text bridge: game messages and action grammars, declared once.

``templates`` holds the message declarations and their host renderer; ``grammar``
the host parsers with GEM's exact regex semantics.
"""

from gemjax.tokenizer_bridge.grammar import BoxedInt, BoxedIntList, Grammar, ParsedAction
from gemjax.tokenizer_bridge.templates import Choice, Int, IntList, MessageTable, Template

__all__ = [
    "BoxedInt",
    "BoxedIntList",
    "Choice",
    "Grammar",
    "Int",
    "IntList",
    "MessageTable",
    "ParsedAction",
    "Template",
]
