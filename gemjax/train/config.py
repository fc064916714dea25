"""The training configuration: one frozen, typed dataclass."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gemjax.checks import boolean, integer, real

Algo = Literal["rebn", "reinforce", "grpo", "ppo"]
ALGOS: tuple[Algo, ...] = ("rebn", "reinforce", "grpo", "ppo")
LrSchedule = Literal["constant", "linear"]
LR_SCHEDULES: tuple[LrSchedule, ...] = ("constant", "linear")
GrpoScore = Literal["discounted", "gem"]
GRPO_SCORES: tuple[GrpoScore, ...] = ("discounted", "gem")
HeadKind = Literal["factored", "joint"]
HEAD_KINDS: tuple[HeadKind, ...] = ("factored", "joint")
Torso = Literal["mlp", "conv"]
TORSOS: tuple[Torso, ...] = ("mlp", "conv")
TOKENIZERS = ("qwen3", "bytes")  # the built-in tokenizers a token agent can use
ParamValue = int | float


@dataclass(frozen=True)
class Stage:
    """A curriculum stage: ``updates`` updates on the game with some of its params
    changed, before the run goes on with the game's own params.

    Attributes:
        updates: updates of the stage (a multiple of the run's ``eval_every``).
        params: ``(field, value)`` pairs: scalar fields of the env's params and their
            values in the stage, e.g. ``(("max_turns", 50),)`` (GuessTheNumber-hard
            with the turn limit of its ``-no-max-turn`` id).
    """

    updates: int
    params: tuple[tuple[str, ParamValue], ...]

    def __post_init__(self) -> None:
        """Raises TypeError or ValueError: a count below 1, no params, a field named
        twice, or a value that is not a real number."""
        if integer("stage updates", self.updates) < 1:
            raise ValueError(f"stage updates must be >= 1, got {self.updates}")
        if not isinstance(self.params, tuple) or not self.params:
            raise TypeError(f"stage params must be a non-empty tuple of pairs, got {self.params!r}")
        for pair in self.params:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise TypeError(f"stage params are (field, value) pairs, got {pair!r}")
            real(f"stage param {pair[0]}", pair[1])
        names = [name for name, _ in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"a stage sets each param once, got {names}")

    def __str__(self) -> str:
        """The CLI's spelling, ``field=value[,field=value]:updates``."""
        return ",".join(f"{name}={value}" for name, value in self.params) + f":{self.updates}"


def check_curriculum(curriculum: tuple[Stage, ...], eval_every: int, num_updates: int) -> None:
    """A run's curriculum: a tuple of :class:`Stage`, each of whole chunks of
    ``eval_every`` updates, leaving the game itself at least one chunk of
    ``num_updates``.

    Raises:
        TypeError: not a tuple of stages; ValueError: a stage of part of a chunk, or
            stages taking every update.
    """
    if not isinstance(curriculum, tuple) or not all(
        isinstance(stage, Stage) for stage in curriculum
    ):
        raise TypeError(f"curriculum must be a tuple of Stage, got {curriculum!r}")
    for stage in curriculum:
        if stage.updates % eval_every:
            raise ValueError(
                f"curriculum stage {stage} must last a multiple of eval_every "
                f"({eval_every}) updates"
            )
    staged = sum(stage.updates for stage in curriculum)
    if curriculum and staged >= num_updates:
        raise ValueError(
            f"the curriculum takes {staged} of the {num_updates} updates: the "
            "game itself needs some (raise num_updates or shorten the stages)"
        )


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`gemjax.train.make_train` needs (hashable, so jit-static).

    The defaults are the paper's discount experiment (GuessTheNumber 1..50 with 50
    turns, ReBN, gamma 0.9), tuned toward greedy success 1.0 and at most 4.9 mean
    turns (the optimum is 4.86) within three minutes of a 2-core CPU; how close each
    seed comes is in docs/results.md.

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
        grpo_score: what GRPO normalises within a group: ``discounted``, each
            episode's discounted return from its first turn (carries a speed signal);
            ``gem``, GEM's GRPO: the undiscounted episode return, with ReBN applied
            over the batch afterwards (:func:`gemjax.train.estimators.gem_grpo_advantages`).
        torso: the policy's body: ``mlp`` over every observation feature, or
            ``conv``, 3x3 convolutions over the board of a game whose actions name a
            cell (:class:`~gemjax.core.CellActions`: Minesweeper, Sudoku), scoring
            every cell alike (:mod:`gemjax.train.grid_policy`); ``conv`` needs the
            joint head.
        hidden: widths of the MLP's hidden layers, or the channels of each 3x3
            convolution of the ``conv`` torso.
        code_bits: low bits of 8-bit integer observation leaves (categorical codes)
            added as 0/1 features (:func:`gemjax.train.policy.flatten_observation`).
        learning_rate, weight_decay, max_grad_norm: AdamW with global-norm clipping.
        lr_schedule: ``constant``, or ``linear``: from ``learning_rate`` down to 0 over
            the run's optimiser steps (``num_updates * update_epochs *
            num_minibatches``).
        ent_coef: entropy bonus weight. The default 0.005 keeps GuessTheNumber's policy
            exploring a little longer before it settles on a search tree (without it,
            seed 1 of the default run never finds 2% of the targets; docs/results.md).
        clip_eps: PPO-style ratio clipping; ``None`` gives the plain policy gradient
            ``-A log pi`` (with one epoch of one minibatch both have the same
            gradient). Required by PPO.
        num_transitions: learn on this many valid transitions of each rollout,
            drawn uniformly without replacement (GEM's subsampling); ``None``: all
            ``num_episodes * horizon`` turns (invalid ones carry no loss).
        update_epochs, num_minibatches: passes over the learning transitions and
            minibatches per pass.
        gae_lambda, vf_coef: PPO's GAE lambda and value-loss weight.
        head: the action distribution: ``factored``, one independent categorical per
            action component (``sum(nvec)`` logits); ``joint``, one categorical over
            every combination of the components (``prod(nvec)`` logits, at most
            :data:`~gemjax.train.policy.MAX_JOINT`), which can express moves whose
            components depend on each other (a cell's row and column).
        mask_invalid: ablation switch: mask the logits with the env's
            ``valid_action_mask(state)`` (:class:`~gemjax.core.ActionMasking`; the env
            must define it: GuessTheNumber, Sudoku, Minesweeper, FifteenPuzzle,
            Game2048, Sokoban). Sudoku's and Minesweeper's masks are of combinations
            (a digit no peer holds in an empty cell; a hidden cell): the joint head
            keeps them exactly, the factored head each component's values.
        mask_format_errors: design switch: mask the action value every kernel reads as
            a format error (value 0 of the first component), so the policy only plays
            parseable answers (a text policy's grammar-constrained decoding; GEM's -0.1
            penalty is never drawn). Off by default: the paper's agent can err.
        curriculum: design switch: :class:`Stage` s played, in order, before the game's
            own params (their updates count in ``num_updates``; the game keeps at
            least one chunk). Each stage changes some of the env's params (a
            GuessTheNumber-hard policy first learns with 50 turns, where the
            last-turn distance reward cannot trap it, then with the id's 7); greedy
            evaluation always plays the game itself. Off by default.
        eval_every: updates between greedy evaluations (a chunk of the host loop).
        eval_episodes: episodes per greedy evaluation (always the same initial states;
            the default is large enough that their sampling error of GuessTheNumber's
            mean turns, a standard error of about 0.01 for the optimal policy, is small
            next to the 0.04 between the optimum and the training goal).
    """

    env_id: str = "game:GuessTheNumber-v0-hard-no-max-turn"
    algo: Algo = "rebn"
    gamma: float = 0.9
    num_updates: int = 2000
    num_episodes: int = 256
    horizon: int | None = None
    group_size: int = 8
    grpo_score: GrpoScore = "discounted"
    torso: Torso = "mlp"
    hidden: tuple[int, ...] = (128, 128)
    code_bits: int = 2
    learning_rate: float = 2e-3
    lr_schedule: LrSchedule = "constant"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    ent_coef: float = 0.005
    clip_eps: float | None = None
    num_transitions: int | None = 2048
    update_epochs: int = 1
    num_minibatches: int = 1
    gae_lambda: float = 0.95
    vf_coef: float = 0.5
    head: HeadKind = "factored"
    mask_invalid: bool = False
    mask_format_errors: bool = False
    curriculum: tuple[Stage, ...] = ()
    eval_every: int = 50
    eval_episodes: int = 16384

    def __post_init__(self) -> None:
        """Check every field's type and range (a clear error here, never a crash or a
        silently converted value inside the trainer).

        Raises:
            TypeError: a field of the wrong type (a float count, a bool width).
            ValueError: a value outside its range, or fields that do not fit together.
        """
        if self.algo not in ALGOS:
            raise ValueError(f"algo must be one of {ALGOS}, got {self.algo!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.grpo_score not in GRPO_SCORES:
            raise ValueError(f"grpo_score must be one of {GRPO_SCORES}, got {self.grpo_score!r}")
        if self.grpo_score != "discounted" and self.algo != "grpo":
            raise ValueError(f"grpo_score applies to algo 'grpo' only, not {self.algo!r}")
        if not isinstance(self.env_id, str) or not self.env_id:
            raise TypeError(f"env_id must be a registered id, got {self.env_id!r}")
        counts: tuple[str, ...] = ("num_updates", "num_episodes", "group_size", "update_epochs")
        counts += ("num_minibatches", "eval_every", "eval_episodes")
        optional = {"horizon": self.horizon, "num_transitions": self.num_transitions}
        for name, value in [(n, getattr(self, n)) for n in counts] + list(optional.items()):
            if value is not None and integer(name, value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not isinstance(self.hidden, tuple) or not self.hidden:
            raise TypeError(f"hidden must be a non-empty tuple of widths, got {self.hidden!r}")
        for width in self.hidden:
            if integer("hidden width", width) < 1:
                raise ValueError(f"hidden widths must be >= 1, got {self.hidden}")
        if integer("code_bits", self.code_bits) < 0:
            raise ValueError(f"code_bits must be >= 0, got {self.code_bits}")
        if self.head not in HEAD_KINDS:
            raise ValueError(f"head must be one of {HEAD_KINDS}, got {self.head!r}")
        if self.torso not in TORSOS:
            raise ValueError(f"torso must be one of {TORSOS}, got {self.torso!r}")
        if self.torso == "conv" and self.head != "joint":
            raise ValueError("the conv torso scores joint actions: it needs head 'joint'")
        boolean("mask_invalid", self.mask_invalid)
        boolean("mask_format_errors", self.mask_format_errors)
        self._check_reals()
        if self.num_updates % self.eval_every:
            raise ValueError("num_updates must be a multiple of eval_every")
        if self.num_transitions is not None and self.num_transitions % self.num_minibatches:
            raise ValueError("num_transitions must be a multiple of num_minibatches")
        if self.algo == "grpo" and self.num_episodes % self.group_size:
            raise ValueError("num_episodes must be a multiple of group_size for grpo")
        if self.algo == "ppo" and self.clip_eps is None:
            raise ValueError("ppo needs clip_eps")
        check_curriculum(self.curriculum, self.eval_every, self.num_updates)

    def _check_reals(self) -> None:
        """The float fields: finite, and within their ranges."""
        ranges = {  # name: (low, low included, high)
            "gamma": (0.0, False, 1.0),
            "learning_rate": (0.0, False, math.inf),
            "weight_decay": (0.0, True, math.inf),
            "max_grad_norm": (0.0, False, math.inf),
            "ent_coef": (0.0, True, math.inf),
            "gae_lambda": (0.0, True, 1.0),
            "vf_coef": (0.0, True, math.inf),
            "clip_eps": (0.0, False, math.inf),
        }
        for name, (low, closed, high) in ranges.items():
            value = getattr(self, name)
            if value is None and name == "clip_eps":
                continue
            value = real(name, value)
            if not ((low <= value) if closed else (low < value)) or value > high:
                opening, closing = "[" if closed else "(", ")" if high == math.inf else "]"
                interval = f"{opening}{low}, {high}{closing}"
                raise ValueError(f"{name} must lie in {interval}, got {value}")
