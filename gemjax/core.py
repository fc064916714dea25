"""The kernel protocol every gemjax game implements.

Conventions (the gymnax/Jumanji lineage, made stricter):

* ``state, ts = env.reset(key, params)`` and
  ``state, ts = env.step(key, state, action, params)`` are pure and jittable; batch
  them with ``jax.vmap(env.step, in_axes=(0, 0, 0, None))``.
* Static configuration (array capacities, which variant) is fixed by ``gemjax.make``;
  everything a user may sweep without recompiling lives in ``params``.
* No PRNG key is stored in a state: randomness comes from the key passed in.
* Reset and step return identical pytree structures and dtypes, so either can feed
  a ``lax.scan`` carry.
* The kernel reports *which* message applies (an :class:`Event`); text is rendered
  from events by the game's :mod:`gemjax.text` declaration (on the host) or the
  token bridge (on device), never built in the kernel.

A game is three declared interfaces, each checked by ``gemjax.make``:

* :class:`Environment`, the kernel (abstract methods; a missing one fails at
  construction), with its text declaration (:class:`TextDeclaration`: ``messages``,
  ``suffix`` and ``grammar``, set per instance in ``__init__``);
* :class:`GemMirror`, the side-by-side mirror of a live ``gem-llm`` env that
  :func:`gemjax.gem.from_gem` and the parity harness use;
* optional capabilities: :class:`ActionMasking` (``valid_action_mask``, for the
  trainer's masking ablation), :class:`EpisodeOutcomes` (``outcomes``, what a trainer
  reports beside ``success``) and :meth:`Environment.printed_words` (a word game's
  list, default none).
"""

from __future__ import annotations

import abc
import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.checks import check_key, check_structure
from gemjax.types import Event, Rewards, TimeStep

if TYPE_CHECKING:
    from gemjax.spaces import Space
    from gemjax.text.grammar import Grammar
    from gemjax.text.templates import MessageTable, Template

__all__ = [
    "INT32_MAX",
    "ActionMasking",
    "Environment",
    "EpisodeOutcomes",
    "Event",
    "GemMirror",
    "Rewards",
    "TextDeclaration",
    "TimeStep",
    "Variant",
    "check_int_action",
    "counted_action",
    "saturate_action",
]


INT32_MAX = 2**31 - 1

TState = TypeVar("TState")
TParams = TypeVar("TParams")
TState_contra = TypeVar("TState_contra", contravariant=True)


class TextDeclaration(Protocol):
    """A game's text, read by the text API, the token bridge and the testing kit.

    Attributes:
        messages: the ``MessageTable``; its first message is the reset
            ``"instructions"`` and it has a ``"format_error"`` message.
        suffix: the ``Template`` GEM returns in ``info["suffix"]``.
        grammar: the host action parser (and renderer) of the game's responses.
    """

    messages: MessageTable
    suffix: Template
    grammar: Grammar


