"""Checks shared by the word games' tests (Wordle, Hangman): the game's own
observation layout, the kernel contract on secret guesses, reset uniformity.

Each check takes a :class:`Kit` (tests/conftest.py); some take a function drawing a
batch of kernel actions that reach every branch.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gemjax import testing

Actions = Callable[[np.random.Generator, object, int], np.ndarray]


def play_secret(state) -> jax.Array:
    """The winning guess of ``state``: ``[word_length, *secret]``."""
    return jnp.concatenate([state.word_length[None], state.secret]).astype(jnp.int32)


def check_contract_on_secret_guesses(kit, actions: Actions) -> None:
    """jit equals eager and vmap equals a loop on ``actions`` (host-drawn branch
    actions) mixed with guesses of the secret: successes are compared too, and the
    rewards take at least three values (format errors, zeros, progress). The rest of
    the kernel contract runs on every id in tests/test_contract.py."""
    env, params = kit.env, kit.params
    table = testing.actions_from(actions(np.random.default_rng(0), env, 256))
    mixed = testing.mixed_actions(table, play_secret, 0.2)
    timesteps = testing.check_jit_matches_eager(env, params, mixed, episodes=1, steps=10)
    assert any(bool(ts.info["success"]) for ts in timesteps)
    history = testing.check_vmap_matches_loop(env, params, mixed, batch=8, steps=10)
    assert len(np.unique(history.reward)) >= 3
    testing.check_no_retracing(env, params, table)


def check_observation_layout(kit, obs_keys: set[str]) -> None:
    """The observation has exactly ``obs_keys``, int32 scalars for the counters, and
    nothing in it equals the secret's letters at reset."""
    state, ts = kit.reset(jax.random.key(0), kit.params)
    assert set(ts.observation) == obs_keys
    for name in ("turn", "word_length", "max_turns"):
        assert ts.observation[name].shape == () and ts.observation[name].dtype == jnp.int32
    assert "secret" not in ts.observation
    secret = np.asarray(state.secret)
    for leaf in jax.tree.leaves(ts.observation):
        leaf = np.asarray(leaf)
        if leaf.shape[-1:] == secret.shape:
            assert not (leaf == secret).all()


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
