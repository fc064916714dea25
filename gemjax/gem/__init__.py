"""GEM-compatible text API over gemjax kernels.

>>> import gemjax.gem as gem
>>> env = gem.make("game:GuessTheNumber-v0-hard")
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{25}")

``make``, ``make_vec`` and the observation wrappers behave as GEM's (same strings,
byte for byte); ``from_gem`` mirrors a live ``gem-llm`` env. Every text env exposes
its kernel, params and current state (``.kernel``, ``.params``, ``.state``).
"""

from gemjax.gem.text_env import TextEnv, from_gem, make
from gemjax.gem.vector import AutoresetMode, LaneEnv, VectorEnv, make_vec
from gemjax.gem.wrappers import (
    WRAPPER_FACTORY,
    EnvWrapper,
    EpisodeTrackingWrapper,
    ObservationWrapper,
    get_wrapper_fns,
)

__all__ = [
    "WRAPPER_FACTORY",
    "AutoresetMode",
    "EnvWrapper",
    "EpisodeTrackingWrapper",
    "LaneEnv",
    "ObservationWrapper",
    "TextEnv",
    "VectorEnv",
    "from_gem",
    "get_wrapper_fns",
    "make",
    "make_vec",
]
