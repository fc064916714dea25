"""``make_train``: one jitted update (rollout, estimator, optimiser steps) per call
of ``lax.scan``, PureJaxRL style, with metrics as scan outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gemjax.core import ActionMasking, CellActions, Environment
from gemjax.registry import make
from gemjax.rng import split
from gemjax.train.config import Stage, TrainConfig
from gemjax.train.estimators import (
    discounted_returns,
    gae,
    gem_grpo_advantages,
    grpo_advantages,
    normalize,
    rebn_advantages,
    reinforce_advantages,
)
from gemjax.train.grid_policy import cell_layout, conv_actor_critic
from gemjax.train.policy import (
    ActionHead,
    ActorCritic,
    JointCategorical,
    action_head,
    feature_size,
)
from gemjax.train.rollout import (
    Constrain,
    EpisodeMetrics,
    Rollout,
    Trajectory,
    episode_metrics,
    masked_logits,
)

BATCH_AXIS = "batch"


class TrainState(struct.PyTreeNode):
    """Everything a run carries from one update to the next.

    Attributes:
        params: the policy's Flax variables.
        opt_state: the optax state.
        key: PRNG key array[] for the next update.
        eval_key: PRNG key array[]; greedy evaluations always start from its episodes.
        update: int32[] updates done so far.
    """

    params: Any
    opt_state: Any
    key: jax.Array
    eval_key: jax.Array
    update: jax.Array


class UpdateMetrics(struct.PyTreeNode):
    """Metrics of one update's rollout and loss (float32[] each).

    Attributes:
        episodes: return, success rate and mean turns of the sampled episodes.
        loss, policy_loss, value_loss, entropy: from the last minibatch step.
    """

    episodes: EpisodeMetrics
    loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array


class ChunkMetrics(struct.PyTreeNode):
    """``train``: :class:`UpdateMetrics` with a leading axis of ``eval_every``
    updates; ``eval``: greedy :class:`EpisodeMetrics` after the last of them."""

    train: UpdateMetrics
    eval: EpisodeMetrics


class Batch(struct.PyTreeNode):
    """Learning data: per turn ``[T, B, ...]``, or per transition ``[N, ...]`` once
    flattened and subsampled.

    Attributes:
        features: float32[..., F]; actions: int32[...] (or int32[..., K], see
        :class:`~gemjax.train.rollout.Trajectory`); log_probs: float32[...] (at
        sampling time); action_mask: bool[..., L]; valid: bool[...];
        advantages: float32[...]; targets: float32[...] critic targets (PPO).
    """

    features: jax.Array
    actions: jax.Array
    log_probs: jax.Array
    action_mask: jax.Array
    valid: jax.Array
    advantages: jax.Array
    targets: jax.Array


def masked_mean(x: jax.Array, valid: jax.Array) -> jax.Array:
    """float32[]: the mean of ``x`` over entries where bool ``valid`` is True."""
    return jnp.sum(jnp.where(valid, x, 0.0)) / jnp.maximum(jnp.sum(valid), 1)


def advantages_and_targets(config: TrainConfig, traj: Trajectory) -> tuple[jax.Array, jax.Array]:
    """The configured estimator: float32[T, B] advantages and critic targets (zeros
    unless PPO)."""
    valid = traj.valid
    if config.algo == "ppo":
        adv, targets = gae(
            traj.rewards, traj.values, valid, traj.bootstrap, config.gamma, config.gae_lambda
        )
        return normalize(adv, valid), targets
    if config.algo == "grpo" and config.grpo_score == "gem":
        adv = gem_grpo_advantages(traj.rewards, valid, config.group_size)
        return adv, jnp.zeros_like(adv)
    returns = discounted_returns(traj.rewards, valid, config.gamma)
    if config.algo == "rebn":
        adv = rebn_advantages(returns, valid)
    elif config.algo == "reinforce":
        adv = reinforce_advantages(returns, valid)
    else:
        adv = grpo_advantages(returns, valid, config.group_size)
    return adv, jnp.zeros_like(adv)


def horizon_of(config: TrainConfig, env: Environment, params: Any = None) -> int:
    """``config.horizon``, else the largest ``max_turns`` in the env's params (a
    field of that name anywhere in them: a word game keeps its turn limits in its
    bank); ``params`` default to the env's.

    Raises:
        ValueError: neither is available.
    """
    if config.horizon is not None:
        return config.horizon
    params = env.default_params if params is None else params
    leaves, _ = jax.tree_util.tree_flatten_with_path(params)
    limits = [
        int(np.max(leaf)) for path, leaf in leaves if getattr(path[-1], "name", None) == "max_turns"
    ]
    if not limits:
        raise ValueError(
            f"{env.name} has no max_turns param: give the rollout's turns "
            "(gemjax train --horizon N, TrainConfig.horizon)"
        )
    return max(limits)


def check_transitions(config: TrainConfig, horizon: int) -> None:
    """Raise unless ``config.num_transitions`` fits in a rollout of
    ``num_episodes * horizon`` turns, and the learning batch (those transitions, or
    every turn) splits into ``num_minibatches`` equal minibatches.

    Raises:
        ValueError: it does not, with what to change.
    """
    turns = config.num_episodes * horizon
    if config.num_transitions is not None and config.num_transitions > turns:
        raise ValueError(
            f"num_transitions {config.num_transitions} is more than the {turns} turns a "
            f"rollout holds ({config.num_episodes} episodes x {horizon} turns): lower "
            "--transitions, or raise --episodes or --horizon"
        )
    if (config.num_transitions or turns) % config.num_minibatches:
        raise ValueError(
            f"the {turns} turns of a rollout ({config.num_episodes} episodes x {horizon}) "
            f"do not split into num_minibatches {config.num_minibatches}: change "
            "--episodes or --minibatches, or give --transitions"
        )


def stage_params(env: Environment, stage: Stage) -> Any:
    """The env's default params with ``stage.params`` set, each value cast to its
    field's dtype, for a stage that plays the same game (same observation and action
    shapes).

    Raises:
        ValueError: a ``-random`` env (it draws its configuration at every reset), a
            name that is not a scalar field of the params, a fraction for an integer
            field, params the env rejects (``validate_params``), or params that
            change the observation or action shapes.
    """
    if env.randomize:
        raise ValueError(
            f"curriculum stage {stage}: a -random id draws its configuration at every "
            f"reset and ignores {env.name}'s params"
        )
    params = env.default_params
    scalars = {
        field.name
        for field in dataclasses.fields(params)
        if getattr(getattr(params, field.name), "ndim", None) == 0
    }
    changes = {}
    for name, value in stage.params:
        if name not in scalars:
            raise ValueError(
                f"curriculum stage {stage}: {env.name}'s params have no scalar field "
                f"{name!r} (they have: {', '.join(sorted(scalars))})"
            )
        dtype = getattr(params, name).dtype
        if jnp.issubdtype(dtype, jnp.integer) and value != int(value):
            raise ValueError(f"curriculum stage {stage}: {name} takes an integer, got {value}")
        changes[name] = jnp.asarray(value, dtype)
    staged = params.replace(**changes)
    env.validate_params(staged)
    shapes = lambda p: (  # noqa: E731
        jax.tree.map(lambda x: (x.shape, x.dtype), env.observation_spec(p)),
        env.action_space(p),
    )
    if shapes(staged) != shapes(params):
        raise ValueError(
            f"curriculum stage {stage} changes {env.name}'s observation or action shapes: "
            "a stage must play the same board, only other params"
        )
    return staged


def batch_constraint(mesh: Mesh | None) -> Constrain:
    """Shard the leading axis of every leaf over ``mesh``'s ``batch`` axis (identity
    without a mesh)."""
    if mesh is None:
        return lambda tree: tree
    sharding = NamedSharding(mesh, PartitionSpec(BATCH_AXIS))
    return lambda tree: jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, sharding), tree)


class Staged(Protocol):
    """A trainer with a curriculum (:class:`Trainer`, the token trainers)."""

    @property
    def config(self) -> Any: ...
    @property
    def rollout(self) -> Any: ...
    @property
    def stage_rollouts(self) -> tuple[Any, ...]: ...


StagedT = TypeVar("StagedT", bound=Staged)


def stretches(
    trainer: StagedT, changes: Callable[[Any], dict[str, Any]] = lambda rollout: {}
) -> tuple[tuple[int, StagedT], ...]:
    """``(updates, trainer)`` for each stretch of a run with a curriculum (a
    :class:`Staged` frozen dataclass that also has ``eval_rollout``): each stage's
    trainer plays its stage's rollout (and the fields ``changes(rollout)`` gives)
    while evaluating the game's, then ``trainer`` itself for the updates left."""
    staged = tuple(
        (
            stage.updates,
            dataclasses.replace(
                trainer,  # type: ignore[type-var]  # a frozen dataclass
                rollout=rollout,
                stage_rollouts=(),
                eval_rollout=trainer.rollout,
                **changes(rollout),
            ),
        )
        for stage, rollout in zip(trainer.config.curriculum, trainer.stage_rollouts, strict=True)
    )
    left = trainer.config.num_updates - sum(updates for updates, _ in staged)
    return (*staged, (left, trainer))


