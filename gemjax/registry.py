"""GEM ids -> kernel factories: :func:`make`, :func:`register`, :func:`list_envs`."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gemjax.checks import check_kwargs
from gemjax.core import Environment, GemMirror
from gemjax.text import Grammar, MessageTable, Template


@dataclass(frozen=True)
class EnvSpec:
    """A registered id: ``factory(**kwargs)`` builds the env."""

    id: str
    factory: Callable[..., Environment]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


_REGISTRY: dict[str, EnvSpec] = {}


def register(env_id: str, factory: Callable[..., Environment], **kwargs: Any) -> None:
    """Register ``env_id`` (GEM's ``register``: an id can be registered once).

    Raises:
        ValueError: the id is taken.
    """
    if env_id in _REGISTRY:
        raise ValueError(f"environment id {env_id!r} is already registered")
    _REGISTRY[env_id] = EnvSpec(env_id, factory, dict(kwargs))


def spec(env_id: str) -> EnvSpec:
    """The spec of ``env_id``.

    Raises:
        TypeError: ``env_id`` is not a string.
        ValueError: unknown id, with the closest registered ids as suggestions (found
            ignoring case).
    """
    if not isinstance(env_id, str):
        raise TypeError(
            f"an environment id is a string such as 'game:GuessTheNumber-v0-easy', "
            f"got {env_id!r} ({type(env_id).__name__}); gemjax.list_envs() lists them"
        )
    try:
        return _REGISTRY[env_id]
    except KeyError:
        by_lower = {name.lower(): name for name in _REGISTRY}
        close = difflib.get_close_matches(env_id.lower(), by_lower, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(by_lower[c]) for c in close)}?" if close else ""
        raise ValueError(
            f"unknown environment id {env_id!r}.{hint} "
            "gemjax.list_envs() lists every registered id."
        ) from None


def make(env_id: str, **kwargs: Any) -> Environment:
    """Build the kernel env of ``env_id``; call-site kwargs override the registered ones.

    Impossible parameters (``min_number > max_number``, ``max_turns < 1``, ...) raise
    ``ValueError`` here, never inside jit; kwargs of the wrong type (``max_turns=2.5``,
    ``clues=True``) raise ``TypeError`` (:func:`gemjax.checks.check_kwargs`).
    """
    env_spec = spec(env_id)
    check_kwargs(env_spec.factory, kwargs)
    env = env_spec.factory(**{**env_spec.kwargs, **kwargs})
    check_protocol(env)
    env.validate_params(env.default_params)
    return env


def check_protocol(env: Environment) -> None:
    """Raise unless ``env`` declares what the game protocol asks (called by
    ``gemjax.make``): its text (:class:`~gemjax.core.TextDeclaration`: ``messages`` a
    ``MessageTable`` whose first message is ``"instructions"`` and which has a
    ``"format_error"`` message, ``suffix`` a ``Template``, ``grammar`` a ``Grammar``),
    a :class:`~gemjax.core.GemMirror`'s ``gem_class_name`` (a non-empty string), and optional
    capabilities that are callable where present.

    Raises:
        TypeError: a member is missing or of another type, naming it.
    """
    game = type(env).__name__
    for name, kind in (("messages", MessageTable), ("suffix", Template), ("grammar", Grammar)):
        value = getattr(env, name, None)
        if not isinstance(value, kind):
            raise TypeError(f"{game}.{name} must be a {kind.__name__}, got {type(value).__name__}")
    names = env.messages.names
    if names[0] != "instructions" or "format_error" not in names:
        raise TypeError(
            f"{game}.messages must start with 'instructions' and have a "
            f"'format_error' message, got {names}"
        )
    if isinstance(env, GemMirror):
        gem_name = getattr(env, "gem_class_name", None)
        if not isinstance(gem_name, str) or not gem_name:
            raise TypeError(f"{game}.gem_class_name must name GEM's env class, got {gem_name!r}")
    for capability in ("valid_action_mask", "printed_words"):
        if hasattr(env, capability) and not callable(getattr(env, capability)):
            raise TypeError(f"{game}.{capability} must be a method")


def list_envs() -> list[str]:
    """Every registered id, sorted."""
    return sorted(_REGISTRY)
