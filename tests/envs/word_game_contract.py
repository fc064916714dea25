"""JAX-contract checks shared by the word games' tests (Wordle, Hangman).

Each check takes a :class:`Kit` (tests/conftest.py) and a function drawing a batch of
kernel actions that reach every branch.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from kernel_contract import assert_trees_equal, check_reset_step_structure, lane

Actions = Callable[[np.random.Generator, object, int], np.ndarray]


def with_secret(actions: np.ndarray, states, lanes: list[int]) -> np.ndarray:
    """``actions`` with the given lanes guessing their secret word (successes)."""
    actions = actions.copy()
    for i in lanes:
        actions[i, 0] = int(states.word_length[i])
        actions[i, 1:] = np.asarray(states.secret[i])
    return actions


def check_jit_matches_eager(kit, actions: Actions) -> None:
    env, params = kit.env, kit.params
    key = jax.random.key(1)
    eager, jitted = env.reset(key, params), kit.reset(key, params)
    assert_trees_equal(jitted, eager)
    s_eager, s_jit = eager[0], jitted[0]
    batch = actions(np.random.default_rng(0), env, 6)
    batch = with_secret(batch, jax.tree.map(lambda x: x[None], s_jit), [0])[::-1]
    for action in batch:
        eager = env.step(key, s_eager, jnp.asarray(action), params)
        jitted = kit.step(key, s_jit, jnp.asarray(action), params)
        assert_trees_equal(jitted, eager)
        s_eager, s_jit = eager[0], jitted[0]
    assert bool(jitted[1].info["success"])  # the last action guessed the secret


def check_vmap_matches_loop(kit, actions: Actions, batch: int = 8, steps: int = 10) -> None:
    env, params = kit.env, kit.params
    rng = np.random.default_rng(1)
    keys = jax.random.split(jax.random.key(2), batch)
    states, ts = kit.vreset(keys, params)
    singles = [kit.reset(keys[i], params) for i in range(batch)]
    for i in range(batch):
        assert_trees_equal(lane((states, ts), i), singles[i])
    assert len({tuple(s) for s in np.asarray(states.secret).tolist()}) > 1
    rewards = []
    for t in range(steps):
        batch_actions = with_secret(actions(rng, env, batch), states, [t % batch])
        states, ts = kit.vstep(keys, states, jnp.asarray(batch_actions), params)
        rewards.append(np.asarray(ts.reward))
        for i in range(batch):
            singles[i] = kit.step(keys[i], singles[i][0], jnp.asarray(batch_actions[i]), params)
            assert_trees_equal(lane((states, ts), i), singles[i])
    assert len(np.unique(np.concatenate(rewards))) >= 3  # format errors, zeros, progress


def check_structure(kit, obs_keys: set[str]) -> None:
    env = kit.env
    action = jnp.zeros((env.size + 1,), jnp.int32)
    state, ts = check_reset_step_structure(kit, action, obs_keys)
    for name in ("turn", "word_length", "max_turns"):
        assert ts.observation[name].shape == () and ts.observation[name].dtype == jnp.int32
    assert "secret" not in ts.observation
    # Nothing in the observation equals the secret's letters at reset.
    secret = np.asarray(state.secret)
    for leaf in jax.tree.leaves(ts.observation):
        leaf = np.asarray(leaf)
        if leaf.shape[-1:] == secret.shape:
            assert not (leaf == secret).all()


def check_no_retracing(kit, actions: Actions) -> None:
    env, params = kit.env, kit.params
    traces = {"reset": 0, "step": 0}

    def reset(key, params):
        traces["reset"] += 1
        return env.reset(key, params)

    def step(key, state, action, params):
        traces["step"] += 1
        return env.step(key, state, action, params)

    reset, step = jax.jit(reset), jax.jit(step)
    other = params.replace(bank=params.bank.replace(max_turns=params.bank.max_turns - 1))
    state, _ = reset(jax.random.key(0), params)
    state, _ = reset(jax.random.key(1), other)
    for action in actions(np.random.default_rng(3), env, 4):
        state, _ = step(jax.random.key(0), state, jnp.asarray(action), other)
    assert traces == {"reset": 1, "step": 1}
    step(jax.random.key(0), state, jnp.zeros((env.size + 1,), jnp.int8), params)
    assert traces["step"] == 2  # counting works: a new input type retraces


def check_reset_uniform(kit, n: int, seed: int) -> dict:
    """Reset ``n`` times; every configuration and every pool word about equally often.

    Returns ``{word_length: counts per pool word}``."""
    env, params = kit.env, kit.params
    states, _ = kit.vreset(jax.random.split(jax.random.key(seed), n), params)
    states = jax.device_get(states)
    bank = jax.device_get(params.bank)
    lengths = states.word_length
    configs = list(zip(lengths.tolist(), states.max_turns.tolist(), strict=True))
    assert set(configs) == set(env.configs)
    for config in env.configs:  # 5 sigma
        share = configs.count(config) / n
        p = 1 / len(env.configs)
        assert abs(share - p) <= 5 * np.sqrt(p * (1 - p) / n), (config, share)
    assert (states.turn == 0).all()
    counts = {}
    for r, (length, _) in enumerate(env.configs):
        pool = bank.words[r, : bank.num_words[r], :length].astype(np.int32)
        index = {tuple(w): i for i, w in enumerate(pool.tolist())}
        rows = lengths == length
        counts[length] = np.zeros(len(pool), int)
        for name in ("secret", "example"):
            values = getattr(states, name)[rows]
            assert not values[:, length:].any()
            hits = np.bincount(
                [index[tuple(w)] for w in values[:, :length].tolist()], minlength=len(pool)
            )
            if name == "secret":
                counts[length] = hits
            expected = rows.sum() / len(pool)
            # Each word's count is about Binomial(rows, 1/pool): within 5 sigma, and
            # the counts' spread is that of a uniform draw (chi-square, loose bounds).
            assert (np.abs(hits - expected) < 5 * np.sqrt(expected) + 1).all(), name
            chi2 = ((hits - expected) ** 2 / expected).sum()
            assert 0.5 * len(pool) < chi2 < 1.6 * len(pool) + 20, (name, chi2)
        same = (states.secret[rows] == states.example[rows]).all(axis=1).mean()
        assert same < 5 / len(pool) + 0.02
    return counts
