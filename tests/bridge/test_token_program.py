"""Token programs: every game's messages and suffixes rendered straight to token ids.

The boundary rule they rest on is checked against Qwen's pre-tokenizer on random
text; their ids against ``tokenizer.encode`` of the host text on random play, for
every id; and the lanes they cannot vouch for (a minus sign, an option the
tabulation excluded) against the bridge, which renders those from code points.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import tiered

import gemjax
from gemjax.text.templates import MessageTable
from gemjax.tokenizer_bridge.bridge import TokenBridge
from gemjax.tokenizer_bridge.render.programs import ProgramTable
from gemjax.tokenizer_bridge.render.segments import SegmentTokenizer
from gemjax.tokenizer_bridge.render.token_programs import (
    TokenPrograms,
    boundaries_verified,
    cut_between,
)
from gemjax.tokenizer_bridge.tokenizers import load_tokenizer

ALL_IDS = tuple(gemjax.list_envs())
LANES, STEPS = 24, 6
CAPACITY = 2048  # token ids: the longest instructions in bytes take 1,283
# Words spelled letter by letter (units of 27^n combinations) are tabulated for the
# game's word list only; a program whose length no listed word has is not compiled.
WORD_GAMES = ("Hangman", "Wordle")


@functools.cache
def tokenizer_for(name: str) -> Any:
    return load_tokenizer(name)


@functools.cache
def programs_for(env_id: str, name: str) -> tuple[Any, TokenPrograms, TokenPrograms]:
    """``(env, message programs, suffix programs)`` (no segment table: cheap)."""
    env = gemjax.make(env_id)
    segments = SegmentTokenizer(tokenizer_for(name))
    words = env.printed_words(env.default_params)
    messages = TokenPrograms(ProgramTable(env.messages, 64), segments, words)
    suffix = TokenPrograms(ProgramTable(MessageTable(suffix=env.suffix), 64), segments)
    return env, messages, suffix


@functools.cache
def rollout(env_id: str, name: str) -> dict[str, np.ndarray]:
    """Events and suffix args of random play, with both programs' renderings."""
    env, messages, suffix = programs_for(env_id, name)
    params = env.default_params

    def lane(key: jax.Array) -> Any:
        state, ts = env.reset(key, params)

        def body(carry: Any, step_key: jax.Array) -> Any:
            state, ts = carry
            suffix_args = suffix.table.args_from_values(env.suffix_values(state))
            out = {
                "kind": ts.event.kind,
                "args": ts.event.args,
                "suffix_args": suffix_args,
                "obs": messages.render(ts.event.kind, ts.event.args, CAPACITY),
                "suffix": suffix.render(jnp.int32(0), suffix_args, CAPACITY),
            }
            action = env.random_action(step_key, state)
            return env.step(step_key, state, action, params), out

        return jax.lax.scan(body, (state, ts), jax.random.split(key, STEPS))[1]

    keys = jax.random.split(jax.random.key(5), LANES)
    return jax.device_get(jax.jit(jax.vmap(lane))(keys))


def rendered_ids(rendered: tuple[Any, ...], lane: int, step: int) -> tuple[list[int], bool]:
    ids, length, total, valid = rendered
    assert int(total[lane, step]) == int(length[lane, step])  # CAPACITY never overflows
    return ids[lane, step, : int(length[lane, step])].tolist(), bool(valid[lane, step])


def check_programs(env_id: str, name: str) -> tuple[float, float]:
    """Every tabulated lane's ids are ``encode(host text)``; returns the shares of
    tabulated (valid) message and suffix lanes."""
    env, _, suffix = programs_for(env_id, name)
    tokenizer = tokenizer_for(name)
    outs = rollout(env_id, name)
    valid = {"obs": [], "suffix": []}
    for lane in range(LANES):
        for step in range(STEPS):
            texts = {
                "obs": env.messages.render(
                    int(outs["kind"][lane, step]), outs["args"][lane, step].tolist()
                ),
                "suffix": suffix.table.table.render(0, outs["suffix_args"][lane, step].tolist()),
            }
            for key, text in texts.items():
                ids, ok = rendered_ids(outs[key], lane, step)
                valid[key].append(ok)
                if ok:
                    assert ids == tokenizer.encode(text, add_special_tokens=False), (
                        key,
                        text[-200:],
                    )
    return float(np.mean(valid["obs"])), float(np.mean(valid["suffix"]))


@pytest.mark.parametrize("env_id", tiered(ALL_IDS))
def test_programs_render_canonical_ids_qwen3(env_id: str) -> None:
    obs_rate, suffix_rate = check_programs(env_id, "qwen3")
    assert suffix_rate == 1.0
    game = env_id.split(":")[1].split("-")[0]
    _, messages, _ = programs_for(env_id, "qwen3")
    if game not in WORD_GAMES:
        assert all(messages.compiled)
    if game == "Sudoku":  # the hard instructions choose the empty version option
        assert obs_rate >= 0.8, obs_rate
    else:  # the word games' sampler guesses listed words
        assert obs_rate == 1.0, obs_rate


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [i for i in ALL_IDS if i.endswith("-easy")])
def test_programs_render_canonical_ids_bytes(env_id: str) -> None:
    obs_rate, suffix_rate = check_programs(env_id, "bytes")
    assert suffix_rate == 1.0 and obs_rate > 0.3


