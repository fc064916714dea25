"""The GEM parity harness: play gem-llm's env and gemjax's text env side by side.

A parity test resets GEM's env, mirrors it into gemjax (``gemjax.gem.from_gem``),
steps both with the same stream of adversarial responses (:class:`ActionStream`)
and compares every step's 5-tuple (:func:`check_step`); where the game's step draws
randomness (``step_uses_key``: 2048's spawn), GEM's draw is replayed first
(:func:`replay_draw`), so the comparison stays byte-exact; :func:`message_classifier`
names each GEM observation by the message of the game's table it is, so a test can
say which messages its streams reached. Nothing here imports gem-llm: the caller
passes GEM's env. :func:`check_gem_parity` runs the base stream on any game.
"""

from __future__ import annotations

import contextlib
import functools
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.gem import from_gem
from gemjax.gem.text_env import kernel_class_of
from gemjax.text.templates import Choice, MessageTable

Stream = Callable[[], str]
"""A response generator: each call returns the next response text."""

SEPARATORS = (" ", " ", " ", "  ", "\t", "\n", " \n ", "\u2003", "\u3000", "\x1c", "\xa0", "\x85")
"""Whitespace GEM's ``\\s`` and ``str.split`` read differently from an ASCII space."""

DIGIT_ZEROS = (0x660, 0x6F0, 0x966, 0xFF10, 0x1D7CE, 0x0E50)
"""Zeros of Unicode digit blocks (Arabic-Indic, ..., Thai): ``\\d`` matches them and
``int()`` reads them."""

OVER_LONG = ("0" * 4299 + "1", "0" * 4300 + "1", "7" * 4301)
"""Numbers at and beyond Python's int-conversion digit limit (4300 digits)."""


@contextlib.contextmanager
def preserved_global_rng() -> Iterator[None]:
    """Restore Python's and NumPy's global RNG states on exit (GEM's ``reset(seed)``
    reseeds them)."""
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def check_step(ours: tuple, theirs: tuple) -> list[str]:
    """The ways gemjax's step 5-tuple ``ours`` differs from GEM's ``theirs`` (empty when
    equal): same observation string, same types, rewards equal in float32 (gemjax's
    rewards are float32, see docs/gem_differences.md), same flags and info."""
    problems = []
    (o_obs, o_reward, o_term, o_trunc, o_info) = ours
    (g_obs, g_reward, g_term, g_trunc, g_info) = theirs
    if not (type(o_obs) is str and o_obs == g_obs):
        problems.append("observation")
    if not (type(o_reward) is float and np.float32(o_reward) == np.float32(g_reward)):
        problems.append("reward")
    if not (type(o_term) is bool and o_term == g_term):
        problems.append("terminated")
    if not (type(o_trunc) is bool and o_trunc == g_trunc):
        problems.append("truncated")
    if o_info != g_info:
        problems.append("info")
    return problems


DRAW_CANDIDATES = 4096
"""Keys tried per step by :func:`replay_draw` (GEM's rarest 2048 spawn, a 4 on one of
15 empty cells, has probability 1/150: all 4096 keys miss it with probability 1e-12)."""


@functools.cache
def _draw_search(kernel: Any) -> Callable[..., tuple[jax.Array, jax.Array]]:
    """Jitted ``search(keys, state, action, params, target) -> (found, index)``: the
    first of the text env keys ``keys`` (uint32[K, 2]) under which ``kernel``'s step,
    as :class:`~gemjax.gem.TextEnv` calls it, reaches the state ``target``."""

    def reaches(key: jax.Array, state: Any, action: Any, params: Any, target: Any) -> jax.Array:
        _, step_key = jax.random.split(key)
        stepped, _ = kernel.step(step_key, state, action, params)
        same = jax.tree.map(lambda a, b: jnp.all(a == b), stepped, target)
        return jnp.all(jnp.stack(jax.tree.leaves(same)))

    def search(keys: jax.Array, state: Any, action: Any, params: Any, target: Any) -> tuple:
        hits = jax.vmap(reaches, in_axes=(0, None, None, None, None))(
            keys, state, action, params, target
        )
        return jnp.any(hits), jnp.argmax(hits)

    return jax.jit(search)


