"""The multi-turn token rollout: a causal LM plays a game through its text, on device.

Each turn, one ``lax.scan`` step over a batch of episodes:

1. the bridge renders the turn's prompt: GEM's ``concat`` observation (instructions
   and every observation so far, each on its own line, then the suffix), inside
   the ``qwen3_game`` chat template when ``chat`` is set, as token ids;
2. the KV cache is brought up to that prompt (incremental prefill): slots hold the
   tokens at their positions, so only the ids from the first one that differs from
   the previous turn's prompt on are fed (the previous observation's line and the
   new tail: the newest observation, the suffix, the chat tail), never the
   history, in pieces of ``prefill_chunk`` ids;
3. up to ``response_tokens`` tokens are sampled (temperature, or greedy), stopping
   after a token that holds the grammar's closing ``}`` or is an end-of-text
   special;
4. the bridge parses the response on device (``parse_full``, GEM's last-match rule;
   a response cut at ``response_tokens`` without a stop is a format error, as GEM's
   trainers send an invalid action for a truncated generation), the kernel steps,
   and the next observation (with the echoes of what the player typed) joins the
   prompt.

**Auto-reset.** With ``TokenLoopConfig.auto_reset``, a sampled rollout plays each
lane for ``steps`` turns and a lane whose episode ends (the game ended it, or it
reached ``horizon`` turns) resets its env at once and plays a new episode from its
next turn: no lane computes masked turns while the batch's longest episode goes
on. The new episode's first prompt shares the instructions with the lane's last
prompt, so the cache keeps them and only the rest is fed (the replay's visibility
rule below covers it: those slots hold the same ids at the same positions). The
learner uses the episodes that ended within the rollout (``TokenTrajectory.learn``);
a lane's last, unfinished episode is played but not learned from. Returns restart
at each episode's end (``TokenTrajectory.episode_end``). ``replay_tokens`` bounds a
lane's whole stream, all its episodes together: size it for ``steps`` turns.

A turn's log-probability is the sum over its response tokens (GEM's "the action is
the whole response"), so every estimator of :mod:`gemjax.train.estimators` applies
with turn-level credit.

**Context rule.** The cache holds ``context`` slots. A turn is played only if its
whole prompt is exact (the bridge's ``overflow`` is False) and the prompt plus
``response_tokens`` fit the context, and the episode's stream (every id fed to the
model so far, see :func:`replay_stream`) stays within ``replay_tokens`` with a
whole response more; otherwise the episode stops before that turn,
like an episode cut by the horizon (no reward, nothing learned from the unplayed
turn), and :attr:`TokenTrajectory.context_cut` records it. An overflowing prompt is
never fed to the model.

:class:`TokenRollout` checks everything it can on the host when it is built (the
model's vocabulary covers the bridge's ids, the reset prompt fits, sizes are
positive) and then gives pure, jittable functions: :meth:`TokenRollout.collect`
plays the episodes, :meth:`TokenRollout.response_log_probs` recomputes the
response tokens' log-probabilities under (possibly new) parameters by replaying the
same prefills (the learner's forward pass, differentiable).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, struct
from transformers import PreTrainedTokenizerBase

from gemjax.core import Environment
from gemjax.rng import split
from gemjax.tokenizer_bridge.bridge import Prompt, TokenBridge
from gemjax.tokenizer_bridge.tokenizers import token_bytes
from gemjax.train.lm import CausalLM, causal_mask, logits_at, replay_logits_at
from gemjax.train.rollout import EpisodeMetrics

CLOSING = b"}"
END_SPECIALS = ("<|endoftext|>", "<|im_end|>")


@dataclass(frozen=True)
class TokenLoopConfig:
    """Sizes and sampling of the token rollout (hashable, jit-static).

    Attributes:
        horizon: turns per episode at most (scan length).
        context: KV-cache slots per episode: a turn's prompt plus
            ``response_tokens`` must fit (see the module's context rule).
        response_tokens: ``K``, the most tokens of one response.
        prefill_chunk: ids fed to the model per prefill call.
        temperature: sampling temperature (> 0); log-probabilities are those of
            the tempered distribution the tokens were drawn from.
        chat: wrap prompts in GEM's ``qwen3_game`` chat template.
        replay_tokens: ``N``, the tokens a lane may feed the model in all (its
            stream: each turn's re-fed prompt end and its response), which the
            learner replays in one pass; ``None``: one and a half contexts.
        auto_reset: a lane whose episode ends starts a new one at its next turn
            (its cache keeps the instructions both share), for ``steps`` turns;
            sampled rollouts only (greedy evaluation and the format warm-up play one
            episode a lane). See the module's auto-reset section.
        steps: turns each lane plays in an auto-reset rollout (``None``: the
            horizon); only with ``auto_reset``.
    """

    horizon: int
    context: int = 1024
    response_tokens: int = 12
    prefill_chunk: int = 64
    temperature: float = 1.0
    chat: bool = True
    replay_tokens: int | None = None
    auto_reset: bool = False
    steps: int | None = None

    def __post_init__(self) -> None:
        if self.replay_tokens is None:
            object.__setattr__(self, "replay_tokens", self.context + self.context // 2)
        if not isinstance(self.auto_reset, bool):
            raise ValueError(f"auto_reset must be a bool, got {self.auto_reset!r}")
        if self.steps is not None and not self.auto_reset:
            raise ValueError("steps is the length of an auto-reset rollout: set auto_reset")
        if self.auto_reset and self.steps is None:
            object.__setattr__(self, "steps", self.horizon)
        names = ("horizon", "context", "response_tokens", "prefill_chunk", "replay_tokens")
        for name in names + (("steps",) if self.auto_reset else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0):
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        if self.temperature != self.temperature or math.isinf(self.temperature):
            raise ValueError(f"temperature must be finite, got {self.temperature!r}")

    @property
    def lane_turns(self) -> int:
        """Turns a sampled rollout plays in each lane: ``steps`` with auto-reset,
        else ``horizon``."""
        return self.steps if self.auto_reset and self.steps is not None else self.horizon

    @property
    def stream_tokens(self) -> int:
        """``replay_tokens`` with its default resolved (construction sets it)."""
        if self.replay_tokens is None:
            raise AssertionError("__post_init__ resolves replay_tokens")
        return self.replay_tokens


class TokenTrajectory(struct.PyTreeNode):
    """``B`` episodes of a token rollout over ``T`` turns (axis 0 the turn).

    Attributes:
        prompt_ids: int32[T, B, S] each turn's prompt (tokenizer ids, zeros past
            ``prompt_length``; ``S`` is the context).
        prompt_length: int32[T, B].
        prompt_start: int32[T, B] the first position fed to the model that turn
            (the slots before it held the same ids already; 0 at the first turn,
            whose shared beginning may still be computed once for all lanes).
        response_ids: int32[T, B, K] the generated tokens (zeros past
            ``response_length``), the stop token included.
        response_length: int32[T, B].
        token_log_probs: float32[T, B, K] log-probability of each generated token
            when it was sampled (zero past ``response_length``).
        actions: int32[T, B, ...] the kernel actions parsed from the responses.
        rewards: float32[T, B], zero on turns not played.
        valid: bool[T, B] the turn was played.
        success: bool[T, B] ``info["success"]`` on played turns.
        format_error: bool[T, B] the response held no well-formed action (or was
            cut at ``K`` tokens), on played turns.
        response_cut: bool[T, B] the response reached ``K`` tokens without a stop.
        context_cut: bool[B] the lane stopped by the context rule: a prompt did
            not fit the context (or overflowed the bridge's buffer), or the turn
            could take the lane's stream past ``replay_tokens``.
        episode_turn: int32[T, B] the turn's index within its episode (0 where an
            episode starts; zero on turns not played).
        episode_end: bool[T, B] a played turn after which its episode is over: the
            game ended it, or it was the episode's last turn within the horizon.
        learn: bool[T, B] turns the learner uses: every played turn of a
            one-episode-a-lane rollout; in an auto-reset rollout, the played turns
            of episodes that ended within it (a lane's last, unfinished episode is
            left out, as it has no return yet).
    """

    prompt_ids: jax.Array
    prompt_length: jax.Array
    prompt_start: jax.Array
    response_ids: jax.Array
    response_length: jax.Array
    token_log_probs: jax.Array
    actions: jax.Array
    rewards: jax.Array
    valid: jax.Array
    success: jax.Array
    format_error: jax.Array
    response_cut: jax.Array
    context_cut: jax.Array
    episode_turn: jax.Array
    episode_end: jax.Array
    learn: jax.Array

    @property
    def log_probs(self) -> jax.Array:
        """float32[T, B]: each turn's log-probability (the sum over its tokens)."""
        return jnp.sum(self.token_log_probs, axis=-1)

    @property
    def response_mask(self) -> jax.Array:
        """bool[T, B, K]: generated tokens of played turns."""
        k = jnp.arange(self.response_ids.shape[-1])
        return self.valid[..., None] & (k < self.response_length[..., None])

    @property
    def learn_mask(self) -> jax.Array:
        """bool[T, B, K]: generated tokens of the turns the learner uses."""
        return self.response_mask & self.learn[..., None]


class TokenMetrics(struct.PyTreeNode):
    """Episode statistics of a token rollout (float32[] each).

    Attributes:
        episodes: return, success and turns (:class:`EpisodeMetrics`) of the
            episodes the learner uses (every lane's, or an auto-reset rollout's
            finished ones: these lean to short episodes, since a long one is more
            often unfinished when the rollout stops).
        format_error_rate: format errors per played turn.
        response_tokens: mean generated tokens per played turn.
        context_cut: fraction of lanes stopped by the context rule.
        episode_count: episodes counted in ``episodes``.
        turns_played: turns played in all (learned from or not).
    """

    episodes: EpisodeMetrics
    format_error_rate: jax.Array
    response_tokens: jax.Array
    context_cut: jax.Array
    episode_count: jax.Array
    turns_played: jax.Array


def token_metrics(traj: TokenTrajectory) -> TokenMetrics:
    """:class:`TokenMetrics` of a trajectory."""
    played = jnp.maximum(jnp.sum(traj.valid), 1)
    return TokenMetrics(
        episodes=learned_episode_metrics(traj),
        format_error_rate=jnp.sum(traj.format_error & traj.valid) / played,
        response_tokens=jnp.sum(jnp.where(traj.valid, traj.response_length, 0)) / played,
        context_cut=jnp.mean(traj.context_cut.astype(jnp.float32)),
        episode_count=jnp.sum(traj.learn & (traj.episode_turn == 0)).astype(jnp.float32),
        turns_played=jnp.sum(traj.valid).astype(jnp.float32),
    )


def learned_episode_metrics(traj: TokenTrajectory) -> EpisodeMetrics:
    """:class:`EpisodeMetrics` over the episodes of ``traj.learn``'s turns (an
    episode wins at the turn that reports success, which ends it)."""
    episodes = jnp.maximum(jnp.sum(traj.learn & (traj.episode_turn == 0)), 1)
    won = traj.learn & traj.success
    wins = jnp.sum(won)
    return EpisodeMetrics(
        episode_return=jnp.sum(jnp.where(traj.learn, traj.rewards, 0.0)) / episodes,
        success=wins / episodes,
        mean_turns=jnp.sum(traj.learn) / episodes,
        mean_turns_success=jnp.sum(jnp.where(won, traj.episode_turn + 1, 0)) / wins,
    )


def shared_prefix(
    previous: jax.Array, previous_length: jax.Array, ids: jax.Array, length: jax.Array
) -> jax.Array:
    """int32[B]: where feeding must start so the cache holds ``ids``: the length of
    the common prefix of ``previous[:previous_length]`` and ``ids``, at most
    ``length - 1`` (the last prompt token is always fed: its logits start the
    response). ``previous``/``ids`` int32[B, S], lengths int32[B]."""
    position = jnp.arange(ids.shape[1])
    same = (previous == ids) & (position < previous_length[:, None])
    common = jnp.argmin(jnp.concatenate([same, jnp.zeros_like(same[:, :1])], axis=1), axis=1)
    return jnp.minimum(common, jnp.maximum(length - 1, 0)).astype(jnp.int32)


def common_prefix(
    model: CausalLM, ids: jax.Array, length: jax.Array, valid: jax.Array, chunk: int
) -> tuple[Any, jax.Array, jax.Array]:
    """The cache of the first prompts' shared beginning, computed once.

    The reset prompts of a batch often begin alike (a game's instructions depend on
    its params alone): the ids every valid lane shares with the first valid one are
    fed once, for one lane, and that lane's cache is copied to every lane.

    Args:
        ids: int32[B, S] first prompts; length: int32[B]; valid: bool[B] lanes that
            play them.

    Returns:
        ``(cache, previous, previous_length)`` to start the turns from: the cache
        of ``B`` lanes holding the shared ids, int32[B, S] the reference prompt,
        int32[B] the shared length (0 where nothing is shared).
    """
    batch, slots = ids.shape
    reference = jnp.argmax(valid)
    ref_ids = ids[reference]
    ref_length = length[reference]
    position = jnp.arange(slots)
    same = (ids == ref_ids) | ~valid[:, None]
    same = jnp.all(same, axis=0) & (position < ref_length) & jnp.any(valid)
    shared = jnp.argmin(jnp.concatenate([same, jnp.zeros((1,), jnp.bool_)])).astype(jnp.int32)
    one, _ = prefill(
        model,
        model.init_cache(1, slots),
        ref_ids[None],
        jnp.zeros((1,), jnp.int32),
        shared[None],
        chunk,
    )
    cache = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch, *x.shape[1:])), one)
    previous = jnp.broadcast_to(ref_ids, ids.shape)
    return cache, previous, jnp.full((batch,), shared, jnp.int32)