def test_programs_are_small() -> None:
    """Literals fold into their neighbours and numbers are one unit: a step message
    of GuessTheNumber is a handful of units, a 5 x 5 Minesweeper board a few dozen."""
    _, messages, _ = programs_for("game:GuessTheNumber-v0-hard", "qwen3")
    hint = messages.kind_programs([messages.table.table.kind("hint")])
    assert messages.units(hint) <= 8
    _, _, board = programs_for("game:Minesweeper-v0-easy", "qwen3")
    assert board.units(range(board.table.num_programs)) <= 40
    assert all(board.compiled)


BOUNDARY_ALPHABET = "aZé _.,'\"()[]|-:!?09\n\t\r"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=BOUNDARY_ALPHABET, min_size=2, max_size=24))
def test_claimed_boundaries_are_qwen3_pre_token_starts(text: str) -> None:
    pre = tokenizer_for("qwen3").backend_tokenizer.pre_tokenizer
    starts = {start for _, (start, _) in pre.pre_tokenize_str(text)}
    for i in range(1, len(text)):
        if cut_between(text[i - 1], text[i]):
            assert i in starts, (text, i)


def test_boundaries_verified_per_tokenizer() -> None:
    assert boundaries_verified(SegmentTokenizer(tokenizer_for("qwen3")))
    assert boundaries_verified(SegmentTokenizer(tokenizer_for("bytes")))


@functools.cache
def gtn_bridge() -> TokenBridge:
    return TokenBridge(gemjax.make("game:GuessTheNumber-v0-hard"), tokenizer_for("qwen3"))


def event(bridge: TokenBridge, name: str, **values: int) -> tuple[jax.Array, jax.Array]:
    built = bridge.env.messages.event(name, **values)
    return built.kind, built.args


@pytest.mark.slow
def test_lanes_the_programs_cannot_vouch_for_render_from_codepoints() -> None:
    """A negative number (a minus sign would join the text before it) is not
    tabulated: the bridge renders that lane from code points, alone or in a batch
    of tabulated lanes, and the text is still the host's."""
    bridge = gtn_bridge()
    tokenizer = bridge.tokenizer
    cases = [
        event(bridge, "out_of_range", turn=3, guess=-7),
        event(bridge, "hint", turn=2, guess=512, hint=1),
        event(bridge, "duplicate", turn=12, guess=2147483647),
    ]
    kinds = jnp.stack([k for k, _ in cases])
    args = jnp.stack([a for _, a in cases])
    valid = jax.vmap(lambda k, a: bridge.token_messages.render(k, a, 64)[3])(kinds, args)
    assert valid.tolist() == [False, True, True]
    render = jax.jit(jax.vmap(lambda k, a: bridge.render(None, _timestep(k, a))))
    batched = render(jnp.repeat(kinds, 40, axis=0), jnp.repeat(args, 40, axis=0))
    alone = jax.jit(lambda k, a: bridge.render(None, _timestep(k, a)))
    for row, (kind, arg) in enumerate(cases):
        host = bridge.env.messages.render(int(kind), np.asarray(arg).tolist())
        for out, index in ((batched, (row * 40,)), (alone(kind, arg), ())):
            ids = np.asarray(out.ids[index][: int(out.length[index])]).tolist()
            assert tokenizer.decode(ids) == host
            if bool(out.canonical[index]):
                assert ids == tokenizer.encode(host, add_special_tokens=False)
            else:  # the code-point path: a segment the construction never saw
                assert row == 0
    assert "-7" in bridge.env.messages.render(int(cases[0][0]), np.asarray(cases[0][1]).tolist())


def _timestep(kind: jax.Array, args: jax.Array) -> Any:
    """A stand-in timestep: the renderer reads only its event."""
    return SimpleNamespace(event=gemjax.core.Event(kind=kind, args=args))


@pytest.mark.slow
def test_echoes_equal_to_the_slots_own_text_keep_the_token_path() -> None:
    """A guess the player typed as the game prints it (``42``) keeps the lane on its
    token program; one it prints differently (41 digits, clamped) does not, and the
    bridge prints the player's digits from code points."""
    bridge = gtn_bridge()
    tokenizer = bridge.tokenizer
    replies = ["\\boxed{42}", "\\boxed{" + "9" * 41 + "}"]
    encoded = [tokenizer.encode(r, add_special_tokens=False) for r in replies]
    ids = jnp.asarray([e + [0] * (64 - len(e)) for e in encoded], jnp.int32)
    parsed = jax.vmap(bridge.parse_full)(ids, jnp.asarray([len(e) for e in encoded]))
    guesses = np.asarray(parsed.action).reshape(-1).tolist()
    kinds, args = zip(
        *[event(bridge, "hint", turn=1, guess=g, hint=0) for g in guesses], strict=True
    )
    kinds, args = jnp.stack(kinds), jnp.stack(args)
    valid = jax.vmap(lambda k, a, e: bridge.token_messages.render(k, a, 64, echoes=e)[3])(
        kinds, args, parsed.echoes
    )
    assert valid.tolist() == [True, False]
    out = jax.jit(jax.vmap(lambda k, a, e: bridge.render(None, _timestep(k, a), e)))(
        kinds, args, parsed.echoes
    )
    for row, reply_digits in enumerate(["42", "9" * 41]):
        text = tokenizer.decode(np.asarray(out.ids[row][: int(out.length[row])]).tolist())
        assert f"you guessed {reply_digits}, and" in text