def replay_draw(ours: Any, gem_env: Any, action: str) -> bool:
    """Set the key of ``ours`` (a text env in the state GEM's env was in before its
    last step) so that stepping ``action`` draws what GEM's step drew: the first of
    :data:`DRAW_CANDIDATES` keys under which our step reaches GEM's new state
    (``state_from_gem``). For games whose step draws randomness (2048's spawn), which
    GEM takes from its global RNG; the step's outcome and text are then compared as
    for any game, and the draws' distribution is tested apart. Returns whether a key
    was found (if not, the key is left and the comparison reports the difference)."""
    kernel = ours.kernel
    keys = jax.random.split(ours.key, DRAW_CANDIDATES)
    parsed = jnp.asarray(kernel.grammar.parse(action).action, jnp.int32)
    target = kernel.state_from_gem(gem_env)
    found, index = _draw_search(kernel)(keys, ours.state, parsed, ours.params, target)
    if bool(found):
        ours.key = keys[int(index)]
    return bool(found)


def play_episode(
    gem_env: Any,
    ours: Any,
    stream: Stream,
    extra: int,
    steps: int,
    label: str,
    describe: Callable[[], str],
) -> list[str]:
    """Step GEM's env and ours with the same ``stream`` of responses for at most
    ``steps`` turns, until the episode ends and then ``extra`` more (GEM does not
    freeze). Returns GEM's observations.

    Raises:
        AssertionError: the first 5-tuple that differs, with ``label``, the hidden
            state (``describe()``) and the episode's responses.
    """
    history: list[str] = []
    observations: list[str] = []
    for step in range(steps):
        action = stream()
        history.append(action)
        theirs = gem_env.step(action)
        if ours.kernel.step_uses_key:
            replay_draw(ours, gem_env, action)
        mine = ours.step(action)
        problems = check_step(mine, theirs)
        if problems:
            raise AssertionError(
                f"{label} step {step}: {', '.join(problems)} differ\n{describe()}\n"
                f"actions: {[a[:200] for a in history]}\ngemjax: {mine!r}\nGEM: {theirs!r}"
            )
        observations.append(theirs[0])
        if theirs[2] or theirs[3]:
            if extra == 0:
                break
            extra -= 1
    return observations


def parity_episodes(
    gem_env: Any,
    env_id: str,
    stream_seed: int,
    episodes: int,
    *,
    start: Callable[[int], Any],
    new_stream: Callable[[Any], Stream],
    extra: Callable[[], int],
    turns_past_limit: int,
    describe: Callable[[], str],
    classify: Callable[[str], str] | None = None,
) -> Counter:
    """Play ``episodes`` episodes of GEM's env and gemjax's side by side with
    :func:`play_episode`; returns how often each class of GEM observation came up.

    Episode ``i`` resets GEM's env with seed ``stream_seed * 100_000 + i``;
    ``start(seed)`` returns gemjax's env in GEM's state (after any per-test work on
    GEM's env); ``new_stream(ours)`` gives the responses and ``extra()`` the steps
    played past the end (called in that order); an episode runs for at most
    ``max_turns + turns_past_limit`` steps. ``classify`` names each GEM observation;
    by default :func:`message_classifier` of the episode's kernel."""
    seen: Counter = Counter()
    for episode in range(episodes):
        seed = stream_seed * 100_000 + episode
        gem_env.reset(seed=seed)
        ours = start(seed)
        stream = new_stream(ours)
        label = f"{env_id}: episode {episode} (seed {seed})"
        steps = gem_env.max_turns + turns_past_limit
        name = classify or message_classifier(ours.kernel.messages)
        for obs in play_episode(gem_env, ours, stream, extra(), steps, label, describe):
            seen[name(obs)] += 1
    return seen


