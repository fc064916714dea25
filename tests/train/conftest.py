"""Tiny training configurations shared by the train tests (compiled once a session)."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from gemjax.train import TrainConfig, Trainer, make_train
from gemjax.train.lm import TinyLMConfig
from gemjax.train.token_trainer import TokenTrainConfig

TINY = TrainConfig(
    env_id="game:GuessTheNumber-v0-easy",
    num_updates=4,
    num_episodes=16,
    num_transitions=32,
    hidden=(16,),
    eval_every=2,
    eval_episodes=16,
)
# A token agent's run of a few steps (GuessTheNumber-easy, a one-layer TinyLM of
# width 16, two-turn episodes).
TINY_TOKEN = TokenTrainConfig(
    env_id="game:GuessTheNumber-v0-easy",
    model=TinyLMConfig(width=16, layers=1),
    loop=dataclasses.replace(TokenTrainConfig().loop, horizon=2, context=320, response_tokens=6),
    num_episodes=4,
    num_updates=2,
    warmup_updates=2,
    eval_every=1,
    eval_episodes=4,
)


@pytest.fixture(scope="session")
def tiny_token():
    """``tiny_token(**changes)``: :data:`TINY_TOKEN` with some fields changed."""
    return lambda **changes: dataclasses.replace(TINY_TOKEN, **changes)


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
