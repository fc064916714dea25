"""Shared fixtures: one set of jitted reset/step functions per env, compiled once.

The session-scoped :func:`kits` cache makes every test that uses an env share its
compiled functions within a run. JAX's persistent compilation cache serves the
compiles it does not share (:func:`compilation_cache_dir`): each test process has a
folder of its own (two processes writing one folder could read each other's files
half written), and ``GEMJAX_TEST_JAX_CACHE=1`` shares ``<repo>/.jax_cache`` between
the workers and keeps it for local reruns. (A clean CI run once segfaulted while
writing to the cache; the cause was the memory-mapping cap below, since handled.)

Every compiled executable keeps its machine code in a few dozen memory mappings of
its own (about 24 for a small function on XLA:CPU, many more for a bridge render),
and Linux caps a process at ``vm.max_map_count`` mappings (65530 by default). The
whole suite compiles more than that in one process, and the compiler crashes
(segfaults) when it cannot map more: :func:`release_compiled_code` drops JAX's
compiled code when a test leaves the process past half the cap.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import pytest

import gemjax
from gemjax.core import Environment
from gemjax.testing import preserved_global_rng

REPO = Path(__file__).resolve().parents[1]

# The suite compiles far more than it runs (small batches, few steps), and LLVM's
# optimisation passes are most of an XLA:CPU compile: level 0 halves the bridge
# tests' time. XLA's own (HLO) passes still run, so what is tested is what ships, but
# for the machine code's speed. GEMJAX_TEST_XLA_OPTIMIZE=1 keeps the default level.
# XLA reads XLA_FLAGS when the first computation starts the backend, which is after
# this file runs; subprocesses started by tests inherit it.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0"
if os.environ.get("GEMJAX_TEST_XLA_OPTIMIZE") != "1":
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()


def compilation_cache_dir() -> Path | None:
    """Where this test process keeps JAX's persistent compilation cache: ``.jax_cache``
    of the repo with ``GEMJAX_TEST_JAX_CACHE=1`` (shared by the workers and kept for
    the next run), none with ``GEMJAX_TEST_JAX_CACHE=0``, else a folder of this process
    alone, deleted when it exits. Tests build the same functions anew again and
    again (each ``jax.jit(env.reset)`` is a new function to JAX's in-memory caches,
    and those are cleared near the memory-mapping cap), and a cache hit reads the
    executable back instead of compiling it."""
    choice = os.environ.get("GEMJAX_TEST_JAX_CACHE")
    if choice == "1":
        return REPO / ".jax_cache"
    if choice == "0":
        return None
    folder = Path(tempfile.mkdtemp(prefix="gemjax-test-jax-cache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


CACHE_DIR = compilation_cache_dir()
if CACHE_DIR is not None:
    jax.config.update("jax_compilation_cache_dir", str(CACHE_DIR))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

GTN_IDS = tuple(i for i in gemjax.list_envs() if i.startswith("game:GuessTheNumber"))


@dataclasses.dataclass(frozen=True)
class Kit:
    """An env with its default params and jitted (and vmapped) entry points.

    ``vreset(keys, params)`` maps over keys; ``vstep(keys, states, actions, params)``
    maps over everything but ``params``.
    """

    env: Environment
    params: Any
    reset: Callable
    step: Callable
    vreset: Callable
    vstep: Callable


class KitCache:
    """``kits(env_or_id, **make_kwargs)``: the :class:`Kit` of an env, built once.

    Envs compare equal by their static configuration, so two equal envs share one
    kit (and one set of compiled functions).
    """

    def __init__(self) -> None:
        self._kits: dict[Environment, Kit] = {}

    def __call__(self, env: Environment | str, **make_kwargs: Any) -> Kit:
        if isinstance(env, str):
            env = gemjax.make(env, **make_kwargs)
        elif make_kwargs:
            raise TypeError("make_kwargs only apply to an env id")
        kit = self._kits.get(env)
        if kit is None:
            kit = Kit(
                env=env,
                params=env.default_params,
                reset=jax.jit(env.reset),
                step=jax.jit(env.step),
                vreset=jax.jit(jax.vmap(env.reset, in_axes=(0, None))),
                vstep=jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None))),
            )
            self._kits[env] = kit
        return kit


# The longest modules first (the trainers', then the bridge's), so the two workers do
# not end on one of them while the other waits.
FIRST = ("tests/train/", "tests/bridge/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Runs the tests under :data:`FIRST` first, in its order (stable otherwise)."""

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.replace("\\", "/")
        return next((k for k, prefix in enumerate(FIRST) if path.startswith(prefix)), len(FIRST))

    items.sort(key=rank)


