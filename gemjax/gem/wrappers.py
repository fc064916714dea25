"""GEM's observation and episode-tracking wrappers, for gemjax text envs.

Same semantics and strings as ``gem.wrappers`` (spec section 18): ``concat`` joins
every observation so far, ``concat_with_action`` interleaves the actions,
``concat_chat`` renders the history with a tokenizer's chat template and
``concat_chat_on_reset`` templates only the first observation; each piece is
followed by a newline unless it already ends with one, and ``info["suffix"]`` is
appended last. Unlike GEM's ``EnvWrapper``, attributes are looked up on the inner
env when read (GEM copies them once, so values such as a random variant's
``max_turns`` go stale there).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any


def with_newline(text: str) -> str:
    """``text`` followed by ``"\\n"`` unless it is empty or already ends with one."""
    return text + "\n" if text and not text.endswith("\n") else text


class EnvWrapper:
    """Base wrapper: forwards ``reset``/``step`` and every attribute to ``env``."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.env.reset(seed=seed)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self.env.step(action)


class ObservationWrapper(EnvWrapper):
    """Turns each observation into the conversation so far (GEM's ``ObservationWrapper``).

    Args:
        include_action: interleave the actions (``info["parsed_action"]`` when a tool
            wrapper set it, else the raw action).
        include_chat_template: render with ``tokenizer.apply_chat_template``.
        apply_chat_template_on_reset: template only the reset observation.
        max_history_length: keep only the last H actions and H + 1 observations.
        tokenizer: a transformers tokenizer with a chat template.
    """

    def __init__(
        self,
        env: Any,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Any = None,
    ) -> None:
        super().__init__(env)
        if include_chat_template and apply_chat_template_on_reset:
            raise ValueError(
                "include_chat_template and apply_chat_template_on_reset cannot both be True"
            )
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise ValueError("a tokenizer is required for the chat template")
        if include_chat_template and not include_action:
            raise ValueError("the chat template needs include_action=True")
        self.include_action = include_action
        self.include_chat_template = include_chat_template
        self.apply_chat_template_on_reset = apply_chat_template_on_reset
        self.tokenizer = tokenizer
        self.obs_queue: deque[tuple[str, bool]] = deque(
            maxlen=max_history_length + 1 if max_history_length else None
        )
        self.act_queue: deque[str] = deque(maxlen=max_history_length)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.obs_queue.clear()
        self.act_queue.clear()
        obs, info = self.env.reset(seed=seed)
        if self.apply_chat_template_on_reset:
            obs = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": obs}], tokenize=False, add_generation_prompt=True
            )
        self.obs_queue.append((obs, info.get("use_tool", False)))
        return self.observation(info), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.act_queue.append(info.get("parsed_action", action))
        self.obs_queue.append((obs, info.get("use_tool", False)))
        return self.observation(info), reward, terminated, truncated, info

    def observation(self, info: dict[str, Any]) -> str:
        """The history text for the current queues, with ``info``'s prefix and suffix."""
        if not self.include_action:
            text = "".join(with_newline(obs) for obs, _ in self.obs_queue)
        elif self.include_chat_template:
            text = self._chat_history()
        else:
            pieces = []
            for (obs, _), act in zip(list(self.obs_queue)[:-1], self.act_queue, strict=True):
                pieces += [with_newline(obs), with_newline(act)]
            text = "".join(pieces) + with_newline(self.obs_queue[-1][0])
        return info.get("prefix", "") + text + info.get("suffix", "")

    def _chat_history(self) -> str:
        def message(obs: str, use_tool: bool) -> dict[str, str]:
            return {"role": "tool" if use_tool else "user", "content": obs}

        messages = []
        for (obs, use_tool), act in zip(list(self.obs_queue)[:-1], self.act_queue, strict=True):
            messages += [message(obs, use_tool), {"role": "assistant", "content": act}]
        messages.append(message(*self.obs_queue[-1]))
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )


class EpisodeTrackingWrapper(EnvWrapper):
    """Counts steps and sums rewards into ``info`` (GEM's, meant to be outermost)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.step_counter = 0
        self.cumulative_rewards = 0.0

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_counter += 1
        self.cumulative_rewards += reward
        info["step_counter"] = self.step_counter
        info["cumulative_rewards"] = self.cumulative_rewards
        return obs, reward, terminated, truncated, info

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        previous_steps, previous_return = self.step_counter, self.cumulative_rewards
        obs, info = self.env.reset(seed)
        self.step_counter, self.cumulative_rewards = 0, 0.0
        info.update(
            step_counter=0,
            prev_ep_step_counter=previous_steps,
            cumulative_rewards=0.0,
            prev_ep_cumulative_rewards=previous_return,
        )
        return obs, info


WRAPPER_FACTORY: dict[str, Callable[..., Any]] = {
    "concat": partial(ObservationWrapper, include_action=False, include_chat_template=False),
    "concat_with_action": partial(
        ObservationWrapper, include_action=True, include_chat_template=False
    ),
    "concat_chat": partial(ObservationWrapper, include_action=True, include_chat_template=True),
    "concat_chat_on_reset": partial(
        ObservationWrapper,
        include_action=True,
        include_chat_template=False,
        apply_chat_template_on_reset=True,
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}
TOKENIZER_REQUIRED = ("concat_chat", "concat_chat_on_reset")
GEM_TOOL_WRAPPERS = (
    "python_tool",
    "python_tool_no_int_reward",
    "python_tool_no_int_reward_last_line_error",
    "search_tool",
    "search_tool_no_int_reward",
)


def get_wrapper_fns(wrappers: str, tokenizer: Any = None) -> list[Callable[[Any], Any]]:
    """GEM's ``get_wrapper_fns``: ``"concat_chat,episode_tracking"`` -> callables for
    ``make_vec(wrappers=...)``, with ``tokenizer`` bound where it is needed.

    Raises:
        TypeError: ``wrappers`` is not a string.
        ValueError: an unknown name; GEM's tool wrappers are named with a pointer
            to ``gem.tools.tool_env_wrapper.ToolEnvWrapper``, which wraps gemjax envs.
    """
    if not isinstance(wrappers, str):
        raise TypeError(
            f"wrappers must be a comma-separated string such as 'concat,episode_tracking' "
            f"(or '' for none), got {wrappers!r}"
        )
    functions = []
    for name in filter(None, (part.strip() for part in wrappers.split(","))):
        if name in GEM_TOOL_WRAPPERS:
            raise ValueError(
                f"{name!r} runs code or web search tools, which gemjax does not ship; wrap "
                "gemjax envs with gem-llm's gem.tools.tool_env_wrapper.ToolEnvWrapper instead"
            )
        if name not in WRAPPER_FACTORY:
            raise ValueError(f"unknown wrapper {name!r}; known: {sorted(WRAPPER_FACTORY)}")
        factory = WRAPPER_FACTORY[name]
        functions.append(
            partial(factory, tokenizer=tokenizer) if name in TOKENIZER_REQUIRED else factory
        )
    return functions
