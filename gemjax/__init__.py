"""gemjax: GEM's text games as pure, jittable, vmappable JAX kernels.

>>> import jax, gemjax
>>> env = gemjax.make("game:GuessTheNumber-v0-hard")
>>> state, ts = env.reset(jax.random.key(0), env.default_params)
"""

from gemjax import envs as envs  # registers the games
from gemjax import wrappers as wrappers
from gemjax.core import Environment, Event, Rewards, TimeStep
from gemjax.registry import list_envs, make, register, spec
from gemjax.spaces import Discrete, Space

__version__ = "0.1.0"

__all__ = [
    "Discrete",
    "Environment",
    "Event",
    "Rewards",
    "Space",
    "TimeStep",
    "list_envs",
    "make",
    "register",
    "spec",
    "wrappers",
]
