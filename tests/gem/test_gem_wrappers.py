"""gemjax's observation wrappers vs GEM's, and GEM's own wrappers around gemjax envs.

Each check runs four stacks in lockstep with the same actions:

    A  GEM wrappers    around a GEM env      (the reference)
    B  GEM wrappers    around a gemjax env
    C  gemjax wrappers around a gemjax env
    D  gemjax wrappers around a GEM env

A and D (same inner env) must agree exactly, and so must B and C; across inner envs
the observations agree modulo the instructions' random example number (the gemjax
env's state is copied from GEM after each reset; the reset text was already drawn)
and rewards agree as float32 (the documented difference).

Chat templates need a tokenizer: a small ChatML one in Python, and a real
``transformers`` tokenizer with a Jinja template where ``jinja2`` is installed.
Tools: a fake ``<fake>...</fake>`` tool built on GEM's ``BaseTool``.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import gem
import numpy as np
import pytest
from gem.tools.base_tool import BaseTool
from gem.tools.tool_env_wrapper import ToolEnvWrapper
from gem.wrappers.episode_tracking_wrapper import (
    EpisodeTrackingWrapper as GemEpisodeTrackingWrapper,
)
from gem.wrappers.observation_wrapper import ObservationWrapper as GemObservationWrapper
from gem.wrappers.wrapper_factory import WRAPPER_FACTORY as GEM_WRAPPER_FACTORY
from gem.wrappers.wrapper_factory import get_wrapper_fns as gem_get_wrapper_fns

import gemjax.gem as gg

EASY = "game:GuessTheNumber-v0-easy"
HARD = "game:GuessTheNumber-v0-hard"
OBSERVATION_WRAPPERS = ["concat", "concat_with_action", "concat_chat", "concat_chat_on_reset"]
CUMULATIVE = ("cumulative_rewards", "prev_ep_cumulative_rewards")
EXAMPLE = re.compile(r"for example, \\boxed\{\d+\}\.\n")
CHATML = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ChatMLTokenizer:
    """What the wrappers use of a tokenizer: ``apply_chat_template`` (ChatML)."""

    def apply_chat_template(
        self, messages: list[dict[str, str]], tokenize: bool = True, add_generation_prompt=False
    ) -> str:
        assert tokenize is False
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


@pytest.fixture(scope="module", params=["python", "transformers"])
def tokenizer(request):
    if request.param == "python":
        return ChatMLTokenizer()
    pytest.importorskip("jinja2", reason="transformers' chat templates need jinja2")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    model = tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(model))
    tok.chat_template = CHATML
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == ChatMLTokenizer().apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    return tok


class FakeTool(BaseTool):
    """Answers ``<fake>text</fake>`` with the text reversed; empty text is an error."""

    tool_type = "fake"
    name = "fake"

    def instruction_string(self) -> str:
        return "Call <fake>text</fake> to get the text reversed."

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        match = re.search(r"<fake>(.*?)</fake>", action, re.DOTALL)
        if match is None:
            return False, False, "", ""
        if not match[1]:
            return True, True, "Tool error: nothing to reverse.", match[0]
        return True, False, f"<result>{match[1][::-1]}</result>", match[0]


class EchoTool(FakeTool):
    """A second tool (GEM lists several tools under "Available tools:")."""

    tool_type = "echo"
    name = "echo"

    def instruction_string(self) -> str:
        return "Call <echo>text</echo> to hear it back."

    def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
        match = re.search(r"<echo>(.*?)</echo>", action, re.DOTALL)
        if match is None:
            return False, False, "", ""
        return True, False, match[1], match[0]


def tool_wrapper(tools: int = 1) -> Callable[[Any], Any]:
    return partial(
        ToolEnvWrapper,
        tools=[FakeTool(), EchoTool()][:tools],
        tool_reward=0.05,
        tool_success_reward=0.25,
        max_tool_uses=3,
    )


def mask(text: str) -> str:
    return EXAMPLE.sub(r"for example, \\boxed{N}.\n", text)


def guess_action(rng: random.Random, game, tool_rate: float = 0.1) -> str:
    """Plausible play, edge cases and tool calls (plain text to envs without tools)."""
    lo, hi = game.min_number, game.max_number
    if rng.random() < tool_rate:
        return rng.choice(["<fake>abc</fake>", "<fake></fake>", "<echo>hi\n</echo> \\boxed{3}"])
    r = rng.random()
    if r < 0.55:
        return rng.choice(["", "Hmm. ", "I guess "]) + f"\\boxed{{{rng.randint(lo, hi)}}}"
    if r < 0.65:
        return f"\\boxed{{{game.game_number}}}"
    return rng.choice(
        [
            f"\\boxed{{{hi + 1}}}",
            "\\boxed{0}",
            "",
            "line\n",
            "\\boxed{٣}",
            f"\\boxed{{{lo}}} \\boxed{{abc}}",
            "\\boxed{ 5}",
            "\\boxed{" + "1" * 5000 + "}",
        ]
    )


def build_stacks(
    env_id: str,
    gem_wrappers: list[Callable[[Any], Any]],
    our_wrappers: list[Callable[[Any], Any]],
) -> dict[str, Any]:
    inner = {
        "A": gem.make(env_id),
        "B": gg.make(env_id),
        "C": gg.make(env_id),
        "D": gem.make(env_id),
    }
    stacks = {}
    for name, env in inner.items():
        for wrapper in gem_wrappers if name in "AB" else our_wrappers:
            env = wrapper(env)
        stacks[name] = env
    return stacks


def sync_inner_state(stacks: dict[str, Any]) -> None:
    """Copy the reference GEM env's state into both gemjax envs."""
    reference = stacks["A"].unwrapped
    for name in "BC":
        ours = stacks[name].unwrapped
        ours.state = ours.kernel.state_from_gem(reference)


