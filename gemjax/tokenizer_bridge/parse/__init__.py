"""Parse ``\\boxed{...}`` actions from generated token ids on device, as GEM would.

:class:`TokenParser` (``parser``) compiles a host grammar (:mod:`gemjax.text.grammar`)
and a byte-level tokenizer into small tables once, on the host; its
``parse(ids, length)`` is then a total, jittable, vmappable function that returns
what ``grammar.parse`` returns for ``tokenizer.decode(ids[:length])``: the same
kernel action, ``ok`` and echo texts.

A batch is read in two passes. A **token pass** (one scan step per token id,
carrying the tracker state alone: one lookup in a table of what each class of whole
tokens does to it, ``token_pass``) marks the tokens where a well-formed match closes;
the last one, the token where its opener starts and the match's byte span then
follow at once. A **window** of a few bytes from that token is then read: its bytes
gathered and decoded all at once (``utf8``), the tracker run over its symbols, and
the reader over the last match's content only
(:meth:`~gemjax.tokenizer_bridge.parse.program.GrammarProgram.parse_symbols`).
Responses the token pass cannot vouch for (a token that is a piece of a character, a
last match longer than the window, more than ``max_bytes`` bytes) get the **byte
reading** below instead (their last ``max_bytes`` byte slots, see Capacities), lane
by lane (:func:`~gemjax.lanes.with_fallback`). Both readings give the same result.

The byte reading (one ``lax.scan`` over byte positions; under ``vmap`` each step is a
handful of vector operations over the whole batch):

1. **Bytes.** A pointer walks the token ids and reads each token's bytes from one
   flat table (``tokenizers.token_bytes``).
2. **UTF-8** (``utf8``). A decoder state machine reproduces
   ``bytes.decode("utf-8", "replace")``.
3. **Symbols** (``regex``). A two-level table maps each code point to a *symbol*:
   code points that every part of the grammar treats alike share one.
4. **Matches** (``regex``). The content regex is compiled to a DFA; one small
   transition table tracks the opener, the content and the closer at once, and
   GEM's "last well-formed match" is the last one the scan sees close.
5. **Reading** (``program``). The grammar's device reader
   (:meth:`~gemjax.text.grammar.Grammar.device_reader`, defined beside the grammar)
   folds each content character into its fields (numbers as ``int()`` reads them,
   clamped to ``2**31 - 1``; words through ``str.lower``/``str.upper``) and says
   where it lands in each echo text. The reading of the candidate being scanned is
   committed when its closer arrives.
6. **Echoes** (``program``). After the scan one scatter writes the committed
   candidate's echo characters into fixed buffers
   (:class:`~gemjax.tokenizer_bridge.device_types.EchoText`).

**Capacities.** A response is read through a window of ``max_bytes`` byte slots:
every token takes as many slots as it has bytes (at least one; ids with no bytes,
including ids outside the vocabulary, take one slot and add no text). When a
response needs more slots, only its **last** ``max_bytes`` slots are read (GEM keeps
the last match, and models put their answer last) and :meth:`TokenParser.overflow`
is True; the parse then equals the host parse of the decoded window, which equals
the host parse of the whole text whenever the last match lies in the window. An
echo longer than ``echo_capacity`` characters is cut and flagged ``truncated``.
"""

from gemjax.tokenizer_bridge.parse.parser import (
    DEFAULT_MAX_BYTES,
    DEFAULT_WINDOW_BYTES,
    TokenParser,
    echo_strings,
)
from gemjax.tokenizer_bridge.parse.program import (
    DEFAULT_ECHO_CAPACITY,
    GrammarProgram,
    compile_grammar,
)

__all__ = [
    "DEFAULT_ECHO_CAPACITY",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_WINDOW_BYTES",
    "GrammarProgram",
    "TokenParser",
    "compile_grammar",
    "echo_strings",
]