@dataclass(frozen=True)
class Trainer:
    """The pure functions of a training run; jit them (``train`` is jittable whole).

    Attributes:
        config: the run's configuration.
        env: the game; rollout: its batched runner; model: the policy.
        optimizer: AdamW behind global-norm clipping.
        horizon: turns per rollout.
        stage_rollouts: one runner per ``config.curriculum`` stage (its params and
            horizon), played before ``rollout``.
        eval_rollout: the runner of the greedy evaluation (None: ``rollout``; a
            stage's trainer keeps evaluating the game itself).
    """

    config: TrainConfig
    env: Environment
    rollout: Rollout
    model: nn.Module
    optimizer: optax.GradientTransformation
    horizon: int
    stage_rollouts: tuple[Rollout, ...] = ()
    eval_rollout: Rollout | None = None

    def stages(self) -> tuple[tuple[int, Trainer], ...]:
        """``(updates, trainer)`` for each stretch of a run: each curriculum stage's
        (a trainer whose rollouts play the stage's params), then this one for the
        updates left."""
        return stretches(self, lambda rollout: {"horizon": rollout.horizon})

    @property
    def env_steps_per_update(self) -> int:
        """Env steps one update runs: ``num_episodes * horizon`` (masked turns too)."""
        return self.config.num_episodes * self.horizon

    def init(self, key: jax.Array, learning_rate: jax.Array | float | None = None) -> TrainState:
        """A fresh :class:`TrainState` from a PRNG key array[].

        Args:
            key: PRNG key array[].
            learning_rate: float32[] (or a float) to train at instead of
                ``config.learning_rate``; needs a trainer built with
                ``make_train(..., learning_rate_in_state=True)``.
        """
        init_key, eval_key, key = jax.random.split(key, 3)
        spec = self.env.observation_spec(self.env.default_params)
        params = self.model.init(
            init_key, jnp.zeros((feature_size(spec, self.config.code_bits),), jnp.float32)
        )
        opt_state = self.optimizer.init(params)
        if learning_rate is not None:
            opt_state = with_learning_rate(opt_state, learning_rate)
        return TrainState(
            params=params,
            opt_state=opt_state,
            key=key,
            eval_key=eval_key,
            update=jnp.int32(0),
        )

    def _reset_keys(self, key: jax.Array) -> jax.Array:
        """key array[B]: one per episode; GRPO repeats each group's key ``group_size``
        times (consecutive episodes share an initial state)."""
        config = self.config
        if config.algo != "grpo":
            return split(key, config.num_episodes)
        groups = split(key, config.num_episodes // config.group_size)
        return jnp.repeat(groups, config.group_size, axis=0)

    def loss(self, params: Any, batch: Batch) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        """Policy-gradient loss (clipped surrogate when ``clip_eps`` is set), minus the
        entropy bonus, plus the value loss for PPO; means over valid turns.

        Returns:
            ``(loss, (policy_loss, value_loss, entropy))``, float32[] each.
        """
        config = self.config
        # linen's apply is typed for its mutable= form too; without it, the outputs.
        outputs = cast(tuple[jax.Array, jax.Array], self.model.apply(params, batch.features))
        logits, values = outputs
        if self.rollout.masks_logits:
            logits = masked_logits(logits, batch.action_mask)
        head = self.rollout.head
        log_probs = head.log_prob(logits, batch.actions)
        entropy = masked_mean(head.entropy(logits), batch.valid)
        adv = batch.advantages
        if config.clip_eps is None:
            surrogate = adv * log_probs
        else:
            ratio = jnp.exp(log_probs - batch.log_probs)
            clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
            surrogate = jnp.minimum(ratio * adv, clipped * adv)
        policy_loss = -masked_mean(surrogate, batch.valid)
        value_loss = 0.5 * masked_mean((values - batch.targets) ** 2, batch.valid)
        vf_coef = config.vf_coef if config.algo == "ppo" else 0.0
        loss = policy_loss - config.ent_coef * entropy + vf_coef * value_loss
        return loss, (policy_loss, value_loss, entropy)

    def _learn(self, state: TrainState, batch: Batch, key: jax.Array):
        """``update_epochs`` passes of ``num_minibatches`` optimiser steps over the
        learning transitions of ``batch`` (flat ``[N]``); returns the new params,
        opt_state and the last step's losses."""
        config = self.config
        size = self.learn_size
        minibatch = size // config.num_minibatches

        def step(carry, mb: Batch):
            params, opt_state = carry
            (loss, aux), grads = jax.value_and_grad(self.loss, has_aux=True)(params, mb)
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), (loss, *aux)

        def epoch(carry, epoch_key):
            order = jax.random.permutation(epoch_key, size)
            shuffled = jax.tree.map(
                lambda x: x[order].reshape((config.num_minibatches, minibatch, *x.shape[1:])),
                batch,
            )
            return jax.lax.scan(step, carry, shuffled)

        (params, opt_state), losses = jax.lax.scan(
            epoch,
            (state.params, state.opt_state),
            jax.random.split(key, config.update_epochs),
        )
        return params, opt_state, jax.tree.map(lambda x: x[-1, -1], losses)

    @property
    def learn_size(self) -> int:
        """Transitions per learning batch: ``num_transitions`` or every turn."""
        return self.config.num_transitions or self.env_steps_per_update

    def _subsample(self, batch: Batch, key: jax.Array) -> Batch:
        """Flatten ``[T, B, ...]`` to ``[T * B, ...]`` and keep ``learn_size``
        transitions: valid ones uniformly without replacement (GEM's subsampling),
        invalid ones only to fill up (they carry no loss)."""
        flat = jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), batch)
        if self.config.num_transitions is None:
            return flat
        priority = jax.random.uniform(key, flat.valid.shape) + flat.valid
        _, keep = jax.lax.top_k(priority, self.config.num_transitions)
        return jax.tree.map(lambda x: x[keep], flat)

    def update(self, state: TrainState) -> tuple[TrainState, UpdateMetrics]:
        """One rollout and its optimiser steps."""
        key, reset_key, rollout_key, sample_key, learn_key = jax.random.split(state.key, 5)
        traj = self.rollout.collect(state.params, self._reset_keys(reset_key), rollout_key)
        advantages, targets = advantages_and_targets(self.config, traj)
        batch = Batch(
            features=traj.features,
            actions=traj.actions,
            log_probs=traj.log_probs,
            action_mask=traj.action_mask,
            valid=traj.valid,
            advantages=advantages,
            targets=targets,
        )
        params, opt_state, (loss, policy_loss, value_loss, entropy) = self._learn(
            state, self._subsample(batch, sample_key), learn_key
        )
        metrics = UpdateMetrics(
            episodes=episode_metrics(traj.valid, traj.success, traj.rewards),
            loss=loss,
            policy_loss=policy_loss,
            value_loss=value_loss,
            entropy=entropy,
        )
        new_state = state.replace(
            params=params, opt_state=opt_state, key=key, update=state.update + 1
        )
        return new_state, metrics

    def evaluate(self, state: TrainState) -> EpisodeMetrics:
        """Greedy play of the current policy on ``eval_episodes`` fixed episodes."""
        reset_key, step_key = jax.random.split(state.eval_key)
        reset_keys = split(reset_key, self.config.eval_episodes)
        rollout = self.rollout if self.eval_rollout is None else self.eval_rollout
        return rollout.evaluate(state.params, reset_keys, step_key)

    def chunk(self, state: TrainState) -> tuple[TrainState, ChunkMetrics]:
        """``eval_every`` updates (a ``lax.scan``), then a greedy evaluation."""

        def body(state: TrainState, _: None):
            return self.update(state)

        state, train = jax.lax.scan(body, state, None, length=self.config.eval_every)
        return state, ChunkMetrics(train=train, eval=self.evaluate(state))

    def train(
        self, key: jax.Array, learning_rate: jax.Array | float | None = None
    ) -> tuple[TrainState, ChunkMetrics]:
        """A whole run from a PRNG key array[] (and optionally a learning rate, see
        :meth:`init`): the curriculum's stages, then the game (:meth:`stages`);
        metrics have leading axes ``[num_updates // eval_every]`` (eval) and
        ``[..., eval_every]`` (train). Jittable and vmappable over keys (without a
        mesh)."""
        state = self.init(key, learning_rate)
        pieces = []
        for updates, trainer in self.stages():

            def body(state: TrainState, _: None, trainer: Trainer = trainer):
                return trainer.chunk(state)

            state, metrics = jax.lax.scan(
                body, state, None, length=updates // self.config.eval_every
            )
            pieces.append(metrics)
        return state, jax.tree.map(lambda *parts: jnp.concatenate(parts), *pieces)


