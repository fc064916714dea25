"""List slots (``IntList``), multi-arg event layouts, ``BoxedIntList`` against GEM's
Mastermind parser, and the ``MultiDiscrete`` space."""

from __future__ import annotations

import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gemjax.spaces import MultiDiscrete
from gemjax.tokenizer_bridge import BoxedIntList, Choice, Int, IntList, MessageTable, Template

INT32_MAX = 2**31 - 1

# --- IntList and the table layout ------------------------------------------------------


def test_int_list_rendering():
    slot = IntList("g", 4, length="n")
    assert slot.format_values([1, 2, 3, 4], 3) == "[1, 2, 3]"
    assert slot.format_values([1, 2, 3, 4], 0) == "[]"
    assert slot.format_values([1, 2, 3, 4], 9) == "[1, 2, 3, 4]"  # clamped to size
    assert slot.format_values([-1, 0, 7, 4], -2) == "[]"
    spaced = IntList("e", 3, length="n", brackets=("", ""), separator=" ")
    assert spaced.format_values(np.asarray([5, 6, 7], np.int32), 2) == "5 6"
    # Echoes replace the whole text, only for echo slots.
    echo = IntList("g", 4, length="n", echo=True)
    values = {"g": [1, 2, 0, 0], "n": 2}
    assert echo.text(values, {"g": "[1, 2, 3, 4, 5]"}) == "[1, 2, 3, 4, 5]"
    assert slot.text(values, {"g": "[9]"}) == "[1, 2]"
    for bad in [dict(size=0, length="n"), dict(size=2, length="g"), dict(size=2, length="a b")]:
        with pytest.raises(ValueError):
            IntList("g", **bad)


def make_table() -> MessageTable:
    guess = IntList("guess", 3, length="count", echo=True)
    return MessageTable(
        start=Template(
            "{lo} to {hi}, e.g. <{example}>",
            example=IntList("example", 2, "hi", brackets=("", ""), separator=" "),
        ),
        said=Template(
            "turn {turn}: {guess} ({count} entries) is {verdict}",
            guess=guess,
            count=Int("count", echo=True),
            verdict=Choice("verdict", ("bad", "good")),
        ),
        again=Template("{guess} again", guess=guess),
        code=Template("the code was {code}", code=IntList("code", 3, "length")),
    )


def test_table_layout_with_list_slots():
    table = make_table()
    assert table.arg_names == (
        "lo",
        "hi",
        "example[0]",
        "example[1]",
        "turn",
        "guess[0]",
        "guess[1]",
        "guess[2]",
        "count",
        "verdict",
        "code[0]",
        "code[1]",
        "code[2]",
        "length",  # a list's length slot is an arg even when no template prints it
    )
    assert table.arg_slices["guess"] == slice(5, 8) and table.arg_slices["length"] == slice(13, 14)
    event = table.event("said", turn=4, guess=jnp.asarray([7, 8, 9]), count=2, verdict=1)
    assert event.args.dtype == jnp.int32 and event.args.shape == (14,)
    np.testing.assert_array_equal(event.args, [0, 0, 0, 0, 4, 7, 8, 9, 2, 1, 0, 0, 0, 0])
    assert table.render_event(event) == "turn 4: [7, 8] (2 entries) is good"
    echoes = {"guess": "[7, 8, 9, 10]", "count": "4"}
    assert table.render_event(event, echoes) == "turn 4: [7, 8, 9, 10] (4 entries) is good"
    code = table.event("code", code=jnp.asarray([3, 1, 2]), length=3)
    assert table.render_event(code) == "the code was [3, 1, 2]"
    assert table.render_event(code, echoes) == "the code was [3, 1, 2]"  # not an echo slot
    assert (
        table.render_event(table.event("start", lo=1, hi=2, example=[2, 1])) == "1 to 2, e.g. <2 1>"
    )
    assert table.render_event(table.event("again", guess=5, count=3)) == "[5, 5, 5] again"
    assert table.values(code.args.tolist())["code"] == [3, 1, 2]
    with pytest.raises(ValueError, match="guess"):
        table.event("again", guess=jnp.asarray([1, 2]))
    with pytest.raises(ValueError, match="turn"):
        table.event("again", turn=jnp.asarray([1, 2]))
    with pytest.raises(KeyError, match="guess\\[0\\]"):
        table.event("again", **{"guess[0]": 1})
    with pytest.raises(ValueError):
        table.render(0, [0] * 13)


def test_list_length_must_be_an_int_slot():
    with pytest.raises(ValueError, match="length"):
        MessageTable(
            a=Template("{g} {n}", g=IntList("g", 2, "n"), n=Choice("n", ("x", "y"))),
        )
    with pytest.raises(ValueError, match="'g'"):
        MessageTable(a=Template("{g}", g=IntList("g", 2, "n")), b=Template("{g}"))


def test_list_events_trace_and_vmap():
    table = make_table()

    @jax.jit
    def said(guess, count):
        return table.event("said", turn=1, guess=guess, count=count)

    batched = jax.vmap(said)(jnp.arange(12, dtype=jnp.int32).reshape(4, 3), jnp.arange(4))
    assert batched.args.shape == (4, 14)
    assert table.render(int(batched.kind[2]), batched.args[2].tolist()) == (
        "turn 1: [6, 7] (2 entries) is bad"
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-(2**31), INT32_MAX), min_size=14, max_size=14),
    st.integers(0, 3),
    st.sampled_from([None, {}, {"guess": "[echo]", "count": "99"}]),
)
def test_table_and_template_renderers_agree(args, kind, echoes):
    table = make_table()
    args[table.arg_slices["verdict"].start] %= 2
    values = table.values(args)
    template = table.templates[table.names[kind]]
    assert table.render(kind, args, echoes) == template.render(values, echoes)


