"""TokenBridge: device renderings equal the host text (and its canonical tokens).

One id per game (its ``-random`` id, which plays every configuration of the game) is
checked in full (observations, suffixes, prompts, chat prompts) with ``qwen3``, two
games with ``bytes`` too. Bridges are built once per (id, tokenizer) and their jitted
rollouts shared through a module cache.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gemjax
from gemjax.gem.wrappers import ObservationWrapper
from gemjax.text.grammar import BoxedLetters, BoxedWord
from gemjax.text.templates import Board, Echo
from gemjax.tokenizer_bridge.bridge import CHAT_PREFIX, CHAT_TAIL, TokenBridge
from gemjax.tokenizer_bridge.tokenizers import load_tokenizer

LANES, STEPS = 8, 6
ALL_IDS = tuple(gemjax.list_envs())
ONE_PER_GAME = tuple({i.split("-v0")[0]: i for i in ALL_IDS if i.endswith("-easy")}.values())
# Each game's -random id draws from all its configurations (every board size, word
# length, code length), so its rollout covers every text table of the game: CI plays
# it with qwen3. The word-grid games' random ids (each 2-5 minutes of compiling on
# CI's CPU) are left to their easy ids, which render the same grids and clue lists,
# and to the token-program tests, which cover every id.
WORD_GRID_GAMES = ("game:WordSearch", "game:Crosswords")
FULL_TEXT_IDS = tuple(
    {
        i.split("-v0")[0]: i
        for i in ALL_IDS
        if i.endswith("-easy" if i.split("-v0")[0] in WORD_GRID_GAMES else "-random")
    }.values()
)
# The byte tokenizer's ids are each text's UTF-8 bytes whatever the game: CI plays it
# on texts that are ASCII (GuessTheNumber) and that are not (Sokoban's boards print a
# multi-byte character). The quick tier (-m "not slow") plays only the game with the
# shortest texts with it (its rollout compiles in seconds; a board game's takes half
# a minute).
QUICK_PROMPT_CASE = ("game:GuessTheNumber-v0-easy", "bytes")
PROMPT_CASES = [
    pytest.param(*case, marks=() if case == QUICK_PROMPT_CASE else pytest.mark.slow)
    for case in [
        *((i, "qwen3") for i in FULL_TEXT_IDS),
        QUICK_PROMPT_CASE,
        ("game:Sokoban-v0-random", "bytes"),
    ]
]


@functools.cache
def tokenizer_for(name: str) -> Any:
    """One tokenizer object per name, so its vocabulary tables are read once."""
    return load_tokenizer(name)


@functools.cache
def bridge_for(env_id: str, name: str) -> TokenBridge:
    return TokenBridge(gemjax.make(env_id), tokenizer_for(name))


def host_suffix(env: Any, values: dict[str, np.ndarray]) -> str:
    """The suffix text of slot values fetched from the device (as ``TextEnv`` does)."""
    return env.suffix.render(
        {k: v.reshape(-1).tolist() if v.ndim else int(v) for k, v in values.items()}
    )


def line(text: str) -> str:
    """GEM's ``maybe_add_new_line``."""
    return text + "\n" if text and not text.endswith("\n") else text


@functools.cache
def rollout_fn(env_id: str, name: str, prompts: bool = True) -> Any:
    """A jitted random-play rollout returning every rendering per lane and step
    (``prompts``: the concat prompts too)."""
    bridge = bridge_for(env_id, name)
    env, params = bridge.env, bridge.env.default_params

    def lane(key: jax.Array) -> Any:
        state, ts = env.reset(key, params)
        carry = (state, ts, bridge.prompt_start(ts), bridge.prompt_start(ts, chat=True))

        def body(carry: Any, step_key: jax.Array) -> Any:
            state, ts, prompt, chat = carry
            out = {
                "kind": ts.event.kind,
                "args": ts.event.args,
                "suffix_values": dict(env.suffix_values(state)),
                "obs": bridge.render(state, ts),
                "suffix": bridge.render_suffix(state),
            }
            if prompts:
                out["prompt"] = bridge.render_prompt(prompt, state)
                out["chat"] = bridge.render_prompt(chat, state, chat=True)
            action = env.random_action(step_key, state)
            state, ts = env.step(step_key, state, action, params)
            if prompts:
                prompt, chat = bridge.prompt_step(prompt, ts), bridge.prompt_step(chat, ts)
            return (state, ts, prompt, chat), out

        _, outs = jax.lax.scan(body, carry, jax.random.split(key, STEPS))
        return outs

    return jax.jit(jax.vmap(lane))