def same_info(a: dict, b: dict) -> bool:
    """Equal infos: same keys in the same order, equal values, except that the sums of
    rewards agree to float32 precision (the rewards themselves are float32)."""
    if list(a) != list(b):
        return False
    for key in a:
        if key in CUMULATIVE:
            if not math.isclose(a[key], b[key], rel_tol=1e-6, abs_tol=1e-6):
                return False
        elif a[key] != b[key]:
            return False
    return True


def assert_same(results: dict[str, tuple], context: str) -> None:
    """A == D and B == C exactly; A ~ B modulo the example and float32 rewards."""
    for left, right in [("A", "D"), ("B", "C")]:
        assert results[left] == results[right], (
            f"{context}: {left} != {right}\n{results[left]!r}\n{results[right]!r}"
        )
    a, b = results["A"], results["B"]
    assert len(a) == len(b)
    if len(a) == 2:  # reset
        assert mask(a[0]) == mask(b[0]), f"{context}: reset\n{a[0]!r}\n{b[0]!r}"
        assert same_info(a[1], b[1]), f"{context}: {a[1]} != {b[1]}"
        return
    assert mask(a[0]) == mask(b[0]), f"{context}: observation\n{a[0]!r}\n{b[0]!r}"
    assert np.float32(a[1]) == np.float32(b[1]), f"{context}: reward {a[1]} != {b[1]}"
    assert a[2:4] == b[2:4], f"{context}: flags {a[2:4]} != {b[2:4]}"
    assert same_info(a[4], b[4]), f"{context}: info\n{a[4]}\n{b[4]}"


def play_side_by_side(
    stacks: dict[str, Any], seed: int, episodes: int, steps: int, tool_rate: float = 0.1
) -> list:
    rng = random.Random(seed)
    observations = []
    for episode in range(episodes):
        results = {name: env.reset(seed=seed * 100 + episode) for name, env in stacks.items()}
        assert_same(results, f"episode {episode} reset")
        sync_inner_state(stacks)
        observations.append(results["A"][0])
        for step in range(rng.randint(1, steps)):
            action = guess_action(rng, stacks["A"].unwrapped, tool_rate)
            results = {name: env.step(action) for name, env in stacks.items()}
            assert_same(results, f"episode {episode} step {step} action {action!r}")
            observations.append(results["A"][0])
    return observations