# --- BoxedIntList against GEM's Mastermind parser -----------------------------------------

GEM_PATTERN = re.compile(r"\\boxed{(\d+(?:\s+\d+)*)}")
GRAMMAR = BoxedIntList("guess", 4, count_slot="entries")


def gem_guess(text: str):
    """Exactly MastermindEnv.step's parsing: a list of ints, or None (format error)."""
    matches = list(GEM_PATTERN.finditer(text))
    clean_action = matches[-1] if matches else None
    try:
        player_guess = list(map(int, clean_action.group(1).split()))
    except Exception:
        player_guess = None
    return player_guess


def assert_agrees_with_gem(text: str):
    gem = gem_guess(text)
    parsed = GRAMMAR.parse(text)
    action = np.asarray(parsed.action)
    assert action.dtype == np.int32 and action.shape == (5,)
    assert parsed.ok == (gem is not None)
    if gem is None:
        assert parsed.echoes == {} and not action.any()
        return parsed
    assert parsed.echoes == {"guess": str(gem), "entries": str(len(gem))}
    assert action[0] == min(len(gem), 5)
    head = [min(v, INT32_MAX) for v in gem[:4]]
    assert action[1 : 1 + len(head)].tolist() == head
    assert not action[1 + len(head) :].any()
    return parsed


SEPARATORS = [" ", "  ", "\t", "\n", "\r\n", "\u2003", "\u3000", "\x1c", "\x85", "\xa0", "\u200b"]
NUMBERS = st.one_of(
    st.from_regex(r"[0-9]{1,6}", fullmatch=True),
    st.text(st.characters(categories=["Nd"]), min_size=1, max_size=4),
    st.sampled_from(["9" * 40, "0" * 4300 + "1", "0" * 4299 + "1", "2147483648", "0"]),
)


@st.composite
def guesses(draw) -> str:
    numbers = draw(st.lists(NUMBERS, min_size=0, max_size=7))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(numbers), max_size=len(numbers)))
    body = "".join(n + s for n, s in zip(numbers, seps, strict=True))
    if draw(st.booleans()):
        body = body.rstrip()
    prefix = draw(st.sampled_from(["", "x ", "\\boxed{1 2} ", "\\boxed{", "}"]))
    suffix = draw(st.sampled_from(["", "}", " \\boxed{abc}", " \\boxed{3}"]))
    return prefix + "\\boxed{" + body + "}" + suffix


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(guesses(), st.text(st.characters(exclude_categories=()))))
@example("\\boxed{1 2 3 4}")
@example("\\boxed{01 ٢ ３\u30004}")
@example("\\boxed{1 2 3 4 5 6 7}")
@example("\\boxed{" + "9" * 40 + " 1}")
@example("\\boxed{1 " + "7" * 4301 + "}")
@example("\\boxed{1 2}\\boxed{3 x}")
@example("\\boxed{ 1 2}")
@example("\\boxed{1\x1c2}")
def test_boxed_int_list_matches_gem(text):
    assert_agrees_with_gem(text)


def test_boxed_int_list_follows_the_int_digit_limit():
    old = sys.get_int_max_str_digits()
    try:
        for limit in (640, 0):
            sys.set_int_max_str_digits(limit)
            for digits in (639, 640, 641, 5000):
                assert_agrees_with_gem("\\boxed{1 " + "3" * digits + "}")
    finally:
        sys.set_int_max_str_digits(old)


def test_boxed_int_list_render_round_trips():
    space = MultiDiscrete((6,) + (10,) * 4)
    actions = np.asarray(space.sample(jax.random.key(0), (300,)))
    for action in actions:
        parsed = GRAMMAR.parse(GRAMMAR.render(action))
        if action[0] == 0:
            assert not parsed.ok
            continue
        count = min(int(action[0]), 4)
        expected = np.zeros(5, np.int32)
        expected[0], expected[1 : 1 + count] = action[0], action[1 : 1 + count]
        np.testing.assert_array_equal(parsed.action, expected)


# --- MultiDiscrete ------------------------------------------------------------------------


def test_multi_discrete_space():
    space = MultiDiscrete((3, 5, 2), start=(0, 1, -1))
    assert space.shape == (3,) and space.dtype == jnp.int32
    assert MultiDiscrete((4, 4)).start == (0, 0)
    x = space.sample(jax.random.key(1), (2000,))
    assert x.shape == (2000, 3) and x.dtype == jnp.int32
    x = np.asarray(x)
    for i, (n, s) in enumerate(zip(space.nvec, space.start, strict=True)):
        assert set(np.unique(x[:, i]).tolist()) == set(range(s, s + n))
    assert bool(space.contains(x).all())
    assert space.sample(jax.random.key(1)).shape == (3,)
    outside = np.asarray([[3, 1, 0], [0, 0, 0], [0, 1, 1], [-1, 1, 0], [2, 5, -1]])
    np.testing.assert_array_equal(space.contains(outside), [False] * 4 + [True])
    for bad in [dict(nvec=()), dict(nvec=(0, 2)), dict(nvec=(2, 2), start=(0,))]:
        with pytest.raises(ValueError):
            MultiDiscrete(**bad)
    sampled = jax.jit(lambda k: space.sample(k, (4,)))(jax.random.key(2))
    assert sampled.shape == (4, 3)
