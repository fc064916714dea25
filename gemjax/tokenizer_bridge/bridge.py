"""``TokenBridge``: a game's text as token ids, rendered and parsed inside ``jit``.

Built once per (env, tokenizer) on the host; everything it returns is a pure,
jittable, vmappable function of arrays::

    bridge = TokenBridge(gemjax.make("game:GuessTheNumber-v0-hard"), load_tokenizer("qwen3"))
    obs = bridge.render(state, ts)               # TokenText(ids, length, overflow, canonical)
    prompt = bridge.prompt_start(ts)             # GEM's ``concat`` observation, step by step
    prompt = bridge.prompt_step(prompt, ts)
    text = bridge.render_prompt(prompt, state)   # instructions, observations, suffix
    action, ok = bridge.parse(ids, length)       # what ``grammar.parse(decode(ids))`` gives

Guarantees (tested for every registered game with ``qwen3`` and ``bytes``):
``tokenizer.decode(ids[:length])`` is the host text byte for byte whenever
``overflow`` is False; and the ids are ``tokenizer.encode(text)`` whenever
``canonical`` is True, which holds for everything the game prints itself (with
``qwen3``; always with ``bytes``). Text the player typed that the tables do not hold
(a word, a letter guess) is written one token per UTF-8 byte.

**Observations and suffixes** come from the game's token programs
(:mod:`~gemjax.tokenizer_bridge.render.token_programs`: canonical ids from host-tokenized
units, a few gathers a unit); the lanes those cannot vouch for are rendered from code
points and tokenized by segments (:mod:`~gemjax.tokenizer_bridge.render.segments`), as
prompts are.

**Prompts.** :meth:`prompt_start` / :meth:`prompt_step` keep a :class:`Prompt`: the
tokens of the observations so far but the newest, each followed by a line break as
GEM's ``maybe_add_new_line`` adds it, and the newest observation's code points;
:meth:`render_prompt` tokenizes the newest observation together with the suffix (and
the chat template's tail), so tokens that span those joins are canonical. With
``chat=True`` the text is wrapped in the ``qwen3_game`` template GEM's trainers use.
**Overflow rule:** a prompt longer than ``prompt_capacity`` tokens keeps its first
``prompt_capacity`` tokens and sets ``overflow``; once the history overflows it
stays overflowed until the next :meth:`prompt_start`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from transformers import PreTrainedTokenizerBase

from gemjax.checks import integer_array
from gemjax.core import Environment, TimeStep
from gemjax.lanes import chunk_lanes_for_backend, in_chunks, tree_where, with_fallback
from gemjax.text.templates import Board, MessageTable
from gemjax.tokenizer_bridge.device_types import DeviceParsed, EchoText, TokenText
from gemjax.tokenizer_bridge.parse import TokenParser, compile_grammar
from gemjax.tokenizer_bridge.render.programs import ProgramTable
from gemjax.tokenizer_bridge.render.segments import (
    END,
    OTHER_NEXT,
    SPECIAL_BASE,
    SegmentTokenizer,
    most_tokens,
)
from gemjax.tokenizer_bridge.render.token_programs import TokenPrograms

CHAT_PREFIX = (
    "<|im_start|>user\nYou are playing language games. Make valid actions to win.\nObservation: "
)
CHAT_TAIL = (
    "\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
SPECIALS = ("<|im_start|>", "<|im_end|>")
SAMPLES_PER_PROGRAM = 48
MIN_SAMPLES = 768  # sampled renderings per table at least
MAX_WORD_SEGMENTS = 200_000  # printed words x contexts tokenized ahead of time
STEP_ECHO_LENGTH = 24  # echo characters the short render buffer makes room for
# Lanes whose text does not fit the short buffer (resets, long echoes) are rendered
# again in full, a 32nd of the batch at a time (docs/performance.md: smaller chunks
# were faster).
RESET_SHARE = 32
_ASCII_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class Prompt(NamedTuple):
    """The running ``concat`` prompt of one episode (a pytree; vmap for batches).

    Attributes:
        history: tokens of every observation but the newest, each with its line break.
        newest: int32[obs_capacity] code points of the newest observation (with the
            chat prefix when it is the first and ``chat``).
        newest_length: int32[] its length.
        turns: int32[] observations after the reset one.
        newest_overflow: bool[] the newest observation is not the host text (it
            repeats an echo the parser cut); its tokens will carry ``overflow``.
    """

    history: TokenText
    newest: jax.Array
    newest_length: jax.Array
    turns: jax.Array
    newest_overflow: jax.Array


def _with_markers(text: str) -> str:
    """``text`` with each special token replaced by its marker code point."""
    for index, special in enumerate(SPECIALS):
        text = text.replace(special, chr(SPECIAL_BASE + index))
    return text


def _concat(
    first: jax.Array,
    first_length: jax.Array,
    second: jax.Array,
    second_length: jax.Array,
    capacity: int,
) -> tuple[jax.Array, jax.Array]:
    """``(first[:first_length] + second[:second_length])`` in a ``capacity`` buffer."""
    position = jnp.arange(capacity)
    take_second = position >= first_length
    index = jnp.where(take_second, position - first_length, position)
    values = jnp.where(
        take_second,
        second[jnp.clip(index, 0, second.shape[0] - 1)],
        first[jnp.clip(index, 0, first.shape[0] - 1)],
    )
    total = first_length + second_length
    return jnp.where(position < total, values, 0), jnp.minimum(total, capacity)


def _append_tokens(first: TokenText, second: TokenText) -> TokenText:
    """``first`` then ``second`` in a buffer of ``first``'s size (ids past each
    length are zeros, as every :class:`TokenText` has them): ``second`` is written in
    place, so the work is per id of ``second``, not of the buffer."""
    capacity = first.ids.shape[0]
    buffer = jnp.concatenate([first.ids, jnp.zeros(second.ids.shape, first.ids.dtype)])
    buffer = jax.lax.dynamic_update_slice(buffer, second.ids.astype(buffer.dtype), (first.length,))
    total = first.length + second.length
    return TokenText(
        buffer[:capacity],
        jnp.minimum(total, capacity).astype(jnp.int32),
        first.overflow | second.overflow | (total > capacity),
        first.canonical & second.canonical,
    )


def _add_line_break(chars: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
    """GEM's ``maybe_add_new_line``: a ``"\\n"`` unless empty or already ending in one."""
    last = chars[jnp.maximum(length - 1, 0)]
    add = (length > 0) & (last != ord("\n")) & (length < chars.shape[0])
    chars = jnp.where(add & (jnp.arange(chars.shape[0]) == length), ord("\n"), chars)
    return chars, length + add.astype(jnp.int32)


