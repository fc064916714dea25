"""AutoReset (same-step and next-step) and EpisodeStatistics on GuessTheNumber."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gemjax
from gemjax.core import ActionMasking
from gemjax.envs.guess_the_number import MESSAGES
from gemjax.wrappers import AutoReset, AutoResetState, EpisodeStatistics

EASY = "game:GuessTheNumber-v0-easy"  # 1..10, 4 turns
MODES = ("same_step", "next_step")
STAT_KEYS = {"episode_return", "episode_length", "episode_success"}
AUTO_KEYS = {"final_observation", "final_event", "reset"}
INSTRUCTIONS = MESSAGES.kind("instructions")


def assert_trees_equal(actual, expected) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert (a.dtype, a.shape) == (e.dtype, e.shape)
        np.testing.assert_array_equal(a, e)


def lane(tree, i: int):
    return jax.tree.map(lambda x: x[i], tree)


def game_state(state):
    """The GuessTheNumber state inside AutoReset(EpisodeStatistics(env))."""
    return state.inner.inner


@pytest.fixture(scope="module")
def raw(kits):
    return kits(EASY)


@pytest.fixture(scope="module", params=MODES)
def mode(request):
    return request.param


@pytest.fixture(scope="module")
def wrapped(kits, raw, mode):
    return kits(AutoReset(EpisodeStatistics(raw.env), mode))


def wrong_guess(target: int) -> jnp.ndarray:
    return jnp.int32(1 if target != 1 else 2)


# --- scripted episodes with known targets ------------------------------------------


def test_reset_info(wrapped, raw):
    key = jax.random.key(0)
    state, ts = wrapped.reset(key, raw.params)
    raw_state, raw_ts = raw.reset(key, raw.params)
    assert_trees_equal(game_state(state), raw_state)
    assert_trees_equal(ts.observation, raw_ts.observation)
    assert_trees_equal(ts.event, raw_ts.event)
    assert_trees_equal(ts.info["final_observation"], raw_ts.observation)
    assert_trees_equal(ts.info["final_event"], raw_ts.event)
    assert bool(ts.info["reset"]) and not bool(state.reset_pending)
    assert float(ts.info["episode_return"]) == 0.0 and int(ts.info["episode_length"]) == 0
    assert not bool(ts.info["episode_success"]) and not bool(ts.done)


@pytest.mark.parametrize(
    "ending", ["success", "format_error", "max_turns"], ids=lambda e: f"ends_with_{e}"
)
def test_episode_end(wrapped, raw, mode, ending):
    params = raw.params
    keys = jax.random.split(jax.random.key(1), 8)
    state, _ = wrapped.reset(keys[0], params)
    target = int(game_state(state).target)
    # Non-ending guesses, then the ending action.
    others = [g for g in range(1, 11) if g != target]
    if ending == "success":
        script = [others[0], target]
    elif ending == "format_error":
        script = [others[0], others[1], 0]
    else:  # four distinct wrong guesses: the fourth hits max_turns (4) in easy
        script = others[:4]
    expected_reward = {
        "success": 1.0,
        "format_error": -0.1,
        "max_turns": 1 - abs(others[3] - target) / 9,
    }[ending]
    expected_return = np.float32(0.0)
    for t, guess in enumerate(script[:-1], start=1):
        state, ts = wrapped.step(keys[t], state, jnp.int32(guess), params)
        assert not bool(ts.done) and not bool(ts.info["reset"])
        assert float(ts.reward) == 0.0 and int(ts.info["episode_length"]) == t
        assert int(ts.observation["turn"]) == t and ts.observation["hints"][guess] != 0
        assert_trees_equal(ts.info["final_observation"], ts.observation)
        assert_trees_equal(ts.info["final_event"], ts.event)
        expected_return = expected_return + np.float32(ts.reward)

    end_key = keys[len(script)]
    raw_next, raw_ts = raw.step(end_key, game_state(state), jnp.int32(script[-1]), params)
    state, ts = wrapped.step(end_key, state, jnp.int32(script[-1]), params)
    kind = MESSAGES.kind(ending)

    # The terminal step's reward, flags and statistics, whatever the mode.
    assert np.float32(ts.reward) == np.float32(expected_reward)
    assert bool(ts.terminated)
    assert bool(ts.truncated) is (ending == "max_turns")
    assert bool(ts.info["success"]) is (ending == "success")
    assert bool(ts.info["episode_success"]) is (ending == "success")
    assert int(ts.info["episode_length"]) == len(script)
    expected_return = expected_return + np.float32(expected_reward)
    assert np.float32(ts.info["episode_return"]) == expected_return
    # final_* hold the terminal step's own observation and event.
    assert_trees_equal(ts.info["final_observation"], raw_ts.observation)
    assert_trees_equal(ts.info["final_event"], raw_ts.event)
    assert int(ts.info["final_event"].kind) == kind
    assert int(ts.info["final_observation"]["turn"]) == len(script)

    fresh_state, fresh = raw.reset(end_key, params)
    if mode == "same_step":
        # The new episode's observation and instructions, already on the ending step.
        assert bool(ts.info["reset"]) and not bool(state.reset_pending)
        assert_trees_equal(ts.observation, fresh.observation)
        assert_trees_equal(ts.event, fresh.event)
        assert int(ts.event.kind) == INSTRUCTIONS and int(ts.observation["turn"]) == 0
        assert_trees_equal(game_state(state), fresh_state)
        assert float(state.inner.episode_return) == 0.0
        assert int(state.inner.episode_length) == 0
        # The next step plays the new episode.
        next_key = keys[len(script) + 1]
        guess = wrong_guess(int(fresh_state.target))
        state, ts = wrapped.step(next_key, state, guess, params)
        assert not bool(ts.done) and not bool(ts.info["reset"])
        assert int(ts.observation["turn"]) == 1 and int(ts.info["episode_length"]) == 1
        assert_trees_equal(game_state(state), raw.step(next_key, fresh_state, guess, params)[0])
        return

    # next_step: the ending step shows the terminal observation and event ...
    assert not bool(ts.info["reset"]) and bool(state.reset_pending)
    assert_trees_equal(ts.observation, raw_ts.observation)
    assert_trees_equal(ts.event, raw_ts.event)
    assert_trees_equal(game_state(state), raw_next)
    # ... and the following step is the reset, whatever its action.
    reset_key = keys[len(script) + 1]
    fresh_state, fresh = raw.reset(reset_key, params)
    outs = [wrapped.step(reset_key, state, jnp.int32(a), params) for a in (0, target, 5, 99)]
    for new_state, ts in outs:
        assert bool(ts.info["reset"]) and not bool(new_state.reset_pending)
        assert float(ts.reward) == 0.0 and ts.reward.dtype == jnp.float32
        assert not bool(ts.terminated) and not bool(ts.truncated)
        assert not bool(ts.info["success"]) and not bool(ts.info["episode_success"])
        assert float(ts.info["episode_return"]) == 0.0 and int(ts.info["episode_length"]) == 0
        assert_trees_equal(ts.observation, fresh.observation)
        assert_trees_equal(ts.event, fresh.event)
        assert int(ts.event.kind) == INSTRUCTIONS
        assert_trees_equal(game_state(new_state), fresh_state)
        assert_trees_equal(new_state, outs[0][0])
        for name in ("observation", "reward", "terminated", "truncated", "event"):
            assert_trees_equal(getattr(ts, name), getattr(outs[0][1], name))
    state = outs[0][0]
    next_key = keys[len(script) + 2]
    guess = wrong_guess(int(fresh_state.target))
    state, ts = wrapped.step(next_key, state, guess, params)
    assert not bool(ts.done) and not bool(ts.info["reset"]) and not bool(state.reset_pending)
    assert int(ts.observation["turn"]) == 1 and int(ts.info["episode_length"]) == 1


# --- randomized comparison with a Python model, under vmap and jit ---------------------


def reference_rollout(raw, params, mode, reset_key, keys, actions):
    """AutoReset(EpisodeStatistics(env)) written with Python control flow, one lane."""
    assert not raw.env.step_uses_key  # the wrapper then resets with the step's key
    state, _ = raw.reset(reset_key, params)
    episode_return, length, pending = np.float32(0.0), 0, False
    records = []
    for key, action in zip(keys, actions, strict=True):
        if mode == "next_step" and pending:
            state, ts = raw.reset(key, params)
            episode_return, length, pending = np.float32(0.0), 0, False
            records.append(
                {
                    "observation": ts.observation,
                    "event": ts.event,
                    "reward": np.float32(0.0),
                    "terminated": False,
                    "truncated": False,
                    "success": False,
                    "reset": True,
                    "episode_return": np.float32(0.0),
                    "episode_length": 0,
                    "episode_success": False,
                }
            )
            continue
        next_state, ts = raw.step(key, state, action, params)
        episode_return = np.float32(episode_return + np.float32(ts.reward))
        length += 1
        record = {
            "observation": ts.observation,
            "event": ts.event,
            "reward": np.float32(ts.reward),
            "terminated": bool(ts.terminated),
            "truncated": bool(ts.truncated),
            "success": bool(ts.info["success"]),
            "reset": False,
            "episode_return": episode_return,
            "episode_length": length,
            "episode_success": bool(ts.info["success"]),
            "final_observation": ts.observation,
            "final_event": ts.event,
        }
        state = next_state
        if bool(ts.done):
            if mode == "same_step":
                state, fresh = raw.reset(key, params)
                record.update(observation=fresh.observation, event=fresh.event, reset=True)
                episode_return, length = np.float32(0.0), 0
            else:
                pending = True
        records.append(record)
    return records


@pytest.mark.parametrize("sparse_resets", [False, True])
@pytest.mark.parametrize(
    "env_id", [EASY, pytest.param("game:GuessTheNumber-v0-random", marks=pytest.mark.slow)]
)
def test_vmapped_jitted_matches_reference(kits, mode, env_id, sparse_resets):
    raw = kits(env_id)
    wrapped = kits(AutoReset(EpisodeStatistics(raw.env), mode, sparse_resets))
    params = raw.params
    batch, steps = 3, 16
    rng = np.random.default_rng(0)
    reset_keys = jax.random.split(jax.random.key(21), batch)
    step_keys = jax.random.split(jax.random.key(22), (steps, batch))
    state, _ = wrapped.vreset(reset_keys, params)
    actions = np.zeros((steps, batch), np.int32)
    outs = []
    for t in range(steps):
        # Often guess the target, sometimes a format error: many episode ends.
        target = np.asarray(game_state(state).target)
        u = rng.random(batch)
        noise = rng.integers(-1, raw.env.capacity + 2, batch)
        actions[t] = np.where(u < 0.3, target, np.where(u < 0.4, 0, noise))
        state, ts = wrapped.vstep(step_keys[t], state, jnp.asarray(actions[t]), params)
        outs.append(jax.device_get(ts))
    resets = 0
    for i in range(batch):
        expected = reference_rollout(
            raw, params, mode, reset_keys[i], list(step_keys[:, i]), jnp.asarray(actions[:, i])
        )
        for t, record in enumerate(expected):
            ts = lane(outs[t], i)
            assert_trees_equal(ts.observation, record["observation"])
            assert_trees_equal(ts.event, record["event"])
            assert np.float32(ts.reward) == record["reward"]
            assert bool(ts.terminated) is record["terminated"]
            assert bool(ts.truncated) is record["truncated"]
            assert bool(ts.info["success"]) is record["success"]
            assert bool(ts.info["reset"]) is record["reset"]
            assert np.float32(ts.info["episode_return"]) == record["episode_return"]
            assert int(ts.info["episode_length"]) == record["episode_length"]
            assert bool(ts.info["episode_success"]) is record["episode_success"]
            if "final_observation" in record:
                assert_trees_equal(ts.info["final_observation"], record["final_observation"])
                assert_trees_equal(ts.info["final_event"], record["final_event"])
            resets += record["reset"]
    assert resets >= batch  # episodes did end and restart in every mode


# --- structure ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda env: EpisodeStatistics(env),
        lambda env: AutoReset(env, "same_step"),
        lambda env: AutoReset(env, "next_step"),
        lambda env: AutoReset(EpisodeStatistics(env), "same_step"),
        lambda env: AutoReset(EpisodeStatistics(env), "next_step"),
    ],
    ids=["stats", "auto_same", "auto_next", "auto_stats_same", "auto_stats_next"],
)
@pytest.mark.parametrize("env_id", [EASY, "game:GuessTheNumber-v0-random"])
def test_reset_and_step_structure_identical(build, env_id):
    env = build(gemjax.make(env_id))
    params = env.default_params
    key = jax.random.key(0)
    reset_out = jax.eval_shape(env.reset, key, params)
    step_out = jax.eval_shape(env.step, key, reset_out[0], jnp.int32(3), params)
    assert jax.tree.structure(reset_out) == jax.tree.structure(step_out)
    for r, s in zip(jax.tree.leaves(reset_out), jax.tree.leaves(step_out), strict=True):
        assert (r.dtype, r.shape, r.weak_type) == (s.dtype, s.shape, s.weak_type)
    info_keys = {"success"}
    if "Statistics" in env.name:
        info_keys |= STAT_KEYS
    if isinstance(env, AutoReset):
        info_keys |= AUTO_KEYS
        assert isinstance(reset_out[0], AutoResetState)
        assert reset_out[0].reset_pending.dtype == jnp.bool_
    assert set(reset_out[1].info) == set(step_out[1].info) == info_keys
    info = reset_out[1].info
    if "episode_return" in info:
        assert info["episode_return"].dtype == jnp.float32
        assert info["episode_length"].dtype == jnp.int32
        assert info["episode_success"].dtype == jnp.bool_

    # A vmapped lax.scan over steps accepts reset's output as its carry.
    def rollout(keys, actions):
        carry = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

        def body(carry, action):
            out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, carry[0], action, params)
            return out, out[1].reward

        return jax.lax.scan(body, carry, actions)

    _, rewards = jax.eval_shape(rollout, jax.random.split(key, 2), jnp.zeros((5, 2), jnp.int32))
    assert rewards.shape == (5, 2) and rewards.dtype == jnp.float32


# --- delegation and configuration -------------------------------------------------------


def test_invalid_mode():
    with pytest.raises(ValueError, match="mode"):
        AutoReset(gemjax.make(EASY), "reset_on_done")


def test_wrapper_delegation_and_equality():
    env = gemjax.make(EASY)
    wrapped = AutoReset(EpisodeStatistics(env), "next_step")
    assert wrapped.unwrapped is env
    assert wrapped.name == "AutoReset(EpisodeStatistics(GuessTheNumber))"
    assert wrapped.messages is env.messages and wrapped.grammar is env.grammar
    assert wrapped.suffix is env.suffix and wrapped.step_uses_key is env.step_uses_key
    assert wrapped.capacity == env.capacity  # attribute delegation
    assert wrapped.action_space(env.default_params) == env.action_space(env.default_params)
    state, _ = wrapped.reset(jax.random.key(3), env.default_params)
    assert_trees_equal(wrapped.instructions_event(state), env.instructions_event(game_state(state)))
    assert wrapped.suffix_values(state) == {}

    same = AutoReset(EpisodeStatistics(gemjax.make(EASY)), "next_step")
    assert wrapped == same and hash(wrapped) == hash(same)
    assert wrapped != AutoReset(EpisodeStatistics(env), "same_step")
    assert wrapped != AutoReset(env, "next_step")
    assert wrapped != AutoReset(
        EpisodeStatistics(gemjax.make("game:GuessTheNumber-v0-hard")), "next_step"
    )


def test_action_masking_reads_the_wrapped_state():
    """A wrapped env keeps the ActionMasking capability of its game, applied to the
    game's part of the wrapper's state (and a game without it has none wrapped)."""
    env = gemjax.make(EASY)
    wrapped = AutoReset(EpisodeStatistics(env), "next_step")
    assert isinstance(wrapped, ActionMasking)
    state, _ = wrapped.reset(jax.random.key(3), env.default_params)
    state, _ = wrapped.step(jax.random.key(4), state, jnp.int32(3), env.default_params)
    expected = env.valid_action_mask(game_state(state))
    assert not expected.all()  # the guessed 3 is masked: a mask of the real state
    np.testing.assert_array_equal(jax.jit(wrapped.valid_action_mask)(state), expected)
    assert not isinstance(AutoReset(gemjax.make("game:Mastermind-v0-easy")), ActionMasking)


def test_next_step_reset_step_reports_the_fresh_episode_as_final():
    """The reset step of next-step mode ignores its action: ``final_*`` must not
    depend on it (they describe the fresh episode, like ``AutoReset.reset``)."""
    env = AutoReset(gemjax.make("game:GuessTheNumber-v0-easy"), "next_step")
    params = env.default_params
    state, _ = env.reset(jax.random.key(0), params)
    state, ts = env.step(jax.random.key(1), state, jnp.int32(0), params)  # format error
    assert bool(ts.terminated)
    finals = []
    for action in (0, 5, 9):
        _, ts = env.step(jax.random.key(2), state, jnp.int32(action), params)
        assert bool(ts.info["reset"])
        assert int(ts.info["final_event"].kind) == MESSAGES.kind("instructions")
        assert int(ts.info["final_observation"]["turn"]) == 0
        finals.append(jax.tree.map(np.asarray, ts.info["final_observation"]))
    for other in finals[1:]:
        jax.tree.map(np.testing.assert_array_equal, finals[0], other)
