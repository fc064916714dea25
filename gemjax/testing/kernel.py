"""The kernel contract every gemjax game must pass, as reusable checks.

:func:`check_kernel_contract` runs them all on one env; each check is also callable
on its own (with a game's own action sampler, to reach a branch random play rarely
reaches). The checks raise ``AssertionError`` with a message on the first breach and
need nothing but JAX, NumPy and chex, so a downstream game can run them in its own
tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from gemjax.checks import same_structure
from gemjax.core import Environment

ActionFn = Callable[[jax.Array, Any], jax.Array]
"""``(key, state) -> action``: one kernel action for one (unbatched) state; jittable."""

RANDOM_PLAY_STEPS = 128  # every registered id ends an episode within this many steps


@dataclass(frozen=True)
class Jitted:
    """An env's entry points, jitted once for the checks that share them (each
    ``jax.jit(env.reset)`` is a new function to JAX, compiled anew).

    Attributes:
        reset: ``reset(key, params)``.
        step: ``step(key, state, action, params)``.
        vreset: ``reset`` mapped over keys.
        vstep: ``step`` mapped over everything but ``params``.
    """

    reset: Callable
    step: Callable
    vreset: Callable
    vstep: Callable


@functools.lru_cache(maxsize=4)
def jitted(env: Environment) -> Jitted:
    """The :class:`Jitted` of ``env``, built once for the last few envs asked for, so
    the checks of one :func:`check_kernel_contract` compile each entry point once.
    Envs equal by their configuration share them."""
    return Jitted(
        reset=jax.jit(env.reset),
        step=jax.jit(env.step),
        vreset=jax.jit(jax.vmap(env.reset, in_axes=(0, None))),
        vstep=jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None))),
    )


@functools.lru_cache(maxsize=4)
def jitted_actions(actions: ActionFn) -> tuple[Callable, Callable]:
    """``(draw, vdraw)``: ``actions`` jitted, and jitted over a batch of keys and
    states, built once for the last few samplers asked for."""
    return jax.jit(actions), jax.jit(jax.vmap(actions))


def assert_trees_equal(actual: Any, expected: Any) -> None:
    """Same pytree structure, and leaves of equal dtype, shape and values (exactly)."""
    assert same_structure(actual, expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
        np.testing.assert_array_equal(a, e)


def lane(tree: Any, i: int) -> Any:
    """Lane ``i`` of a batched pytree."""
    return jax.tree.map(lambda x: x[i], tree)


def batched_resets(env: Environment, count: int, seed: int) -> Any:
    """``count`` resets of ``env`` under its default params, from the keys of
    ``jax.random.split(jax.random.key(seed), count)``, in one jitted vmap; the states
    as host arrays (for statistics of generated levels and grids)."""
    keys = jax.random.split(jax.random.key(seed), count)
    states, _ = jitted(env).vreset(keys, env.default_params)
    return jax.device_get(states)


def adversarial_actions(env: Environment) -> ActionFn:
    """Kernel actions reaching every branch: half are drawn from
    :meth:`~gemjax.core.Environment.action_space` (whose layout holds format errors,
    out-of-range values and wrong lengths, as an LLM could write them), half are
    :meth:`~gemjax.core.Environment.random_action` (well formed, GEM's sampler where
    GEM has one)."""
    space = env.action_space(env.default_params)

    def draw(key: jax.Array, state: Any) -> jax.Array:
        wild_key, fine_key, pick_key = jax.random.split(key, 3)
        wild = space.sample(wild_key)
        fine = env.random_action(fine_key, state)
        return jnp.where(jax.random.bernoulli(pick_key), fine, wild).astype(jnp.int32)

    return draw


def mixed_actions(base: ActionFn, special: Callable[[Any], jax.Array], p: float) -> ActionFn:
    """``special(state)`` with probability ``p``, else ``base``: e.g. a game's winning
    move (from the hidden state) mixed into :func:`adversarial_actions`."""

    def draw(key: jax.Array, state: Any) -> jax.Array:
        pick_key, base_key = jax.random.split(key)
        chosen = jnp.asarray(special(state), jnp.int32)
        return jnp.where(jax.random.bernoulli(pick_key, p), chosen, base(base_key, state))

    return draw


def actions_from(table: Any) -> ActionFn:
    """Draws a row of ``table`` (int32[n, *action_shape], e.g. a game's hand-picked
    branch actions made on the host), uniformly by key, whatever the state."""
    rows = jnp.asarray(table, jnp.int32)

    def draw(key: jax.Array, state: Any) -> jax.Array:
        return rows[jax.random.randint(key, (), 0, rows.shape[0])]

    return draw


def swept_params(env: Environment, params: Any) -> Any:
    """``params`` with other values of the same structure: every float leaf (the
    rewards) doubled plus 0.25, every ``max_turns`` leaf one lower (at least 1).
    ``validate_params`` accepts them; a kernel must run them without recompiling."""

    def sweep(path: tuple[Any, ...], leaf: Any) -> Any:
        leaf = jnp.asarray(leaf)
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            return (leaf * 2 + 0.25).astype(leaf.dtype)
        if getattr(path[-1], "name", None) == "max_turns":
            return jnp.maximum(leaf - 1, 1).astype(leaf.dtype)
        return leaf

    other = jax.tree_util.tree_map_with_path(sweep, params)
    env.validate_params(other)
    return other


def _signature(tree: Any) -> list[tuple[Any, tuple[int, ...], bool]]:
    return [
        (x.dtype, tuple(x.shape), bool(getattr(x, "weak_type", False)))
        for x in jax.tree.leaves(tree)
    ]


def check_structure(env: Environment, params: Any, actions: ActionFn) -> None:
    """Reset and step give the same pytree structure, dtypes, shapes and weak types
    (abstractly and as run, so either feeds a ``lax.scan`` carry); the timestep has
    its documented fields (reward float32[], flags bool[], event int32[] and
    int32[num_args], info ``{"success": bool[]}``); the observation matches
    ``observation_spec``; the action space's shape is the actions'."""
    key = jax.random.key(0)
    compiled = jitted(env)
    reset_out = jax.eval_shape(env.reset, key, params)
    state, ts = compiled.reset(key, params)
    action = jitted_actions(actions)[0](key, state)
    step_out = jax.eval_shape(env.step, key, reset_out[0], action, params)
    assert same_structure(reset_out, step_out)
    assert _signature(reset_out) == _signature(step_out)
    stepped = compiled.step(key, state, action, params)
    for concrete in ((state, ts), stepped):
        assert same_structure(concrete, reset_out)
        assert _signature(concrete) == _signature(reset_out)
    assert (ts.reward.dtype, ts.reward.shape) == (jnp.float32, ())
    for flag in (ts.terminated, ts.truncated):
        assert (flag.dtype, flag.shape) == (jnp.bool_, ())
    assert (ts.event.kind.dtype, ts.event.kind.shape) == (jnp.int32, ())
    assert ts.event.args.dtype == jnp.int32
    assert ts.event.args.shape == (len(env.messages.arg_names),)
    assert set(ts.info) == {"success"} and ts.info["success"].dtype == jnp.bool_
    spec = env.observation_spec(params)
    assert same_structure(spec, ts.observation)
    assert _signature(spec) == _signature(ts.observation)
    space = env.action_space(params)
    assert action.shape == space.shape and action.dtype == space.dtype == jnp.int32

    def rollout(key: jax.Array, keys: jax.Array) -> jax.Array:
        def body(carry: Any, k: jax.Array) -> tuple[Any, jax.Array]:
            carry = env.step(k, carry[0], actions(k, carry[0]), params)
            return carry, carry[1].reward

        return jax.lax.scan(body, env.reset(key, params), keys)[1]

    rewards = jax.eval_shape(rollout, key, jax.random.split(key, 3))
    assert (rewards.shape, rewards.dtype) == ((3,), jnp.float32)


def check_jit_matches_eager(
    env: Environment, params: Any, actions: ActionFn, episodes: int = 2, steps: int = 8
) -> list[Any]:
    """Jitted and eager reset and step agree exactly (values, dtypes, shapes) over
    ``episodes`` episodes of ``steps`` steps. Returns the jitted timesteps."""
    compiled = jitted(env)
    reset, step, draw = compiled.reset, compiled.step, jitted_actions(actions)[0]
    key = jax.random.key(1)
    timesteps = []
    for _ in range(episodes):
        key, k = jax.random.split(key)
        eager, on_device = env.reset(k, params), reset(k, params)
        assert_trees_equal(on_device, eager)
        for _ in range(steps):
            key, k, ka = jax.random.split(key, 3)
            action = draw(ka, on_device[0])
            eager = env.step(k, eager[0], action, params)
            on_device = step(k, on_device[0], action, params)
            assert_trees_equal(on_device, eager)
            timesteps.append(on_device[1])
    return timesteps


def check_vmap_matches_loop(
    env: Environment, params: Any, actions: ActionFn, batch: int = 8, steps: int = 10
) -> Any:
    """``vmap`` of reset and step equals a Python loop over lanes, exactly; the lanes'
    states differ at reset or after some step (else a lane mix-up could not show; a
    game whose reset is deterministic, as Tower of Hanoi's fixed ids, diverges with
    the lanes' actions). Returns the batched timesteps stacked over steps (leading
    axes ``[steps, batch]``)."""
    compiled = jitted(env)
    reset, step, vreset, vstep = compiled.reset, compiled.step, compiled.vreset, compiled.vstep
    vdraw = jitted_actions(actions)[1]
    keys = jax.random.split(jax.random.key(2), batch)
    states, ts = vreset(keys, params)
    singles = [reset(keys[i], params) for i in range(batch)]
    fetched = jax.device_get((states, ts))
    for i in range(batch):
        assert_trees_equal(lane(fetched, i), jax.device_get(singles[i]))
    diverged = lanes_differ(fetched[0])
    history = []
    for t in range(steps):
        step_keys = jax.random.split(jax.random.fold_in(jax.random.key(3), t), batch)
        batch_actions = vdraw(step_keys, states)
        states, ts = vstep(step_keys, states, batch_actions, params)
        fetched = jax.device_get((states, ts))
        for i in range(batch):
            singles[i] = step(step_keys[i], singles[i][0], batch_actions[i], params)
            assert_trees_equal(lane(fetched, i), jax.device_get(singles[i]))
        diverged = diverged or lanes_differ(fetched[0])
        history.append(fetched[1])
    assert diverged, "every lane had the same state at reset and after every step"
    return jax.tree.map(lambda *xs: np.stack(xs), *history)


def lanes_differ(states: Any) -> bool:
    """Some leaf of the batched (fetched) ``states`` differs between lanes."""
    return any((np.asarray(x) != np.asarray(x)[:1]).any() for x in jax.tree.leaves(states))


def check_no_retracing(
    env: Environment, params: Any, actions: ActionFn, other: Any | None = None
) -> None:
    """One trace of reset and of step serves new keys, states, actions and other
    params of the same structure (``other``, by default :func:`swept_params`),
    checked with ``chex.assert_max_traces``; a new action dtype does retrace (so the
    count is real). Clears chex's trace counter."""
    chex.clear_trace_counter()
    if other is None:
        other = swept_params(env, params)
    else:
        env.validate_params(other)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def reset(key: jax.Array, params: Any) -> Any:
        return env.reset(key, params)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(key: jax.Array, state: Any, action: jax.Array, params: Any) -> Any:
        return env.step(key, state, action, params)

    draw = jitted_actions(actions)[0]
    state, _ = reset(jax.random.key(0), params)
    state, _ = reset(jax.random.key(1), other)
    for i in range(4):
        key = jax.random.key(10 + i)
        state, _ = step(key, state, draw(key, state), other if i % 2 else params)
    action = draw(jax.random.key(0), state)
    try:
        step(jax.random.key(0), state, action.astype(jnp.int8), params)
    except AssertionError:
        return
    raise AssertionError("a new action dtype did not retrace: the trace count is not counting")


