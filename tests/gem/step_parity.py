"""The comparison every GEM parity test makes between two step 5-tuples."""

import numpy as np


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
