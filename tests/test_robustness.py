"""Careless and hostile input against every registered id and every CLI verb.

Each class of input gets a clear error (``TypeError``/``ValueError`` naming what is
wrong; one line and exit status 2 on the command line) or GEM's format-error reward,
never a crash and never a silently wrong result. The cases come from
``gemjax.list_envs()``, the factories' annotations and the CLI's parser, so a new
game or verb gets the same coverage without new code. Compiled functions are shared
through module caches.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import re
import typing
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import tiered

import gemjax
import gemjax.gem as gem
from gemjax import cli
from gemjax.core import INT32_MAX
from gemjax.registry import spec

ALL_IDS = tuple(gemjax.list_envs())
INT32_MIN = -INT32_MAX - 1


@functools.cache
def kernel(env_id: str) -> Any:
    return gemjax.make(env_id)


@functools.cache
def text_env(env_id: str) -> Any:
    return gem.make(env_id, seed=0)


@functools.cache
def first_state(env_id: str) -> Any:
    env = kernel(env_id)
    return jax.jit(env.reset)(jax.random.key(0), env.default_params)[0]


@functools.cache
def an_action(env_id: str) -> np.ndarray:
    """A well-formed kernel action of the first state."""
    return np.asarray(kernel(env_id).random_action(jax.random.key(3), first_state(env_id)))


def annotated(env_id: str, kind: type) -> list[str]:
    """The factory parameters of ``env_id`` annotated with ``kind`` (``int | None``
    included; an ``int`` annotation never counts ``bool``)."""
    factory = spec(env_id).factory
    hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    names = []
    for name, hint in hints.items():
        members = typing.get_args(hint) or (hint,)
        if kind in members and (kind is bool or bool not in members):
            names.append(name)
    return names


# --- make: ids and kwargs ---------------------------------------------------------


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_make_refuses_floats_bools_and_strings_for_integer_kwargs(env_id):
    names = annotated(env_id, int)
    assert names, "every game has integer parameters"
    for name in names:
        value = spec(env_id).kwargs.get(name) or 3
        for bad in (value + 0.5, float(value), True, str(value)):
            with pytest.raises(TypeError, match=f"{name} must be an integer"):
                gemjax.make(env_id, **{name: bad})
            with pytest.raises(TypeError, match=f"{name} must be an integer"):
                gem.make(env_id, **{name: bad})


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_make_refuses_non_bools_for_flags(env_id):
    for name in annotated(env_id, bool):
        for bad in (1, 0, "yes"):
            with pytest.raises(TypeError, match=f"{name} must be True or False"):
                gemjax.make(env_id, **{name: bad})


@pytest.mark.parametrize("bad", [None, 123, 1.5, b"game:GuessTheNumber-v0-easy", ["x"]])
def test_make_refuses_ids_that_are_not_strings(bad):
    for make in (gemjax.make, gem.make):
        with pytest.raises(TypeError, match="an environment id is a string"):
            make(bad)


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_an_id_in_another_case_gets_did_you_mean(env_id):
    for variant in {env_id.upper(), env_id.lower(), env_id.swapcase()} - {env_id}:
        with pytest.raises(ValueError, match=re.escape(f"Did you mean {env_id!r}")):
            gemjax.make(variant)


# --- kernel: keys, states, actions -------------------------------------------------


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_kernel_refuses_int_keys_and_key_batches(env_id):
    env = kernel(env_id)
    params = env.default_params
    for bad in (0, np.uint32(3), jax.random.split(jax.random.key(0), 2)):
        with pytest.raises(TypeError, match="key must be one PRNG key"):
            env.reset(bad, params)
        with pytest.raises(TypeError, match="key must be one PRNG key"):
            env.step(bad, first_state(env_id), an_action(env_id), params)


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_kernel_step_refuses_other_games_states(env_id):
    env = kernel(env_id)
    other = next(i for i in ALL_IDS if kernel(i).state_spec() != env.state_spec())
    action = an_action(env_id)
    key = jax.random.key(1)
    for bad in (first_state(other), {}, None, 3):
        with pytest.raises((TypeError, ValueError), match=re.escape(f"a state of {env!r}")):
            jax.jit(env.step)(key, bad, action, env.default_params)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), first_state(env_id))
    with pytest.raises(ValueError, match="has shape"):
        env.step(key, batch, action, env.default_params)


@functools.cache
def step_of(env_id: str, action: Any = None) -> Any:
    """Jitted ``step(key, state, params)`` of a fixed ``action`` (a NumPy constant the
    kernel sees as it is: a jit argument would be converted by JAX first), or
    ``step(key, state, action, params)`` when ``action`` is None."""
    env = kernel(env_id)
    if action is None:
        return jax.jit(env.step)
    return jax.jit(lambda key, state, params: env.step(key, state, action.array, params))


class Frozen:
    """A NumPy array that can key a cache."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __hash__(self) -> int:
        return hash((self.array.dtype.str, self.array.shape, self.array.tobytes()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frozen) and hash(self) == hash(other)


def same(a: Any, b: Any) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_wide_integer_actions_saturate_instead_of_wrapping(env_id):
    """Every component of an action of int64, uint64 or Python ints beyond int32
    acts as the int32 bound it exceeds (JAX alone would wrap ``2**32 + v`` to ``v``)."""
    env = kernel(env_id)
    params, key, state = env.default_params, jax.random.key(2), first_state(env_id)
    action = an_action(env_id)
    for shift, bound in ((2**32, INT32_MAX), (-(2**32), INT32_MIN)):
        expected = step_of(env_id)(key, state, np.full_like(action, bound), params)
        for wide in (action.astype(np.int64) + shift, np.asarray(action.astype(object) + shift)):
            got = step_of(env_id, Frozen(wide))(key, state, params)
            assert same(got, expected), (wide, "saturates")
        if shift > 0:
            unsigned = action.astype(np.uint64) + np.uint64(shift)
            assert same(step_of(env_id, Frozen(unsigned))(key, state, params), expected)


def test_a_64_bit_guess_of_target_plus_2_to_32_does_not_win():
    env = kernel("game:GuessTheNumber-v0-hard")
    state = first_state("game:GuessTheNumber-v0-hard")
    _, ts = env.step(
        jax.random.key(0), state, np.int64(2**32 + int(state.target)), env.default_params
    )
    assert not bool(ts.info["success"]) and float(ts.reward) == 0.0
    assert env.messages.names[int(ts.event.kind)] == "out_of_range"


COUNTED_IDS = [i for i in ALL_IDS if hasattr(kernel(i).grammar, "count_slot")]


@pytest.mark.parametrize("env_id", tiered(COUNTED_IDS))
def test_a_huge_count_prints_clamped_as_the_grammar_clamps_it(env_id):
    """A structured action of all 10**9 (Wordle-hard: five U+3000 and "1000000000
    letters" before) prints the count ``C + 1`` that docs/gem_differences.md states."""
    env = kernel(env_id)
    size = env.grammar.size
    action = np.full(size + 1, 10**9, np.int32)
    _, ts = step_of(env_id)(jax.random.key(0), first_state(env_id), action, env.default_params)
    count = int(ts.event.args[env.messages.arg_slices[env.grammar.count_slot]][0])
    assert count == size + 1
    assert "1000000000" not in env.messages.render_event(ts.event).split("[")[0]


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_kernel_refuses_float_and_bool_actions(env_id):
    env = kernel(env_id)
    action = an_action(env_id)
    for bad in (action.astype(np.float32), action.astype(bool)):
        with pytest.raises(TypeError, match="integer arrays"):
            step_of(env_id)(jax.random.key(0), first_state(env_id), bad, env.default_params)


# --- text API ------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_text_env_state_refuses_what_is_not_its_state(env_id):
    env = text_env(env_id)
    good = env.state
    other = next(i for i in ALL_IDS if kernel(i).state_spec() != kernel(env_id).state_spec())
    for bad in (text_env(other).state, {}, 3, None, [good]):
        with pytest.raises((TypeError, ValueError), match=re.escape(f"a state of {env.kernel!r}")):
            env.state = bad
    with pytest.raises(ValueError, match="has shape"):
        env.state = jax.tree.map(lambda x: np.stack([x, x]), good)
    retyped = jax.tree.map(
        lambda x: np.asarray(x, np.float32 if x.dtype != np.float32 else bool), good
    )
    with pytest.raises(TypeError, match="has dtype"):
        env.state = retyped
    env.state = good  # still accepted, and unchanged
    assert same(env.state, good)


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_params_of_other_dtypes_or_classes_are_refused(env_id):
    """Params whose leaves are floats where the game reads integers (or bools where
    it reads floats) raise at construction, not read as truncated numbers."""
    env = kernel(env_id)
    params = env.default_params
    retyped = jax.tree.map(
        lambda x: np.asarray(x, np.float32 if x.dtype != np.float32 else bool), params
    )
    for bad in (retyped, {}, first_state(env_id)):
        with pytest.raises(TypeError, match=re.escape(f"the params of {env!r}")):
            gem.TextEnv(env, bad)
    env.validate_params(params)


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_text_env_refuses_non_integer_seeds_and_non_text_actions(env_id):
    env = text_env(env_id)
    for bad in (1.5, True, "3", np.float32(2.0)):
        with pytest.raises(TypeError, match="seed must be an integer"):
            env.reset(seed=bad)
    for bad in (None, b"\\boxed{1}", 3, np.zeros(3, np.int32)):
        with pytest.raises(TypeError, match="response text"):
            env.step(bad)


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=60))
def test_any_text_is_a_gem_step_never_a_crash(text):
    """Arbitrary text (hypothesis) steps every game: a 5-tuple of GEM's types."""
    for env_id in ALL_IDS[::4]:
        env = text_env(env_id)
        obs, reward, terminated, truncated, info = env.step(text)
        assert isinstance(obs, str) and isinstance(reward, float)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert isinstance(info, dict)


