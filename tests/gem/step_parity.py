"""What every GEM parity test shares: comparing two step 5-tuples, playing episodes."""

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest


def check_step(ours: tuple, theirs: tuple) -> list[str]:
    """The ways gemjax's step 5-tuple ``ours`` differs from GEM's ``theirs`` (empty when
    equal): same observation string, same types, rewards equal in float32 (gemjax's
    rewards are float32, see docs/gem_differences.md), same flags and info."""
    problems = []
    (o_obs, o_reward, o_term, o_trunc, o_info) = ours
    (g_obs, g_reward, g_term, g_trunc, g_info) = theirs
    if not (type(o_obs) is str and o_obs == g_obs):
        problems.append("observation")
    if not (type(o_reward) is float and np.float32(o_reward) == np.float32(g_reward)):
        problems.append("reward")
    if not (type(o_term) is bool and o_term == g_term):
        problems.append("terminated")
    if not (type(o_trunc) is bool and o_trunc == g_trunc):
        problems.append("truncated")
    if o_info != g_info:
        problems.append("info")
    return problems


def play_episode(
    gem_env: Any,
    ours: Any,
    stream: Callable[[], str],
    extra: int,
    steps: int,
    label: str,
    describe: Callable[[], str],
) -> list[str]:
    """Step GEM's env and ours with the same ``stream`` of responses for at most
    ``steps`` turns, until the episode ends and then ``extra`` more (GEM does not
    freeze), failing on the first 5-tuple that differs. Returns GEM's observations.

    ``label`` names the episode and ``describe()`` the hidden state in the failure."""
    history: list[str] = []
    observations: list[str] = []
    for step in range(steps):
        action = stream()
        history.append(action)
        theirs, mine = gem_env.step(action), ours.step(action)
        problems = check_step(mine, theirs)
        if problems:
            pytest.fail(
                f"{label} step {step}: {', '.join(problems)} differ\n{describe()}\n"
                f"actions: {[a[:200] for a in history]}\ngemjax: {mine!r}\nGEM: {theirs!r}"
            )
        observations.append(theirs[0])
        if theirs[2] or theirs[3]:
            if extra == 0:
                break
            extra -= 1
    return observations


def parity_episodes(
    gem_env: Any,
    env_id: str,
    stream_seed: int,
    episodes: int,
    *,
    start: Callable[[int], Any],
    new_stream: Callable[[Any], Callable[[], str]],
    extra: Callable[[], int],
    turns_past_limit: int,
    describe: Callable[[], str],
    classify: Callable[[str], str],
) -> Counter:
    """Play ``episodes`` episodes of GEM's env and gemjax's side by side with
    :func:`play_episode`; returns how often each class of GEM observation came up.

    Episode ``i`` resets GEM's env with seed ``stream_seed * 100_000 + i``;
    ``start(seed)`` returns gemjax's env in GEM's state (after any per-test work on
    GEM's env); ``new_stream(ours)`` gives the responses and ``extra()`` the steps
    played past the end (called in that order); an episode runs for at most
    ``max_turns + turns_past_limit`` steps."""
    seen: Counter = Counter()
    for episode in range(episodes):
        seed = stream_seed * 100_000 + episode
        gem_env.reset(seed=seed)
        ours = start(seed)
        stream = new_stream(ours)
        label = f"{env_id}: episode {episode} (seed {seed})"
        steps = gem_env.max_turns + turns_past_limit
        for obs in play_episode(gem_env, ours, stream, extra(), steps, label, describe):
            seen[classify(obs)] += 1
    return seen
