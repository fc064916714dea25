"""Host-side checks of user input: integers that must not be floats or bools, and a
factory's keyword arguments against its annotations (run before anything is built,
so a wrong type fails with a message rather than being converted silently)."""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np


def integer(name: str, value: Any) -> int:
    """``value`` as a Python int: an ``int`` or NumPy integer, never a bool or float
    (``2.5`` would otherwise become 2, and ``True`` 1).

    Raises:
        TypeError: ``value`` is not an integer.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def boolean(name: str, value: Any) -> bool:
    """``value`` as a Python bool (a ``bool`` or NumPy bool, never ``0``/``1``).

    Raises:
        TypeError: ``value`` is not a bool.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def real(name: str, value: Any) -> float:
    """``value`` as a finite Python float (ints accepted, bools and NaN not).

    Raises:
        TypeError: not a number. ValueError: NaN or infinite.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _hint_types(hint: Any) -> tuple[Any, ...]:
    """The member types of an annotation (``int | None`` -> ``(int, NoneType)``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def check_kwargs(factory: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    """Check ``kwargs`` against ``factory``'s annotations: a parameter annotated
    ``int`` takes an integer (:func:`integer`), one annotated ``bool`` a bool, and
    ``None`` only where the annotation allows it. Other annotations, and names the
    factory does not take (it raises ``TypeError`` itself), are not checked.

    Raises:
        TypeError: a value of the wrong type, naming the parameter.
    """
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except (NameError, TypeError):  # annotations that do not evaluate: nothing to check
        return
    for name, value in kwargs.items():
        allowed = _hint_types(hints.get(name, Any))
        if value is None:
            if Any not in allowed and type(None) not in allowed:
                raise TypeError(f"{name} must not be None")
        elif bool in allowed:
            boolean(name, value)
        elif int in allowed and float not in allowed:
            integer(name, value)


def _dtype_of(leaf: Any) -> np.dtype:
    """A leaf's dtype as JAX would hold it (host values canonicalized: an int64 NumPy
    array or a Python int counts as int32)."""
    dtype = getattr(leaf, "dtype", None)
    return jax.dtypes.canonicalize_dtype(dtype if dtype is not None else np.asarray(leaf).dtype)


def check_structure(tree: Any, expected: Any, what: str, shapes: bool = True) -> None:
    """Raise unless ``tree`` has the structure of ``expected`` (a pytree of arrays or
    ``jax.ShapeDtypeStruct``): the same pytree (its classes included), and per leaf
    the same dtype and (if ``shapes``) shape. Works on tracers (it reads shapes, never
    values).

    Raises:
        TypeError: another structure (another game's state, a dict, None) or a leaf
            of another dtype. ValueError: a leaf of another shape.
    """
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    wanted, wanted_def = jax.tree.flatten(expected)
    if not same_structure_def(treedef, wanted_def):
        raise TypeError(
            f"{what} must be a {type(expected).__name__} (pytree {wanted_def}), got "
            f"{type(tree).__name__} (pytree {treedef})"
        )
    for (path, leaf), want in zip(leaves, wanted, strict=True):
        name = jax.tree_util.keystr(path)
        if shapes and tuple(np.shape(leaf)) != tuple(want.shape):
            raise ValueError(f"{what}{name} has shape {np.shape(leaf)}, expected {want.shape}")
        if _dtype_of(leaf) != want.dtype:
            raise TypeError(f"{what}{name} has dtype {_dtype_of(leaf)}, expected {want.dtype}")


def check_key(key: Any) -> None:
    """Raise unless ``key`` is one (unbatched) JAX PRNG key: a typed key array of
    shape ``()`` (``jax.random.key``) or a raw ``uint32[2]`` (``jax.random.PRNGKey``).

    Raises:
        TypeError: anything else (an int seed, a batch of keys outside ``vmap``).
    """
    dtype = getattr(key, "dtype", None)
    shape = tuple(np.shape(key)) if dtype is not None else None
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    if (typed and shape == ()) or (dtype == np.uint32 and shape == (2,)):
        return
    got = f"{type(key).__name__} of shape {shape} and dtype {dtype}" if dtype else repr(key)
    raise TypeError(
        f"key must be one PRNG key, jax.random.key(seed) (vmap over a batch of keys), "
        f"got {got:.120}"
    )


def integer_array(name: str, value: Any, ndim: int | None, hint: str = "") -> Any:
    """``value`` if it is an integer array or scalar (a tracer too) with ``ndim``
    dimensions, none of them empty (``ndim`` None: any shape).

    Raises:
        TypeError: a float or bool array (``hint`` ends the message).
        ValueError: another number of dimensions, or an empty one.
    """
    dtype = _dtype_of(value)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {dtype}{hint}")
    shape = tuple(np.shape(value))
    if ndim is not None and (len(shape) != ndim or 0 in shape):
        raise ValueError(f"{name} must have {ndim} non-empty dimension(s), got shape {shape}{hint}")
    return value


def same_structure_def(a: Any, b: Any) -> bool:
    """Whether two ``PyTreeDef`` are equal (jaxlib ships ``PyTreeDef`` without type
    stubs, so its ``==`` is unknown to type checkers; this is the one place it is used)."""
    return bool(a == b)


def same_structure(a: Any, b: Any) -> bool:
    """Whether pytrees ``a`` and ``b`` have the same structure (node types, keys and
    static fields; leaves not compared)."""
    return same_structure_def(jax.tree.structure(a), jax.tree.structure(b))