@dataclass(frozen=True)
class RandomPlay:
    """What :func:`check_random_play` saw.

    Attributes:
        kinds: int32[steps, batch] the step events' kinds (-1 once a lane was done).
        rewards: float32[steps, batch] (0 once done).
        success: bool[batch] the lane's episode ended in success.
        length: int32[batch] the step at which the lane's episode ended (1-based).
    """

    kinds: np.ndarray
    rewards: np.ndarray
    success: np.ndarray
    length: np.ndarray


def check_random_play(
    env: Environment,
    params: Any,
    actions: ActionFn,
    batch: int = 16,
    steps: int = RANDOM_PLAY_STEPS,
) -> RandomPlay:
    """Play ``batch`` episodes with ``actions`` (one jitted ``lax.scan``, lanes frozen
    once done) and check each ends within ``steps`` steps, with finite rewards and
    event kinds of the message table; the instructions only at reset."""
    vreset = jax.vmap(env.reset, in_axes=(0, None))
    vstep = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    @jax.jit
    def play(key: jax.Array) -> tuple[Any, ...]:
        state, ts = vreset(jax.random.split(key, batch), params)

        def body(carry: Any, key: jax.Array) -> tuple[Any, Any]:
            state, done, success = carry
            keys = jax.random.split(key, batch)
            action = jax.vmap(actions)(keys, state)
            new_state, ts = vstep(keys, state, action, params)
            keep = lambda new, old: jnp.where(  # noqa: E731
                done.reshape(done.shape + (1,) * (new.ndim - 1)), old, new
            )
            state = jax.tree.map(keep, new_state, state)
            kind = jnp.where(done, -1, ts.event.kind)
            reward = jnp.where(done, 0.0, ts.reward)
            success = success | (~done & ts.info["success"])
            return (state, done | ts.done, success), (kind, reward, done)

        init = (state, jnp.zeros(batch, bool), jnp.zeros(batch, bool))
        (_, done, success), out = jax.lax.scan(body, init, jax.random.split(key, steps))
        return ts.event.kind, done, success, *out

    first, done, success, kinds, rewards, was_done = jax.device_get(play(jax.random.key(4)))
    assert (first == env.messages.kind("instructions")).all()
    assert done.all(), f"{(~done).sum()} of {batch} episodes still running after {steps} steps"
    assert np.isfinite(rewards).all()
    live = kinds[kinds >= 0]
    assert ((live > 0) & (live < len(env.messages.names))).all(), np.unique(live)
    length = (~was_done).sum(axis=0).astype(np.int32)
    return RandomPlay(kinds=kinds, rewards=rewards, success=success, length=length)