@functools.cache
def vector() -> Any:
    return gem.make_vec(["game:GuessTheNumber-v0-easy"] * 2, seed=0)


@pytest.mark.parametrize("seed", ["3", 1.5, True, np.float64(2.0)])
def test_make_vec_refuses_non_integer_seeds(seed):
    for call in (
        lambda: gem.make_vec(["game:GuessTheNumber-v0-easy"] * 2, seed=seed),
        lambda: vector().reset(seed=seed),
        lambda: vector().reset(seed=[seed, 0]),
        lambda: gem.make_vec(["game:GuessTheNumber-v0-easy"], vec_kwargs=[{"seed": seed}]),
    ):
        with pytest.raises(TypeError, match="seed must be an integer"):
            call()


@pytest.mark.parametrize("index", ["0", 1.0, True, None])
def test_make_vec_step_refuses_indices_that_are_not_integers(index):
    with pytest.raises(TypeError, match="an env index must be an integer"):
        vector().step({index: "\\boxed{1}"})


def test_make_vec_misuse_is_a_clear_error():
    with pytest.raises(ValueError, match="got 1 vec_kwargs dicts for 2 env ids"):
        gem.make_vec(["game:GuessTheNumber-v0-easy"] * 2, vec_kwargs=[{}])
    with pytest.raises(IndexError, match="out of range"):
        vector().step({5: "\\boxed{1}"})
    with pytest.raises(TypeError, match="response text"):
        vector().step(["\\boxed{1}", None])
    with pytest.raises(TypeError, match="a list of strings"):
        vector().step("\\boxed{1}")
    for bad in (None, ["concat"], 3):
        with pytest.raises(TypeError, match="comma-separated string"):
            gem.get_wrapper_fns(bad)