def check_observation_wrapper(name: str, max_history_length, tokenizer=None) -> None:
    kwargs: dict[str, Any] = {"max_history_length": max_history_length}
    if tokenizer is not None:
        kwargs["tokenizer"] = tokenizer
    gem_wrappers = [partial(GEM_WRAPPER_FACTORY[name], **kwargs), GemEpisodeTrackingWrapper]
    our_wrappers = [partial(gg.WRAPPER_FACTORY[name], **kwargs), gg.EpisodeTrackingWrapper]
    stacks = build_stacks(HARD, gem_wrappers, our_wrappers)
    observations = play_side_by_side(stacks, seed=len(name), episodes=10, steps=12)
    # the history really is kept, and cut as configured
    turns = max(o.count("At turn ") for o in observations)
    assert turns >= 2
    if max_history_length is not None:  # the last H actions and H + 1 observations
        assert turns == max_history_length + 1
    game_parts = [o.split("Enter your first guess to start the game.\n")[-1] for o in observations]
    assert any("\\boxed{" in part for part in game_parts) == (name != "concat")
    if name == "concat_chat":
        # the actions kept plus the generation prompt
        prompts = max(o.count("<|im_start|>assistant\n") for o in observations)
        assert (prompts == turns) if max_history_length else (prompts >= 3)
    if name == "concat_chat_on_reset":
        assert any(o.startswith("<|im_start|>user\n") for o in observations)
        assert all(o.count("<|im_start|>user\n") <= 1 for o in observations)


@pytest.mark.parametrize("max_history_length", [None, 1, 3])
@pytest.mark.parametrize("name", ["concat", "concat_with_action"])
def test_observation_wrappers_match_gem(name: str, max_history_length) -> None:
    check_observation_wrapper(name, max_history_length)


@pytest.mark.parametrize("max_history_length", [None, 1, 3])
@pytest.mark.parametrize("name", ["concat_chat", "concat_chat_on_reset"])
def test_chat_observation_wrappers_match_gem(name: str, max_history_length, tokenizer) -> None:
    check_observation_wrapper(name, max_history_length, tokenizer)


def test_wrapper_factories_have_gem_names() -> None:
    assert set(OBSERVATION_WRAPPERS) | {"episode_tracking"} == set(gg.WRAPPER_FACTORY)
    assert set(gg.WRAPPER_FACTORY) <= set(GEM_WRAPPER_FACTORY)


def test_episode_tracking_alone_matches_gem() -> None:
    stacks = build_stacks(EASY, [GemEpisodeTrackingWrapper], [gg.EpisodeTrackingWrapper])
    play_side_by_side(stacks, seed=1, episodes=12, steps=8)
    info = stacks["C"].reset()[1]
    assert info["step_counter"] == 0 and "prev_ep_step_counter" in info


def test_gem_observation_wrapper_kwargs_match() -> None:
    """Direct construction with GEM's class and ours, every flag combination GEM allows."""
    combos = [
        {"include_action": False, "include_chat_template": False},
        {"include_action": True, "include_chat_template": False},
        {"include_action": True, "include_chat_template": True},
        {"include_action": False, "include_chat_template": False, "max_history_length": 2},
        {
            "include_action": True,
            "include_chat_template": False,
            "apply_chat_template_on_reset": True,
        },
    ]
    tok = ChatMLTokenizer()
    for combo in combos:
        stacks = build_stacks(
            EASY,
            [partial(GemObservationWrapper, tokenizer=tok, **combo)],
            [partial(gg.ObservationWrapper, tokenizer=tok, **combo)],
        )
        play_side_by_side(stacks, seed=3, episodes=3, steps=6)


@pytest.mark.parametrize("tools", [1, 2])
@pytest.mark.parametrize("name", ["concat_with_action", "concat_chat"])
def test_gem_tool_wrapper_around_gemjax_env(name: str, tools: int) -> None:
    """GEM's ToolEnvWrapper wraps gemjax envs unchanged: tool calls are answered by the
    tool without stepping the game, other responses step it."""
    tok = ChatMLTokenizer()
    gem_wrappers = [
        tool_wrapper(tools),
        partial(GEM_WRAPPER_FACTORY[name], tokenizer=tok),
        GemEpisodeTrackingWrapper,
    ]
    our_wrappers = [
        tool_wrapper(tools),
        partial(gg.WRAPPER_FACTORY[name], tokenizer=tok),
        gg.EpisodeTrackingWrapper,
    ]
    stacks = build_stacks(HARD, gem_wrappers, our_wrappers)
    observations = play_side_by_side(stacks, seed=10 + tools, episodes=10, steps=10, tool_rate=0.4)
    text = "\n".join(observations)
    assert "<result>cba</result>" in text
    # GEM tries each tool in turn and keeps the last one's verdict: with a second tool,
    # a failed <fake> call is no tool call at all and steps the game.
    assert ("Tool error" in text) == (tools == 1)
    assert "Reached the maximum number of tool use" in text
    assert ("Available tools:" in text) == (tools > 1)
    if name == "concat_chat":
        assert "<|im_start|>tool\n" in text