@pytest.fixture(scope="session")
def kits() -> KitCache:
    return KitCache()


MAPS = Path("/proc/self/maps")
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")


def memory_mappings() -> int:
    """How many memory mappings this process holds (0 where /proc is missing)."""
    if not MAPS.exists():
        return 0
    with MAPS.open("rb") as lines:
        return sum(1 for _ in lines)


@pytest.fixture(autouse=True)
def release_compiled_code() -> Iterator[None]:
    """After a test, clear JAX's caches (compiled code included) if this process
    holds more than half of the kernel's cap on memory mappings; later tests then
    recompile what they use."""
    yield
    if MAX_MAP_COUNT.exists() and memory_mappings() > int(MAX_MAP_COUNT.read_text()) // 2:
        jax.clear_caches()


@pytest.fixture(autouse=True)
def _keep_global_rng() -> Iterator[None]:
    """GEM's ``reset(seed)`` reseeds the process-global RNGs; restore them after each test."""
    with preserved_global_rng():
        yield


@pytest.fixture(autouse=True)
def _gem_sokoban_levels_from_the_bank(request, monkeypatch) -> None:
    """gem-llm's SokobanEnv draws its levels from gemjax's bank instead of running its
    reverse-play search (seconds per 8x8 level, 25 s with 5 boxes): the bank's levels
    are that search's own output (``tests/envs/test_sokoban_levels.py`` checks the
    generator and the bank against GEM's ``generate_room``, unpatched, in tests
    marked ``gem_sokoban_generator``). A seeded reset picks the level ``seed`` mod the
    bank's size, an unseeded one a level from the global ``random``."""
    if request.node.get_closest_marker("gem_sokoban_generator"):
        return
    import random

    import numpy as np
    from gem.envs.game_env.sokoban import sokoban as gem_sokoban

    from gemjax.envs.sokoban import BOX, FLOOR, PLAYER, bank_levels, bank_tag

    def generate_room(dim, num_steps, num_boxes, seed=None):
        levels = bank_levels(bank_tag(dim[0], num_boxes))
        index = random.randrange(len(levels)) if seed is None else seed % len(levels)
        state = levels[index].astype(np.int64)
        fixed = np.where((state == BOX) | (state == PLAYER), FLOOR, state)
        return fixed, state, {}

    monkeypatch.setattr(gem_sokoban, "generate_room", generate_room)


@pytest.fixture(scope="session")
def nltk_words(tmp_path_factory):
    """Point NLTK at the word lists shipped in gemjax (``corpora/words/{en,en-basic,README}``
    in a tmp folder), so GEM's Wordle and Hangman run offline. Request it before any
    GEM word game is constructed."""
    import os

    import nltk

    from gemjax.envs.words import write_nltk_data

    root = write_nltk_data(tmp_path_factory.mktemp("nltk_data"))
    previous = os.environ.get("NLTK_DATA")
    os.environ["NLTK_DATA"] = str(root)
    nltk.data.path.insert(0, str(root))
    yield root
    nltk.data.path.remove(str(root))
    if previous is None:
        os.environ.pop("NLTK_DATA", None)
    else:
        os.environ["NLTK_DATA"] = previous
