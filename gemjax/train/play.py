"""Watch a trained policy play: one greedy episode rendered as GEM's text."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from gemjax.core import Environment
from gemjax.envs.guess_the_number import GuessTheNumber
from gemjax.train.trainer import Trainer


def greedy_transcript(trainer: Trainer, params: Any, key: jax.Array) -> str:
    """One greedy (argmax) episode of ``trainer``'s policy with ``params``, as the
    text an LLM would see and write: the instructions, then per turn the action (as
    ``\\boxed{...}``) and the game's answer, one per line (GEM's
    ``concat_with_action`` layout, without the suffix).

    Args:
        trainer: from :func:`gemjax.train.make_train`.
        params: the policy's variables (``TrainState.params``).
        key: PRNG key array[] choosing the episode.
    """
    env, rollout = trainer.env, trainer.rollout
    params_env = rollout.env_params
    reset_key, step_key = jax.random.split(key)
    state, ts = jax.vmap(env.reset, in_axes=(0, None))(reset_key[None], params_env)
    lines = [env.messages.render_event(jax.tree.map(lambda x: x[0], ts.event)).rstrip("\n")]
    act = jax.jit(rollout.policy)
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    for turn in range(trainer.horizon):
        _, _, logits, _ = act(params, state, ts.observation)
        action = rollout.head.mode(logits)
        state, ts = step(jax.random.fold_in(step_key, turn), state, action, params_env)
        lines.append(env.grammar.render(np.asarray(action[0])))
        lines.append(env.messages.render_event(jax.tree.map(lambda x: x[0], ts.event)))
        if bool(ts.done[0]):
            break
    return "\n".join(lines)


def binary_search_mean_turns(n: int) -> float:
    """Mean guesses of the optimal GuessTheNumber strategy over ``n`` equally likely
    numbers: a balanced binary search, ``2**(d-1)`` numbers found at guess ``d``
    (4.86 for 1..50, below the loose ``log2 50 = 5.6``)."""
    total, depth, left = 0, 1, n
    while left:
        found = min(2 ** (depth - 1), left)
        total += depth * found
        left -= found
        depth += 1
    return total / n


def binary_search_optimum(env: Environment) -> float | None:
    """:func:`binary_search_mean_turns` of a GuessTheNumber env with a fixed range
    (None for other games and for ``-random``, whose range changes every episode)."""
    if not isinstance(env, GuessTheNumber) or env.randomize:
        return None
    params = env.default_params
    return binary_search_mean_turns(int(params.max_number) - int(params.min_number) + 1)
