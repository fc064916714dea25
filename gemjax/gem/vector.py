"""GEM's vector env with one batched, jitted kernel call per step and game config.

GEM's ``SyncVectorEnv`` loops over Python envs. Here every group of lanes that
share a kernel configuration is stepped (and, for auto-reset, reset) by one
vmapped call; the per-lane Python work is parsing, rendering and the wrappers.

Wrappers are applied to each lane exactly as in GEM (``wrapper(env)`` in list
order, the first innermost), GEM's own wrapper classes included. Each lane's
innermost env is a :class:`LaneEnv`: the batched call *plans* what its ``step`` and
``reset`` will return; when a wrapper calls them as planned (the usual case) the
planned result is used, and when a wrapper changes or skips a call (a tool wrapper
answering a tool call itself, say) the lane falls back to an unbatched kernel call,
and the batched state is patched for that lane. Results never depend on the path.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.checks import integer
from gemjax.core import Environment
from gemjax.gem import kernel_ops as ops
from gemjax.gem.text_env import check_action_text, fresh_seed
from gemjax.registry import make as make_kernel
from gemjax.text.grammar import ParsedAction


class AutoresetMode(enum.Enum):
    """GEM's auto-reset modes (``gem.vector.vector_env.AutoresetMode``)."""

    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"


@dataclass(slots=True)
class _Plan:
    """What the batched call prepared for one lane in the current vector call.

    ``round`` is ``"step"`` or ``"reset"``; ``expected`` is where the lane's state
    ends if its wrappers call ``step``/``reset`` as planned (``"stepped"`` or
    ``"fresh"``).
    """

    round: str
    expected: str
    action: str | None = None
    parsed: ParsedAction | None = None
    views: ops.HostViews | None = None  # stepped candidates (step rounds)
    fresh: ops.HostViews | None = None  # reset candidates
    slot: int = 0
    seed: int | None = None


class _Group:
    """The lanes of one kernel configuration: batched keys and packed states."""

    def __init__(self, kernel: Environment) -> None:
        self.kernel = kernel
        self.params = kernel.default_params
        self.params_buffer = ops.pack_params(kernel, self.params)
        self.size = 0
        self.keys: jax.Array = jnp.zeros((0, 2), jnp.uint32)
        self.states: jax.Array = jnp.zeros((0, ops.layouts(kernel).state.size), jnp.uint32)
        self.prev_keys = self.keys
        self.prev_states = self.states


Location = str | tuple[jax.Array, jax.Array]


class LaneEnv:
    """The innermost env of one vector lane, with GEM's interface.

    Inside a vector call it returns what the batched call planned; called otherwise
    (by a wrapper that changes the action, or outside a vector call) it runs an
    unbatched kernel call on its lane's state. Either way the results are the same.
    """

    def __init__(self, vec: VectorEnv, group: _Group, slot: int, env_id: str) -> None:
        self._vec = vec
        self._group = group
        self._slot = slot
        self.env_id = env_id
        self.kernel = group.kernel
        self._plan: _Plan | None = None
        self._location: Location = "batched"

    @property
    def unwrapped(self) -> LaneEnv:
        return self

    @property
    def params(self) -> Any:
        return self._group.params

    @property
    def state(self) -> Any:
        """This lane's current kernel state (unbatched); assign to move the lane."""
        return ops.unpack_state(self.kernel, self._key_and_state(self._location)[1])

    @state.setter
    def state(self, state: Any) -> None:
        key = self._key_and_state(self._location)[0]
        self._deviate((key, ops.pack_state(self.kernel, state)))

    def _key_and_state(self, location: Location) -> tuple[jax.Array, jax.Array]:
        """The lane's key and packed state at ``location``."""
        group, slot, plan = self._group, self._slot, self._plan
        if isinstance(location, tuple):
            return location
        if location == "batched" or (location == "fresh" and plan and plan.round == "reset"):
            return group.keys[slot], group.states[slot]
        if location == "prev":
            return group.prev_keys[slot], group.prev_states[slot]
        assert plan is not None and plan.parsed is not None
        key, stepped, fresh = ops.lane_candidates(
            self.kernel,
            group.prev_keys[slot],
            group.prev_states[slot],
            plan.parsed.action,
            group.params_buffer,
        )
        return key, stepped if location == "stepped" else fresh

    def _deviate(self, location: tuple[jax.Array, jax.Array]) -> None:
        self._location = location
        if self._plan is None:  # outside a vector call: write the lane back now
            self._group.keys = self._group.keys.at[self._slot].set(location[0])
            self._group.states = self._group.states.at[self._slot].set(location[1])
            self._location = "batched"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        plan = self._plan
        if (
            plan is not None
            and plan.round == "step"
            and self._location == "prev"
            and action == plan.action
        ):
            self._location = "stepped"
            return plan.views.step_result(plan.slot, plan.parsed.echoes)  # type: ignore[union-attr]
        parsed = self.kernel.grammar.parse(check_action_text(action))
        key, state = self._key_and_state(self._location)
        key, state, view = ops.step_one(
            self.kernel, key, state, parsed.action, self._group.params_buffer
        )
        self._deviate((key, state))
        return ops.HostViews(self.kernel, np.asarray(view)[None]).step_result(0, parsed.echoes)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        plan = self._plan
        planned = (
            plan is not None
            and seed == plan.seed
            and (
                (plan.round == "step" and self._location in ("prev", "stepped"))
                or (plan.round == "reset" and self._location == "prev")
            )
        )
        if planned:
            self._location = "fresh"
            return plan.fresh.reset_result(plan.slot)  # type: ignore[union-attr]
        key = ops.seed_key(seed) if seed is not None else self._key_and_state(self._location)[0]
        key, state, view = ops.reset_one(self.kernel, key, self._group.params_buffer)
        self._deviate((key, state))
        return ops.HostViews(self.kernel, np.asarray(view)[None]).reset_result(0)

    def sample_random_action(self) -> str:
        """A random well-formed response (GEM's ``sample_random_action``)."""
        key, state = self._key_and_state(self._location)
        key, action = ops.random_action_one(self.kernel, key, state)
        self._deviate((key, state))
        return self.kernel.grammar.render(np.asarray(action))

    def __repr__(self) -> str:
        return f"LaneEnv({self.env_id!r})"