def make_optimizer(
    config: TrainConfig, learning_rate_in_state: bool = False
) -> optax.GradientTransformation:
    """AdamW behind global-norm gradient clipping, at ``config.lr_schedule``'s rate.
    With ``learning_rate_in_state``
    AdamW's learning rate is a float32[] of the optimiser state
    (``optax.inject_hyperparams``), so one compiled program trains at any rate
    (:func:`with_learning_rate`).

    Raises:
        ValueError: ``learning_rate_in_state`` with a schedule other than constant.
    """
    if learning_rate_in_state and config.lr_schedule != "constant":
        raise ValueError("a learning rate kept in the optimiser state needs lr_schedule 'constant'")
    rate: optax.ScalarOrSchedule = config.learning_rate
    if config.lr_schedule == "linear":
        steps = config.num_updates * config.update_epochs * config.num_minibatches
        rate = optax.linear_schedule(config.learning_rate, 0.0, transition_steps=steps)
    adamw = optax.inject_hyperparams(optax.adamw) if learning_rate_in_state else optax.adamw
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        adamw(learning_rate=rate, weight_decay=config.weight_decay),
    )


def with_learning_rate(opt_state: Any, learning_rate: jax.Array | float) -> Any:
    """The state of :func:`make_optimizer` (``learning_rate_in_state=True``) with
    AdamW's learning rate set to ``learning_rate`` (a float or float32[]).

    Raises:
        ValueError: the optimiser's learning rate is a compile-time constant.
    """
    clip_state, adamw_state = opt_state
    if "learning_rate" not in getattr(adamw_state, "hyperparams", {}):
        raise ValueError(
            "this trainer's learning rate is fixed when it compiles: build it with "
            "make_train(config, learning_rate_in_state=True) to pass one"
        )
    rate = jnp.asarray(learning_rate, jnp.float32)
    hyperparams = {**adamw_state.hyperparams, "learning_rate": rate}
    return (clip_state, adamw_state._replace(hyperparams=hyperparams))


