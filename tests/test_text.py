"""Message templates, the MessageTable, and the host grammar's parity with GEM."""

from __future__ import annotations

import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import gemjax
from gemjax.core import Event
from gemjax.envs.guess_the_number import MESSAGES, GuessTheNumber
from gemjax.text.grammar import Grammar, Reader
from gemjax.tokenizer_bridge import BoxedInt, Choice, Int, MessageTable, ParsedAction, Template

INT32_MAX = 2**31 - 1

# --- Template ---------------------------------------------------------------------------


def test_plain_template_pieces_and_render():
    t = Template("At turn {turn}, you guessed {guess}.")
    assert t.text == "At turn {turn}, you guessed {guess}."
    assert t.pieces == ("At turn ", Int("turn"), ", you guessed ", Int("guess"), ".")
    assert t.slots == (Int("turn"), Int("guess"))
    assert t.render({"turn": 3, "guess": 17}) == "At turn 3, you guessed 17."
    assert t.render({"turn": -2, "guess": 0}) == "At turn -2, you guessed 0."
    with pytest.raises(KeyError):
        t.render({"turn": 3})


@pytest.mark.parametrize(
    ("spec", "value", "text"),
    [
        ("", 42, "42"),
        ("", -7, "-7"),
        ("2", 3, " 3"),
        ("2", 123, "123"),
        ("03d", 7, "007"),
        ("+d", 5, "+5"),
        (">4", 12, "  12"),
        ("<4", 12, "12  "),
        ("x", 255, "ff"),
        (",", 1234567, "1,234,567"),
    ],
)
def test_int_format_spec(spec, value, text):
    slot = Int("r", format_spec=spec)
    assert slot.text({"r": value}, {}) == text == format(value, spec)
    t = Template("[{r}]", r=slot)
    assert t.render({"r": value}) == f"[{text}]"
    # numpy and JAX integers render as Python ints do.
    assert t.render({"r": np.int32(value)}) == t.render({"r": jnp.int32(value)}) == f"[{text}]"


@pytest.mark.parametrize(
    "text", ["{r:2}", "{r!r}", "{r!s:>3}", "{}", "{0}", "{a.b}", "{a[0]}", "{x", "x}", "{{x}"]
)
def test_malformed_fields_raise(text):
    with pytest.raises(ValueError):
        Template(text)


def test_choice_slot():
    hint = Choice("hint", ("higher", "lower"))
    t = Template("the target is {hint} than {guess}.", hint=hint)
    assert t.pieces[1] == hint
    assert t.render({"hint": 0, "guess": 4}) == "the target is higher than 4."
    assert t.render({"hint": 1, "guess": 4}) == "the target is lower than 4."
    assert t.render({"hint": np.int32(1), "guess": 4}) == "the target is lower than 4."
    with pytest.raises(IndexError):
        t.render({"hint": 2, "guess": 4})
    # A Choice ignores echoes.
    assert hint.text({"hint": 0}, {"hint": "sideways"}) == "higher"


def test_echo_override():
    guess = Int("guess", echo=True)
    t = Template("you guessed {guess}, not {guess}; turn {turn}.", guess=guess)
    values = {"guess": INT32_MAX, "turn": 2}
    digits = "9" * 40
    assert t.render(values) == f"you guessed {INT32_MAX}, not {INT32_MAX}; turn 2."
    assert t.render(values, {"guess": digits}) == f"you guessed {digits}, not {digits}; turn 2."
    # Only echo slots read echoes, and only their own name.
    assert t.render(values, {"turn": "two"}) == f"you guessed {INT32_MAX}, not {INT32_MAX}; turn 2."
    plain = Template("{guess}")
    assert plain.render({"guess": 5}, {"guess": "005"}) == "5"
    # An echo replaces the whole text, so an echo slot cannot also have a format spec.
    with pytest.raises(ValueError, match="guess"):
        Int("guess", format_spec="04d", echo=True)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("\\boxed{{{example}}}", {"example": 7}),
        ("{{}}", {}),
        ("{{{{x}}}}", {}),
        ("a {{b}} {c} }}{{", {"c": 3}),
        ("{{{c}}}{{{c}}}", {"c": -1}),
    ],
)
def test_doubled_braces(text, values):
    t = Template(text)
    assert t.render(values) == text.format(**values)
    assert {s.name for s in t.slots} == set(values)