def tokens_of(text: Any, lane: int, step: int | None) -> list[int]:
    index = (lane,) if step is None else (lane, step)
    return np.asarray(text.ids[index][: int(text.length[index])]).tolist()


def check_text(tokenizer: Any, text: Any, lane: int, step: int | None, host: str) -> bool:
    """Decoded ids equal ``host``; ids are the canonical encoding when flagged so
    (``text`` batched over lanes, and steps unless ``step`` is None). Returns the
    canonical flag."""
    index = (lane,) if step is None else (lane, step)
    assert not bool(text.overflow[index])
    ids = tokens_of(text, lane, step)
    assert tokenizer.decode(ids) == host, (lane, step, host[-300:])
    canonical = bool(text.canonical[index])
    if canonical:
        assert ids == tokenizer.encode(host, add_special_tokens=False), (lane, step, host[-300:])
    return canonical


def check_compact_vocabulary(bridge: TokenBridge, outs: dict[str, Any]) -> None:
    """The ids a rollout rendered and a well-formed action's ids map into the bridge's
    compact vocabulary and back; ids outside it map to -1."""
    env = bridge.env
    used = np.concatenate(
        [
            np.asarray(text.ids)[np.arange(text.ids.shape[-1]) < np.asarray(text.length)[..., None]]
            for text in (outs["obs"], outs["suffix"])
        ]
    )
    compact = np.asarray(bridge.to_compact(jnp.asarray(used)))
    assert (compact >= 0).all() and (compact < len(bridge.vocab)).all()
    np.testing.assert_array_equal(np.asarray(bridge.to_full(jnp.asarray(compact))), used)
    outside = np.setdiff1d(np.arange(2000), bridge.vocab)[:5]
    assert (np.asarray(bridge.to_compact(jnp.asarray(outside))) == -1).all()
    state, _ = env.reset(jax.random.key(0), env.default_params)
    text = env.grammar.render(np.asarray(env.random_action(jax.random.key(1), state)))
    ids = bridge.tokenizer.encode(text, add_special_tokens=False)
    assert (np.asarray(bridge.to_compact(jnp.asarray(ids))) >= 0).all(), text


def check_rollout(env_id: str, name: str, prompts: bool) -> dict[str, Any]:
    bridge = bridge_for(env_id, name)
    env, tokenizer = bridge.env, bridge.tokenizer
    keys = jax.random.split(jax.random.key(3), LANES)
    outs = jax.device_get(rollout_fn(env_id, name, prompts)(keys))
    flags = []
    for lane in range(LANES):
        history: list[str] = []
        for step in range(STEPS):
            args = outs["args"][lane, step].tolist()
            obs = env.messages.render(int(outs["kind"][lane, step]), args)
            values = {k: v[lane, step] for k, v in outs["suffix_values"].items()}
            suffix = host_suffix(env, values)
            flags.append(check_text(tokenizer, outs["obs"], lane, step, obs))
            flags.append(check_text(tokenizer, outs["suffix"], lane, step, suffix))
            history.append(obs)
            if not prompts:
                continue
            with_suffix = step > 0 or env.reset_info_has_suffix
            prompt = "".join(line(o) for o in history) + (suffix if with_suffix else "")
            flags.append(check_text(tokenizer, outs["prompt"], lane, step, prompt))
            chat = CHAT_PREFIX + prompt + CHAT_TAIL
            flags.append(check_text(tokenizer, outs["chat"], lane, step, chat))
    # Well-formed play (the game's own sampler) is canonical throughout, but for board
    # suffixes, whose runs of cells the construction-time sampling does not cover
    # exhaustively (measured rates: docs/performance.md).
    boards = any(isinstance(slot, Board) for slot in env.suffix.slots)
    assert np.mean(flags) >= (0.9 if boards else 1.0), f"canonical rate {np.mean(flags):.3f}"
    return outs