def test_gem_wrappers_around_gemjax_env_only() -> None:
    """GEM's wrapper classes (not the factory) around a gemjax env vs around GEM's."""
    tok = ChatMLTokenizer()
    wrappers = [
        tool_wrapper(1),
        partial(GemObservationWrapper, tokenizer=tok, max_history_length=4),
        GemEpisodeTrackingWrapper,
    ]
    stacks = build_stacks(EASY, wrappers, wrappers)
    play_side_by_side(stacks, seed=5, episodes=5, steps=8)


def test_get_wrapper_fns_matches_gem() -> None:
    tok = ChatMLTokenizer()
    for spec in ["concat", "concat_with_action,episode_tracking", "concat_chat,episode_tracking"]:
        stacks = build_stacks(
            EASY, gem_get_wrapper_fns(spec, tokenizer=tok), gg.get_wrapper_fns(spec, tokenizer=tok)
        )
        play_side_by_side(stacks, seed=7, episodes=3, steps=6)
    with pytest.raises(ValueError, match="ToolEnvWrapper"):
        gg.get_wrapper_fns("python_tool")
    with pytest.raises(ValueError, match="unknown"):
        gg.get_wrapper_fns("concat,nope")


# --- vector envs with wrappers -------------------------------------------------------

VEC_IDS = [EASY, HARD, HARD, EASY, HARD, EASY]


class Commands(gg.EnvWrapper):
    """A wrapper that changes or skips the planned step (exercises the vector env's
    fallback path): ``SKIP`` answers without stepping, ``RESET`` resets mid-episode,
    ``twice:<action>`` steps twice, ``guess N`` is rewritten to ``\\boxed{N}``."""

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if action == "SKIP":
            return "skipped", 0.0, False, False, {"skipped": True}
        if action == "RESET":
            obs, info = self.env.reset()
            return obs, 0.0, False, False, info
        if action.startswith("twice:"):
            self.env.step(action[len("twice:") :])
            return self.env.step(action[len("twice:") :])
        match = re.fullmatch(r"guess (\d+)", action)
        if match:
            return self.env.step(f"\\boxed{{{match[1]}}}")
        return self.env.step(action)


def command_action(rng: random.Random, game) -> str:
    r = rng.random()
    if r < 0.1:
        return "SKIP"
    if r < 0.17:
        return "RESET"
    if r < 0.3:
        return f"twice:\\boxed{{{rng.randint(game.min_number, game.max_number)}}}"
    if r < 0.45:
        return f"guess {rng.randint(game.min_number, game.max_number)}"
    return guess_action(rng, game)


def copy_lane(ours: gg.VectorEnv, theirs, i: int) -> None:
    lane = ours.lane_envs[i]
    lane.state = lane.kernel.state_from_gem(theirs.envs[i].unwrapped)


def drive_vectors(
    ours: gg.VectorEnv,
    theirs,
    steps: int,
    rng: random.Random,
    make_action: Callable[[random.Random, Any], str],
    next_step: bool = False,
) -> dict[str, int]:
    """Same actions to both; reset lanes are re-synchronised from GEM. Observations are
    compared modulo the example number (wrapped histories contain the instructions)."""
    n = ours.num_envs
    pending = [False] * n
    stats = {"resets": 0, "ends": 0, "tool": 0}
    for step in range(steps):
        if rng.random() < 0.3:
            indices = rng.sample(range(n), rng.randint(1, n))
            actions: Any = {i: make_action(rng, theirs.envs[i].unwrapped) for i in indices}
        else:
            indices = list(range(n))
            actions = [make_action(rng, theirs.envs[i].unwrapped) for i in indices]
        g_obs, g_rew, g_term, g_trunc, g_infos = theirs.step(actions)
        o_obs, o_rew, o_term, o_trunc, o_infos = ours.step(actions)
        context = f"step {step}, actions {actions!r}"
        assert o_rew.dtype == g_rew.dtype == np.float64
        assert np.array_equal(o_rew.astype(np.float32), g_rew.astype(np.float32)), (
            f"{context}: {o_rew} != {g_rew}"
        )
        assert np.array_equal(o_term, g_term) and np.array_equal(o_trunc, g_trunc), context
        assert o_term.dtype == o_trunc.dtype == np.bool_
        assert len(o_obs) == len(g_obs) == len(o_infos) == len(g_infos) == len(indices)
        for k, i in enumerate(indices):
            assert mask(o_obs[k]) == mask(g_obs[k]), (
                f"{context}: lane {i}\n{o_obs[k]!r}\n!= GEM\n{g_obs[k]!r}"
            )
            assert same_info(o_infos[k], g_infos[k]), (
                f"{context}: lane {i} info {o_infos[k]} != GEM {g_infos[k]}"
            )
            ended = bool(g_term[k] or g_trunc[k])
            action = actions[i]
            reset = (pending[i] if next_step else ended) or action == "RESET"
            if reset:
                copy_lane(ours, theirs, i)
                stats["resets"] += 1
            stats["ends"] += ended
            stats["tool"] += g_infos[k].get("tool_type") == "fake"
            if next_step:
                pending[i] = ended
    return stats