_FORMAT_PIECES = st.one_of(
    st.text(st.characters(exclude_characters="{}"), max_size=4),
    st.sampled_from(["{{", "}}", "{a}", "{b}", "{long_name}", "\\boxed{{", "\n"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_FORMAT_PIECES, max_size=8), st.integers(-(10**6), 10**6))
def test_template_renders_like_str_format(pieces, value):
    text = "".join(pieces)
    t = Template(text)
    values = {s.name: value + i for i, s in enumerate(t.slots)}
    assert t.render(values) == text.format(**values)


def test_unknown_slots_raise():
    with pytest.raises(ValueError, match="'y'"):
        Template("a {x}", y=Int("y"))
    with pytest.raises(ValueError, match="hint"):
        Template("no fields", hint=Choice("hint", ("a", "b")))
    Template("a {x}", x=Int("x", echo=True))  # declared and used: fine


# --- MessageTable ---------------------------------------------------------------------


def test_message_table_layout():
    table = MessageTable(
        start=Template("{lo}..{hi} in {turns}"),
        hint=Template(
            "{guess} is {hint}", guess=Int("guess", echo=True), hint=Choice("hint", ("low", "high"))
        ),
        again=Template("{guess} again at {turn}", guess=Int("guess", echo=True)),
        bare=Template("done"),
    )
    assert table.names == ("start", "hint", "again", "bare")
    assert table.arg_names == ("lo", "hi", "turns", "guess", "hint", "turn")
    assert [table.kind(n) for n in table.names] == [0, 1, 2, 3]
    with pytest.raises(KeyError, match="nope"):
        table.kind("nope")

    event = table.event("again", guess=12, turn=3)
    assert isinstance(event, Event)
    assert event.kind.dtype == jnp.int32 and event.kind.shape == () and int(event.kind) == 2
    assert event.args.dtype == jnp.int32
    np.testing.assert_array_equal(event.args, [0, 0, 0, 12, 0, 3])
    assert table.render_event(event) == "12 again at 3"
    assert table.render_event(event, {"guess": "0012"}) == "0012 again at 3"
    assert table.render(1, [0, 0, 0, 4, 1, 0]) == "4 is high"
    assert table.render(3, [9, 9, 9, 9, 9, 9]) == "done"
    with pytest.raises(ValueError):
        table.render(3, [0, 0])  # args of the wrong length
    with pytest.raises(KeyError, match="target"):
        table.event("again", target=1)


def test_message_table_event_traces():
    table = MessageTable(a=Template("{x}"), b=Template("{x} {y}"))

    @jax.jit
    def pick(flag, x, y):
        return table.event(jnp.where(flag, table.kind("b"), table.kind("a")), x=x, y=y)

    event = pick(True, jnp.int32(4), jnp.int32(-5))
    assert int(event.kind) == 1
    np.testing.assert_array_equal(event.args, [4, -5])
    assert table.render_event(event) == "4 -5"
    assert table.render_event(pick(False, jnp.int32(4), jnp.int32(-5))) == "4"
    batched = jax.vmap(lambda x: table.event("a", x=x))(jnp.arange(3, dtype=jnp.int32))
    assert batched.args.shape == (3, 2) and batched.kind.shape == (3,)


def test_select_takes_the_first_case_that_holds():
    table = MessageTable(a=Template("a"), b=Template("b"), c=Template("c"))
    first = jnp.asarray([True, False, False, True])
    second = jnp.asarray([True, True, False, False])
    kinds = jax.jit(lambda x, y: table.select((x, "a"), (y, "b"), default="c"))(first, second)
    assert kinds.dtype == jnp.int32
    assert kinds.tolist() == [0, 1, 2, 0]
    assert int(table.select(default="b")) == 1
    with pytest.raises(KeyError):
        table.select((first, "d"), default="a")


def test_message_table_without_slots():
    table = MessageTable(only=Template("hello {{}}"))
    event = table.event("only")
    assert event.args.shape == (0,) and event.args.dtype == jnp.int32
    assert table.render_event(event) == "hello {}"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (Int("g", echo=True), Int("g")),
        (Int("g"), Int("g", format_spec="2")),
        (Int("g"), Choice("g", ("a", "b"))),
        (Choice("g", ("a", "b")), Choice("g", ("b", "a"))),
    ],
)
def test_inconsistent_slot_declarations_raise(first, second):
    with pytest.raises(ValueError, match="'g'"):
        MessageTable(one=Template("{g}", g=first), two=Template("x {g}", g=second))
    # The same declaration twice is fine.
    MessageTable(one=Template("{g}", g=first), two=Template("x {g}", g=first))


