"""Action grammars: each one a host parser with GEM's exact regex semantics and the
device reader the token bridge runs for it, in one module.

``base`` holds the protocol (:class:`Grammar`, :class:`ParsedAction`) and ``reader``
the device-reader protocol (:class:`Reader`) with the number reading readers share;
``fields`` (:class:`BoxedInt`, :class:`BoxedInts`, :class:`BoxedCommand`),
``int_list`` (:class:`BoxedIntList`), ``letters`` (:class:`BoxedLetters`),
``choices`` (:class:`BoxedChoices`) and ``choice`` (:class:`BoxedWord`) are the
grammars the games use. A new grammar is one more module: a :class:`Grammar`
subclass (``pattern``, ``parse``, ``render``, ``device_reader``) and its
:class:`Reader`.
"""

from gemjax.text.grammar.base import (
    INT32_MAX_DIGITS,
    Grammar,
    ParsedAction,
    clamp_decimal,
    normalise_digits,
)
from gemjax.text.grammar.choice import BoxedWord, WordReader
from gemjax.text.grammar.choices import BoxedChoices, ChoicesReader
from gemjax.text.grammar.fields import BoxedCommand, BoxedInt, BoxedInts, FieldsReader
from gemjax.text.grammar.int_list import BoxedIntList, ListReader
from gemjax.text.grammar.letters import (
    IGNORECASE_EXTRA_LETTERS,
    WHITESPACE_BUT_SPACE,
    BoxedLetters,
    LettersReader,
)
from gemjax.text.grammar.reader import INT32_MAX, Feature, Reader, Write

__all__ = [
    "IGNORECASE_EXTRA_LETTERS",
    "INT32_MAX",
    "INT32_MAX_DIGITS",
    "WHITESPACE_BUT_SPACE",
    "BoxedChoices",
    "BoxedCommand",
    "BoxedInt",
    "BoxedIntList",
    "BoxedInts",
    "BoxedLetters",
    "BoxedWord",
    "ChoicesReader",
    "Feature",
    "FieldsReader",
    "Grammar",
    "LettersReader",
    "ListReader",
    "ParsedAction",
    "Reader",
    "WordReader",
    "Write",
    "clamp_decimal",
    "normalise_digits",
]