def ends_later(episode_end: jax.Array) -> jax.Array:
    """bool[T, B]: some turn ``t' >= t`` of the lane ends an episode (so the
    episode of turn ``t``, if played, ended within the rollout)."""
    return jnp.flip(jnp.cumsum(jnp.flip(episode_end, 0), axis=0), 0) > 0


def _take(ids: jax.Array, positions: jax.Array) -> jax.Array:
    """int32[B, N]: ``ids[b, positions[b, n]]`` (positions clipped into range)."""
    return jnp.take_along_axis(ids, jnp.clip(positions, 0, ids.shape[1] - 1), axis=1)


def prefill(
    model: CausalLM,
    cache: Any,
    ids: jax.Array,
    start: jax.Array,
    length: jax.Array,
    chunk: int,
) -> tuple[Any, jax.Array]:
    """Feed ``ids[b, start[b]:length[b]]`` at their positions, ``chunk`` ids a call.

    Args:
        model: a :class:`CausalLM`; cache: its cache of ``S`` slots.
        ids: int32[B, S] prompt ids; start, length: int32[B] (``start < length``).
        chunk: ids per call; calls no lane needs are skipped.

    Returns:
        The cache and float32[B, V] logits after each lane's last prompt token.
    """
    batch, slots = ids.shape
    offsets = jnp.arange(chunk)

    def piece(carry, index):
        cache, last = carry
        first = start + index * chunk
        needed = first < length

        def run(cache, last):
            positions = first[:, None] + offsets
            at = jnp.clip(length - 1 - first, 0, chunk - 1)
            logits, cache = logits_at(
                model,
                _take(ids, positions),
                positions,
                cache,
                causal_mask(positions, slots),
                at[:, None],
            )
            picked = logits[:, 0]
            here = needed & (length - 1 - first < chunk)
            return cache, jnp.where(here[:, None], picked.astype(jnp.float32), last)

        return jax.lax.cond(jnp.any(needed), run, lambda *carry: carry, cache, last), None

    vocab = model.token_ids.shape[0]
    init = (cache, jnp.zeros((batch, vocab), jnp.float32))
    (cache, last), _ = jax.lax.scan(piece, init, jnp.arange(math.ceil(slots / chunk)))
    return cache, last