def _template_pattern(template: Any) -> tuple[re.Pattern[str], list[str]]:
    """A regex matching the template's texts (each slot any text, a ``Choice`` one of
    its options, captured), and the names of its ``Choice`` slots in group order."""
    parts, choices = [], []
    for piece in template.pieces:
        if isinstance(piece, str):
            parts.append(re.escape(piece))
        elif isinstance(piece, Choice):
            parts.append("(" + "|".join(re.escape(o) for o in piece.options) + ")")
            choices.append(piece.name)
        else:
            parts.append("(?:.*?)")
    return re.compile("".join(parts), re.DOTALL), choices


@functools.cache
def message_classifier(messages: MessageTable) -> Callable[[str], str]:
    """``classify(obs) -> name``: the message of ``messages`` that GEM's observation
    ``obs`` is, found by matching each template's literal text around its slots (the
    match with the most literal text wins). A template with ``Choice`` slots names
    the options too, ``"flag[added]"``; an observation no template matches is
    ``"other"``. Built once per table."""
    patterns = []
    for name, template in messages.templates.items():
        pattern, choices = _template_pattern(template)
        literal = sum(len(p) for p in template.pieces if isinstance(p, str))
        patterns.append((literal, name, pattern, choices))
    patterns.sort(key=lambda entry: -entry[0])

    def classify(obs: str) -> str:
        for _, name, pattern, choices in patterns:
            match = pattern.fullmatch(obs)
            if match is not None:
                if not choices:
                    return name
                return f"{name}[{','.join(match.groups())}]"
        return "other"

    return classify


class ActionStream:
    """Adversarial responses for one episode: ``stream()`` draws one of ``kinds``
    (``(method, weight)`` pairs) and returns its text.

    The base kinds need no game knowledge: GEM-style samples of gemjax's text env,
    kernel actions of the whole action space rendered by the game's grammar (format
    errors, out of range, wrong lengths), those wrapped in prose or given twice,
    empty text and random code points. A game's stream subclasses this, adds its own
    kinds (moves that read GEM's hidden state) and uses the pieces: :meth:`digits`
    (leading zeros, other scripts), :meth:`boxed`, :data:`SEPARATORS`,
    :data:`OVER_LONG`.

    Attributes:
        rng: the stream's ``random.Random`` (a fixed seed reproduces a failure).
        gem_env: GEM's env (read, never stepped here). ours: gemjax's text env.
        kinds: ``(method, weight)`` pairs.
    """

    def __init__(self, rng: random.Random, gem_env: Any, ours: Any) -> None:
        self.rng, self.gem_env, self.ours = rng, gem_env, ours
        self.kinds: list[tuple[Stream, int]] = [
            (self.sampled, 4),
            (self.rendered, 4),
            (self.decorated, 2),
            (self.multi_box, 2),
            (self.empty, 1),
            (self.garbage, 1),
        ]

    def __call__(self) -> str:
        kinds, weights = zip(*self.kinds, strict=True)
        return self.rng.choices(kinds, weights)[0]()

    leading_zeros = 0.1  # the share of :meth:`digits` with leading zeros
    other_script = 0.05  # the share of :meth:`digits` in another script

    def digits(self, value: int) -> str:
        """``value``'s decimal text: mostly plain, sometimes with leading zeros or in
        another script's digits."""
        r = self.rng.random()
        if r < self.leading_zeros:
            return "0" * self.rng.randint(1, 3) + str(value)
        if r < self.leading_zeros + self.other_script:
            zero = self.rng.choice(DIGIT_ZEROS)
            return "".join(chr(zero + int(c)) for c in str(value))
        return str(value)

    def boxed(self, body: str, prose: float = 0.3) -> str:
        """``\\boxed{body}``, inside a sentence with probability ``prose``."""
        text = "\\boxed{" + body + "}"
        if self.rng.random() < prose:
            text = f"Let me think.\n\nMy move: {text}."
        return text

    def sampled(self) -> str:
        """A response as gemjax's ``sample_random_action`` writes it."""
        return self.ours.sample_random_action()

    def rendered(self) -> str:
        """A kernel action drawn from the whole action space (but those GEM's step
        crashes on, ``gem_step_crashes``), as the grammar writes it."""
        kernel = self.ours.kernel
        crashes: frozenset[int] = getattr(kernel, "gem_step_crashes", frozenset())
        while True:
            key = jax.random.key(self.rng.getrandbits(32))
            action = jax.device_get(kernel.action_space(self.ours.params).sample(key))
            if not crashes or int(action) not in crashes:
                return kernel.grammar.render(action)

    def decorated(self) -> str:
        """A rendered action inside prose."""
        return f"I think the answer is {self.rendered()} for now."

    def multi_box(self) -> str:
        """Two responses in one: GEM keeps the last well-formed match."""
        first = self.rng.choice([self.sampled, self.rendered])()
        second = self.rng.choice([self.sampled, self.rendered, lambda: "\\boxed{x}"])()
        return f"{first} or {second}"

    def empty(self) -> str:
        return ""

    def garbage(self) -> str:
        """Up to 20 random code points."""
        return "".join(chr(self.rng.randrange(0x110000)) for _ in range(self.rng.randint(0, 20)))