# --- the command line ----------------------------------------------------------------


def verbs() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser."""
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def bad_argvs(verb: str, parser: argparse.ArgumentParser) -> list[list[str]]:
    """Usage errors of ``verb``: an unknown flag, and for each option a wrong value
    (an unknown id, a non-number, zero and a negative count)."""
    required = {"train": ["--out", "unused-run-dir"], "play": ["game:GuessTheNumber-v0-easy"]}
    base = [verb, *required.get(verb, [])]
    argvs = [[*base, "--no-such-flag"]]
    for action in parser._actions:
        flag = action.option_strings[-1] if action.option_strings else None
        if action.type is cli.env_id_of:
            bad = ["game:NoSuchGame-v0"]
            argvs.append([verb, *bad] if flag is None else [*base, flag, *bad])
        elif action.type is cli.positive:
            argvs += [[*base, flag, value] for value in ("0", "-4", "1e8", "x")]
        elif action.type in (int, float):
            argvs.append([*base, flag, "x"])
    return argvs


CLI_CASES = [(verb, argv) for verb, parser in verbs().items() for argv in bad_argvs(verb, parser)]


@pytest.mark.parametrize(("verb", "argv"), CLI_CASES, ids=[" ".join(a) for _, a in CLI_CASES])
def test_every_cli_usage_error_is_one_line_with_status_2(verb, argv, capsys, tmp_path):
    argv = [str(tmp_path / a) if a == "unused-run-dir" else a for a in argv]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    assert re.match(r"gemjax( [\w-]+)?: error: ", captured.err), captured.err
    assert not (tmp_path / "unused-run-dir").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lr", "nan"], "--lr must be a finite number"),
        (["--lr", "-1"], "--lr must lie in"),
        (["--gamma", "0"], "gamma must lie in"),
        (["--ent-coef", "inf"], "--ent-coef must be a finite number"),
        (["--algo", "grpo", "--episodes", "12"], "multiple of --group-size"),
        (["--env", "game:GuessTheNumber-v0-easy", "--transitions", "100000"], "more than"),
        (["--updates", "75"], "multiple of --eval-every"),
        (["--algo", "ppo", "--episodes", "13", "--transitions", "13"], "multiple of --minibatches"),
        (
            ["--algo", "ppo", "--episodes", "13", "--horizon", "3"],
            "do not split into --minibatches",
        ),
    ],
)
def test_train_settings_that_do_not_fit_are_one_line_errors(flags, message, capsys, tmp_path):
    out = tmp_path / "run"
    assert cli.main(["train", "--out", str(out), *flags]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error
    assert not out.exists()


def test_empty_paths_are_one_line_errors(capsys):
    assert cli.main(["train", "--out", ""]) == 2
    assert "--out must name a run directory" in capsys.readouterr().err
    assert cli.main(["bench", "--env", "game:GuessTheNumber-v0-easy", "--json", " "]) == 2
    assert "--json must name a file" in capsys.readouterr().err


def test_debug_shows_the_traceback(capsys, tmp_path):
    assert cli.main(["--debug", "train", "--out", str(tmp_path / "r"), "--lr", "nan"]) == 2
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_train_defaults_fit_every_registered_id(env_id):
    """``gemjax train --env ID`` with every other flag at its default builds a
    trainer (GuessTheNumber-hard's 256 x 7 turns hold fewer than the default 2,048
    transitions; word games keep their turn limits in their banks)."""
    from gemjax.train import make_train

    args = cli.build_parser().parse_args(["train", "--env", env_id, "--out", "unused"])
    trainer = make_train(cli.train_config(args))
    assert trainer.horizon >= 1
    assert trainer.learn_size <= trainer.env_steps_per_update


# --- the token bridge ----------------------------------------------------------------


@functools.cache
def bridge() -> Any:
    from gemjax.tokenizer_bridge import TokenBridge, load_tokenizer

    return TokenBridge(kernel("game:GuessTheNumber-v0-easy"), load_tokenizer("bytes"))


@pytest.mark.parametrize(
    ("ids", "length", "error", "message"),
    [
        (np.zeros(8, np.float32), np.int32(3), TypeError, "ids must be integers"),
        (np.zeros(8, bool), np.int32(3), TypeError, "ids must be integers"),
        (np.zeros(8, np.int32), np.float32(3), TypeError, "length must be integers"),
        (np.zeros(0, np.int32), np.int32(0), ValueError, "non-empty"),
        (np.zeros((2, 8), np.int32), np.int32(3), ValueError, "jax.vmap for a batch"),
        (np.int32(5), np.int32(1), ValueError, "got shape ()"),
        (np.zeros(8, np.int32), np.zeros(2, np.int32), ValueError, "length must have 0"),
    ],
)
def test_parse_refuses_ids_that_are_not_one_response(ids, length, error, message):
    for parse in (bridge().parse, bridge().parse_full):
        with pytest.raises(error, match=re.escape(message)):
            parse(ids, length)


def test_compact_ids_outside_the_vocabulary_map_to_minus_one_both_ways():
    size = len(bridge().vocab)
    full = np.asarray(bridge().to_full(jnp.asarray([-1, size, size + 5, 0, size - 1])))
    np.testing.assert_array_equal(full[:3], -1)
    np.testing.assert_array_equal(full[3:], bridge().vocab[[0, -1]])
    assert int(bridge().to_compact(jnp.int32(-1))) == -1
    assert int(bridge().to_full(bridge().to_compact(jnp.int32(-1)))) == -1
    for convert in (bridge().to_full, bridge().to_compact):
        with pytest.raises(TypeError, match="must be integers"):
            convert(jnp.zeros(3, jnp.float32))