def policy_model(config: TrainConfig, env: Environment, head: ActionHead) -> nn.Module:
    """The policy of ``config.torso``: :class:`~gemjax.train.policy.ActorCritic`
    (``mlp``) or the board convolutions of :mod:`gemjax.train.grid_policy`
    (``conv``); both map flat features float32[..., F] to ``(logits, value)``.

    Raises:
        ValueError: ``conv`` for a game whose actions name no cell
            (:class:`~gemjax.core.CellActions`).
    """
    critic = config.algo == "ppo"
    if config.torso == "mlp":
        return ActorCritic(num_logits=head.num_logits, hidden=config.hidden, critic=critic)
    if not isinstance(env, CellActions):
        raise ValueError(f"{env.name}'s actions name no board cell: the conv torso is unavailable")
    assert isinstance(head, JointCategorical)  # TrainConfig refuses conv without 'joint'
    spec = env.observation_spec(env.default_params)
    layout = cell_layout(spec, config.code_bits, head, env.action_cells())
    return conv_actor_critic(layout, config.hidden, critic)


def make_train(
    config: TrainConfig, mesh: Mesh | None = None, *, learning_rate_in_state: bool = False
) -> Trainer:
    """Build the :class:`Trainer` of ``config``.

    Args:
        config: the run.
        mesh: shard the episode axis of rollouts over this mesh's ``batch`` axis
            (``num_episodes`` and ``eval_episodes`` must divide by its size).
        learning_rate_in_state: keep the learning rate in the optimiser state, so
            ``train(key, learning_rate)`` sweeps rates through one compiled program.

    Raises:
        ValueError: the env lacks ``valid_action_mask`` while ``mask_invalid`` is set,
            the batch does not divide over the mesh, ``num_transitions`` is more than
            a rollout's turns (:func:`check_transitions`), the action space has no
            ``config.head`` (:func:`~gemjax.train.policy.action_head`), or a
            curriculum stage's params do not fit the game (:func:`stage_params`).
    """
    env = make(config.env_id)
    if config.mask_invalid and not isinstance(env, ActionMasking):
        raise ValueError(f"{env.name} has no valid_action_mask: mask_invalid is unavailable")
    if mesh is not None:
        size = mesh.shape[BATCH_AXIS]
        if config.num_episodes % size or config.eval_episodes % size:
            raise ValueError(f"num_episodes and eval_episodes must divide by {size} devices")
    horizon = horizon_of(config, env)
    check_transitions(config, horizon)
    staged_params = [stage_params(env, stage) for stage in config.curriculum]
    for params in staged_params:
        check_transitions(config, horizon_of(config, env, params))
    head = action_head(env.action_space(env.default_params), config.head)
    model = policy_model(config, env, head)
    rollout = Rollout(
        env=env,
        env_params=env.default_params,
        model=model,
        head=head,
        horizon=horizon,
        mask_invalid=config.mask_invalid,
        mask_format_errors=config.mask_format_errors,
        code_bits=config.code_bits,
        constrain=batch_constraint(mesh),
    )
    stage_rollouts = tuple(
        dataclasses.replace(rollout, env_params=params, horizon=horizon_of(config, env, params))
        for params in staged_params
    )
    optimizer = make_optimizer(config, learning_rate_in_state)
    return Trainer(config, env, rollout, model, optimizer, horizon, stage_rollouts)