def mirror(gem_env: Any, previous: Any = None, seed: int | None = None) -> Any:
    """gemjax's text env in the state of GEM's ``gem_env``: ``previous`` (an earlier
    mirror of the same GEM env, so of the same kernel) moved there, keeping its
    compiled calls, or a new ``from_gem`` mirror when ``previous`` is None."""
    if previous is None:
        return from_gem(gem_env, seed=seed)
    previous.state = previous.kernel.state_from_gem(gem_env)
    return previous


StreamFactory = Callable[[random.Random, Any, Any], Stream]
"""``factory(rng, gem_env, ours)``: a new episode's response stream."""


def check_gem_parity(
    gem_env: Any,
    env_id: str,
    episodes: int = 8,
    stream_seed: int = 0,
    *,
    stream: StreamFactory = ActionStream,
    opening: Callable[[Any, random.Random], None] | None = None,
    on_reset: Callable[[Any], None] | None = None,
    extra_turns: tuple[int, int] = (2, 3),
    turns_past_limit: int = 3,
    describe: Callable[[Any], str] | None = None,
) -> Counter:
    """Play ``episodes`` episodes of GEM's ``gem_env`` (a game of ``env_id``) and its
    mirror (:func:`mirror`) side by side, sometimes on past the end. Every 5-tuple
    must be equal, the mirror's task suffix GEM's, and every GEM observation one of
    the game's messages. Returns how often each message came up
    (:func:`message_classifier`).

    Args:
        stream: the responses of an episode, ``stream(rng, gem_env, ours)``; by
            default the base :class:`ActionStream` (a game's own stream subclasses it).
        opening: moves played on GEM's env after its reset and before mirroring,
            ``opening(gem_env, rng)``; by default the game's ``gem_opening``.
        on_reset: called with GEM's env after the opening (to count configurations).
        extra_turns: ``(zeros, most)``: an episode goes on past its end for 0 turns
            with odds ``zeros`` to 1, else for 1 to ``most`` turns.
        turns_past_limit: an episode stops at ``max_turns`` plus this many steps.
        describe: GEM's hidden state in a failure message (default: its attributes).

    Raises:
        AssertionError: a step or the suffix differs, or GEM printed text no message
            matches.
    """
    rng = random.Random(stream_seed)
    ours: list[Any] = [None]
    play_opening = opening or kernel_class_of(gem_env).gem_opening
    zeros, most = extra_turns

    def start(seed: int) -> Any:
        play_opening(gem_env, rng)
        if on_reset is not None:
            on_reset(gem_env)
        ours[0] = mirror(gem_env, ours[0], seed)
        assert ours[0].get_task_suffix() == gem_env.get_task_suffix(), env_id
        return ours[0]

    with preserved_global_rng():
        seen = parity_episodes(
            gem_env,
            env_id,
            stream_seed,
            episodes,
            start=start,
            new_stream=lambda ours: stream(rng, gem_env, ours),
            extra=lambda: rng.choice([0] * zeros + [rng.randint(1, most)]),
            turns_past_limit=turns_past_limit,
            describe=lambda: (describe or (lambda env: repr(vars(env))[:2000]))(gem_env),
        )
    assert "other" not in seen, f"GEM printed text that is none of the messages: {seen}"
    return seen
