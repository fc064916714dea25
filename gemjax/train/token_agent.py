"""A trained token agent driven from the host: text in, text out, one device call a turn.

:class:`HostAgent` gives a token policy what an outside LLM gets through GEM: an
observation string (GEM's ``concat`` observation, from :mod:`gemjax.gem` or
``gem-llm`` itself), which it wraps in the ``qwen3_game`` template when the loop
uses chat prompts, tokenizes with the bridge's tokenizer, feeds to the model (the
KV cache kept on device between turns, fed from the first id that changed, as the
on-device rollout does) and answers with the decoded response. :func:`evaluate_on_host`
plays whole episodes that way through ``gemjax.gem`` and reports the same
statistics as the on-device evaluation, from the same seeds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import gemjax.gem as gem
from gemjax.gem import kernel_ops
from gemjax.tokenizer_bridge.bridge import CHAT_PREFIX, CHAT_TAIL
from gemjax.train.lm import causal_mask
from gemjax.train.token_rollout import TokenRollout

# What GEM's trainers send for a generation they could not finish (a prompt past
# the model's length, or a response cut at the token limit): a format error.
INVALID_ACTION = "<｜INVALID_ACTION｜>"


def seed_reset_keys(seeds: Sequence[int]) -> jax.Array:
    """key array[B]: the reset key ``gemjax.gem`` uses for each seed
    (``TextEnv.reset(seed)``), so device and host play the same episodes."""
    raw = jnp.stack([jax.random.split(kernel_ops.seed_key(s))[1] for s in seeds])
    return jax.random.wrap_key_data(raw)


@dataclass(frozen=True)
class LastTurn:
    """One :meth:`HostAgent.act` call's ids: prompt int32[B, S] and length int32[B]
    (1 where the prompt did not fit), response int32[B, K] and length int32[B]."""

    prompt_ids: np.ndarray
    prompt_length: np.ndarray
    response_ids: np.ndarray
    response_length: np.ndarray


class HostAgent:
    """A token agent answering observation strings (see the module docstring).

    Args:
        rollout: the token rollout the agent was trained in (model graph, bridge,
            sizes).
        params: the model's parameters.
        greedy: argmax decoding (else sampling at the loop's temperature).
        seed: seed of the sampling key.

    Attributes:
        cut: bool[B] lanes whose last prompt did not fit the context (they were
            answered with :data:`INVALID_ACTION`).
        last: the last turn's token ids, as :class:`LastTurn`.
    """

    def __init__(
        self, rollout: TokenRollout, params: Any, greedy: bool = True, seed: int = 0
    ) -> None:
        self.rollout = rollout
        self.params = params
        self.greedy = greedy
        self.tokenizer = rollout.bridge.tokenizer
        self._key = jax.random.key(seed)
        self._turn = jax.jit(self._device_turn)
        self.reset(1)

    def reset(self, batch: int) -> None:
        """Forget every conversation; the next :meth:`act` takes ``batch`` prompts."""
        slots = self.rollout.config.context
        self._cache = self.rollout.model(self.params).init_cache(batch, slots)
        self._previous = np.zeros((batch, slots), np.int32)
        self._previous_length = np.zeros((batch,), np.int32)
        self.cut = np.zeros((batch,), np.bool_)

    def prompt_text(self, observation: str) -> str:
        """The prompt the model reads for a GEM observation string."""
        if self.rollout.config.chat:
            return CHAT_PREFIX + observation + CHAT_TAIL
        return observation

    def _device_turn(self, params, cache, previous, previous_length, ids, length, key):
        model = self.rollout.model(params)
        cache, response = self.rollout.respond(
            model, cache, previous, previous_length, ids, length, key, self.greedy
        )
        return cache, response.ids, response.length, response.cut

    def act(self, observations: Sequence[str]) -> list[str]:
        """Responses to one observation per lane (GEM's ``concat`` observations of
        the lanes' episodes so far; a lane starts over when its observation no
        longer extends the previous one, as after a reset)."""
        config = self.rollout.config
        batch = len(observations)
        if batch != self._previous.shape[0]:
            raise ValueError(f"reset({batch}) first: the agent holds {self._previous.shape[0]}")
        encoded = self.tokenizer([self.prompt_text(o) for o in observations])["input_ids"]
        length = np.asarray([len(e) for e in encoded], np.int32)
        fits = length + config.response_tokens <= config.context
        ids = np.zeros((batch, config.context), np.int32)
        for lane, tokens in enumerate(encoded):
            if fits[lane]:
                ids[lane, : len(tokens)] = tokens
        length = np.where(fits, length, 1)
        self._key, key = jax.random.split(self._key)
        self._cache, response, response_length, response_cut = self._turn(
            self.params, self._cache, self._previous, self._previous_length, ids, length, key
        )
        self._previous, self._previous_length = ids, length
        self.cut = ~fits
        response, response_length = np.asarray(response), np.asarray(response_length)
        self.last = LastTurn(ids, length, response, response_length)
        texts = self.tokenizer.batch_decode(
            [r[:n] for r, n in zip(response, response_length, strict=True)]
        )
        cut = self.cut | np.asarray(response_cut)
        return [INVALID_ACTION if c else t for t, c in zip(texts, cut, strict=True)]

    def stream(self, observation: str) -> Iterator[str]:
        """One lane's response, decoded text piece by piece as each token is drawn
        (for watching the agent; ``reset(1)`` first). A response cut at the token
        limit ends with :data:`INVALID_ACTION` as the text sent to the game."""
        config = self.rollout.config
        tokens = self.tokenizer(self.prompt_text(observation))["input_ids"]
        if len(tokens) + config.response_tokens > config.context:
            self.cut = np.ones((1,), np.bool_)
            yield INVALID_ACTION
            return
        ids = np.zeros((1, config.context), np.int32)
        ids[0, : len(tokens)] = tokens
        length = np.asarray([len(tokens)], np.int32)
        self._cache, logits = _prefill_one(
            self.rollout,
            self.params,
            self._cache,
            self._previous,
            self._previous_length,
            ids,
            length,
        )
        self._previous, self._previous_length = ids, length
        drawn: list[int] = []
        shown = ""
        for k in range(config.response_tokens):
            self._key, key = jax.random.split(self._key)
            token, stop = _draw(self.rollout, logits, key, self.greedy)
            drawn.append(int(token))
            text = self.tokenizer.batch_decode([drawn])[0]
            yield text[len(shown) :]
            shown = text
            if bool(stop):
                return
            if k + 1 < config.response_tokens:
                self._cache, logits = _feed_one(
                    self.rollout, self.params, self._cache, token, length + k
                )
        yield "\n" + INVALID_ACTION


@functools.partial(jax.jit, static_argnums=0)
def _prefill_one(rollout, params, cache, previous, previous_length, ids, length):
    from gemjax.train.token_rollout import prefill, shared_prefix

    start = shared_prefix(previous, previous_length, ids, length)
    return prefill(rollout.model(params), cache, ids, start, length, rollout.config.prefill_chunk)


@functools.partial(jax.jit, static_argnums=(0, 3))
def _draw(rollout, logits, key, greedy):
    from gemjax.train.token_rollout import tempered_log_softmax

    log_p = tempered_log_softmax(logits, rollout.config.temperature)
    row = jnp.argmax(log_p[0]) if greedy else jax.random.categorical(key, log_p[0])
    return jnp.asarray(rollout.token_ids)[row], rollout.stop_rows[row]


@functools.partial(jax.jit, static_argnums=0)
def _feed_one(rollout, params, cache, token, position):
    positions = position[:, None]
    logits, cache = rollout.model(params)(
        token[None, None], positions, cache, causal_mask(positions, rollout.config.context)
    )
    return cache, logits[:, 0].astype(jnp.float32)


@dataclass(frozen=True)
class HostEvaluation:
    """Episodes played through ``gemjax.gem``: success rate (an episode succeeds
    when the game prints its ``success`` message), mean turns and format errors per
    turn (floats), and per-episode success (bool[B])."""

    success: float
    mean_turns: float
    format_error_rate: float
    episode_success: np.ndarray


def evaluate_on_host(
    rollout: TokenRollout, params: Any, env_id: str, seeds: Sequence[int], greedy: bool = True
) -> HostEvaluation:
    """Play one ``gemjax.gem`` episode per seed with a :class:`HostAgent`, at most
    ``horizon`` turns each, all lanes in one batch (ended episodes wait).

    The text envs are GEM's ``concat`` (``ObservationWrapper(include_action=False,
    include_chat_template=False)``); their first states are those of the device
    rollout's :func:`seed_reset_keys` of the same seeds."""
    agent = HostAgent(rollout, params, greedy=greedy)
    envs = [
        gem.ObservationWrapper(gem.make(env_id), include_action=False, include_chat_template=False)
        for _ in seeds
    ]
    observations = [env.reset(seed=seed)[0] for env, seed in zip(envs, seeds, strict=True)]
    agent.reset(len(envs))
    running = np.ones(len(envs), np.bool_)
    success = np.zeros(len(envs), np.bool_)
    turns = np.zeros(len(envs), np.int32)
    errors = 0
    for _ in range(rollout.config.horizon):
        if not running.any():
            break
        responses = agent.act(observations)
        for lane, env in enumerate(envs):
            if not running[lane]:
                continue
            if agent.cut[lane]:  # the device rollout stops such an episode unplayed
                running[lane] = False
                continue
            observation, _, terminated, truncated, _ = env.step(responses[lane])
            observations[lane] = observation
            turns[lane] += 1
            message = env.unwrapped.last_message
            errors += message == "format_error"
            success[lane] |= message == "success"
            running[lane] = not (terminated or truncated)
    return HostEvaluation(
        success=float(success.mean()),
        mean_turns=float(turns.mean()),
        format_error_rate=errors / max(int(turns.sum()), 1),
        episode_success=success,
    )


def host_transcript(rollout: TokenRollout, params: Any, env_id: str, seed: int) -> str:
    """One greedy episode of a token agent through ``gemjax.gem`` (at most
    ``horizon`` turns), as text: each observation GEM prints, then the agent's
    response after ``> `` and the turn's reward."""
    agent = HostAgent(rollout, params)
    env = gem.make(env_id)
    observation, info = env.reset(seed=seed)
    history = [observation]
    lines = [observation]
    for _ in range(rollout.config.horizon):
        concat = "".join(o if o.endswith("\n") else o + "\n" for o in history)
        response = agent.act([concat + info.get("suffix", "")])[0]
        lines.append(f"> {response}")
        observation, reward, terminated, truncated, info = env.step(response)
        history.append(observation)
        lines.append(f"{observation}  [reward {reward}]")
        if terminated or truncated:
            break
    return "\n".join(lines)