@pytest.mark.parametrize(("env_id", "name"), PROMPT_CASES)
def test_random_play_renders_exact_canonical_text_and_prompts(env_id, name):
    outs = check_rollout(env_id, name, prompts=True)
    if name == "qwen3":
        check_compact_vocabulary(bridge_for(env_id, name), outs)


@pytest.mark.parametrize("env_id", ["game:Mastermind-v0-easy", "game:Minesweeper-v0-easy"])
def test_concat_rule_matches_the_observation_wrapper(env_id):
    """The host prompt rule used above is what GEM's ``concat`` wrapper builds."""
    raw = gemjax.gem.make(env_id)
    wrapped = ObservationWrapper(
        gemjax.gem.make(env_id), include_action=False, include_chat_template=False
    )
    obs, info = raw.reset(seed=5)
    text, _ = wrapped.reset(seed=5)
    history = [obs]
    assert text == line(obs) + info.get("suffix", "")
    for _ in range(6):
        action = raw.sample_random_action()
        obs, _, terminated, truncated, info = raw.step(action)
        text, *_ = wrapped.step(action)
        history.append(obs)
        assert text == "".join(line(o) for o in history) + info.get("suffix", "")
        if terminated or truncated:
            break


def encode_batch(tokenizer: Any, texts: list[str], width: int) -> tuple[jax.Array, jax.Array]:
    ids = np.zeros((len(texts), width), np.int32)
    lengths = np.zeros(len(texts), np.int32)
    for row, text in enumerate(texts):
        encoded = tokenizer.encode(text, add_special_tokens=False)[:width]
        ids[row, : len(encoded)] = encoded
        lengths[row] = len(encoded)
    return jnp.asarray(ids), jnp.asarray(lengths)


def adversarial(text: str, rng: np.random.Generator) -> str:
    """A response the grammar still reads, with what messages echo made odd: numbers
    with leading zeros or 40 digits, letters in mixed case, an unknown command word."""
    choice = rng.integers(4)
    if choice == 0:
        return re.sub(r"\d+", lambda m: "00" + m.group(), text)
    if choice == 1:
        return re.sub(r"\d+", lambda m: "9" * 40, text, count=1)
    if choice == 2:
        return "".join(c.lower() if rng.random() < 0.5 else c for c in text)
    return re.sub(r"\{[a-z]+", "{Dig", text)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy"])
def test_render_is_the_same_whichever_path_a_lane_takes(env_id):
    """Batches with no, a few, many and only reset lanes, whose instructions do not
    fit the short buffer, render the host text; so does one lane rendered on its own."""
    bridge = bridge_for(env_id, "qwen3")
    env, params, tokenizer = bridge.env, bridge.env.default_params, bridge.tokenizer
    keys = jax.random.split(jax.random.key(5), 16)
    states, first = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jax.vmap(env.random_action)(keys, states)
    states, stepped = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, states, actions, params)
    render = jax.jit(jax.vmap(bridge.render))
    for resets in (0, 2, 10, 16):
        reset = jnp.arange(16) < resets
        ts = jax.tree.map(
            lambda a, b, r=reset: jnp.where(r.reshape((16,) + (1,) * (a.ndim - 1)), a, b),
            first,
            stepped,
        )
        texts = jax.device_get(render(states, ts))
        for lane in range(16):
            kind, args = int(ts.event.kind[lane]), np.asarray(ts.event.args[lane]).tolist()
            assert (kind == 0) == (lane < resets)
            assert check_text(tokenizer, texts, lane, None, env.messages.render(kind, args))
    single = jax.jit(bridge.render)
    for lane in (0, 15):  # a reset lane and a step lane, alone
        one = single(*jax.tree.map(lambda x, i=lane: x[i], (states, ts)))
        np.testing.assert_array_equal(np.asarray(one.ids), np.asarray(texts.ids[lane]))