class Environment(abc.ABC, Generic[TState, TParams]):
    """A GEM game as a pure JAX state machine.

    Subclasses set, in ``__init__``, the instance attributes of
    :class:`TextDeclaration` (``messages``, ``suffix``, ``grammar``), and implement
    the abstract methods. ``step_uses_key`` tells wrappers whether ``step`` draws
    randomness; when it does not, an auto-reset can spend the whole key on ``reset``.
    ``reset_info_has_suffix`` tells the GEM text API whether ``reset`` returns
    ``{"suffix": ...}`` as its info (most games) or ``{}`` (GEM's Mastermind).
    ``sparse_resets`` is the auto-reset's default for this game: compute fresh
    episodes only for the lanes that ended (pays where a reset costs much more than
    copying a state: drawing a puzzle or a permutation) rather than for every lane.

    Environments compare equal (and hash) by their static configuration, so jitted
    functions taking an env as a static argument are compiled once per configuration.

    Every subclass's own ``reset`` and ``step`` check their inputs when traced (on
    the host, never inside the compiled code): the key must be one PRNG key
    (:func:`gemjax.checks.check_key`) and ``step``'s state one of this env's states
    (:meth:`check_state`), so a wrong key or another game's state raises a
    ``TypeError``/``ValueError`` that says so. Its ``validate_params`` first checks
    that the params have the structure and dtypes of :attr:`default_params` (a float
    ``max_turns`` of 2.5 raises rather than being read as 2; shapes are the game's
    own check).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("reset", "step"):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "__isabstractmethod__", False):
                setattr(cls, name, _with_input_checks(method, check_state=name == "step"))
        validate = cls.__dict__.get("validate_params")
        if validate is not None and not getattr(validate, "__isabstractmethod__", False):
            cls.validate_params = _with_params_check(validate)  # type: ignore[method-assign]

    messages: MessageTable
    suffix: Template
    grammar: Grammar
    # Set by every game's constructor from Variant.of (declared, not defaulted, so a
    # wrapper reads its inner game's).
    variant: Variant
    randomize: bool
    step_uses_key: bool = True
    reset_info_has_suffix: bool = True
    sparse_resets: bool = False

    @property
    def config(self) -> tuple[Any, ...]:
        """Hashable static configuration (shapes, variant flags): the variant's
        (:attr:`Variant.config`); a game with other static flags adds them."""
        return self.variant.config

    @property
    @abc.abstractmethod
    def default_params(self) -> TParams:
        """The parameters of the registered id."""

    @abc.abstractmethod
    def validate_params(self, params: TParams) -> None:
        """Raise ``ValueError`` if ``params`` is impossible (host-side, not traceable)."""

    @abc.abstractmethod
    def reset(self, key: jax.Array, params: TParams) -> tuple[TState, TimeStep]:
        """Start an episode. ``ts.event`` is the instructions message."""

    @abc.abstractmethod
    def step(
        self, key: jax.Array, state: TState, action: jax.Array, params: TParams
    ) -> tuple[TState, TimeStep]:
        """Advance one turn with a parsed action (see :meth:`action_space`)."""

    @abc.abstractmethod
    def action_space(self, params: TParams) -> Space:
        """The space of kernel actions (format errors included)."""

    @abc.abstractmethod
    def instructions_event(self, state: TState) -> Event:
        """The reset instructions of the episode ``state`` belongs to."""

    @abc.abstractmethod
    def suffix_values(self, state: TState) -> Mapping[str, jax.Array]:
        """Slot values of :attr:`suffix` for ``state``."""

    @abc.abstractmethod
    def random_action(self, key: jax.Array, state: TState) -> jax.Array:
        """A random well-formed action in ``state`` (never a format error), as GEM's
        ``sample_random_action`` draws it where GEM has one (the text API's
        ``sample_random_action``, the token trainer's format warm-up)."""

    def printed_words(self, params: TParams) -> tuple[str, ...]:
        """Optional capability: words the game's text can show besides its templates'
        fixed text, as printed (a word game's list); a token bridge tokenizes them
        ahead of time. None by default."""
        return ()

    @property
    def name(self) -> str:
        """The game's name (the class name)."""
        return type(self).__name__

    def state_spec(self) -> Any:
        """``jax.ShapeDtypeStruct`` pytree of an (unbatched) state (computed once)."""
        spec = self.__dict__.get("_state_spec")  # never a wrapped env's (__getattr__)
        if spec is None:
            spec, _ = jax.eval_shape(self.reset, jax.random.key(0), self.default_params)
            self.__dict__["_state_spec"] = spec
        return spec

    def check_state(self, state: Any) -> None:
        """Raise unless ``state`` is a state of this env (its class, leaves, shapes and
        dtypes; tracers too).

        Raises:
            TypeError, ValueError: it is not (another game's state, a dict, None, a
                batch of states outside ``vmap``).
        """
        check_structure(state, self.state_spec(), f"a state of {self!r}")

    def observation_spec(self, params: TParams) -> Any:
        """``jax.ShapeDtypeStruct`` pytree of the observation (no computation)."""
        _, ts = jax.eval_shape(self.reset, jax.random.key(0), params)
        return ts.observation

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.config == other.config

    def __hash__(self) -> int:
        return hash((type(self), self.config))

    def __repr__(self) -> str:
        return f"{self.name}{self.config}"


@dataclass(frozen=True)
class Variant:
    """A game's registered configuration: GEM's fixed values, or its ``-random``
    variant (drawn at every reset) when the constructor got None.

    Every game's constructor builds one with :meth:`of`; ``values`` are the fixed
    values, or for ``-random`` the capacities its arrays are sized for.

    Attributes:
        randomize: the ``-random`` variant.
        values: ints, in the order of the constructor's arguments.
    """

    randomize: bool
    values: tuple[int, ...]

    @classmethod
    def of(
        cls,
        given: Mapping[str, int | None],
        random_values: Sequence[int],
        check: Callable[..., None],
        all_or_none: bool = False,
    ) -> Variant:
        """The variant of the constructor arguments ``given`` (name -> value): ``-random``
        with ``random_values`` when any is None, else the given ints; ``check(*values)``
        raises on impossible values (the game's range checks).

        Raises:
            ValueError: ``all_or_none`` and only some values are None, or ``check``'s.
        """
        missing = [name for name, value in given.items() if value is None]
        if all_or_none and 0 < len(missing) < len(given):
            raise ValueError(
                f"give {', '.join(given)} together, or none of them for the random variant"
            )
        if missing:
            variant = cls(True, tuple(int(v) for v in random_values))
        else:
            variant = cls(False, tuple(int(v) for v in given.values() if v is not None))
        check(*variant.values)
        return variant

    @property
    def config(self) -> tuple[Any, ...]:
        """The hashable static configuration: ``("random",)`` or the values."""
        return ("random",) if self.randomize else self.values


class GemMirror(abc.ABC, Generic[TState]):
    """A game that mirrors a ``gem-llm`` env, for :func:`gemjax.gem.from_gem` and the
    GEM parity harness (:mod:`gemjax.testing.parity`): mixed into the game's
    :class:`Environment` subclass.

    Attributes:
        gem_class_name: the class name of the GEM env mirrored (``"SudokuEnv"``).
        gem_step_crashes: kernel actions GEM's ``step`` crashes on.
    """

    gem_class_name: ClassVar[str]
    #: Scalar kernel actions whose text crashes GEM's ``step`` (a GEM bug gemjax does
    #: not copy, docs/gem_differences.md): the parity streams never send them.
    gem_step_crashes: ClassVar[frozenset[int]] = frozenset()

    @classmethod
    @abc.abstractmethod
    def kwargs_from_gem(cls, gem_env: Any) -> dict[str, Any]:
        """The constructor kwargs of the game matching a live GEM env's configuration
        (most games: :meth:`gem_kwargs`)."""

    @staticmethod
    def gem_kwargs(gem_env: Any, variant_names: tuple[str, ...], **fixed: Any) -> dict[str, Any]:
        """Constructor kwargs read from a live GEM env: each of ``variant_names`` from
        its attribute of that name, or None for all of them when GEM draws them at
        every reset (its ``_is_random``); ``fixed`` (flags outside the variant) as
        given."""
        drawn = bool(gem_env._is_random)
        values = {name: None if drawn else getattr(gem_env, name) for name in variant_names}
        return {**values, **fixed}

    @abc.abstractmethod
    def state_from_gem(self, gem_env: Any) -> TState:
        """The kernel state equal to a live GEM env's (for side-by-side stepping)."""

    @classmethod
    def gem_opening(cls, gem_env: Any, rng: random.Random) -> None:
        """Play the moves on a live ``gem-llm`` env (with ``rng``'s choices) after
        which its state mirrors exactly (``state_from_gem``) for a side-by-side
        run: GEM draws some hidden state inside ``step`` from its global RNG, which
        no mirror can reproduce. None by default."""


@runtime_checkable
class ActionMasking(Protocol[TState_contra]):
    """Optional capability: the kernel actions that are legal in a state
    (``gemjax.train``'s ``mask_invalid``)."""

    def valid_action_mask(self, state: TState_contra) -> jax.Array:
        """Which actions are neither a format error nor illegal in ``state``: bool[n]
        for a ``Discrete(n)`` space; for a ``MultiDiscrete(nvec)`` one, bool[*nvec]
        (each combination) or bool[sum(nvec)] (each component's values, when
        legality does not tie components together)."""
        ...


@dataclass(frozen=True)
class ActionCells:
    """Where a ``MultiDiscrete`` action names a cell of the game's board, for
    policies that score every cell alike (``gemjax.train``'s ``--torso conv``).

    Attributes:
        grid: ``(R, C)``, the board's shape; the observation leaves whose shapes
            start with it are the board's per-cell features.
        axes: the action components giving the cell's row and column.
        first: the values of those components that name row 0 and column 0 (values
            from ``first`` to ``first + R - 1`` are on the board, others off it).
    """

    grid: tuple[int, int]
    axes: tuple[int, int]
    first: tuple[int, int]


@runtime_checkable
class CellActions(Protocol):
    """Optional capability: which action components name a cell of the board."""

    def action_cells(self) -> ActionCells:
        """The board's shape and the action components that index it."""
        ...


@runtime_checkable
class EpisodeOutcomes(Protocol[TState_contra]):
    """Optional capability: outcomes of a game a trainer reports beside GEM's
    ``success`` (``gemjax.train``'s greedy evaluation: the fraction of episodes in
    which each held after some turn), for games whose ``success`` is not the whole
    story (Minesweeper's needs every mine flagged, which earns nothing)."""

    def outcomes(self, state: TState_contra) -> Mapping[str, jax.Array]:
        """Named bool[] outcomes of ``state`` (the same names for every state)."""
        ...


def _with_input_checks(method: Callable[..., Any], check_state: bool) -> Callable[..., Any]:
    """``method`` (an env's ``reset`` or ``step``) checking its key, and with
    ``check_state`` its state, before it runs."""

    @functools.wraps(method)
    def checked(self: Environment, key: Any, *args: Any, **kwargs: Any) -> Any:
        check_key(key)
        if check_state:
            self.check_state(args[0] if args else kwargs["state"])
        return method(self, key, *args, **kwargs)

    return checked


def gem_ending(
    format_error: jax.Array,
    game_over: jax.Array,
    out_of_turns: jax.Array,
    turn: jax.Array,
    max_turns: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """GEM's common ending rule (spec section 3), ``(terminated, truncated)``, bool[]
    each: a format error ends the episode, truncated only on exactly the last turn
    (``turn == max_turns``); a game that ends itself (``game_over``: won or lost)
    terminates untruncated, even on the last turn; running out of turns otherwise
    terminates and truncates."""
    terminated = format_error | game_over | out_of_turns
    truncated = jnp.where(format_error, turn == max_turns, out_of_turns & ~game_over)
    return terminated, truncated


def counted_action(action: Any, size: int) -> tuple[jax.Array, jax.Array]:
    """``(count int32[], items int32[size])`` of a counted kernel action
    ``int32[size + 1]`` ``[count, i_0, ..., i_{size-1}]`` (Mastermind's entries, a word
    game's letters), checked as :func:`check_int_action` does, with the count clamped
    to ``size + 1`` as the grammars clamp it: more items than ``size`` can only be of
    a wrong length, and the text API prints their exact count from the echo."""
    action = check_int_action(action, (size + 1,))
    return jnp.minimum(action[0], size + 1), action[1:]


def _with_params_check(validate: Callable[..., Any]) -> Callable[..., Any]:
    """An env's ``validate_params``, checking first that the params have the
    structure and leaf dtypes of its default params."""

    @functools.wraps(validate)
    def checked(self: Environment, params: Any) -> Any:
        default = jax.eval_shape(lambda: self.default_params)
        check_structure(params, default, f"the params of {self!r}", shapes=False)
        return validate(self, params)

    return checked


def saturate_action(action: Any) -> Any:
    """A host action (NumPy array or scalar, Python int or list) as an int32 NumPy
    array, values beyond int32 saturated; device arrays and tracers unchanged.

    JAX converts 64-bit host integers to int32 by wrapping (``2**32 + 5`` becomes
    5), so they are saturated here, before any conversion: call it on host actions
    before passing them to jitted code.

    Raises:
        TypeError: the action holds something other than integers.
    """
    if isinstance(action, jax.Array):
        return action
    host = np.asarray(action)
    if host.dtype == object:  # Python ints beyond int64
        values = host.reshape(-1).tolist()
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise TypeError(f"actions must be integer arrays, got {action!r:.80}")
        clipped = [min(max(v, -INT32_MAX - 1), INT32_MAX) for v in values]
        return np.asarray(clipped, np.int32).reshape(host.shape)
    if not np.issubdtype(host.dtype, np.integer):
        return host  # rejected with its dtype by check_int_action
    info = np.iinfo(host.dtype)
    if info.max > INT32_MAX:
        host = np.minimum(host, INT32_MAX)
    if info.min < -INT32_MAX - 1:
        host = np.maximum(host, -INT32_MAX - 1)
    return host.astype(np.int32)


def check_int_action(action: Any, shape: tuple[int, ...]) -> jax.Array:
    """Validate a kernel action's dtype and shape at trace time; return it as int32,
    saturating values of wider integer types (int64, uint32, uint64, Python ints
    beyond int32) instead of wrapping them.

    A ``jax.jit`` call converts its 64-bit NumPy arguments to int32 before the kernel
    sees them (wrapping, JAX's rule), so pass actions to jitted code as int32 (or
    through :func:`saturate_action` first).

    Raises:
        TypeError: the action is not an integer array (a float or bool slipped in).
        ValueError: the action has the wrong shape.
    """
    action = jnp.asarray(saturate_action(action))
    if not jnp.issubdtype(action.dtype, jnp.integer) or action.dtype == jnp.bool_:
        raise TypeError(f"actions must be integer arrays, got dtype {action.dtype}")
    if action.shape != shape:
        raise ValueError(
            f"action has shape {action.shape}, expected {shape} "
            "(batch with jax.vmap, not by passing a batch to an unbatched env)"
        )
    info = jnp.iinfo(action.dtype)
    if info.max > INT32_MAX or info.min < -INT32_MAX - 1:
        # Saturate instead of wrapping: a huge guess stays out of range, as in GEM.
        action = jnp.clip(action, max(info.min, -INT32_MAX - 1), INT32_MAX)
    return action.astype(jnp.int32)