def check_grammar_round_trip(env: Environment, params: Any, count: int = 32) -> None:
    """The host grammar and the action layout agree: rendering a parsed rendering
    gives the same text (for ``random_action`` and ``action_space`` draws alike); every
    ``random_action`` renders to a well-formed action that parses back to itself (the
    protocol: never a format error); text without an action parses to a format error,
    and stepping that action shows the ``format_error`` message."""
    key = jax.random.key(5)
    keys = jax.random.split(key, count)
    compiled = jitted(env)
    states, _ = compiled.vreset(keys, params)
    fine = jax.device_get(jax.jit(jax.vmap(env.random_action))(keys, states))
    wild = jax.device_get(env.action_space(params).sample(key, (count,)))
    well_formed = 0
    for action in [*fine, *wild]:
        text = env.grammar.render(action)
        parsed = env.grammar.parse(text)
        assert env.grammar.render(np.asarray(parsed.action)) == text, (action, text)
    for action in fine:
        text = env.grammar.render(action)
        parsed = env.grammar.parse(text)
        if parsed.ok:
            well_formed += 1
            np.testing.assert_array_equal(np.asarray(parsed.action), action, err_msg=text)
    assert well_formed == count, f"{well_formed} of {count} random actions are well formed"
    step = compiled.step
    for text in ("", "no action here", "\\boxed{}", "boxed{1}"):
        parsed = env.grammar.parse(text)
        assert not parsed.ok, text
        action = jnp.asarray(parsed.action, jnp.int32)
        _, ts = step(key, lane(states, 0), action, params)
        assert int(ts.event.kind) == env.messages.kind("format_error"), text