@pytest.mark.slow
def test_resets_and_echo_lanes_in_shared_chunks_render_the_host_text():
    """Resets (token programs) and lanes that echo the player (code points) are
    re-rendered together, two to a chunk under a batch of 64: chunks of two resets,
    of a reset and an echo, of two echoes; every lane renders the host text, as it
    does alone."""
    env_id = "game:Minesweeper-v0-easy"
    bridge = bridge_for(env_id, "qwen3")
    env, params, tokenizer = bridge.env, bridge.env.default_params, bridge.tokenizer
    count = 64
    keys = jax.random.split(jax.random.key(8), count)
    states, first = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    # The lanes re-rendered, in lane order: reset, reset, reset, echo, echo, echo, ...
    pattern = ("reset", "reset", "reset", "echo", "echo", "echo", "plain", "plain")
    roles = [pattern[lane % len(pattern)] for lane in range(count)]
    texts = ["\\boxed{dig 1 2}" if role == "echo" else "\\boxed{reveal 1 2}" for role in roles]
    ids, lengths = encode_batch(tokenizer, texts, 16)
    reset = jnp.asarray([role == "reset" for role in roles])

    @jax.jit
    def device(keys, states, first, ids, lengths):
        parsed = jax.vmap(bridge.parse_full)(ids, lengths)
        _, ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, states, parsed.action, params)
        ts = jax.tree.map(
            lambda a, b: jnp.where(reset.reshape((count,) + (1,) * (a.ndim - 1)), a, b), first, ts
        )
        return ts, parsed.echoes, jax.vmap(bridge.render)(states, ts, parsed.echoes)

    ts, echoes, rendered = jax.device_get(device(keys, states, first, ids, lengths))
    single = jax.jit(bridge.render)
    for lane, role in enumerate(roles):
        kind, args = int(ts.event.kind[lane]), np.asarray(ts.event.args[lane]).tolist()
        assert (kind == 0) == (role == "reset")
        host = env.grammar.parse(texts[lane])
        check_text(tokenizer, rendered, lane, None, env.messages.render(kind, args, host.echoes))
        if role == "echo":
            assert "dig" in env.messages.render(kind, args, host.echoes)
        if lane < len(pattern):
            lane_echoes = jax.tree.map(lambda x, i=lane: x[i], echoes)
            lane_state = jax.tree.map(lambda x, i=lane: x[i], states)
            one = single(lane_state, jax.tree.map(lambda x, i=lane: x[i], ts), lane_echoes)
            np.testing.assert_array_equal(np.asarray(one.ids), np.asarray(rendered.ids[lane]))