def test_table_and_template_renderers_agree():
    """``MessageTable.render`` and ``Template.render`` give the same text (GuessTheNumber's
    table plus one with format specs), echoes included."""
    spec_table = MessageTable(
        row=Template("{r}|{c}|{d}", r=Int("r", format_spec="2"), c=Int("c", format_spec="03d")),
        pick=Template(
            "{{{h}}} {r}", h=Choice("h", ("a", "bb", "ccc")), r=Int("r", format_spec="2")
        ),
    )
    rng = np.random.default_rng(0)
    for table in (MESSAGES, spec_table):
        for kind, name in enumerate(table.names):
            template = table.templates[name]
            for _ in range(20):
                args = rng.integers(-5, 60, len(table.arg_names)).tolist()
                choices = {s.name: len(s.options) for s in template.slots if isinstance(s, Choice)}
                for slot_name, n in choices.items():
                    args[table.arg_names.index(slot_name)] = int(rng.integers(0, n))
                values = dict(zip(table.arg_names, args, strict=True))
                for echoes in (None, {}, {"guess": "9" * 40}, {"r": "echo"}):
                    assert table.render(kind, args, echoes) == template.render(values, echoes)
    # An echo is used exactly where the slot is an echo slot.
    hint = MESSAGES.kind("hint")
    args = [0] * len(MESSAGES.arg_names)
    args[MESSAGES.arg_names.index("guess")] = INT32_MAX
    text = MESSAGES.render(hint, args, {"guess": "9" * 40})
    assert text.count("9" * 40) == 2 and str(INT32_MAX) not in text


def test_empty_message_table_raises():
    with pytest.raises(ValueError):
        MessageTable()


# --- GuessTheNumber's text against GEM ---------------------------------------------------


@pytest.mark.parametrize(
    ("lo", "hi", "turns", "example"), [(1, 50, 7, 23), (4, 4, 1, 4), (10, 60, 9, 60)]
)
def test_instructions_and_suffix_match_gem(lo, hi, turns, example):
    from gem.envs.game_env.guess_the_number import GuessTheNumberEnv

    gem = GuessTheNumberEnv(min_number=lo, max_number=hi, max_turns=turns)
    gem.sample_random_action = lambda: f"\\boxed{{{example}}}"
    event = MESSAGES.event(
        "instructions", min_number=lo, max_number=hi, max_turns=turns, example=example
    )
    assert MESSAGES.render_event(event) == gem._get_instructions()
    assert GuessTheNumber().suffix.render({}) == gem.get_task_suffix()


# --- BoxedInt against GEM's parser ---------------------------------------------------------

GEM_PATTERN = re.compile(r"\\boxed{(\d+)}")
GRAMMAR = BoxedInt("guess")


def gem_guess(text: str):
    """Exactly GuessTheNumberEnv.step's parsing: the guess, or None/0 (format error)."""
    matches = list(GEM_PATTERN.finditer(text))
    clean_action = matches[-1] if matches else None
    try:
        player_guess = int(clean_action.group(1))
    except Exception:
        player_guess = None
    return player_guess


def assert_agrees_with_gem(text: str) -> ParsedAction:
    gem = gem_guess(text)
    parsed = GRAMMAR.parse(text)
    assert np.shape(parsed.action) == ()  # a scalar kernel action
    action = int(parsed.action)
    assert 0 <= action <= INT32_MAX  # representable as int32, never negative
    # The kernel's rule: a guess <= 0 is a format error.
    assert (not gem) == (action <= 0)
    assert parsed.ok == (gem is not None)
    if gem is None:
        assert parsed.echoes == {}
    else:
        assert action == min(gem, INT32_MAX)
        assert parsed.echoes == {"guess": str(gem)}
    return parsed


BIG = [
    "9" * 40,
    "1" + "0" * 39,
    "0" * 40,
    "7" * 5000,
    "0" * 4299 + "5",
    "0" * 4300 + "5",
    "3" * 4300,
    "3" * 4301,
    "٣" * 4301,
    "2147483646",
    "2147483647",
    "2147483648",
    "02147483648",
    "4294967295",
    "4294967296",
    "4294967297",
    "9" * 11,
]
PIECES = [
    "\\boxed{",
    "}",
    "{",
    "\\",
    "\\\\",
    "boxed",
    "\\boxed",
    "\\boxed ",
    "\\Boxed{",
    " ",
    "-",
    "+",
    "_",
    "",
    "٣",
    "７",
    "߀",
    "𝟗",
    "0",
    "00",
    "\n",
    "\\boxed{\\boxed{",
    "}}",
    "\ud800",
]
DIGITS = st.from_regex(r"[0-9]{1,12}", fullmatch=True)
UNICODE_DIGITS = st.text(st.characters(categories=["Nd"]), min_size=1, max_size=6)
NUMBERS = st.one_of(DIGITS, UNICODE_DIGITS, st.sampled_from(BIG))
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=6)  # surrogates too