def test_make_vec_with_wrapper_fns_matches_gem() -> None:
    spec = "concat_with_action,episode_tracking"
    ours = gg.make_vec(VEC_IDS, wrappers=gg.get_wrapper_fns(spec))
    theirs = gem.make_vec(VEC_IDS, wrappers=gem_get_wrapper_fns(spec))
    o_reset, g_reset = ours.reset(seed=4), theirs.reset(seed=4)
    assert [mask(o) for o in o_reset[0]] == [mask(g) for g in g_reset[0]]
    assert o_reset[1] == g_reset[1]
    for i in range(len(VEC_IDS)):
        copy_lane(ours, theirs, i)
    stats = drive_vectors(ours, theirs, 40, random.Random(4), guess_action)
    assert stats["resets"] > 10, stats


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_vector_fallback_when_wrappers_change_the_step(mode: str) -> None:
    from gem.vector.sync_vector_env import SyncVectorEnv
    from gem.vector.vector_env import AutoresetMode

    wrappers = [Commands, *gg.get_wrapper_fns("episode_tracking")]
    ours = gg.VectorEnv(VEC_IDS, wrappers=wrappers, autoreset_mode=mode)

    def gem_env(env_id: str):
        return GemEpisodeTrackingWrapper(Commands(gem.make(env_id)))

    theirs = SyncVectorEnv(
        VEC_IDS, [partial(gem_env, i) for i in VEC_IDS], autoreset_mode=AutoresetMode(mode)
    )
    o_reset, g_reset = ours.reset(seed=8), theirs.reset(seed=8)
    assert [mask(o) for o in o_reset[0]] == [mask(g) for g in g_reset[0]]
    for i in range(len(VEC_IDS)):
        copy_lane(ours, theirs, i)
    stats = drive_vectors(
        ours, theirs, 50, random.Random(mode), command_action, next_step=mode == "NextStep"
    )
    assert stats["resets"] > 10 and stats["ends"] > 10, stats


def test_make_vec_with_gem_tool_wrapper_matches_gem() -> None:
    """GEM's ToolEnvWrapper answers tool calls without stepping the game, so the lanes
    leave the batched plan; results must still equal GEM's."""
    tok = ChatMLTokenizer()
    gem_fns = [tool_wrapper(2), *gem_get_wrapper_fns("concat_chat,episode_tracking", tok)]
    our_fns = [tool_wrapper(2), *gg.get_wrapper_fns("concat_chat,episode_tracking", tok)]
    ours = gg.make_vec(VEC_IDS, wrappers=our_fns)
    theirs = gem.make_vec(VEC_IDS, wrappers=gem_fns)
    o_reset, g_reset = ours.reset(seed=2), theirs.reset(seed=2)
    assert [mask(o) for o in o_reset[0]] == [mask(g) for g in g_reset[0]]
    assert o_reset[1] == g_reset[1]
    for i in range(len(VEC_IDS)):
        copy_lane(ours, theirs, i)
    stats = drive_vectors(ours, theirs, 50, random.Random(2), partial(guess_action, tool_rate=0.35))
    assert stats["tool"] > 10 and stats["resets"] > 5, stats