@pytest.mark.slow
def test_rendering_in_chunks_of_lanes_is_the_same():
    """Under vmap, rendering a batch of 10 lanes (three just reset) 3 lanes at a time,
    padded to whole chunks, gives the ids of rendering it all at once: observations,
    suffixes and prompts."""
    whole = copy.copy(bridge_for("game:GuessTheNumber-v0-easy", "qwen3"))
    whole.chunk_lanes = None
    chunked = copy.copy(whole)
    chunked.chunk_lanes = 3
    env, params = whole.env, whole.env.default_params
    keys = jax.random.split(jax.random.key(9), 10)
    states, first = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jax.vmap(env.random_action)(keys, states)
    states, stepped = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, states, actions, params)
    reset = jnp.arange(10) < 3
    ts = jax.tree.map(
        lambda a, b: jnp.where(reset.reshape((10,) + (1,) * (a.ndim - 1)), a, b), first, stepped
    )

    def everything(bridge: TokenBridge, state: Any, start: Any, now: Any) -> Any:
        prompt = bridge.prompt_step(bridge.prompt_start(start), now)
        return (
            bridge.render(state, now),
            bridge.render_suffix(state),
            bridge.render_prompt(prompt, state),
        )

    outputs = [
        jax.device_get(jax.jit(jax.vmap(functools.partial(everything, b)))(states, first, ts))
        for b in (whole, chunked)
    ]
    for a, b in zip(*(jax.tree.leaves(o) for o in outputs), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_prompts_are_the_same_whichever_buffer_a_lane_takes():
    """Batched prompt steps and prompts tokenize each lane's newest text into the
    smallest buffer that holds it (a step message's, the reset instructions', the
    whole text buffer's, the prompt's); a batch mixing them all (short and long ASCII,
    text of multi-byte characters) gives each lane the ids of its unbatched call (the
    prompt's buffer), with and without a prompt capacity that overflows."""
    full = bridge_for("game:GuessTheNumber-v0-easy", "qwen3")
    small = copy.copy(full)
    small.prompt_capacity = 60
    env, tokenizer = full.env, full.tokenizer
    state, first = env.reset(jax.random.key(0), env.default_params)
    state, ts = env.step(jax.random.key(1), state, jnp.int32(3), env.default_params)
    size = full.text_capacity
    texts = [
        "Your guess 12 is too low.",
        "x" * (full.step_text + 40),
        "caf\u00e9 \u00fc" * 12,
        "\U0001f600" * (size // 3),
        "Line one\nline two.",
        "word " * (size // 6),
        "\U0001f600" * (size - 2),  # more ids than any smaller buffer
    ] * 4
    chars = np.zeros((len(texts), size), np.int32)
    for row, text in enumerate(texts):
        chars[row, : len(text)] = [ord(c) for c in text]
    lengths = jnp.asarray([len(t) for t in texts], jnp.int32)
    assert int(jnp.max(lengths)) < size
    for bridge in (full, small):
        start = bridge.prompt_start(first)
        prompts = jax.vmap(lambda c, n, p=start: p._replace(newest=c, newest_length=n))(
            jnp.asarray(chars), lengths
        )
        states = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(texts), *x.shape)), state)
        tss = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(texts), *x.shape)), ts)
        stepped = jax.jit(jax.vmap(bridge.prompt_step))(prompts, tss)
        rendered = jax.jit(jax.vmap(bridge.render_prompt))(stepped, states)
        chat = jax.jit(jax.vmap(lambda p, s, b=bridge: b.render_prompt(p, s, chat=True)))
        last = chat(prompts, states)  # the reset prompt: the chat tail, no suffix
        for row, text in enumerate(texts):
            one = jax.tree.map(lambda x, r=row: x[r], prompts)
            alone_step = bridge.prompt_step(one, ts)
            for batched, alone in (
                (stepped.history, alone_step.history),
                (rendered, bridge.render_prompt(alone_step, state)),
                (last, bridge.render_prompt(one, state, chat=True)),
            ):
                for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(alone), strict=True):
                    np.testing.assert_array_equal(got[row], want, err_msg=f"{row}: {text[:30]}")
        if bridge is full:
            ids = np.asarray(stepped.history.ids[2, : int(stepped.history.length[2])])
            assert tokenizer.decode(ids.tolist()) == line(texts[2])


@pytest.mark.slow
def test_prompt_steps_with_long_echoes_match_unbatched_steps():
    """A batched prompt step renders the new message in a step message's buffer and
    re-renders the lanes whose echoes do not fit (two 60-digit cell coordinates):
    every lane's prompt equals its unbatched step, and the new message is the host's
    text."""
    bridge = bridge_for("game:Minesweeper-v0-easy", "qwen3")
    env, params, tokenizer = bridge.env, bridge.env.default_params, bridge.tokenizer
    count = 16
    keys = jax.random.split(jax.random.key(3), count)
    states, first = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    far = "9" * 60
    texts = [
        f"\\boxed{{reveal {far} {far}}}" if row % 4 == 0 else f"\\boxed{{reveal {row % 5} 2}}"
        for row in range(count)
    ]
    ids, lengths = encode_batch(tokenizer, texts, 160)
    parsed = jax.vmap(bridge.parse_full)(ids, lengths)
    _, ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, states, parsed.action, params)
    prompts = jax.vmap(bridge.prompt_start)(first)
    stepped = jax.jit(jax.vmap(bridge.prompt_step))(prompts, ts, parsed.echoes)
    for row, text in enumerate(texts):
        one = functools.partial(lambda tree, r: jax.tree.map(lambda x: x[r], tree), r=row)
        alone = bridge.prompt_step(one(prompts), one(ts), one(parsed.echoes))
        for got, want in zip(jax.tree.leaves(stepped), jax.tree.leaves(alone), strict=True):
            np.testing.assert_array_equal(got[row], want, err_msg=text)
        host = env.messages.render(
            int(ts.event.kind[row]), ts.event.args[row].tolist(), env.grammar.parse(text).echoes
        )
        newest = np.asarray(stepped.newest[row, : int(stepped.newest_length[row])])
        assert "".join(map(chr, newest)) == host
    assert max(int(n) for n in stepped.newest_length) > bridge.step_text


