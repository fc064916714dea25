"""On-device RL for gemjax games: one rollout, several advantage estimators.

``make_train(TrainConfig(...))`` returns a :class:`Trainer` whose ``train(key)`` runs a
whole training run inside one jit, and whose ``chunk(state)`` runs ``eval_every``
updates plus a greedy evaluation (the host loop of ``gemjax train``).
"""

from gemjax.train.config import ALGOS, Algo, Stage, TrainConfig
from gemjax.train.play import greedy_transcript
from gemjax.train.trainer import ChunkMetrics, Trainer, TrainState, UpdateMetrics, make_train

__all__ = [
    "ALGOS",
    "Algo",
    "ChunkMetrics",
    "Stage",
    "TrainConfig",
    "TrainState",
    "Trainer",
    "UpdateMetrics",
    "greedy_transcript",
    "make_train",
]
