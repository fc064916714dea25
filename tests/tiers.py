"""The test tiers: ``scripts/test.sh`` (CI) runs everything; the quick tier
(``pytest -m "not slow"``) runs each per-id test on the first id (in
``gemjax.list_envs()`` order) of each game, and leaves the other ids, and the long
bridge and training checks, to CI.

A new game is in both tiers the moment it is registered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

import gemjax

IDS = tuple(gemjax.list_envs())


def first_of_each_game(ids: Iterable[str]) -> tuple[str, ...]:
    """The first of ``ids`` (in their order) of each game class."""
    first: dict[type, str] = {}
    for env_id in ids:
        first.setdefault(type(gemjax.make(env_id)), env_id)
    return tuple(first.values())


FIRST_OF_GAME = first_of_each_game(IDS)


def tiered(ids: Iterable[str]) -> list[Any]:
    """``ids`` as pytest params, the ones that are not their game's first marked slow."""
    return [pytest.param(i, marks=() if i in FIRST_OF_GAME else pytest.mark.slow) for i in ids]


def quick_first(values: Iterable[Any]) -> list[Any]:
    """``values`` as pytest params, all but the first marked slow."""
    return [pytest.param(v, marks=() if k == 0 else pytest.mark.slow) for k, v in enumerate(values)]