@pytest.mark.slow
def test_prompt_overflow_keeps_the_first_tokens():
    full = bridge_for("game:GuessTheNumber-v0-easy", "qwen3")
    small = copy.copy(full)
    small.prompt_capacity = 40
    env = full.env
    state, first = env.reset(jax.random.key(0), env.default_params)
    short = small.render_prompt(small.prompt_start(first), state)
    whole = full.render_prompt(full.prompt_start(first), state)
    assert bool(short.overflow) and not bool(whole.overflow)
    assert int(short.length) == 40 and int(whole.length) > 40
    np.testing.assert_array_equal(short.ids, whole.ids[:40])
    # Once the history overflows, later prompts stay overflowed.
    state, ts = env.step(jax.random.key(1), state, jnp.int32(3), env.default_params)
    history = small.prompt_step(small.prompt_start(first), ts)
    assert bool(history.history.overflow)
    later = small.render_prompt(history, state)
    assert bool(later.overflow) and int(later.length) == 40


@pytest.mark.slow
def test_construction_reports_non_canonical_messages():
    wordle = bridge_for("game:Wordle-v0-easy", "qwen3")
    guess_the_number = bridge_for("game:GuessTheNumber-v0-hard", "qwen3")
    bytes_bridge = bridge_for("game:Wordle-v0-easy", "bytes")
    # Random letter strings are not in the word list: reported, with a rate.
    assert 0 < wordle.non_canonical["feedback"] < 1
    assert guess_the_number.non_canonical == {} and bytes_bridge.non_canonical == {}


# Echo slots that print a count (entries, letters): at most ten digits, never cut.
COUNT_SLOTS = frozenset({"entries", "letters"})


def edge_echoes(env: Any, capacity: int) -> list[tuple[str, str, int]]:
    """``(text, slot, echo length)`` of responses whose echo of ``slot`` takes
    ``capacity`` and ``capacity + 1`` code points: one run of digits or letters of a
    well-formed action's text lengthened at a time, for every echo slot it feeds."""
    state, _ = env.reset(jax.random.key(0), env.default_params)
    base = env.grammar.render(np.asarray(env.random_action(jax.random.key(1), state)))
    runs = list(re.finditer(r"\d+|(?<=\{)[a-zA-Z]+", base))
    found: dict[tuple[str, int], tuple[str, str, int]] = {}
    for run in runs:
        fill = "9" if run.group().isdigit() else "q"
        for width in range(1, 2 * capacity):
            text = base[: run.start()] + fill * width + base[run.end() :]
            for slot, echo in env.grammar.parse(text).echoes.items():
                if len(echo) in (capacity, capacity + 1):
                    found.setdefault((slot, len(echo)), (text, slot, len(echo)))
    return list(found.values())


def prints_echoes(env: Any) -> bool:
    """Some message of the game prints the player's own text (an echo slot; not
    FifteenPuzzle's, Sokoban's or TowerofHanoi's)."""
    slots = env.messages.slots.values()
    return any(isinstance(slot, Echo) or getattr(slot, "echo", False) for slot in slots)