def tempered_log_softmax(logits: jax.Array, temperature: float) -> jax.Array:
    """float32[..., V] log-probabilities of the tempered distribution."""
    return jax.nn.log_softmax(logits.astype(jnp.float32) / temperature, axis=-1)


@dataclass(frozen=True)
class Generated:
    """One turn's responses: ids int32[B, K], log_probs float32[B, K], length
    int32[B], cut bool[B] (no stop token within ``K``)."""

    ids: jax.Array
    log_probs: jax.Array
    length: jax.Array
    cut: jax.Array


class TurnCarry(NamedTuple):
    """What the rollout's scan carries from turn to turn (``B`` lanes).

    Attributes:
        state, prompt: the envs' states and the bridge's prompt states.
        ids, length, fits: the coming turn's prompt, int32[B, S] and int32[B], and
            whether it fits the context (bool[B]).
        cached, cached_length: the ids the KV cache holds, int32[B, S] and int32[B]
            (the shared instruction prefix before the first turn).
        own, own_length: the lane's own last prompt (length 0 before the first
            turn), from whose common prefix with ``ids`` the turn feeds.
        used: int32[B] stream tokens fed so far (within ``replay_tokens``).
        cache: the model's KV cache (None when responses are forced).
        running: bool[B] lanes still playing; cut: bool[B] stopped by the
            context rule.
        episode_turn: int32[B] the coming turn's index within its episode.
    """

    state: Any
    prompt: Any
    ids: jax.Array
    length: jax.Array
    fits: jax.Array
    cached: jax.Array
    cached_length: jax.Array
    own: jax.Array
    own_length: jax.Array
    used: jax.Array
    cache: Any
    running: jax.Array
    cut: jax.Array
    episode_turn: jax.Array