class VectorEnv:
    """GEM's ``SyncVectorEnv`` semantics over batched kernels.

    Args:
        env_ids: one registered id per lane.
        env_kwargs: per-lane kernel kwargs (GEM's ``vec_kwargs``); a ``seed`` entry
            seeds that lane (GEM ignores it; see docs/gem_differences.md).
        wrappers: callables applied to each lane env in order (first innermost).
        autoreset_mode: ``AutoresetMode.SAME_STEP`` (GEM's default) or ``NEXT_STEP``.

    Attributes:
        envs: the per-lane envs (wrapped); ``lane_envs`` the innermost ones;
        ``num_envs``.
    """

    def __init__(
        self,
        env_ids: Sequence[str],
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        wrappers: Sequence[Callable[[Any], Any]] | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        self.env_ids = list(env_ids)
        self.num_envs = len(self.env_ids)
        if self.num_envs == 0:
            raise ValueError("a vector env needs at least one env id")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        env_kwargs = env_kwargs if env_kwargs is not None else [{} for _ in self.env_ids]
        if len(env_kwargs) != self.num_envs:
            raise ValueError(f"got {len(env_kwargs)} kwargs dicts for {self.num_envs} envs")
        seeds: list[int | None] = []
        self._groups: dict[Environment, _Group] = {}
        self._lanes: list[tuple[_Group, int]] = []
        for env_id, kwargs in zip(self.env_ids, env_kwargs, strict=True):
            kwargs = dict(kwargs)
            seed = kwargs.pop("seed", None)
            seeds.append(fresh_seed() if seed is None else integer("seed", seed))
            kernel = make_kernel(env_id, **kwargs)
            group = self._groups.setdefault(kernel, _Group(kernel))
            self._lanes.append((group, group.size))
            group.size += 1
        for group in self._groups.values():
            group.keys = jnp.zeros((group.size, 2), jnp.uint32)
            group.states = jnp.zeros((group.size, ops.layouts(group.kernel).state.size), jnp.uint32)
        self.lane_envs = [
            LaneEnv(self, group, slot, env_id)
            for (group, slot), env_id in zip(self._lanes, self.env_ids, strict=True)
        ]
        self._bare = not wrappers
        self.envs: list[Any] = []
        for lane in self.lane_envs:
            env: Any = lane
            for wrapper in wrappers or ():
                env = wrapper(env)
            self.envs.append(env)
        self._rewards = np.zeros(self.num_envs, np.float64)
        self._terminations = np.zeros(self.num_envs, np.bool_)
        self._truncations = np.zeros(self.num_envs, np.bool_)
        self._autoreset_envs = np.zeros(self.num_envs, np.bool_)
        self.reset(seed=seeds)

    def _members(self, group: _Group, indices: Sequence[int]) -> list[tuple[int, int]]:
        """``(lane index, slot)`` of the lanes of ``group`` among ``indices``."""
        return [(i, self._lanes[i][1]) for i in indices if self._lanes[i][0] is group]

    def _run(self, plans: dict[int, _Plan], call: Callable[[int], Any]) -> dict[int, Any]:
        """Run ``call(i)`` (the wrapped envs' reset/step) for the planned lanes, then
        patch the lanes whose wrappers deviated from the plan."""
        for i, plan in plans.items():
            lane = self.lane_envs[i]
            lane._plan, lane._location = plan, "prev"
        try:
            results = {i: call(i) for i in plans}
            for i, plan in plans.items():
                lane = self.lane_envs[i]
                if lane._location != plan.expected:
                    key, state = lane._key_and_state(lane._location)
                    group, slot = self._lanes[i]
                    group.keys = group.keys.at[slot].set(key)
                    group.states = group.states.at[slot].set(state)
        finally:
            for i in plans:
                self.lane_envs[i]._plan, self.lane_envs[i]._location = None, "batched"
        return results

    def reset(
        self, seed: int | Sequence[int | None] | None = None
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """GEM's ``reset``: a scalar seed ``s`` gives lane i ``s + i``, a list one seed
        per lane; None keeps each lane's own random stream."""
        seeds = lane_seeds(seed, self.num_envs)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
        plans: dict[int, _Plan] = {}
        for group in self._groups.values():
            members = self._members(group, range(self.num_envs))
            seed_array = np.zeros(group.size, np.uint32)
            seeded = np.zeros(group.size, np.bool_)
            for i, slot in members:
                if seeds[i] is not None:
                    seed_array[slot], seeded[slot] = seeds[i] % 2**32, True  # type: ignore[operator]
            group.prev_keys, group.prev_states = group.keys, group.states
            group.keys, group.states, views = ops.reset_batch(
                group.kernel, group.keys, seed_array, seeded, group.params_buffer
            )
            fresh = ops.HostViews(group.kernel, np.asarray(views))
            for i, slot in members:
                plans[i] = _Plan("reset", "fresh", fresh=fresh, slot=slot, seed=seeds[i])
        results = self._run(plans, lambda i: self.envs[i].reset(seed=seeds[i]))
        self._terminations[:] = self._truncations[:] = self._autoreset_envs[:] = False
        return [results[i][0] for i in range(self.num_envs)], [
            results[i][1] for i in range(self.num_envs)
        ]

    def step(
        self, actions: Sequence[str] | Mapping[int, str]
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """GEM's ``step``: a list with one action per env, or ``{index: action}`` to
        step only those envs. Returns, per stepped env in the given order: observations,
        float64 rewards, terminated and truncated flags, infos."""
        if isinstance(actions, Mapping):
            active = {integer("an env index", i): action for i, action in actions.items()}
        elif isinstance(actions, (str, bytes)) or not isinstance(actions, Sequence):
            raise TypeError(
                f"actions must be a list of strings, one per env, or {{index: string}}; "
                f"got {type(actions).__name__}"
            )
        else:
            if len(actions) != self.num_envs:
                raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")
            active = dict(enumerate(actions))
        for i, action in active.items():
            if not 0 <= i < self.num_envs:
                raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
            check_action_text(action)
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        if self._bare:  # no wrappers: what the batched call computed are the results
            results = self._step_bare(active, same_step)
        else:
            plans = self._plan_step(active, same_step)
            results = self._run(plans, lambda i: self._play(i, active[i], same_step))
        order = list(active)
        observations, reward_list, terminated_list, truncated_list, infos = (
            zip(*(results[i] for i in order), strict=True) if order else ((),) * 5
        )
        rewards = np.asarray(reward_list, np.float64)
        terminations = np.asarray(terminated_list, np.bool_)
        truncations = np.asarray(truncated_list, np.bool_)
        self._rewards[order], self._terminations[order] = rewards, terminations
        self._truncations[order] = truncations
        self._autoreset_envs[order] = terminations | truncations
        return list(observations), rewards, terminations, truncations, list(infos)

    def _play(self, i: int, action: str, same_step: bool) -> tuple[str, float, bool, bool, dict]:
        """GEM's per-env step of the vector env, through lane ``i``'s wrappers."""
        env = self.envs[i]
        if not same_step and self._autoreset_envs[i]:
            obs, info = env.reset()
            return obs, 0.0, False, False, info
        obs, reward, terminated, truncated, info = env.step(action)
        if same_step and (terminated or truncated):
            obs, info = env.reset()
        return obs, reward, terminated, truncated, info

    def _group_round(
        self,
        group: _Group,
        members: list[tuple[int, int]],
        active: Mapping[int, str],
        same_step: bool,
    ) -> tuple[list[ParsedAction], ops.HostViews, ops.HostViews, np.ndarray]:
        """Parse the actions of ``members`` and make the group's one batched kernel call.

        Returns the parsed actions (in ``members`` order), the stepped and the fresh
        views of every slot, and bool[group.size]: the next-step mode's pending resets.
        """
        kernel = group.kernel
        parse = kernel.grammar.parse
        parsed = [parse(active[i]) for i, _ in members]
        lanes, slots = [i for i, _ in members], [slot for _, slot in members]
        actions = np.zeros((group.size, *kernel.action_space(group.params).shape), np.int32)
        actions[slots] = [p.action for p in parsed]
        is_active = np.zeros(group.size, np.bool_)
        is_active[slots] = True
        pending = np.zeros(group.size, np.bool_)
        pending[slots] = self._autoreset_envs[lanes]
        group.prev_keys, group.prev_states = group.keys, group.states
        group.keys, group.states, views = ops.step_batch(
            kernel,
            group.keys,
            group.states,
            actions,
            is_active,
            pending,
            group.params_buffer,
            same_step,
        )
        views = np.asarray(views)
        return (
            parsed,
            ops.HostViews(kernel, views[:, 0]),
            ops.HostViews(kernel, views[:, 1]),
            pending,
        )

    def _step_bare(
        self, active: Mapping[int, str], same_step: bool
    ) -> dict[int, tuple[str, float, bool, bool, dict]]:
        """:meth:`_play`'s results for lanes without wrappers, straight from the views."""
        results: dict[int, tuple[str, float, bool, bool, dict]] = {}
        for group in self._groups.values():
            members = self._members(group, list(active))
            if not members:
                continue
            parsed, stepped, fresh, pending = self._group_round(group, members, active, same_step)
            ends = (stepped.done_lanes() if same_step else pending).tolist()
            going = [
                (i, slot, p.echoes)
                for (i, slot), p in zip(members, parsed, strict=True)
                if not ends[slot]
            ]
            if going:
                lanes, slots, echoes = zip(*going, strict=True)
                results.update(zip(lanes, stepped.step_results(slots, echoes), strict=True))
            for i, slot in members:
                if ends[slot]:
                    obs, info = fresh.reset_result(slot)
                    outcome = stepped.outcome(slot) if same_step else (0.0, False, False)
                    results[i] = (obs, *outcome, info)
        return results

    def _plan_step(self, active: Mapping[int, str], same_step: bool) -> dict[int, _Plan]:
        """One batched kernel call per group; the per-lane plans it produces."""
        plans: dict[int, _Plan] = {}
        for group in self._groups.values():
            members = self._members(group, list(active))
            if not members:
                continue
            parsed, stepped, fresh, pending = self._group_round(group, members, active, same_step)
            for (i, slot), action in zip(members, parsed, strict=True):
                ends = stepped.done(slot) if same_step else pending[slot]
                plans[i] = _Plan(
                    "step",
                    "fresh" if ends else "stepped",
                    active[i],
                    action,
                    views=stepped,
                    fresh=fresh,
                    slot=slot,
                )
        return plans


def lane_seeds(seed: Any, num_envs: int) -> list[int | None]:
    """Per-lane seeds of a vector reset's ``seed``: None for every lane, an integer
    ``s`` as ``s + i``, or a sequence of integers or None (its length is checked by
    the caller).

    Raises:
        TypeError: a seed that is not an integer (a float, a bool, a string).
    """
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence):
        first = integer("seed", seed)
        return [first + i for i in range(num_envs)]
    return [None if s is None else integer("seed", s) for s in seed]


def make_vec(
    env_ids: str | Sequence[str],
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    vec_kwargs: Sequence[dict[str, Any]] | None = None,
    async_mode: bool = False,
    seed: int = 0,
    **kwargs: Any,
) -> VectorEnv:
    """GEM's ``make_vec``: env i is built with ``vec_kwargs[i]`` (given ``seed + i``
    unless it has a seed; the dict is updated in place, as GEM does), then ``kwargs``
    for all. ``async_mode`` is accepted for compatibility: one batched call per step
    is already faster than GEM's thread pool, so both modes run synchronously."""
    if isinstance(env_ids, str):
        env_ids = [env_ids]
    seed = integer("seed", seed)
    if vec_kwargs is not None and len(vec_kwargs) != len(env_ids):
        raise ValueError(f"got {len(vec_kwargs)} vec_kwargs dicts for {len(env_ids)} env ids")
    per_env = []
    for i in range(len(env_ids)):
        env_kwargs = vec_kwargs[i] if vec_kwargs is not None else {}
        if "seed" not in env_kwargs:
            env_kwargs["seed"] = seed + i
        env_kwargs.update(**kwargs)
        per_env.append(env_kwargs)
    return VectorEnv(env_ids, per_env, wrappers)