# The games whose messages print the player's text: the others' parsing is
# test_device_parse's (every game's grammar), their messages the rollouts above.
@pytest.mark.slow
@pytest.mark.parametrize("env_id", [i for i in ONE_PER_GAME if prints_echoes(gemjax.make(i))])
def test_parsed_echoes_render_what_the_host_prints_and_cut_ones_are_flagged(env_id):
    """Text actions parsed on device, stepped, rendered with the parser's echoes (one
    compiled program for both kinds of response):

    * well-formed actions made odd (:func:`adversarial`) give the host's action and
      text;
    * every echo slot at the echo buffer's edge renders the host text exactly; one
      code point past it, the observation, the prompt after that step and the
      history after the next step all set ``overflow`` (``exact`` False): a cut echo
      never passes for the host text.
    """
    bridge = bridge_for(env_id, "qwen3")
    env, params, tokenizer = bridge.env, bridge.env.default_params, bridge.tokenizer
    capacity = bridge.messages.echo_capacity
    cases = edge_echoes(env, capacity)
    check_echo_slots_reach_the_edge(env, bridge, cases, capacity)
    count = 48  # the odd responses, each drawn for the state its lane plays it in
    keys = jax.random.split(jax.random.key(11), count + len(cases))
    states, _ = jax.vmap(env.reset, in_axes=(0, None))(keys[:count], params)
    actions = np.asarray(jax.vmap(env.random_action)(keys[:count], states))
    rng = np.random.default_rng(0)
    odd = ["I think " + adversarial(env.grammar.render(a), rng) for a in actions]
    texts = odd + [text for text, _, _ in cases]
    ids, lengths = encode_batch(tokenizer, texts, bridge.max_tokens)

    @jax.jit
    def device(keys, ids, lengths):
        states, first = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        parsed = jax.vmap(bridge.parse_full)(ids, lengths)
        states, ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, states, parsed.action, params
        )
        prompt = jax.vmap(bridge.prompt_step)(
            jax.vmap(bridge.prompt_start)(first), ts, parsed.echoes
        )
        return (
            parsed.action,
            first,
            ts,
            jax.vmap(bridge.render)(states, ts, parsed.echoes),
            jax.vmap(bridge.render_prompt)(prompt, states),
            jax.vmap(bridge.prompt_step)(prompt, ts).history,
            dict(jax.vmap(env.suffix_values)(states)),
        )

    action, first, ts, obs, prompt, history, suffix_values = jax.device_get(
        device(keys, ids, lengths)
    )
    canonical = []
    for row, text in enumerate(odd):
        host = env.grammar.parse(text)
        np.testing.assert_array_equal(action[row], np.asarray(host.action), err_msg=text)
        expected = env.messages.render(
            int(ts.event.kind[row]), ts.event.args[row].tolist(), host.echoes
        )
        got = np.asarray(obs.ids[row, : int(obs.length[row])]).tolist()
        assert tokenizer.decode(got) == expected, (text, expected)
        canonical.append(bool(obs.canonical[row]))
        if canonical[-1]:
            assert got == tokenizer.encode(expected, add_special_tokens=False)
    print(env_id, "canonical rate under adversarial echoes", np.mean(canonical))
    for row, (text, slot, size) in enumerate(cases, start=len(odd)):
        echoes = env.grammar.parse(text).echoes
        host = env.messages.render(int(ts.event.kind[row]), ts.event.args[row].tolist(), echoes)
        cut = any(len(e) > capacity and e in host for e in echoes.values())
        assert cut == (size > capacity and echoes[slot] in host), (text, host)
        reset = env.messages.render(0, first.event.args[row].tolist())
        suffix = host_suffix(env, {k: v[row] for k, v in suffix_values.items()})
        for rendered, want in ((obs, host), (prompt, line(reset) + line(host) + suffix)):
            assert bool(rendered.exact[row]) == (not cut), (text, host)
            if not cut:
                check_text(tokenizer, rendered, row, None, want)
        assert bool(history.overflow[row]) == cut, text


def check_echo_slots_reach_the_edge(
    env: Any, bridge: TokenBridge, cases: list[tuple[str, str, int]], capacity: int
) -> None:
    """``cases`` hold, for every echo slot of the game, a response whose echo takes
    ``capacity`` and one whose echo takes ``capacity + 1`` code points, but for a word
    of a fixed list, which is never near the edge."""
    echo_slots = set(bridge.messages.echo_slots) - COUNT_SLOTS
    if isinstance(env.grammar, BoxedWord):
        longest = max(len(w) for w in env.grammar.words)
        assert echo_slots == {env.grammar.slot} and not cases and 2 * longest < capacity
        return
    assert {(slot, n) for _, slot, n in cases} >= {
        (slot, n) for slot in echo_slots for n in (capacity, capacity + 1)
    }


def test_a_grammar_the_device_cannot_read_fails_at_construction():
    """The grammar's device program is compiled when the bridge is built, so a grammar
    the device parser refuses fails there, not at the first ``parse``."""
    env = copy.copy(gemjax.make("game:GuessTheNumber-v0-hard"))
    env.grammar = BoxedLetters(r"\\boxed{([a-z]+)!}", "abc", 3, "guess", "letters")
    with pytest.raises(NotImplementedError, match="group to be the content"):
        TokenBridge(env, load_tokenizer("bytes"))
