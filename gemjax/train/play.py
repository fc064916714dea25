"""Watch a trained policy play: one greedy episode rendered as GEM's text."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

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
        action = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        state, ts = step(jax.random.fold_in(step_key, turn), state, action, params_env)
        lines.append(env.grammar.render(np.asarray(action[0])))
        lines.append(env.messages.render_event(jax.tree.map(lambda x: x[0], ts.event)))
        if bool(ts.done[0]):
            break
    return "\n".join(lines)