@st.composite
def boxed_soup(draw) -> str:
    piece = st.one_of(
        st.sampled_from(PIECES),
        NUMBERS,
        ANY_TEXT,
        st.builds(lambda n: "\\boxed{" + n + "}", NUMBERS),
        st.builds(lambda n: "\\boxed{-" + n + "}", NUMBERS),
        st.builds(lambda n: "\\boxed{" + n + " }", NUMBERS),
    )
    return "".join(draw(st.lists(piece, max_size=8)))


EXPLICIT = [
    ("", 0, None),
    ("no box here", 0, None),
    ("\\boxed{0}", 0, "0"),
    ("\\boxed{000}", 0, "0"),
    ("\\boxed{007}", 7, "7"),
    ("\\boxed{٣}", 3, "3"),
    ("\\boxed{７}", 7, "7"),
    ("\\boxed{١٢}", 12, "12"),
    ("\\boxed{-5}", 0, None),
    ("\\boxed{ 5}", 0, None),
    ("\\boxed{5 }", 0, None),
    ("\\boxed{+5}", 0, None),
    ("\\boxed{1_000}", 0, None),
    ("\\boxed{5}\\boxed{x}", 5, "5"),
    ("\\boxed{5} then \\boxed{6}", 6, "6"),
    ("\\boxed{\\boxed{12}}", 12, "12"),
    ("\\boxed{1}2}", 1, "1"),
    ("\\\\boxed{8}", 8, "8"),
    ("\\boxed{2147483647}", INT32_MAX, "2147483647"),
    ("\\boxed{2147483648}", INT32_MAX, "2147483648"),
    ("\\boxed{" + "9" * 40 + "}", INT32_MAX, "9" * 40),
    ("\\boxed{" + "0" * 4299 + "5}", 5, "5"),
    ("\\boxed{" + "0" * 4300 + "5}", 0, None),
    ("\\boxed{" + "1" * 4300 + "}", INT32_MAX, "1" * 4300),
    ("\\boxed{5}\\boxed{" + "1" * 4301 + "}", 0, None),
    ("\\boxed{" + "7" * 5000 + "}", 0, None),
    ("\ud800\\boxed{3}\udfff", 3, "3"),
]


@pytest.mark.parametrize(
    ("text", "action", "echo"), EXPLICIT, ids=[f"explicit{i}" for i in range(len(EXPLICIT))]
)
def test_boxed_int_explicit(text, action, echo):
    parsed = assert_agrees_with_gem(text)
    assert int(parsed.action) == action
    assert parsed.echoes == ({} if echo is None else {"guess": echo})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(exclude_categories=())))
@example("\\boxed{12}")
def test_boxed_int_matches_gem_on_any_text(text):
    assert_agrees_with_gem(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(boxed_soup())
def test_boxed_int_matches_gem_on_boxed_soup(text):
    assert_agrees_with_gem(text)


@pytest.mark.parametrize("limit", [0, 640, 5000])
def test_boxed_int_follows_int_digit_limit(limit):
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        for n in (639, 640, 641, 4300, 4301, 5000, 5001):
            for text in ("\\boxed{" + "4" * n + "}", "\\boxed{" + "0" * n + "4}"):
                assert_agrees_with_gem(text)
    finally:
        sys.set_int_max_str_digits(previous)


def test_boxed_int_render_round_trip():
    for value in (0, 1, 9, 10, 50, 12345, INT32_MAX):
        text = GRAMMAR.render(np.int32(value))
        assert text == f"\\boxed{{{value}}}"
        assert int(GRAMMAR.parse(text).action) == value


def test_grammar_rejects_non_strings():
    for bad in (b"\\boxed{3}", None, 3):
        with pytest.raises(TypeError):
            GRAMMAR.parse(bad)


def test_a_grammar_without_a_device_reader_cannot_be_made():
    """The device reader is part of the grammar protocol: a grammar class that lacks
    one fails where it is instantiated (a game's constructor, so ``make``), naming it."""

    class HostOnly(Grammar):
        pattern = re.compile(r"\\boxed{(\d+)}")

        def parse(self, text: str) -> ParsedAction:
            return ParsedAction(0, False, {})

        def render(self, action: np.ndarray) -> str:
            return "\\boxed{0}"

    with pytest.raises(TypeError, match="device_reader"):
        HostOnly()


@pytest.mark.parametrize("env_id", gemjax.list_envs())
def test_every_game_grammar_has_its_device_reader(env_id):
    grammar = gemjax.make(env_id).grammar
    reader = grammar.device_reader()
    assert isinstance(reader, Reader)
    # The reader lives in the grammar's own module.
    assert type(reader).__module__ == type(grammar).__module__
