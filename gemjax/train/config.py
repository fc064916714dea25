"""The training configuration: one frozen, typed dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Algo = Literal["rebn", "reinforce", "grpo", "ppo"]
ALGOS: tuple[Algo, ...] = ("rebn", "reinforce", "grpo", "ppo")


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`gemjax.train.make_train` needs (hashable, so jit-static).

    The defaults are the paper's discount experiment (GuessTheNumber 1..50 with 50
    turns, ReBN, gamma 0.9), tuned to reach greedy success 1.0 and about 4.9 mean
    turns within three minutes of a 2-core CPU (docs/results.md).

    Attributes:
        env_id: a registered id (``gemjax.list_envs()``).
        algo: the advantage estimator: ``rebn`` (returns normalised over the batch),
            ``reinforce`` (raw returns), ``grpo`` (group-normalised episode returns),
            ``ppo`` (turn-level critic, GAE).
        gamma: per-turn discount, ``0 < gamma <= 1``.
        num_updates: policy updates in a whole run.
        num_episodes: episodes collected per update (the rollout batch; with GRPO,
            ``num_episodes // group_size`` groups).
        horizon: turns per rollout; ``None`` takes the env's ``max_turns`` param.
            Episodes still running at the horizon are cut (PPO bootstraps them with
            the critic, the Monte-Carlo estimators do not).
        group_size: GRPO's episodes per initial state.
        hidden: widths of the MLP's hidden layers.
        code_bits: low bits of 8-bit integer observation leaves (categorical codes)
            added as 0/1 features (:func:`gemjax.train.policy.flatten_observation`).
        learning_rate, weight_decay, max_grad_norm: AdamW with global-norm clipping.
        ent_coef: entropy bonus weight.
        clip_eps: PPO-style ratio clipping; ``None`` gives the plain policy gradient
            ``-A log pi`` (with one epoch of one minibatch both have the same
            gradient). Required by PPO.
        num_transitions: learn on this many valid transitions of each rollout,
            drawn uniformly without replacement (GEM's subsampling); ``None``: all
            ``num_episodes * horizon`` turns (invalid ones carry no loss).
        update_epochs, num_minibatches: passes over the learning transitions and
            minibatches per pass.
        gae_lambda, vf_coef: PPO's GAE lambda and value-loss weight.
        mask_invalid: ablation switch: mask the logits with the env's
            ``valid_action_mask(state)``, bool[L] laid out like the logits (the env
            must define it; only GuessTheNumber does).
        eval_every: updates between greedy evaluations (a chunk of the host loop).
        eval_episodes: episodes per greedy evaluation (always the same initial states).
    """

    env_id: str = "game:GuessTheNumber-v0-hard-no-max-turn"
    algo: Algo = "rebn"
    gamma: float = 0.9
    num_updates: int = 1500
    num_episodes: int = 128
    horizon: int | None = None
    group_size: int = 8
    hidden: tuple[int, ...] = (128, 128)
    code_bits: int = 2
    learning_rate: float = 2e-3
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    ent_coef: float = 0.0
    clip_eps: float | None = None
    num_transitions: int | None = 1024
    update_epochs: int = 1
    num_minibatches: int = 1
    gae_lambda: float = 0.95
    vf_coef: float = 0.5
    mask_invalid: bool = False
    eval_every: int = 50
    eval_episodes: int = 1024

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ValueError(f"algo must be one of {ALGOS}, got {self.algo!r}")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma}")
        positive = ("num_updates", "num_episodes", "group_size", "update_epochs")
        positive += ("num_minibatches", "eval_every", "eval_episodes")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")
        if self.num_updates % self.eval_every:
            raise ValueError("num_updates must be a multiple of eval_every")
        if self.num_transitions is not None and self.num_transitions % self.num_minibatches:
            raise ValueError("num_transitions must be a multiple of num_minibatches")
        if self.algo == "grpo" and self.num_episodes % self.group_size:
            raise ValueError("num_episodes must be a multiple of group_size for grpo")
        if self.algo == "ppo" and self.clip_eps is None:
            raise ValueError("ppo needs clip_eps")