def check_messages_render(env: Environment, play: RandomPlay | None = None) -> None:
    """Every message kind renders on the host: with zero args, and with the args of
    the reset instructions; a random play's kinds are all messages of the table."""
    table = env.messages
    zeros = [0] * len(table.arg_names)
    for kind, name in enumerate(table.names):
        text = table.render(kind, zeros)
        assert isinstance(text, str) and text, name
    _, ts = env.reset(jax.random.key(6), env.default_params)
    assert table.render_event(ts.event)
    if play is not None:
        assert set(np.unique(play.kinds[play.kinds >= 0]).tolist()) <= set(range(len(table.names)))


def check_kernel_contract(
    env: Environment,
    params: Any = None,
    actions: ActionFn | None = None,
    batch: int = 8,
) -> RandomPlay:
    """Run every check of this module on ``env`` (its default params and
    :func:`adversarial_actions` unless given). Returns the random play's record, for
    a game's own assertions (kinds reached, successes)."""
    params = env.default_params if params is None else params
    actions = adversarial_actions(env) if actions is None else actions
    check_structure(env, params, actions)
    check_jit_matches_eager(env, params, actions)
    check_vmap_matches_loop(env, params, actions, batch=batch)
    check_no_retracing(env, params, actions)
    play = check_random_play(env, params, actions, batch=2 * batch)
    check_grammar_round_trip(env, params)
    check_messages_render(env, play)
    return play