class TokenBridge:
    """Token ids of a game's text and actions, on device (see the module docstring).

    Args:
        env: a kernel env (``gemjax.make(id)``).
        tokenizer: a byte-level transformers tokenizer (``load_tokenizer``).
        capacity: token ids in a rendered observation or suffix (default: twice
            ``text_capacity``).
        prompt_capacity: token ids in a rendered prompt.
        text_capacity: code points one message (or suffix) may take (default: the
            longest text the templates can print, echoes at full capacity).
        echo_capacity: code points kept of text the player typed.
        max_tokens: token ids :meth:`parse` reads.
        seed: seed of the host sampling that builds the segment table.
        chunk_lanes: under ``vmap``, lanes rendered together, chunk after chunk
            ("auto": 128 on a CPU, where a batch whose text buffers fit the caches
            renders faster; the whole batch on an accelerator; None: the whole
            batch). Parsing works on token ids, small enough to gain nothing from it.

    Attributes:
        token_messages, token_suffix: the messages' and the suffix's token programs.
        step_tokens: ids of the short buffer :meth:`render` tries first (the most
            tokens a compiled step message prints).
        step_text: code points of the short buffer :meth:`render_codepoints` tries first.
        non_canonical: per message name (and ``"suffix"``), the fraction of sampled
            renderings (random slot values, no player text) that were not canonical
            at construction; messages not listed were always canonical.
        vocab: int32[V] sorted token ids the game's text and actions can use (the
            compact vocabulary; see :meth:`to_compact` / :meth:`to_full`).
    """

    def __init__(
        self,
        env: Environment,
        tokenizer: PreTrainedTokenizerBase,
        capacity: int | None = None,
        prompt_capacity: int = 4096,
        text_capacity: int | None = None,
        echo_capacity: int = 64,
        max_tokens: int = 256,
        seed: int = 0,
        chunk_lanes: int | Literal["auto"] | None = "auto",
    ) -> None:
        self.env = env
        self.chunk_lanes = chunk_lanes_for_backend(chunk_lanes)
        self.tokenizer = tokenizer
        self.prompt_capacity = prompt_capacity
        self.max_tokens = max_tokens
        specials = tuple(s for s in SPECIALS if s in tokenizer.get_vocab())
        self.chat_supported = specials == SPECIALS
        self.messages = ProgramTable(
            env.messages, echo_capacity, lead=(_with_markers(CHAT_PREFIX),)
        )
        with jax.ensure_compile_time_eval():  # tables are constants, even if built in jit
            # The grammar's device program (its reader, symbols and automaton), cached
            # for the parser: a grammar the device cannot read fails here, not at the
            # first parse.
            compile_grammar(env.grammar, self.messages.echo_capacity)
        self.suffix_table = MessageTable(suffix=env.suffix)
        self.suffix = ProgramTable(
            self.suffix_table, echo_capacity, trail=(_with_markers(CHAT_TAIL),)
        )
        self.text_capacity = text_capacity or max(self.messages.max_length, self.suffix.max_length)
        self.step_text = max(self.messages.longest_per_kind(STEP_ECHO_LENGTH)[1:], default=0)
        self.capacity = capacity or 2 * self.text_capacity
        self._tail = jnp.asarray([ord(c) for c in _with_markers(CHAT_TAIL)], jnp.int32)
        self.segments = SegmentTokenizer(tokenizer, specials)
        words = env.printed_words(env.default_params)
        self.token_messages = TokenPrograms(self.messages, self.segments, words)
        self.token_suffix = TokenPrograms(self.suffix, self.segments)
        self.step_programs = self.token_messages.kind_programs(
            range(1, len(self.messages.kind_base))
        )
        self.step_tokens = self.token_messages.longest(self.step_programs)
        self.non_canonical = self._build_table(np.random.default_rng(seed))
        self.vocab = self._vocabulary()
        self._parser: TokenParser | None = None

    # --- code points ----------------------------------------------------------------

    def event_chars(
        self,
        kind: jax.Array,
        args: jax.Array,
        echoes: Mapping[str, EchoText] | None = None,
        lead: Any = 0,
    ) -> tuple[jax.Array, jax.Array]:
        """``(code points int32[text_capacity], length)`` of one event's message (see
        :meth:`ProgramTable.render` for whether it is the host text)."""
        chars, length, _ = self.messages.render(kind, args, echoes, self.text_capacity, lead=lead)
        return chars, length

    def suffix_chars(self, state: Any, tail: Any = 0) -> tuple[jax.Array, jax.Array]:
        """``(code points, length)`` of the suffix of ``state`` (with the chat tail if set)."""
        args = self.suffix.args_from_values(self.env.suffix_values(state))
        chars, length, _ = self.suffix.render(
            jnp.int32(0), args, None, self.text_capacity, trail=tail
        )
        return chars, length

    # --- rendering --------------------------------------------------------------------

    def render(
        self,
        state: Any,
        ts: TimeStep,
        echoes: Mapping[str, EchoText] | None = None,
        capacity: int | None = None,
    ) -> TokenText:
        """Token ids of the observation ``gemjax.gem`` returns for ``ts`` (the
        instructions on reset). ``echoes``: the parser's, for messages that repeat
        what the player typed (:meth:`parse_full`). ``capacity``: token ids in the
        output (default :attr:`capacity`); a smaller one renders faster, and text that
        does not fit sets ``overflow``.

        A lane is rendered from its token program
        (:class:`~gemjax.tokenizer_bridge.render.token_programs.TokenPrograms`: canonical ids,
        a few gathers a unit) unless the program could not be tabulated, the lane
        prints a variant the tabulation excluded, or it repeats text the player typed;
        those lanes are rendered from code points (:meth:`render_codepoints`, or its
        full buffer alone when every step message has a token program: a smaller
        compile). Under ``vmap`` every lane first goes through the step messages'
        token programs in a buffer of :attr:`step_tokens` ids (the longest step
        message); the rest (resets, lanes for the code-point path) are rendered again
        on their own, a 32nd of the batch at a time (:data:`RESET_SHARE`): through
        every token program in a buffer of the longest one's ids, and from code
        points only in a chunk holding a lane that needs them. The ids are the same
        either way."""
        del state  # the observation text is a function of the event
        kind = jnp.asarray(ts.event.kind, jnp.int32)
        args = jnp.asarray(ts.event.args, jnp.int32)
        tokens = capacity or self.capacity
        if all(self.token_messages.compiled[self.step_programs]):
            codepoints = functools.partial(self._codepoint_tokens, capacity=capacity)
        else:
            codepoints = functools.partial(self.render_codepoints, capacity=capacity)
        render = self._token_render(
            self.token_messages,
            codepoints,
            min(self.step_tokens, tokens),
            tokens,
            self.step_programs,
        )
        return render(kind, args, echoes)

    def render_suffix(self, state: Any, capacity: int | None = None) -> TokenText:
        """Token ids of the suffix (``info["suffix"]``) of ``state`` (``capacity`` as
        in :meth:`render`; rendered from the suffix's token program where it has
        one, else from code points)."""
        tokens = capacity or self.capacity
        text = self._text_capacity(capacity, self.suffix)

        def codepoints(kind: jax.Array, args: jax.Array, echoes: Any) -> TokenText:
            chars, length, cut = self.suffix.render(kind, args, echoes, text)
            return self._tokens(chars, length, cut, tokens)

        programs = self.token_suffix
        longest = programs.longest(range(self.suffix.num_programs))
        render = self._token_render(programs, codepoints, min(longest, tokens), tokens)
        args = self.suffix.args_from_values(self.env.suffix_values(state))
        return render(jnp.zeros(args.shape[:-1], jnp.int32), args, None)

    def _token_render(
        self,
        programs: TokenPrograms,
        codepoints: Any,
        short: int,
        capacity: int,
        first: Sequence[int] | None = None,
    ) -> Any:
        """The per-lane function ``(kind, args, echoes) -> TokenText`` of ``capacity``
        ids: the token program where it applies, else ``codepoints`` (same signature).

        Its ``vmap`` renders every lane's token program in ``short`` ids first (only
        the programs ``first`` lists, when given: their tables are smaller) and
        re-renders the rest lane by lane (:func:`with_fallback`), a
        :data:`RESET_SHARE` of the batch at a time. With ``first``, those lanes (the
        resets) go through every program in as many ids as the longest prints
        first, and only a chunk holding a lane that needs ``codepoints`` runs it."""

        def exact(kind: jax.Array, args: jax.Array, echoes: Any) -> TokenText:
            ids, length, total, valid = programs.render(kind, args, capacity, echoes=echoes)
            fast = TokenText(ids, length, total > capacity, jnp.bool_(True))
            # Both computed (a cond would be a select under vmap anyway, and the
            # code-point path's own batching rule does not nest inside a cond).
            return tree_where(valid, fast, codepoints(kind, args, echoes))

        def tried(short: int, chosen: Sequence[int] | None, rest: Any, share: int) -> Any:
            """Token programs (``chosen``; None: all) in ``short`` ids, else ``rest``."""

            def check(kind: jax.Array, args: jax.Array, echoes: Any) -> tuple[Any, jax.Array]:
                ids, length, total, valid = jax.vmap(
                    lambda k, a, e: programs.render(k, a, short, chosen, e)
                )(kind, args, echoes)
                hard = ~valid
                if short < capacity:
                    hard = hard | (total > short)
                return (ids, length, total), hard

            def finish(rendered: tuple[jax.Array, jax.Array, jax.Array]) -> TokenText:
                ids, length, total = rendered
                ids = jnp.pad(ids, ((0, 0), (0, capacity - short)))
                return TokenText(ids, length, total > capacity, jnp.ones(length.shape, jnp.bool_))

            return with_fallback(check, finish, rest, share)

        render = exact
        if first is not None:
            longest = programs.longest(range(len(programs.compiled)))
            # share 1: a chunk is read from code points as a whole, or not at all.
            render = tried(min(longest, capacity), None, render, 1)
        # The token path's buffers are small: chunking only the lanes re-rendered.
        return tried(short, first, render, RESET_SHARE)

    def render_codepoints(
        self,
        kind: jax.Array,
        args: jax.Array,
        echoes: Mapping[str, EchoText] | None = None,
        capacity: int | None = None,
    ) -> TokenText:
        """Token ids of an event's message, rendered as code points and tokenized by
        segments (every message, echoes included; canonical where the segment table
        holds every segment). Under ``vmap``, every lane is first rendered in a buffer
        of :attr:`step_text` code points (the longest step message with echoes of up
        to :data:`STEP_ECHO_LENGTH` characters); lanes that do not fit are rendered
        again in the full buffer, a 32nd of the batch at a time."""
        text = self._text_capacity(capacity, self.messages)
        tokens = capacity or self.capacity
        short = min(self.step_text, text)
        exact = functools.partial(self._codepoint_tokens, capacity=capacity)
        if 2 * short > text:  # not worth a second path
            return in_chunks(exact, self.chunk_lanes)(kind, args, echoes)
        short_tokens = min(short, tokens)

        def check(kind: jax.Array, args: jax.Array, echoes: Any) -> tuple[Any, jax.Array]:
            render = jax.vmap(lambda k, a, e: self.messages.render(k, a, e, short))
            chars, length, cut = render(kind, args, echoes)
            size = jax.vmap(most_tokens)(chars, length)
            return (chars, length), cut | (size > short_tokens)

        def finish(rendered: tuple[jax.Array, jax.Array]) -> TokenText:
            tokenize = jax.vmap(lambda c, n: self.segments.tokenize(c, n, short_tokens))
            out = tokenize(*rendered)
            return out._replace(ids=jnp.pad(out.ids, ((0, 0), (0, tokens - short_tokens))))

        render = with_fallback(check, finish, exact, RESET_SHARE, self.chunk_lanes)
        return render(kind, args, echoes)

    def _codepoint_tokens(
        self,
        kind: jax.Array,
        args: jax.Array,
        echoes: Mapping[str, EchoText] | None,
        capacity: int | None,
    ) -> TokenText:
        """One lane of :meth:`render_codepoints` in the full buffer."""
        chars, length, cut = self.messages.render(
            kind, args, echoes, self._text_capacity(capacity, self.messages)
        )
        return self._tokens(chars, length, cut, capacity)

    def _text_capacity(self, capacity: int | None, table: ProgramTable) -> int:
        """Code points to render a message of ``table`` (no lead or trail) for
        ``capacity`` tokens: no more than it can print, nor four per token."""
        text = min(self.text_capacity, max(table.kind_lengths))
        return text if capacity is None else min(text, 4 * capacity)

    def _tokens(
        self, chars: jax.Array, length: jax.Array, cut: jax.Array, capacity: int | None
    ) -> TokenText:
        tokens = self.segments.tokenize(chars, length, capacity or self.capacity)
        return tokens._replace(overflow=tokens.overflow | cut)

    def prompt_start(self, ts: TimeStep, chat: bool = False) -> Prompt:
        """The prompt after a reset: the instructions (with the chat prefix if ``chat``)."""
        self._check_chat(chat)
        chars, length = self.event_chars(ts.event.kind, ts.event.args, None, lead=int(chat))
        empty = TokenText(
            jnp.zeros((self.prompt_capacity,), jnp.int32),
            jnp.int32(0),
            jnp.bool_(False),
            jnp.bool_(True),
        )
        return Prompt(empty, chars, length, jnp.int32(0), jnp.bool_(False))

    def prompt_step(
        self, prompt: Prompt, ts: TimeStep, echoes: Mapping[str, EchoText] | None = None
    ) -> Prompt:
        """The prompt after a step whose timestep is ``ts``: the newest observation
        joins the history and ``ts``'s observation becomes the newest."""
        return in_chunks(self._prompt_step, self.chunk_lanes)(
            prompt, ts.event.kind, ts.event.args, echoes
        )

    def _prompt_step(
        self,
        prompt: Prompt,
        kind: jax.Array,
        args: jax.Array,
        echoes: Mapping[str, EchoText] | None,
    ) -> Prompt:
        """:meth:`prompt_step` of one lane, from the timestep's event."""
        chars, length = _add_line_break(prompt.newest, prompt.newest_length)
        history = self._append_text(prompt.history, chars, length, OTHER_NEXT, [self.step_text + 1])
        history = history._replace(overflow=history.overflow | prompt.newest_overflow)
        new_chars, new_length, cut = self._step_chars(kind, args, echoes)
        return Prompt(history, new_chars, new_length, prompt.turns + 1, cut)

    def _step_chars(
        self, kind: jax.Array, args: jax.Array, echoes: Mapping[str, EchoText] | None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(code points int32[text_capacity], length, cut)`` of a step's message (one
        lane; ``cut``: it is not the host text, see :meth:`ProgramTable.render`). Under
        ``vmap`` every lane is rendered in a buffer of :attr:`step_text` code points
        first, and the lanes whose text does not fit (long echoes) again in the full
        buffer."""
        short, full = self.step_text, self.text_capacity

        def whole(kind: jax.Array, args: jax.Array, echoes: Any) -> Any:
            return self.messages.render(kind, args, echoes, full)

        if 2 * short > full:  # not worth a second path
            return whole(kind, args, echoes)

        def check(kind: jax.Array, args: jax.Array, echoes: Any) -> tuple[Any, jax.Array]:
            render = jax.vmap(lambda k, a, e: self.messages.render(k, a, e, short))
            chars, length, cut = render(kind, args, echoes)
            return (chars, length), cut

        def finish(rendered: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, ...]:
            chars, length = rendered
            fits = jnp.zeros(length.shape, jnp.bool_)
            return jnp.pad(chars, ((0, 0), (0, full - short))), length, fits

        return with_fallback(check, finish, whole)(kind, args, echoes)

    def _append_text(
        self,
        history: TokenText,
        chars: jax.Array,
        length: jax.Array,
        end_follower: int,
        sizes: Sequence[int],
    ) -> TokenText:
        """``history`` (``prompt_capacity`` ids) followed by the tokens of
        ``chars[:length]`` (one lane; ``end_follower`` as in
        :meth:`SegmentTokenizer.tokenize`).

        Tokenizing costs work per output id, so under ``vmap`` the text is tried in
        small buffers first: into each of ``sizes`` ids in turn, for the texts that
        take at most as many UTF-8 bytes and specials (a step's message fits the
        first), then into as many ids as ``chars`` holds code points, then into the
        full ``prompt_capacity`` buffer; each try takes the lanes it can hold and
        passes the rest on (:func:`with_fallback`). The ids are the same either way."""

        def tokens(chars: jax.Array, length: jax.Array, capacity: int) -> TokenText:
            return self.segments.tokenize(chars, length, capacity, end_follower=end_follower)

        def full(history: TokenText, chars: jax.Array, length: jax.Array) -> TokenText:
            return _append_tokens(history, tokens(chars, length, self.prompt_capacity))

        def first(size: int, rest: Any) -> Any:
            """Texts that cannot take more than ``size`` ids (:func:`most_tokens`)
            into ``size`` ids, else ``rest``."""

            def check(history: TokenText, chars: jax.Array, length: jax.Array) -> Any:
                return (history, chars, length), jax.vmap(most_tokens)(chars, length) > size

            def finish(carry: tuple[TokenText, jax.Array, jax.Array]) -> TokenText:
                history, chars, length = carry
                text = jax.vmap(lambda c, n: tokens(c[:size], n, size))(chars, length)
                return jax.vmap(_append_tokens)(history, text)

            return with_fallback(check, finish, rest)

        append = full
        for size in sorted({*sizes, chars.shape[0]}, reverse=True):
            if size < self.prompt_capacity:
                append = first(size, append)
        return append(history, chars, length)

    def render_prompt(self, prompt: Prompt, state: Any, chat: bool = False) -> TokenText:
        """Token ids of GEM's ``concat`` observation: every observation so far, each
        on its own line, then the suffix of ``state`` (none after a reset of a game
        whose reset info has no suffix); inside the ``qwen3_game`` template if ``chat``."""
        self._check_chat(chat)
        return in_chunks(lambda p, s: self._render_prompt(p, s, chat), self.chunk_lanes)(
            prompt, state
        )

    def _render_prompt(self, prompt: Prompt, state: Any, chat: bool) -> TokenText:
        """:meth:`render_prompt` of one lane."""
        newest, newest_length = _add_line_break(prompt.newest, prompt.newest_length)
        suffix, suffix_length = self.suffix_chars(state, tail=int(chat))
        if not self.env.reset_info_has_suffix:
            tail_length = jnp.int32(len(self._tail) if chat else 0)
            tail = jnp.pad(self._tail, (0, max(self.text_capacity - len(self._tail), 0)))
            without = prompt.turns == 0
            suffix = jnp.where(without, tail[: suffix.shape[0]], suffix)
            suffix_length = jnp.where(without, tail_length, suffix_length)
        chars, length = _concat(
            newest, newest_length, suffix, suffix_length, 2 * self.text_capacity
        )
        # A step's message or the reset instructions (with the chat prefix), each
        # with its line break and the suffix (with the chat tail).
        sizes = [self.step_text + 1 + self.suffix.max_length]
        sizes.append(self.messages.max_length + 1 + self.suffix.max_length)
        text = self._append_text(prompt.history, chars, length, END, sizes)
        return text._replace(overflow=text.overflow | prompt.newest_overflow)

    def _check_chat(self, chat: bool) -> None:
        if chat and not self.chat_supported:
            raise ValueError(
                f"the tokenizer has no {SPECIALS} special tokens for the chat template"
            )

    # --- parsing --------------------------------------------------------------------

    @property
    def parser(self) -> TokenParser:
        """The device parser of the game's grammar (its token tables built on first use)."""
        if self._parser is None:
            with jax.ensure_compile_time_eval():  # tables are constants, even if built in jit
                self._parser = TokenParser(
                    self.env.grammar,
                    self.tokenizer,
                    echo_capacity=self.messages.echo_capacity,
                )
        return self._parser

    def parse(self, ids: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(action, ok)`` of generated ``ids[:length]``, as the host grammar parses
        their decoded text; ``action`` is what the kernel's ``step`` accepts."""
        return self.parser.parse(ids, length)

    def parse_full(self, ids: jax.Array, length: jax.Array) -> DeviceParsed:
        """:meth:`parse` with the echo texts messages repeat (pass them to :meth:`render`)."""
        return self.parser.parse_full(ids, length)

    # --- compact vocabulary -------------------------------------------------------

    def to_compact(self, ids: jax.Array) -> jax.Array:
        """Compact ids (indices into :attr:`vocab`) of full-vocabulary ``ids``; ids
        outside the vocabulary map to -1."""
        vocab = jnp.asarray(self.vocab)
        ids = jnp.asarray(integer_array("ids", ids, None))
        index = jnp.clip(jnp.searchsorted(vocab, ids), 0, vocab.shape[0] - 1)
        return jnp.where(vocab[index] == ids, index, -1).astype(jnp.int32)

    def to_full(self, compact: jax.Array) -> jax.Array:
        """Full-vocabulary ids of compact ids; ids outside ``0..len(vocab) - 1`` (the
        -1 :meth:`to_compact` gives unknown ids) map to -1, never to a real token."""
        vocab = jnp.asarray(self.vocab)
        compact = jnp.asarray(integer_array("compact ids", compact, None))
        inside = (compact >= 0) & (compact < vocab.shape[0])
        return jnp.where(inside, vocab[jnp.clip(compact, 0, vocab.shape[0] - 1)], -1)

    def _vocabulary(self) -> np.ndarray:
        """Every id the renderer can emit, every byte token, the specials, and the
        tokens of the grammar's rendering of sampled actions."""
        ids = [self.segments.token_ids, np.asarray(self.segments.byte_ids)]
        ids.append(np.asarray(self.segments.special_ids, np.int32))
        env, params = self.env, self.env.default_params

        @jax.jit
        def sample_actions(keys: jax.Array) -> jax.Array:
            states, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
            return jax.vmap(env.random_action)(keys, states)

        actions = np.asarray(sample_actions(jax.random.split(jax.random.key(0), 256)))
        texts = sorted({self.env.grammar.render(a) for a in actions} | {"\\boxed{}"})
        ids += [
            np.asarray(self.tokenizer.encode(t, add_special_tokens=False), np.int32) for t in texts
        ]
        return np.unique(np.concatenate(ids)).astype(np.int32)

    # --- the segment table (host) ------------------------------------------------

    def _build_table(self, rng: np.random.Generator) -> dict[str, float]:
        """Sample renderings of every program, add their segments, then measure the
        canonical rate on fresh samples. Returns the non-canonical fractions."""
        if not self.segments.merges:  # one token per byte: canonical by construction
            self.segments.freeze()
            return {}
        sample = jax.jit(self._sample_segments)
        found: set[tuple[tuple[int, ...], int]] = set()
        for _ in range(2):
            found |= set().union(*_row_segments(*sample(*self._sample_inputs(rng))))
        self.segments.add_segments(sorted(found))
        self.segments.add_segments(self._word_segments(found))
        self.segments.freeze()
        inputs = self._sample_inputs(rng)
        return self._measure(np.asarray(inputs[0]), _row_segments(*sample(*inputs)))

    def _word_segments(
        self, found: set[tuple[tuple[int, ...], int]]
    ) -> list[tuple[tuple[int, ...], int]]:
        """The game's printed words and every capital letter (a board cell, a guessed
        letter) in every context an upper-case letter run was seen in (the text
        before the run in its segment, and what followed)."""
        words = (*self.env.printed_words(self.env.default_params), *_ASCII_LETTERS[:26])
        contexts = set()
        for chars, follower in found:
            text = "".join(map(chr, chars))
            run = len(text) - len(text.rstrip(_ASCII_LETTERS))
            prefix = text[:-run]
            printable = all(c == "\n" or " " <= c <= "~" for c in prefix)
            if run and text[-run:].isupper() and printable:  # not adversarial guesses
                contexts.add((prefix, follower))
        if len(words) * len(contexts) > MAX_WORD_SEGMENTS:
            return []
        return [
            (tuple(map(ord, prefix + word)), follower)
            for prefix, follower in sorted(contexts)
            for word in words
        ]

    def _sample_args(
        self, rng: np.random.Generator, table: ProgramTable
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(kinds int32[n], args int32[n, num_args])``: every program of ``table``
        :data:`SAMPLES_PER_PROGRAM` times (at least :data:`MIN_SAMPLES` in all). Args
        that index a string table (choices, symbols, cells) take one per-sample
        background index (index 0 half the time) with a random probability, else a
        uniform one, so cells and list items repeat in runs of every length; integers
        are small or large."""
        domains = _arg_domains(table.table)
        boards = [
            (table.table.arg_slices[slot.name], slot.shape, len(slot.cells))
            for slot in table.table.slots.values()
            if isinstance(slot, Board)
        ]
        per_program = max(SAMPLES_PER_PROGRAM, -(-MIN_SAMPLES // table.num_programs))
        kinds, rows = [], []
        for kind, dims in enumerate(table.kind_dims):
            extents = [range(extent + 1) for _, _, extent in dims]
            for shape in itertools.product(*extents):
                for _ in range(per_program):
                    # A background index (0 half the time) filling a random share of
                    # the indexed args, the rest uniform: runs of every length.
                    background = 0.0 if rng.random() < 0.5 else rng.random()
                    uniform = rng.random(len(domains))
                    share = 1.0 if rng.random() < 0.25 else rng.uniform(0.3, 1.0)
                    picked = np.where(rng.random(len(domains)) < share, background, uniform)
                    args = np.where(domains > 0, (picked * domains).astype(np.int64), 0)
                    numbers = np.where(
                        rng.random(len(domains)) < 0.1,
                        rng.integers(0, 2**31 - 1, len(domains)),
                        rng.integers(0, 100, len(domains)),
                    )
                    args = np.where(domains > 0, args, numbers)
                    for block, (height, width), size in boards:
                        args[block] = _board_rows(rng, height, width, size)
                    for (_, arg, _), value in zip(dims, shape, strict=True):
                        args[arg] = value
                    kinds.append(kind)
                    rows.append(args)
        return np.asarray(kinds, np.int32), np.asarray(rows, np.int32).reshape(len(rows), -1)

    def _sample_inputs(self, rng: np.random.Generator) -> tuple[jax.Array, ...]:
        """``(kinds, args, suffix args, pick)``: sampled events of every program of the
        messages and the suffix; ``pick`` pairs each suffix with a message."""
        kinds, args = self._sample_args(rng, self.messages)
        _, suffix_args = self._sample_args(rng, self.suffix)
        pick = rng.integers(0, len(kinds), len(suffix_args))
        return tuple(jnp.asarray(x) for x in (kinds, args, suffix_args, pick))

    def _sample_segments(
        self, kinds: jax.Array, args: jax.Array, suffix_args: jax.Array, pick: jax.Array
    ) -> tuple[jax.Array, ...]:
        """Segments of the sampled events rendered in every mode the bridge uses
        (alone, as a prompt line, a line followed by the suffix; with and without the
        chat template): ``(chars, lengths, starts, ends, followers)`` (traced)."""
        capacity = 2 * self.text_capacity
        render = jax.vmap(
            lambda k, a, lead: self.messages.render(k, a, None, capacity, lead=lead)[:2],
            in_axes=(0, 0, None),
        )
        suffix = jax.vmap(
            lambda a, trail: self.suffix.render(jnp.int32(0), a, None, capacity, trail=trail)[:2],
            in_axes=(0, None),
        )
        line = jax.vmap(_add_line_break)
        join = jax.vmap(lambda a, b, c, d: _concat(a, b, c, d, capacity))
        batches = []
        for chat in range(1 + self.chat_supported):
            chars, lengths = render(kinds, args, chat)
            line_chars, line_lengths = line(chars, lengths)
            batches += [(chars, lengths, END), (line_chars, line_lengths, OTHER_NEXT)]
            joined = join(line_chars[pick], line_lengths[pick], *suffix(suffix_args, chat))
            batches.append((*joined, END))
            if chat and not self.env.reset_info_has_suffix:
                tail = jnp.broadcast_to(
                    jnp.pad(self._tail, (0, capacity - len(self._tail))), chars.shape
                )
                tail_lengths = jnp.full(lengths.shape, len(self._tail), jnp.int32)
                batches.append((*join(line_chars, line_lengths, tail, tail_lengths), END))
        chars = jnp.concatenate([b[0] for b in batches])
        lengths = jnp.concatenate([b[1] for b in batches])
        end_followers = jnp.concatenate([jnp.full(b[1].shape, b[2], jnp.int32) for b in batches])
        starts, ends, followers = jax.vmap(self.segments.segments)(chars, lengths)
        followers = jnp.where(ends >= lengths[:, None], end_followers[:, None], followers)
        return chars, lengths, starts, ends, followers

    def _measure(
        self, kinds: np.ndarray, rows: list[set[tuple[tuple[int, ...], int]]]
    ) -> dict[str, float]:
        """Non-canonical fractions of fresh samples: per message (rendered alone; the
        first ``len(kinds)`` rows) and ``"prompt"`` (every other way of rendering)."""
        known = self.segments.known
        missed = np.asarray([not row <= known for row in rows])
        rates = {
            name: float(missed[: len(kinds)][kinds == kind].mean())
            for kind, name in enumerate(self.env.messages.names)
        }
        rates["prompt"] = float(missed[len(kinds) :].mean())
        return {name: rate for name, rate in rates.items() if rate > 0}


def _row_segments(
    chars: jax.Array, lengths: jax.Array, starts: jax.Array, ends: jax.Array, followers: jax.Array
) -> list[set[tuple[tuple[int, ...], int]]]:
    """Per sampled rendering, its distinct ``(code points, follower)`` segments."""
    chars_, lengths_, starts_, ends_, followers_ = (
        np.asarray(x) for x in (chars, lengths, starts, ends, followers)
    )
    rows = []
    for row, length in enumerate(lengths_.tolist()):
        text = chars_[row, :length].tolist()
        count = int(np.searchsorted(starts_[row], length))
        rows.append(
            {
                (tuple(text[s:e]), f)
                for s, e, f in zip(
                    starts_[row, :count].tolist(),
                    ends_[row, :count].tolist(),
                    followers_[row, :count].tolist(),
                    strict=True,
                )
            }
        )
    return rows


def _arg_domains(table: MessageTable) -> np.ndarray:
    """int64[num_args]: per event arg, the size of the string table it indexes (a
    choice's options, a symbol list's symbols, a board's cells), 0 for integers."""
    domains = np.zeros(len(table.arg_names), np.int64)
    for name, slot in table.slots.items():
        size = len(getattr(slot, "options", getattr(slot, "symbols", getattr(slot, "cells", ()))))
        domains[table.arg_slices[name]] = size
    return domains


def _board_rows(rng: np.random.Generator, height: int, width: int, size: int) -> np.ndarray:
    """int64[height * width] cell codes, row-major: each row its own background code
    (0 half the time; half the boards one background for every row) filling a random
    share of it, the rest uniform below a random top code (boards of small tiles or
    numbers), so runs of every length and position, within and across rows, appear
    within a few samples."""
    background = np.where(rng.random(height) < 0.5, 0, rng.integers(0, size, height))
    if rng.random() < 0.5:
        background[:] = background[0]
    share = np.where(rng.random(height) < 0.25, 1.0, rng.uniform(0.3, 1.0, height))
    uniform = rng.integers(0, rng.integers(1, size + 1), (height, width))
    rows = np.where(rng.random((height, width)) < share[:, None], background[:, None], uniform)
    return rows.reshape(-1)
