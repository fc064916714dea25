"""A tiny training configuration shared by the train tests (compiled once a session)."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from gemjax.train import TrainConfig, Trainer, make_train

TINY = TrainConfig(
    env_id="game:GuessTheNumber-v0-easy",
    num_updates=4,
    num_episodes=16,
    num_transitions=32,
    hidden=(16,),
    eval_every=2,
    eval_episodes=16,
)


@pytest.fixture(scope="session")
def tiny():
    """``tiny(**changes)``: :data:`TINY` with some fields changed."""
    return lambda **changes: dataclasses.replace(TINY, **changes)


@pytest.fixture(scope="session")
def tiny_trainer() -> Trainer:
    return make_train(TINY)


@pytest.fixture(scope="session")
def tiny_state(tiny_trainer):
    return jax.jit(tiny_trainer.init)(jax.random.key(0))