class TokenRollout:
    """A model, a game's bridge and the loop's sizes, checked once on the host.

    Args:
        model: a :class:`CausalLM` (an ``nnx.Module``); its graph and every
            variable but its ``nnx.Param`` ones are kept here, the parameters
            (``nnx.state(model, nnx.Param)``) are passed to each call.
        bridge: the game's :class:`TokenBridge`.
        config: the loop's sizes.
        env_params: the game's params (default: ``bridge.env.default_params``).
        tokenizer: if given, it must be the bridge's (same vocabulary).

    Raises:
        ValueError: the tokenizer is not the bridge's, the model's ``token_ids`` miss
            some of the bridge's ids, the chat template is asked of a tokenizer
            without its specials, or the reset prompt (plus ``response_tokens``)
            does not fit the context.
        TypeError: the model is not a :class:`CausalLM`.
    """

    def __init__(
        self,
        model: CausalLM,
        bridge: TokenBridge,
        config: TokenLoopConfig,
        env_params: Any = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> None:
        if not isinstance(model, CausalLM):
            raise TypeError(
                f"{type(model).__name__} is not a CausalLM: it needs token_ids, "
                "__call__(tokens, positions, cache, attention_mask) and init_cache"
            )
        if tokenizer is not None and tokenizer.get_vocab() != bridge.tokenizer.get_vocab():
            raise ValueError("the tokenizer is not the bridge's: build the bridge with it")
        token_ids = np.asarray(model.token_ids)
        missing = np.setdiff1d(bridge.vocab, token_ids)
        if missing.size:
            raise ValueError(
                f"the model's vocabulary lacks {missing.size} of the bridge's token ids "
                f"(e.g. {missing[:5].tolist()}): build it over bridge.vocab"
            )
        graph, *states = nnx.split(model, nnx.Param, ...)
        self.graph, self.constants = graph, states[1]  # states: the params, the rest
        self.token_ids = token_ids
        self.bridge = bridge
        self.env: Environment = bridge.env
        self.env_params = self.env.default_params if env_params is None else env_params
        self.stop_rows = jnp.asarray(_stop_rows(bridge.tokenizer, token_ids))
        self._configure(config)

    def with_config(self, config: TokenLoopConfig) -> TokenRollout:
        """The same model, bridge and params with other loop sizes (checked as at
        construction)."""
        rollout = copy.copy(self)
        rollout._configure(config)
        return rollout

    def with_params(self, env_params: Any) -> TokenRollout:
        """The same model, bridge and sizes playing the game with ``env_params`` (a
        curriculum stage's); the reset prompt is checked against the context again,
        as it may be longer under other params."""
        rollout = copy.copy(self)
        rollout.env_params = env_params
        rollout._configure(self.config)
        return rollout

    def _configure(self, config: TokenLoopConfig) -> None:
        """Take ``config`` after checking it against the bridge: chat support, and
        room for the reset prompt and a response."""
        if config.chat and not self.bridge.chat_supported:
            raise ValueError("chat=True needs a tokenizer with <|im_start|>/<|im_end|>")
        self.config = config
        longest = self.reset_prompt_length()
        if longest + config.response_tokens > config.context:
            raise ValueError(
                f"the reset prompt takes {longest} tokens: context {config.context} "
                f"must hold it plus response_tokens {config.response_tokens}"
            )

    def model(self, params: Any) -> CausalLM:
        """The model with ``params`` (an ``nnx.State`` of its ``nnx.Param`` variables)."""
        return nnx.merge(self.graph, params, self.constants)

    # --- host checks --------------------------------------------------------------

    def reset_prompt_length(self, episodes: int = 64) -> int:
        """The longest reset prompt (tokens) over ``episodes`` sampled resets
        (a prompt over the bridge's buffer counts as longer than the context)."""

        @jax.jit
        def lengths(keys: jax.Array) -> jax.Array:
            states, ts = jax.vmap(self.env.reset, in_axes=(0, None))(keys, self.env_params)
            text = self._render(self._start(ts), states)
            return jnp.where(text.overflow, self.config.context + 1, text.length)

        return int(np.max(lengths(jax.random.split(jax.random.key(0), episodes))))

    # --- the bridge, batched ------------------------------------------------------

    def _start(self, ts: Any) -> Prompt:
        return jax.vmap(lambda t: self.bridge.prompt_start(t, chat=self.config.chat))(ts)

    def _render(self, prompt: Prompt, states: Any):
        return jax.vmap(lambda p, s: self.bridge.render_prompt(p, s, chat=self.config.chat))(
            prompt, states
        )

    def _prompt(self, prompt: Prompt, states: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The turn's prompt: ids int32[B, S], length int32[B], and bool[B] whether
        it may be played (exact, and room for a response: the context rule)."""
        text = self._render(prompt, states)
        fits = ~text.overflow & (text.length + self.config.response_tokens <= self.config.context)
        return self._context_ids(text.ids), text.length, fits

    def _context_ids(self, ids: jax.Array) -> jax.Array:
        """int32[B, S]: prompt ids cut or zero-padded to the context."""
        size = self.config.context
        if ids.shape[1] >= size:
            return ids[:, :size]
        return jnp.pad(ids, ((0, 0), (0, size - ids.shape[1])))

    # --- generation ---------------------------------------------------------------

    def rows(self, ids: jax.Array) -> jax.Array:
        """int32[...]: the model's row of each tokenizer id."""
        table = jnp.asarray(self.token_ids)
        return jnp.clip(jnp.searchsorted(table, ids), 0, table.shape[0] - 1).astype(jnp.int32)

    def respond(
        self,
        model: CausalLM,
        cache: Any,
        previous: jax.Array,
        previous_length: jax.Array,
        ids: jax.Array,
        length: jax.Array,
        key: jax.Array,
        greedy: bool = False,
    ) -> tuple[Any, Generated]:
        """One turn of generation: bring the cache from the previous prompt
        (int32[B, S] ``previous`` of int32[B] ``previous_length``; slots hold its ids)
        up to the new prompt ``ids[:, :length]`` by feeding from the first id that
        differs, then sample the responses. Returns the cache and the responses."""
        start = shared_prefix(previous, previous_length, ids, length)
        cache, logits = prefill(model, cache, ids, start, length, self.config.prefill_chunk)
        return self._generate(model, cache, logits, length, key, greedy)

    def _generate(
        self,
        model: CausalLM,
        cache: Any,
        logits: jax.Array,
        length: jax.Array,
        key: jax.Array,
        greedy: bool,
    ) -> tuple[Any, Generated]:
        """Sample up to ``K`` tokens after prompts of int32[B] ``length`` whose last
        token gave float32[B, V] ``logits``."""
        config = self.config
        token_ids = jnp.asarray(self.token_ids)
        slots = config.context

        def step(carry, inputs):
            cache, logits, done = carry
            k, step_key = inputs
            log_p = tempered_log_softmax(logits, config.temperature)
            if greedy:
                row = jnp.argmax(log_p, axis=-1)
            else:
                row = jax.random.categorical(step_key, log_p, axis=-1)
            active = ~done
            token_log_p = jnp.take_along_axis(log_p, row[:, None], axis=1)[:, 0]
            done = done | self.stop_rows[row]
            ids = token_ids[row]

            def feed(cache):
                positions = (length + k)[:, None]
                out, cache = model(ids[:, None], positions, cache, causal_mask(positions, slots))
                return cache, out[:, 0].astype(jnp.float32)

            more = jnp.any(~done) & (k < config.response_tokens - 1)
            cache, logits = jax.lax.cond(more, feed, lambda c: (c, logits), cache)
            record = (jnp.where(active, ids, 0), jnp.where(active, token_log_p, 0.0), active)
            return (cache, logits, done), record

        batch = length.shape[0]
        steps = jnp.arange(config.response_tokens)
        keys = jax.random.split(key, config.response_tokens)
        (cache, _, done), (ids, log_probs, active) = jax.lax.scan(
            step, (cache, logits, jnp.zeros((batch,), jnp.bool_)), (steps, keys)
        )
        generated = Generated(
            ids=ids.T,
            log_probs=log_probs.T,
            length=jnp.sum(active, axis=0, dtype=jnp.int32),
            cut=~done,
        )
        return cache, generated

    # --- the rollout --------------------------------------------------------------

    def _step_env(self, key: jax.Array, state: Any, actions: jax.Array) -> tuple[Any, Any]:
        if self.env.step_uses_key:
            keys = split(key, actions.shape[0])
            return jax.vmap(self.env.step, in_axes=(0, 0, 0, None))(
                keys, state, actions, self.env_params
            )
        return jax.vmap(self.env.step, in_axes=(None, 0, 0, None))(
            key, state, actions, self.env_params
        )

    def collect(
        self,
        params: Any,
        reset_keys: jax.Array,
        key: jax.Array,
        greedy: bool = False,
        forced: Generated | None = None,
        single: bool = False,
    ) -> TokenTrajectory:
        """Play ``B = len(reset_keys)`` episodes for at most ``horizon`` turns, or,
        for a sampled rollout with ``config.auto_reset`` (unless ``single``), ``B``
        lanes for ``steps`` turns, each lane starting a new episode when its episode
        ends.

        Args:
            params: the model's parameters, ``nnx.state(model, nnx.Param)``.
            reset_keys: key array[B], each lane's first reset (an auto-reset
                rollout draws the later ones from ``key``).
            key: PRNG key array[] for sampling and the env's steps.
            greedy: take each token's argmax instead of sampling (one episode a
                lane).
            forced: play these responses instead of the model's
                (ids int32[T, B, K] and length int32[T, B]; the model is not run;
                log-probabilities are zero): the format warm-up's episodes (one
                episode a lane).
            single: one episode a lane even with ``config.auto_reset`` (a sampled
                evaluation on fixed episodes).

        Returns:
            The :class:`TokenTrajectory` (``T`` = ``steps`` or ``horizon``).
        """
        config = self.config
        auto_reset = config.auto_reset and not (greedy or single) and forced is None
        turns_played = config.lane_turns if auto_reset else config.horizon
        model = self.model(params)
        batch = reset_keys.shape[0]
        state, ts = jax.vmap(self.env.reset, in_axes=(0, None))(reset_keys, self.env_params)
        prompt = self._start(ts)
        ids, length, fits = self._prompt(prompt, state)
        if forced is None:
            cache, previous, previous_length = common_prefix(
                model, ids, length, fits, config.prefill_chunk
            )
        else:
            cache, previous, previous_length = None, ids, jnp.zeros((batch,), jnp.int32)
        zeros = jnp.zeros((batch,), jnp.int32)
        init = TurnCarry(
            state=state,
            prompt=prompt,
            ids=ids,
            length=length,
            fits=fits,
            cached=previous,
            cached_length=previous_length,
            own=ids,
            own_length=zeros,
            used=zeros,
            cache=cache,
            running=jnp.ones((batch,), jnp.bool_),
            cut=jnp.zeros((batch,), jnp.bool_),
            episode_turn=zeros,
        )
        turn_keys = jax.random.split(key, turns_played)
        turns = jnp.arange(turns_played)

        def turn(carry: TurnCarry, inputs: tuple[jax.Array, jax.Array]):
            turn_index, turn_key = inputs
            ids, length = carry.ids, carry.length
            start = shared_prefix(carry.own, carry.own_length, ids, length)
            room = carry.used + length - start + config.response_tokens <= config.stream_tokens
            fits = carry.fits & room
            playing = carry.running & fits
            cut = carry.cut | (carry.running & ~fits)
            sample_key, step_key = jax.random.split(turn_key)
            cache = carry.cache
            if forced is None:
                cache, response = self.respond(
                    model, cache, carry.cached, carry.cached_length, ids, length, sample_key, greedy
                )
            else:
                response = Generated(
                    ids=forced.ids[turn_index],
                    log_probs=jnp.zeros(forced.ids.shape[1:], jnp.float32),
                    length=forced.length[turn_index],
                    cut=jnp.zeros((batch,), jnp.bool_),
                )
            parse_length = jnp.where(response.cut, 0, response.length)
            parsed = jax.vmap(self.bridge.parse_full)(response.ids, parse_length)
            state, ts = self._step_env(step_key, carry.state, parsed.action)
            episode_end = playing & (ts.done | (carry.episode_turn + 1 >= config.horizon))
            mask = playing[:, None]
            record = TokenTrajectory(
                prompt_ids=jnp.where(mask, ids, 0),
                prompt_length=jnp.where(playing, length, 0),
                prompt_start=jnp.where(playing, start, 0),
                response_ids=jnp.where(mask, response.ids, 0),
                response_length=jnp.where(playing, response.length, 0),
                token_log_probs=jnp.where(mask, response.log_probs, 0.0),
                actions=parsed.action,
                rewards=jnp.where(playing, ts.reward, 0.0),
                valid=playing,
                success=playing & ts.info["success"],
                format_error=playing & ~parsed.ok,
                response_cut=playing & response.cut,
                context_cut=cut,
                episode_turn=jnp.where(playing, carry.episode_turn, 0),
                episode_end=episode_end,
                learn=playing,
            )
            cached = jnp.where(mask, ids, carry.cached)
            cached_length = jnp.where(playing, length, carry.cached_length)
            prompt = jax.vmap(self.bridge.prompt_step)(carry.prompt, ts, parsed.echoes)
            if auto_reset:
                reset_keys = split(jax.random.fold_in(turn_key, 1), batch)
                state, prompt = self._restart(reset_keys, episode_end, state, prompt)
            next_ids, next_length, next_fits = self._prompt(prompt, state)
            carry = TurnCarry(
                state=state,
                prompt=prompt,
                ids=next_ids,
                length=next_length,
                fits=next_fits,
                cached=cached,
                cached_length=cached_length,
                own=cached,
                own_length=cached_length,
                used=carry.used + jnp.where(playing, length - start + response.length, 0),
                cache=cache,
                running=playing if auto_reset else playing & ~ts.done,
                cut=cut,
                episode_turn=jnp.where(episode_end, 0, carry.episode_turn + 1),
            )
            return carry, record

        def maybe_turn(carry: TurnCarry, inputs: tuple[jax.Array, jax.Array]):
            skipped = jax.eval_shape(turn, carry, inputs)[1]

            def skip(carry, inputs):
                empty = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), skipped)
                return carry, empty.replace(context_cut=carry.cut)

            return jax.lax.cond(jnp.any(carry.running), turn, skip, carry, inputs)

        carry, traj = jax.lax.scan(maybe_turn, init, (turns, turn_keys))
        traj = traj.replace(context_cut=carry.cut)
        if auto_reset:
            return traj.replace(learn=traj.valid & ends_later(traj.episode_end))
        return traj

    def _restart(
        self, reset_keys: jax.Array, ended: jax.Array, state: Any, prompt: Prompt
    ) -> tuple[Any, Prompt]:
        """The lanes of bool[B] ``ended`` start new episodes (key array[B]
        ``reset_keys``): their env states and prompt states are replaced."""
        fresh, ts = jax.vmap(self.env.reset, in_axes=(0, None))(reset_keys, self.env_params)
        fresh_prompt = self._start(ts)

        def pick(new: jax.Array, old: jax.Array) -> jax.Array:
            return jnp.where(ended.reshape((-1,) + (1,) * (old.ndim - 1)), new, old)

        return jax.tree.map(pick, fresh, state), jax.tree.map(pick, fresh_prompt, prompt)

    def evaluate(
        self, params: Any, reset_keys: jax.Array, key: jax.Array, greedy: bool = True
    ) -> TokenMetrics:
        """Greedy (or, with ``greedy=False``, sampled) play of ``len(reset_keys)``
        episodes, one a lane: their :class:`TokenMetrics`."""
        return token_metrics(self.collect(params, reset_keys, key, greedy=greedy, single=True))

    # --- the learner's forward pass -------------------------------------------------

    def response_log_probs(
        self, params: Any, traj: TokenTrajectory, length: int | None = None
    ) -> jax.Array:
        """float32[T, B, K]: log-probabilities of ``traj``'s response tokens under
        ``params`` (zero past each response), in one cache-free forward pass over
        each episode's stream (:func:`replay_stream`) of ``length`` tokens (static;
        default ``replay_tokens``; every stream of ``traj`` must fit in it, see
        :func:`stream_lengths`)."""
        return self.response_scores(params, traj, length)[0]

    def response_scores(
        self, params: Any, traj: TokenTrajectory, length: int | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """float32[T, B, K] each: the :meth:`response_log_probs`, and the entropy
        (nats) of the tempered next-token distribution each response token was drawn
        from (zero past each response). Summed over a response's tokens, the
        entropies estimate the whole response's entropy without bias."""
        model = self.model(params)
        length = self.config.stream_tokens if length is None else length
        tokens, positions, mask, targets = replay_stream(traj, length)
        batch, turns, size = targets.shape[1], targets.shape[0], targets.shape[2]
        flat = jnp.transpose(targets, (1, 0, 2)).reshape(batch, turns * size)
        # The logits of the T * K response positions only, not of all N (see
        # SelectiveLogits): with a tokenizer-sized vocabulary, [B, N, V] logits and
        # their gradient would be most of the update's memory.
        # The stream's mask has nothing above its diagonal (no token reads a later one).
        at_responses = replay_logits_at(model, tokens, positions, mask, flat)  # [B, T*K, V]
        log_p = tempered_log_softmax(at_responses, self.config.temperature)
        rows = jnp.transpose(self.rows(traj.response_ids), (1, 0, 2)).reshape(batch, -1)
        picked = jnp.take_along_axis(log_p, rows[:, :, None], axis=2)[:, :, 0]
        # A model may give a token no probability (a logit of -inf): it adds nothing.
        finite = jnp.where(jnp.isfinite(log_p), log_p, 0.0)
        entropy = -jnp.sum(jnp.exp(finite) * finite, axis=-1)

        def per_turn(x: jax.Array) -> jax.Array:
            x = jnp.transpose(x.reshape(batch, turns, size), (1, 0, 2))
            return jnp.where(traj.response_mask, x, 0.0)

        return per_turn(picked), per_turn(entropy)


class Stream(NamedTuple):
    """The layout of episodes' streams: int32[T, B] ``start`` (first fed position),
    ``fed`` (prompt ids fed), ``size`` (stream tokens: fed ids and the response)
    and ``offset`` (where the turn begins in the stream)."""

    start: jax.Array
    fed: jax.Array
    size: jax.Array
    offset: jax.Array


def stream_layout(traj: TokenTrajectory) -> Stream:
    """Each played turn feeds its prompt from ``prompt_start`` and then its
    response, one after the other (unplayed turns take no room)."""
    fed = jnp.where(traj.valid, traj.prompt_length - traj.prompt_start, 0)
    size = fed + jnp.where(traj.valid, traj.response_length, 0)
    offset = jnp.cumsum(size, axis=0) - size
    return Stream(traj.prompt_start, fed, size, offset)


def stream_lengths(traj: TokenTrajectory) -> jax.Array:
    """int32[B]: the tokens each episode fed the model (its replay stream's length)."""
    return jnp.sum(stream_layout(traj).size, axis=0)


def replay_lengths(replay_tokens: int, buckets: int) -> tuple[int, ...]:
    """The stream lengths a learner compiles its replay for: ``buckets`` lengths
    evenly spaced up to ``replay_tokens`` (the last), each a multiple of 16 below
    it, without repeats. A batch of short episodes is replayed at the shortest one
    that holds them, so its cost follows the episodes played, not the bound."""
    lengths = {
        min(replay_tokens, -(-replay_tokens * (i + 1) // buckets // 16) * 16)
        for i in range(buckets)
    }
    return tuple(sorted(lengths))


def replay_stream(
    traj: TokenTrajectory, length: int
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Every token the rollout fed an episode, in feeding order, with who saw whom.

    The rollout keeps one cache slot per position and re-feeds a turn's prompt from
    ``prompt_start`` on, overwriting the slots of the previous turn's end. So in the
    stream, token ``j`` (turn ``t_j``, position ``p_j``) was in the cache when token
    ``i`` (turn ``t_i``, position ``p_i``) was fed iff ``p_j <= p_i`` and either both
    belong to one turn, or ``t_j < t_i`` and no turn in ``(t_j, t_i]`` re-fed from
    ``p_j`` or before (``p_j < start[t]`` for each). A cache-free pass over the stream
    with that mask computes what the rollout's cached calls did.

    Args:
        traj: a rollout of ``T`` turns, ``B`` episodes.
        length: ``N``, stream tokens per episode (the rollout kept every stream
            within it).

    Returns:
        tokens int32[B, N], positions int32[B, N], mask bool[B, N, N], and int32[T, B, K]
        the stream index whose logits give each response token.
    """
    layout = stream_layout(traj)
    turns = traj.valid.shape[0]
    index = jnp.arange(length)
    ends = (layout.offset + layout.size).T  # [B, T]
    turn = jnp.minimum(jnp.sum(ends[:, None, :] <= index[None, :, None], axis=-1), turns - 1)
    pick = lambda x: jnp.take_along_axis(x.T, turn, axis=1)  # noqa: E731  [B, N]
    local = index[None, :] - pick(layout.offset)
    real = index[None, :] < jnp.sum(layout.size, axis=0)[:, None]
    positions = pick(layout.start) + local
    lanes = jnp.arange(traj.valid.shape[1])[:, None]
    is_prompt = local < pick(layout.fed)
    prompt_token = traj.prompt_ids[
        turn, lanes, jnp.clip(positions, 0, traj.prompt_ids.shape[-1] - 1)
    ]
    response_at = jnp.clip(local - pick(layout.fed), 0, traj.response_ids.shape[-1] - 1)
    response_token = traj.response_ids[turn, lanes, response_at]
    tokens = jnp.where(real, jnp.where(is_prompt, prompt_token, response_token), 0)
    positions = jnp.where(real, positions, 0)
    # A key is overwritten at the first later turn that re-feeds from its position or
    # before: it is seen by the queries of its own turn up to that one.
    starts = jnp.where(traj.valid, layout.start, jnp.iinfo(jnp.int32).max).T  # [B, T]
    later = jnp.arange(turns)
    overwrites = (later > turn[:, :, None]) & (starts[:, None, :] <= positions[:, :, None])
    death = jnp.min(jnp.where(overwrites, later, turns), axis=-1)  # [B, N]
    query_turn = turn[:, :, None]
    mask = (
        real[:, :, None]
        & real[:, None, :]
        & (positions[:, None, :] <= positions[:, :, None])
        & (turn[:, None, :] <= query_turn)
        & (query_turn < death[:, None, :])
    )
    k = jnp.arange(traj.response_ids.shape[-1])
    targets = layout.offset[..., None] + layout.fed[..., None] - 1 + k
    return tokens, positions, mask, jnp.clip(targets, 0, length - 1)


def _stop_rows(tokenizer: PreTrainedTokenizerBase, token_ids: np.ndarray) -> np.ndarray:
    """bool[V]: rows whose token ends a response: it holds the grammar's closing
    ``}`` or is an end-of-text special."""
    table = token_bytes(tokenizer)
    vocab = tokenizer.get_vocab()
    ends = {vocab[s] for s in END_SPECIALS if s in vocab}
    return np.asarray(
        [int(i) in ends or (int(i) < len(table) and CLOSING in table[int(i)]) for i in token_ids],
        np.bool_,
    )
