"""Training a token agent on device: a format warm-up, then RL, each step one jit.

:func:`make_token_train` builds a :class:`TokenTrainer` from a
:class:`TokenTrainConfig`: the game, its :class:`~gemjax.tokenizer_bridge.TokenBridge`,
a :class:`~gemjax.train.lm.TinyLM` over the bridge's vocabulary and the
:class:`~gemjax.train.token_rollout.TokenRollout`. Its jittable functions:

* :meth:`TokenTrainer.warmup_step`, the **format warm-up**: episodes played with
  random well-formed actions (``env.random_action``, GEM's sampler) written as GEM
  formats them (``\\boxed{...}``, the grammar's own rendering, tokenized on the
  host), and one supervised step on those responses given their prompts. It
  teaches the format only: the actions are uniform among well-formed ones, never a
  strategy.
* :meth:`TokenTrainer.update`, one RL update: a sampled token rollout, per-turn
  rewards, discounted returns, the estimator's advantages (ReBN, REINFORCE or GRPO,
  :mod:`gemjax.train.estimators`), and ``update_epochs`` policy-gradient steps on
  the replayed response log-probabilities (GEM's per-token surrogate, clipped
  when ``clip_eps`` is set, each response's token sum divided by
  ``response_tokens`` as GEM's ``masked_sum / generate_max_length``).
* :meth:`TokenTrainer.chunk` / :meth:`TokenTrainer.warmup_chunk`: ``eval_every``
  steps in a ``lax.scan``, then a greedy and a sampled evaluation on fixed episodes
  (the host loop's unit; :meth:`TokenTrainer.train` runs a whole run in one call).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx, struct

from gemjax.registry import make
from gemjax.rng import split
from gemjax.tokenizer_bridge.bridge import TokenBridge
from gemjax.tokenizer_bridge.tokenizers import load_tokenizer
from gemjax.train.config import TOKENIZERS, Algo, Stage, check_curriculum
from gemjax.train.estimators import (
    discounted_returns,
    grpo_advantages,
    rebn_advantages,
    reinforce_advantages,
)
from gemjax.train.lm import TinyLM, TinyLMConfig
from gemjax.train.token_rollout import (
    Generated,
    TokenLoopConfig,
    TokenMetrics,
    TokenRollout,
    TokenTrajectory,
    replay_lengths,
    stream_lengths,
    token_metrics,
)
from gemjax.train.trainer import masked_mean, stage_params, stretches

TrainerT = TypeVar("TrainerT", bound="TokenTrainer")
TOKEN_ALGOS: tuple[Algo, ...] = ("rebn", "reinforce", "grpo")
WARMUP_ACTIONS = 4096  # distinct well-formed actions the warm-up draws from, at most


@dataclass(frozen=True)
class TokenTrainConfig:
    """A token-agent run (hashable, jit-static).

    The defaults are the paper's discount experiment (GuessTheNumber 1..50 in 50
    turns, ReBN, gamma 0.9) with the ``qwen3`` tokenizer and the ``qwen3_game``
    chat prompt.

    Attributes:
        env_id: a registered id.
        tokenizer: ``qwen3`` or ``bytes`` (:func:`~gemjax.tokenizer_bridge.load_tokenizer`).
        algo: ``rebn``, ``reinforce`` or ``grpo`` (``ppo`` needs a critic, which the
            token policy does not have).
        gamma: per-turn discount in (0, 1].
        model: the :class:`TinyLM`'s shape.
        loop: the rollout's sizes (:class:`TokenLoopConfig`; its horizon caps the
            turns an episode may take in training and evaluation).
        num_episodes: episodes per RL update (``num_episodes // group_size`` groups
            for GRPO).
        num_updates: RL updates.
        warmup_updates: format warm-up steps before RL (each on ``num_episodes``
            episodes).
        learning_rate, warmup_learning_rate: AdamW step sizes of RL and warm-up.
        max_grad_norm: global-norm gradient clipping.
        clip_eps: ratio clipping of the per-token surrogate (``None``: plain
            ``-A log pi``).
        ent_coef: weight of an entropy bonus added to the surrogate at every
            response token: the entropy of the tempered next-token distribution the
            token was drawn from, a turn's sum over ``response_tokens`` as the
            surrogate's (0: none). It rewards sampled play for staying spread over
            its answers.
        update_epochs: gradient steps per RL update (each over the whole batch).
        group_size: GRPO's episodes per initial state.
        replay_episodes: episodes the learner replays at once (gradients are summed
            over chunks of this many; ``num_episodes`` must divide by it when it is
            larger).
        replay_buckets: stream lengths the replay is compiled for
            (:func:`~gemjax.train.token_rollout.replay_lengths`): episodes are
            replayed shortest first, each chunk at the shortest length holding its
            streams (the same gradients as one length, less padding computed).
        curriculum: :class:`~gemjax.train.config.Stage` s of RL played, in order,
            before the game's own params, as the MLP trainer's (their updates count
            in ``num_updates``; the game keeps at least one chunk): each plays the
            game with some of its params changed (a smaller range first:
            GuessTheNumber's ``max_number=10``). The format warm-up plays the
            first stage's params and writes the random well-formed actions of
            every stage and of the game (a warm-up on the first stage's alone
            leaves a model that never writes the rest: GuessTheNumber's numbers
            above the first range), and evaluation always plays the game itself.
        eval_every: steps per host chunk (warm-up and RL alike), each followed by
            a greedy and a sampled evaluation.
        eval_episodes: episodes per evaluation (always the same ones).
    """

    env_id: str = "game:GuessTheNumber-v0-hard-no-max-turn"
    tokenizer: str = "qwen3"
    algo: Algo = "rebn"
    gamma: float = 0.9
    model: TinyLMConfig = field(default_factory=TinyLMConfig)
    loop: TokenLoopConfig = field(default_factory=lambda: TokenLoopConfig(horizon=12))
    num_episodes: int = 64
    num_updates: int = 400
    warmup_updates: int = 40
    learning_rate: float = 1e-3
    warmup_learning_rate: float = 3e-3
    max_grad_norm: float = 1.0
    clip_eps: float | None = None
    ent_coef: float = 0.0
    update_epochs: int = 1
    group_size: int = 8
    replay_episodes: int = 16
    replay_buckets: int = 3
    curriculum: tuple[Stage, ...] = ()
    eval_every: int = 20
    eval_episodes: int = 256

    def __post_init__(self) -> None:
        if self.algo not in TOKEN_ALGOS:
            raise ValueError(
                f"algo must be one of {TOKEN_ALGOS} for a token policy, got {self.algo!r}"
            )
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {self.tokenizer!r}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma}")
        counts: tuple[str, ...] = (
            "num_episodes",
            "num_updates",
            "update_epochs",
            "group_size",
            "eval_every",
        )
        counts += ("replay_episodes", "replay_buckets")
        for name in (*counts, "eval_episodes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if isinstance(self.warmup_updates, bool) or self.warmup_updates < 0:
            raise ValueError(f"warmup_updates must be >= 0, got {self.warmup_updates!r}")
        for name in ("num_updates", "warmup_updates"):
            if getattr(self, name) % self.eval_every:
                raise ValueError(f"{name} must be a multiple of eval_every ({self.eval_every})")
        for name in ("learning_rate", "warmup_learning_rate", "max_grad_norm"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not (np.isfinite(self.ent_coef) and self.ent_coef >= 0):
            raise ValueError(f"ent_coef must be a finite number >= 0, got {self.ent_coef!r}")
        if self.clip_eps is not None and not (0 < self.clip_eps < 1):
            raise ValueError(f"clip_eps must lie in (0, 1), got {self.clip_eps!r}")
        if self.num_episodes % min(self.replay_episodes, self.num_episodes):
            raise ValueError(
                f"num_episodes {self.num_episodes} must divide by replay_episodes "
                f"{self.replay_episodes}"
            )
        if self.algo == "grpo" and self.num_episodes % self.group_size:
            raise ValueError("num_episodes must be a multiple of group_size for grpo")
        check_curriculum(self.curriculum, self.eval_every, self.num_updates)
        if self.algo == "grpo" and self.loop.auto_reset:
            raise ValueError(
                "grpo scores groups of episodes from one initial state: an auto-reset "
                "rollout's later episodes start apart, use rebn or reinforce"
            )


class TokenTrainState(struct.PyTreeNode):
    """What a run carries between steps.

    Attributes:
        params: the model's ``nnx.Param`` state.
        opt_state: the optax state.
        key: PRNG key array[] for the next step.
        eval_key: PRNG key array[]; greedy evaluations always play its episodes.
        warmup: int32[] warm-up steps done; update: int32[] RL updates done.
    """

    params: Any
    opt_state: Any
    key: jax.Array
    eval_key: jax.Array
    warmup: jax.Array
    update: jax.Array


class TokenStepMetrics(struct.PyTreeNode):
    """One step's metrics: its episodes' :class:`TokenMetrics`, the loss and the
    mean log-probability of a response (float32[] each)."""

    rollout: TokenMetrics
    loss: jax.Array
    response_log_prob: jax.Array


class TokenChunkMetrics(struct.PyTreeNode):
    """``train``: :class:`TokenStepMetrics` with a leading ``eval_every`` axis;
    ``eval``: the greedy :class:`TokenMetrics` after the chunk; ``sampled``: the
    :class:`TokenMetrics` of the same episodes played at the sampling temperature,
    what RL's rollouts face (a warm-up chunk's ``train`` play is forced, so this is
    where its model's sampled format errors show)."""

    train: TokenStepMetrics
    eval: TokenMetrics
    sampled: TokenMetrics


@dataclass(frozen=True)
class WarmupTable:
    """GEM-formatted well-formed actions as response tokens: ids int32[N, K] and
    length int32[N] (each ends with a stop token)."""

    ids: np.ndarray
    length: np.ndarray


def warmup_table(
    rollouts: Sequence[TokenRollout], samples: int = 4 * WARMUP_ACTIONS
) -> WarmupTable:
    """Up to :data:`WARMUP_ACTIONS` distinct actions drawn by ``env.random_action``
    from ``samples`` random resets of each rollout's params (a run's curriculum
    stages and the game: every action RL will have to write), rendered by the game's
    grammar and tokenized.

    Raises:
        ValueError: a rendered action takes more than ``response_tokens`` tokens or
            does not end with a stop token.
    """
    first = rollouts[0]
    env, bridge = first.env, first.bridge

    @jax.jit
    def sample(keys: jax.Array, params: Any) -> jax.Array:
        states, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        folded = jax.vmap(jax.random.fold_in, (0, None))(keys, 1)
        return jax.vmap(env.random_action)(folded, states)

    keys = jax.random.split(jax.random.key(0), samples)
    texts: set[str] = set()
    for rollout in rollouts:
        actions = np.asarray(sample(keys, rollout.env_params))
        texts.update(env.grammar.render(a) for a in actions)
    size = first.config.response_tokens
    kept = sorted(texts)[:WARMUP_ACTIONS]
    ids = np.zeros((len(kept), size), np.int32)
    length = np.zeros((len(kept),), np.int32)
    stop_rows = np.asarray(first.stop_rows)
    for index, text in enumerate(kept):
        tokens = bridge.tokenizer.encode(text, add_special_tokens=False)
        if len(tokens) > size:
            raise ValueError(
                f"the action {text!r} takes {len(tokens)} tokens: response_tokens must be "
                f">= {len(tokens)}"
            )
        if not stop_rows[np.searchsorted(first.token_ids, tokens[-1])]:
            raise ValueError(f"the action {text!r} does not end with a stop token")
        ids[index, : len(tokens)] = tokens
        length[index] = len(tokens)
    return WarmupTable(ids, length)


def advantages(config: TokenTrainConfig, traj: TokenTrajectory) -> jax.Array:
    """float32[T, B]: the configured estimator over the turns the learner uses
    (``traj.learn``), returns restarting at each episode's end."""
    returns = discounted_returns(traj.rewards, traj.learn, config.gamma, traj.episode_end)
    if config.algo == "rebn":
        return rebn_advantages(returns, traj.learn)
    if config.algo == "reinforce":
        return reinforce_advantages(returns, traj.learn)
    return grpo_advantages(returns, traj.learn, config.group_size)


@dataclass(frozen=True)
class TokenTrainer:
    """The pure functions of a token-agent run (see the module docstring).

    Attributes:
        config: the run; rollout: the token rollout (model graph, bridge, sizes)
            of the game;
        optimizer: AdamW behind global-norm clipping, warm-up rate first;
        table: the warm-up's response table (the well-formed actions of every
            curriculum stage and of the game);
        stage_rollouts: one rollout per ``config.curriculum`` stage (its params),
            played before ``rollout``;
        eval_rollout: the greedy evaluation's rollout (None: ``rollout``; a stage's
            trainer keeps evaluating the game itself).
    """

    config: TokenTrainConfig
    rollout: TokenRollout
    optimizer: optax.GradientTransformation
    table: WarmupTable
    stage_rollouts: tuple[TokenRollout, ...] = ()
    eval_rollout: TokenRollout | None = None

    def stages(self) -> tuple[tuple[int, TokenTrainer], ...]:
        """``(updates, trainer)`` for each stretch of RL: each curriculum stage's (a
        trainer whose rollouts play the stage's params), then this one for the
        updates left. The first stretch's trainer also runs the format warm-up."""
        return stretches(self)

    @property
    def env_steps_per_update(self) -> int:
        """Turns one RL update plays at most: ``num_episodes`` lanes times
        ``steps`` (auto-reset) or ``horizon``."""
        return self.config.num_episodes * self.config.loop.lane_turns

    def init(self, key: jax.Array) -> TokenTrainState:
        """A fresh state: the parameters of :meth:`initial_params`, and the keys of
        sampling and of the fixed evaluation episodes, all split from ``key``."""
        init_key, eval_key, key = jax.random.split(key, 3)
        params = self.initial_params(init_key)
        return TokenTrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            key=key,
            eval_key=eval_key,
            warmup=jnp.int32(0),
            update=jnp.int32(0),
        )

    def initial_params(self, key: jax.Array) -> Any:
        """The ``nnx.Param`` state a run starts from: a fresh
        :class:`~gemjax.train.lm.TinyLM` drawn from ``key``."""
        model = TinyLM(self.rollout.token_ids, self.config.model, nnx.Rngs(key))
        return nnx.state(model, nnx.Param)

    def _reset_keys(self, key: jax.Array) -> jax.Array:
        """key array[B]; GRPO repeats each group's key ``group_size`` times."""
        config = self.config
        if config.algo != "grpo":
            return split(key, config.num_episodes)
        groups = split(key, config.num_episodes // config.group_size)
        return jnp.repeat(groups, config.group_size, axis=0)

    def _apply(self, state: TokenTrainState, grads: Any) -> tuple[Any, Any]:
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        return optax.apply_updates(state.params, updates), opt_state

    def policy_loss(
        self,
        params: Any,
        traj: TokenTrajectory,
        adv: jax.Array,
        count: jax.Array,
        length: int | None = None,
    ) -> jax.Array:
        """float32[]: GEM's per-token policy-gradient loss (with the entropy bonus
        of ``ent_coef`` at each token), each turn's token sum over
        ``response_tokens``, summed over the turns the learner uses and divided by
        ``count`` (those turns of the whole batch); ``length`` is the replay's
        (static) stream length."""
        config = self.config
        log_p, entropy = self.rollout.response_scores(params, traj, length)
        mask = traj.learn_mask
        if config.clip_eps is None:
            surrogate = adv[..., None] * log_p
        else:
            ratio = jnp.exp(log_p - traj.token_log_probs)
            clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
            surrogate = jnp.minimum(ratio * adv[..., None], clipped * adv[..., None])
        if config.ent_coef:
            surrogate = surrogate + config.ent_coef * entropy
        per_turn = jnp.sum(jnp.where(mask, surrogate, 0.0), axis=-1) / config.loop.response_tokens
        return -jnp.sum(jnp.where(traj.learn, per_turn, 0.0)) / count

    def value_and_grad(
        self, loss: Callable[..., jax.Array], params: Any, traj: TokenTrajectory, *per_turn: Any
    ) -> tuple[jax.Array, Any]:
        """``loss(params, traj, *per_turn, length=N)`` and its gradient, summed over
        chunks of ``replay_episodes`` episodes (the replay's memory grows with the
        square of an episode's stream, so a big batch is replayed a chunk at a
        time). Episodes go shortest stream first, and each chunk is replayed at the
        shortest of :func:`~gemjax.train.token_rollout.replay_lengths` that holds
        its streams (one compiled branch per length, ``lax.switch`` picks);
        ``per_turn`` arrays are float32[T, B]."""
        batch = traj.valid.shape[1]
        size = min(self.config.replay_episodes, batch)
        lengths = replay_lengths(self.config.loop.stream_tokens, self.config.replay_buckets)
        order = jnp.argsort(stream_lengths(traj))

        def chunks(x: jax.Array, axis: int) -> jax.Array:
            x = jnp.take(x, order, axis=axis)
            shape = (*x.shape[:axis], batch // size, size, *x.shape[axis + 1 :])
            return jnp.moveaxis(x.reshape(shape), axis, 0)

        pieces = traj.replace(
            **{
                name: chunks(getattr(traj, name), 0 if name == "context_cut" else 1)
                for name in (f.name for f in dataclasses.fields(traj))
            }
        )
        branches = [functools.partial(_value_and_grad_at, loss, length) for length in lengths]

        def body(total, chunk):
            piece = chunk[0]
            longest = jnp.max(stream_lengths(piece))
            bucket = jnp.minimum(jnp.sum(jnp.asarray(lengths) < longest), len(lengths) - 1)
            value, grads = jax.lax.switch(bucket, branches, params, *chunk)
            return jax.tree.map(jnp.add, total, (value, grads)), None

        zero = (jnp.float32(0.0), jax.tree.map(jnp.zeros_like, params))
        (value, grads), _ = jax.lax.scan(body, zero, (pieces, *(chunks(x, 1) for x in per_turn)))
        return value, grads

    def update(self, state: TokenTrainState) -> tuple[TokenTrainState, TokenStepMetrics]:
        """One RL update: a sampled rollout, then :meth:`learn` from it."""
        key, reset_key, rollout_key = jax.random.split(state.key, 3)
        traj = self.rollout.collect(state.params, self._reset_keys(reset_key), rollout_key)
        return self.learn(state.replace(key=key), traj)

    def learn(
        self, state: TokenTrainState, traj: TokenTrajectory
    ) -> tuple[TokenTrainState, TokenStepMetrics]:
        """``update_epochs`` policy-gradient steps on a trajectory (from
        :meth:`TokenRollout.collect`, or built from a host loop's token ids)."""
        adv = advantages(self.config, traj)
        count = jnp.maximum(jnp.sum(traj.learn), 1).astype(jnp.float32)

        def epoch(carry, _):
            params, opt_state = carry
            loss, grads = self.value_and_grad(
                functools.partial(self.policy_loss, count=count), params, traj, adv
            )
            params, opt_state = self._apply(
                state.replace(params=params, opt_state=opt_state), grads
            )
            return (params, opt_state), loss

        (params, opt_state), losses = jax.lax.scan(
            epoch, (state.params, state.opt_state), None, length=self.config.update_epochs
        )
        metrics = TokenStepMetrics(
            rollout=token_metrics(traj),
            loss=losses[-1],
            response_log_prob=masked_mean(traj.log_probs, traj.valid),
        )
        return state.replace(params=params, opt_state=opt_state, update=state.update + 1), metrics

    def _forced_responses(self, key: jax.Array) -> Generated:
        """Warm-up responses: int32[T, B, K] rows of the table, drawn uniformly."""
        config = self.config
        shape = (config.loop.horizon, config.num_episodes)
        rows = jax.random.randint(key, shape, 0, self.table.ids.shape[0])
        return Generated(
            ids=jnp.asarray(self.table.ids)[rows],
            log_probs=jnp.zeros((*shape, config.loop.response_tokens), jnp.float32),
            length=jnp.asarray(self.table.length)[rows],
            cut=jnp.zeros(shape, jnp.bool_),
        )

    def warmup_loss(
        self, params: Any, traj: TokenTrajectory, count: jax.Array, length: int | None = None
    ) -> jax.Array:
        """float32[]: negative log-likelihood of the response tokens, summed and
        divided by ``count`` (the response tokens of the whole batch); ``length`` is
        the replay's (static) stream length."""
        log_p = self.rollout.response_log_probs(params, traj, length)
        return -jnp.sum(jnp.where(traj.response_mask, log_p, 0.0)) / count

    def warmup_step(self, state: TokenTrainState) -> tuple[TokenTrainState, TokenStepMetrics]:
        """One supervised format step on random well-formed actions."""
        key, reset_key, rollout_key, forced_key = jax.random.split(state.key, 4)
        reset_keys = split(reset_key, self.config.num_episodes)
        forced = self._forced_responses(forced_key)
        traj = self.rollout.collect(state.params, reset_keys, rollout_key, forced=forced)
        count = jnp.maximum(jnp.sum(traj.response_mask), 1).astype(jnp.float32)
        loss, grads = self.value_and_grad(
            functools.partial(self.warmup_loss, count=count), state.params, traj
        )
        params, opt_state = self._apply(state, grads)
        metrics = TokenStepMetrics(rollout=token_metrics(traj), loss=loss, response_log_prob=-loss)
        new_state = state.replace(
            params=params, opt_state=opt_state, key=key, warmup=state.warmup + 1
        )
        return new_state, metrics

    def evaluate(self, state: TokenTrainState, greedy: bool = True) -> TokenMetrics:
        """Greedy (or sampled) play on ``eval_episodes`` fixed episodes of the game;
        sampled play draws its tokens from a fixed key too."""
        reset_key, step_key = jax.random.split(state.eval_key)
        reset_keys = split(reset_key, self.config.eval_episodes)
        rollout = self.rollout if self.eval_rollout is None else self.eval_rollout
        if not greedy:
            step_key = jax.random.fold_in(step_key, 1)
        return rollout.evaluate(state.params, reset_keys, step_key, greedy)

    def _chunk(self, step, state: TokenTrainState) -> tuple[TokenTrainState, TokenChunkMetrics]:
        state, train = jax.lax.scan(
            lambda s, _: step(s), state, None, length=self.config.eval_every
        )
        metrics = TokenChunkMetrics(
            train=train, eval=self.evaluate(state), sampled=self.evaluate(state, greedy=False)
        )
        return state, metrics

    def chunk(self, state: TokenTrainState) -> tuple[TokenTrainState, TokenChunkMetrics]:
        """``eval_every`` RL updates, then a greedy and a sampled evaluation."""
        return self._chunk(self.update, state)

    def warmup_chunk(self, state: TokenTrainState) -> tuple[TokenTrainState, TokenChunkMetrics]:
        """``eval_every`` warm-up steps, then a greedy and a sampled evaluation."""
        return self._chunk(self.warmup_step, state)

    def train(self, key: jax.Array) -> tuple[TokenTrainState, TokenChunkMetrics, TokenChunkMetrics]:
        """A whole run from a PRNG key: warm-up chunks, then RL chunks (the
        curriculum's stages, then the game, :meth:`stages`); returns the final state
        and both phases' metrics (leading axis: chunks)."""
        config = self.config
        stages = self.stages()

        def chunks(trainer: TokenTrainer, step, state, count):
            return jax.lax.scan(lambda s, _: trainer._chunk(step, s), state, None, length=count)

        first = stages[0][1]
        state, warm = chunks(
            first, first.warmup_step, self.init(key), config.warmup_updates // config.eval_every
        )
        pieces = []
        for updates, trainer in stages:
            state, rl = chunks(trainer, trainer.update, state, updates // config.eval_every)
            pieces.append(rl)
        return state, warm, jax.tree.map(lambda *parts: jnp.concatenate(parts), *pieces)


def _value_and_grad_at(
    loss: Callable[..., jax.Array], length: int, params: Any, *args: Any
) -> tuple[jax.Array, Any]:
    """``loss(params, *args, length=length)`` and its gradient in ``params``."""
    return jax.value_and_grad(functools.partial(loss, length=length))(params, *args)


def make_optimizer(config: TokenTrainConfig) -> optax.GradientTransformation:
    """AdamW behind global-norm clipping, at ``warmup_learning_rate`` for the first
    ``warmup_updates`` steps and ``learning_rate`` after."""
    schedule = optax.join_schedules(
        [
            optax.constant_schedule(config.warmup_learning_rate),
            optax.constant_schedule(config.learning_rate),
        ],
        [config.warmup_updates],
    )
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adamw(schedule))


def make_token_train(config: TokenTrainConfig, bridge: TokenBridge | None = None) -> TokenTrainer:
    """Build the :class:`TokenTrainer` of ``config``.

    Args:
        config: the run.
        bridge: a bridge of ``config.env_id`` to reuse (built otherwise, with a
            prompt buffer of the context's size).

    Raises:
        ValueError: see :class:`TokenRollout` and :func:`warmup_table`.
    """
    if bridge is None:
        env = make(config.env_id)
        tokenizer = load_tokenizer(config.tokenizer)
        bridge = TokenBridge(env, tokenizer, prompt_capacity=config.loop.context)
    model = TinyLM(bridge.vocab, config.model, nnx.Rngs(0))
    rollout = TokenRollout(model, bridge, config.loop)
    return staged_trainer(TokenTrainer, config, rollout, make_optimizer(config))


def staged_trainer(
    trainer_class: type[TrainerT],
    config: TokenTrainConfig,
    rollout: TokenRollout,
    optimizer: optax.GradientTransformation,
    **fields: Any,
) -> TrainerT:
    """A ``trainer_class`` (:class:`TokenTrainer` or a subclass, with its extra
    ``fields``) of ``config`` on the game's ``rollout``: one rollout per curriculum
    stage, and the warm-up table of every stage's and the game's well-formed actions.

    Raises:
        ValueError: a stage's params do not fit the game
            (:func:`~gemjax.train.trainer.stage_params`), or its reset prompt does not
            fit the context; see also :func:`warmup_table`.
    """
    stage_rollouts = tuple(
        rollout.with_params(stage_params(rollout.env, stage)) for stage in config.curriculum
    )
    table = warmup_table((*stage_rollouts, rollout))
    return trainer_class(config, rollout, optimizer, table, stage_rollouts, **fields)
