"""The token agent: the causal-LM interface, the multi-turn token rollout, training.

One tiny GuessTheNumber setup (qwen3 tokenizer, chat prompts) is built and
compiled once for the module.
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import gemjax
import gemjax.gem
from gemjax.tokenizer_bridge import TokenBridge, load_tokenizer
from gemjax.tokenizer_bridge.bridge import CHAT_PREFIX, CHAT_TAIL
from gemjax.train.lm import (
    CausalLM,
    CausalLogits,
    SelectiveLogits,
    TinyLM,
    TinyLMConfig,
    causal_mask,
    logits_at,
    replay_logits_at,
)
from gemjax.train.token_agent import HostAgent, evaluate_on_host, seed_reset_keys
from gemjax.train.token_rollout import (
    TokenLoopConfig,
    TokenRollout,
    replay_lengths,
    stream_lengths,
    token_metrics,
)
from gemjax.train.token_trainer import TokenTrainConfig, advantages, make_token_train

# CI only: the quick tier (-m "not slow") leaves the token loop out. One xdist
# group: the module's fixtures (the trainer, its rollout, the warmed-up state) are
# built and compiled once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("token_loop")]

ENV_ID = "game:GuessTheNumber-v0-easy"
WARMUP_STEPS = 30
LOOP = TokenLoopConfig(horizon=4, context=320, response_tokens=6, prefill_chunk=32)
MODEL = TinyLMConfig(width=32, heads=2, layers=2, mlp=64)
CONFIG = TokenTrainConfig(
    env_id=ENV_ID,
    model=MODEL,
    loop=LOOP,
    num_episodes=16,
    num_updates=2,
    warmup_updates=WARMUP_STEPS,
    eval_every=2,
    eval_episodes=16,
    warmup_learning_rate=1e-2,
)


@pytest.fixture(scope="module")
def trainer():
    tokenizer = load_tokenizer("qwen3")
    bridge = TokenBridge(gemjax.make(ENV_ID), tokenizer, prompt_capacity=LOOP.context)
    return make_token_train(CONFIG, bridge)


@pytest.fixture(scope="module")
def state(trainer):
    return jax.jit(trainer.init)(jax.random.key(0))


@pytest.fixture(scope="module")
def collect(trainer):
    rollout = trainer.rollout
    return jax.jit(
        lambda params, key: rollout.collect(params, jax.random.split(key, 8), key),
    )


@pytest.fixture(scope="module")
def sampled(collect, state):
    """A rollout of the untrained model: mostly garbage responses."""
    return jax.device_get(collect(state.params, jax.random.key(3)))


@pytest.fixture(scope="module")
def warmed(trainer, state):
    """The state after the warm-up steps, and the losses of each step."""
    step = jax.jit(trainer.warmup_step)
    losses = []
    for _ in range(WARMUP_STEPS):
        state, metrics = step(state)
        losses.append(float(metrics.loss))
    return state, losses


def test_tiny_lm_is_a_causal_lm(trainer):
    model = TinyLM(trainer.rollout.token_ids, MODEL, nnx.Rngs(0))
    assert isinstance(model, CausalLM)


def test_kv_cache_decoding_equals_a_full_forward_pass():
    """Prefill in pieces and one token at a time give the full pass's logits (1e-5)."""
    model = TinyLM(np.arange(100, 200, dtype=np.int32), MODEL, nnx.Rngs(1))
    batch, length, slots = 3, 20, 32
    tokens = jax.random.randint(jax.random.key(2), (batch, length), 100, 200)
    positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
    full, _ = model(tokens, positions, None, causal_mask(positions, length))
    cache = model.init_cache(batch, slots)
    pieces = []
    for start, stop in [(0, 7), (7, 15), *((i, i + 1) for i in range(15, length))]:
        piece = positions[:, start:stop]
        logits, cache = model(tokens[:, start:stop], piece, cache, causal_mask(piece, slots))
        pieces.append(logits)
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, atol=1e-5, rtol=0)


class FullPassOnly:
    """A :class:`CausalLM` without ``logits_at``: a model that only has the call."""

    def __init__(self, model: TinyLM) -> None:
        self.model, self.token_ids = model, model.token_ids

    def __call__(self, *args):
        return self.model(*args)

    def init_cache(self, batch: int, length: int):
        return self.model.init_cache(batch, length)


def test_logits_at_equals_the_call_gathered():
    """TinyLM's head applied at chosen positions only, and the gather of the call a
    model without ``logits_at`` gets, both equal the call's rows, without a cache and
    with one (a prompt fed in two pieces), and leave the same cache (1e-5)."""
    model = TinyLM(np.arange(100, 200, dtype=np.int32), MODEL, nnx.Rngs(1))
    batch, length, slots = 3, 20, 32
    tokens = jax.random.randint(jax.random.key(2), (batch, length), 100, 200)
    positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
    at = jnp.asarray([[0, 5, 9, 9], [3, 4, 5, 6], [8, 0, 9, 1]], jnp.int32)
    plain = FullPassOnly(model)
    assert isinstance(model, SelectiveLogits) and not isinstance(plain, SelectiveLogits)
    assert isinstance(plain, CausalLM)
    pick = lambda x: np.take_along_axis(np.asarray(x), np.asarray(at)[:, :, None], axis=1)  # noqa: E731
    first, second = positions[:, :10], positions[:, 10:]
    _, cache = model(
        tokens[:, :10], first, model.init_cache(batch, slots), causal_mask(first, slots)
    )
    cases = [  # (tokens, positions, cache, mask)
        (tokens, positions, None, causal_mask(positions, length)),
        (tokens[:, 10:], second, cache, causal_mask(second, slots)),
    ]
    for args in cases:
        want, want_cache = model(*args)
        for which in (model, plain):
            got, got_cache = jax.jit(
                lambda *args, which=which: logits_at(which, *args[:4], args[4])
            )(*args, at)
            assert got.shape == (batch, 4, 100)
            np.testing.assert_allclose(got, pick(want), atol=1e-5, rtol=0)
            for x, y in zip(jax.tree.leaves(got_cache), jax.tree.leaves(want_cache), strict=True):
                np.testing.assert_allclose(x, y, atol=1e-5, rtol=0)


def test_causal_replay_skips_only_what_the_mask_discards():
    """TinyLM's ``causal_logits_at`` (queries in pieces, each over the keys up to its
    end) equals ``logits_at`` on a mask with nothing above its diagonal and holes
    below it, value and gradient, at lengths that do and do not split evenly; a model
    without it gets ``logits_at`` itself from ``replay_logits_at`` (1e-5)."""
    model = TinyLM(np.arange(100, 200, dtype=np.int32), MODEL, nnx.Rngs(1))
    graph, params, rest = nnx.split(model, nnx.Param, ...)
    batch = 2
    for length in (17, 24):
        tokens = jax.random.randint(jax.random.key(length), (batch, length), 100, 200)
        positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
        holes = jax.random.uniform(jax.random.key(1), (batch, length, length)) < 0.3
        mask = (causal_mask(positions, length) & ~holes) | jnp.eye(length, dtype=bool)
        at = jnp.asarray([[0, 5, length - 1], [length - 2, 3, 9]], jnp.int32)

        def total(params, causal, tokens=tokens, positions=positions, mask=mask, at=at):
            model = nnx.merge(graph, params, rest)
            if causal:
                logits = replay_logits_at(model, tokens, positions, mask, at)
            else:
                logits = logits_at(model, tokens, positions, None, mask, at)[0]
            return jnp.sum(jnp.sin(logits)), logits

        (_, want), want_grad = jax.value_and_grad(total, has_aux=True)(params, False)
        (_, got), got_grad = jax.value_and_grad(total, has_aux=True)(params, True)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
        for x, y in zip(jax.tree.leaves(got_grad), jax.tree.leaves(want_grad), strict=True):
            np.testing.assert_allclose(x, y, atol=1e-5, rtol=0)
        plain = FullPassOnly(model)
        assert isinstance(model, CausalLogits) and not isinstance(plain, CausalLogits)
        np.testing.assert_allclose(
            replay_logits_at(plain, tokens, positions, mask, at), want, atol=1e-5, rtol=0
        )


@pytest.fixture(scope="module")
def played(collect, warmed):
    """A rollout of the warmed-up model: well-formed guesses, several turns."""
    return jax.device_get(collect(warmed[0].params, jax.random.key(4)))


def _full_pass_log_probs(model, traj, t, b) -> np.ndarray:
    """float32[k, V]: the tempered next-token log-probabilities at each of turn
    ``t``'s ``k`` response tokens in lane ``b``, from one cache-free pass over that
    turn's prompt and response."""
    n = int(traj.prompt_length[t, b])
    k = int(traj.response_length[t, b])
    sequence = np.concatenate([traj.prompt_ids[t, b, :n], traj.response_ids[t, b, :k]])
    positions = jnp.arange(sequence.size)[None]
    logits, _ = model(
        jnp.asarray(sequence)[None], positions, None, causal_mask(positions, sequence.size)
    )
    return np.asarray(jax.nn.log_softmax(logits[0, n - 1 : n + k - 1] / LOOP.temperature, -1))


def test_rollout_log_probs_equal_a_full_forward_pass_over_each_turn(trainer, warmed, played):
    """Every played turn's token log-probabilities, computed with the incremental
    cache across turns, equal a cache-free pass over prompt + response."""
    model = trainer.rollout.model(warmed[0].params)
    checked = 0
    for t, b in zip(*np.nonzero(played.valid), strict=True):
        log_p = _full_pass_log_probs(model, played, t, b)
        k = log_p.shape[0]
        rows = np.asarray(trainer.rollout.rows(jnp.asarray(played.response_ids[t, b, :k])))
        expected = log_p[np.arange(k), rows]
        np.testing.assert_allclose(played.token_log_probs[t, b, :k], expected, atol=1e-4)
        checked += 1
    assert checked >= 8
    assert np.any(played.valid[1:]), "no episode reached a second turn"


def test_replayed_log_probs_equal_the_rollout(trainer, state, sampled, warmed, played):
    replay = jax.jit(trainer.rollout.response_log_probs)
    for params, traj in ((state.params, sampled), (warmed[0].params, played)):
        np.testing.assert_allclose(replay(params, traj), traj.token_log_probs, atol=1e-4)


def test_entropy_bonus_is_the_replayed_next_token_entropy(trainer, warmed, played):
    """``response_scores``' entropies equal those of a cache-free pass over each
    turn's prompt and response, and ``ent_coef`` adds their turn sums over
    ``response_tokens`` (a mean over the learned turns) to the surrogate."""
    params = warmed[0].params
    adv = advantages(CONFIG, played)
    count = jnp.float32(np.sum(played.valid))
    bonus = dataclasses.replace(trainer, config=dataclasses.replace(CONFIG, ent_coef=0.25))

    @jax.jit
    def scores_and_losses(params, traj):
        scores = trainer.rollout.response_scores(params, traj)
        return (
            scores,
            trainer.policy_loss(params, traj, adv, count),
            bonus.policy_loss(params, traj, adv, count),
        )

    (log_p, entropy), plain, with_bonus = scores_and_losses(params, played)
    np.testing.assert_allclose(log_p, played.token_log_probs, atol=1e-4)
    model = trainer.rollout.model(params)
    for t, b in list(zip(*np.nonzero(played.valid), strict=True))[:6]:
        log_p = _full_pass_log_probs(model, played, t, b)
        k = log_p.shape[0]
        expected = -np.sum(np.exp(log_p) * log_p, axis=-1)
        np.testing.assert_allclose(entropy[t, b, :k], expected, rtol=1e-4, atol=1e-5)
        assert np.all(np.asarray(entropy[t, b, k:]) == 0.0)
    learned = np.sum(np.where(played.learn[..., None], entropy, 0.0))
    assert learned > 0
    expected_gap = 0.25 * learned / LOOP.response_tokens / float(count)
    np.testing.assert_allclose(plain - with_bonus, expected_gap, rtol=1e-4)


def test_bucketed_replay_gives_the_one_length_gradient(trainer, warmed, played):
    """Episodes replayed shortest first, each chunk at the shortest stream length
    that holds it, give the loss and gradient of one pass at ``replay_tokens``."""
    params = warmed[0].params
    adv = advantages(CONFIG, played)
    count = jnp.float32(np.sum(played.valid))

    def loss_and_grad(**overrides):
        learner = dataclasses.replace(trainer, config=dataclasses.replace(CONFIG, **overrides))
        loss = lambda p, traj, a, length: learner.policy_loss(p, traj, a, count, length)  # noqa: E731
        return jax.jit(lambda p, traj: learner.value_and_grad(loss, p, traj, adv))(params, played)

    lengths = replay_lengths(LOOP.replay_tokens, 6)
    streams = np.sort(np.asarray(stream_lengths(played)))
    used = {int(np.searchsorted(lengths, chunk.max())) for chunk in streams.reshape(2, 4)}
    assert len(used) == 2, f"both chunks fall in one bucket of {lengths}: {streams}"
    one_value, one_grad = loss_and_grad(replay_buckets=1, replay_episodes=8)
    value, grad = loss_and_grad(replay_buckets=6, replay_episodes=4)
    np.testing.assert_allclose(value, one_value, rtol=1e-5)
    for got, want in zip(jax.tree.leaves(grad), jax.tree.leaves(one_grad), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def _host_check(trainer, traj):
    """Every played turn: the host grammar on the decoded response gives the
    rollout's action and format flag; returns how many were well-formed."""
    tokenizer = trainer.rollout.bridge.tokenizer
    grammar = trainer.rollout.env.grammar
    well_formed = 0
    for t, b in zip(*np.nonzero(traj.valid), strict=True):
        k = int(traj.response_length[t, b])
        text = tokenizer.decode(traj.response_ids[t, b, :k])
        parsed = grammar.parse("" if traj.response_cut[t, b] else text)
        assert parsed.ok == (not traj.format_error[t, b]), text
        if parsed.ok:
            np.testing.assert_array_equal(traj.actions[t, b], parsed.action, err_msg=text)
            well_formed += 1
    return well_formed


def test_parsed_actions_equal_the_host_parser_on_decoded_responses(trainer, sampled, played):
    _host_check(trainer, sampled)
    assert _host_check(trainer, played) > 0


def test_prompts_are_gem_text_and_the_episode_replays_on_the_host(trainer, warmed, collect):
    """Each played turn's prompt decodes to the qwen3_game chat prompt around GEM's
    ``concat`` observation of the same episode played through ``gemjax.gem`` with
    the decoded responses, and the host's rewards equal the rollout's."""
    key = jax.random.key(5)
    traj = jax.device_get(collect(warmed[0].params, key))
    tokenizer = trainer.rollout.bridge.tokenizer
    kernel = trainer.rollout.env
    states, ts = jax.vmap(kernel.reset, in_axes=(0, None))(
        jax.random.split(key, 8), kernel.default_params
    )
    played = 0
    for b in range(8):
        lane = jax.tree.map(lambda x, b=b: x[b], (states, ts))
        text_env = gemjax.gem.make(ENV_ID)
        text_env.state = lane[0]
        observations = [kernel.messages.render_event(lane[1].event)]
        suffix = text_env.get_task_suffix() if kernel.reset_info_has_suffix else ""
        for t in range(LOOP.horizon):
            if not traj.valid[t, b]:
                break
            concat = "".join(o if o.endswith("\n") else o + "\n" for o in observations)
            n = int(traj.prompt_length[t, b])
            decoded = tokenizer.decode(traj.prompt_ids[t, b, :n])
            assert decoded == CHAT_PREFIX + concat + suffix + CHAT_TAIL
            k = int(traj.response_length[t, b])
            response = tokenizer.decode(traj.response_ids[t, b, :k])
            observation, reward, terminated, truncated, info = text_env.step(response)
            assert np.float32(reward) == traj.rewards[t, b]
            observations.append(observation)
            suffix = info.get("suffix", "")
            played += 1
            if terminated or truncated:
                assert t + 1 == LOOP.horizon or not traj.valid[t + 1, b]
                break
    assert played > 8


def test_format_warmup_lowers_the_loss_and_format_errors(warmed, trainer, collect, sampled):
    state, losses = warmed
    print("warm-up losses", np.round(losses, 3))
    assert losses[-1] < 0.3 * losses[0]
    traj = collect(state.params, jax.random.key(6))
    before = float(token_metrics(sampled).format_error_rate)
    after = float(token_metrics(traj).format_error_rate)
    assert after < before


def test_a_tiny_training_run_end_to_end(trainer):
    state, warm, rl = jax.jit(trainer.train)(jax.random.key(0))
    assert int(state.warmup) == CONFIG.warmup_updates
    assert int(state.update) == CONFIG.num_updates
    assert warm.eval.format_error_rate.shape == (CONFIG.warmup_updates // CONFIG.eval_every,)
    for tree in (warm, rl):
        for leaf in jax.tree.leaves(tree):
            assert not np.any(np.isinf(np.asarray(leaf)))
    assert np.all(np.isfinite(rl.train.loss))


class _NotALanguageModel:
    token_ids = np.arange(3)


def test_bad_inputs_fail_at_construction(trainer):
    bridge = trainer.rollout.bridge
    model = TinyLM(bridge.vocab, MODEL, nnx.Rngs(0))
    with pytest.raises(ValueError, match="not the bridge's"):
        TokenRollout(model, bridge, LOOP, tokenizer=load_tokenizer("bytes"))
    with pytest.raises(ValueError, match="reset prompt takes"):
        TokenRollout(model, bridge, dataclasses.replace(LOOP, context=64))
    with pytest.raises(ValueError, match="response_tokens must be an int >= 1"):
        dataclasses.replace(LOOP, response_tokens=0)
    with pytest.raises(ValueError, match="lacks"):
        TokenRollout(TinyLM(bridge.vocab[:-3], MODEL, nnx.Rngs(0)), bridge, LOOP)
    with pytest.raises(TypeError, match="not a CausalLM"):
        TokenRollout(_NotALanguageModel(), bridge, LOOP)
    with pytest.raises(ValueError, match="algo must be one of"):
        dataclasses.replace(CONFIG, algo="ppo")
    with pytest.raises(ValueError, match="response_tokens must be >= "):
        make_token_train(
            dataclasses.replace(CONFIG, loop=dataclasses.replace(LOOP, response_tokens=3)),
            bridge,
        )


def test_host_evaluation_through_gemjax_gem_equals_the_device(trainer, warmed):
    """The agent answering gemjax.gem's strings on the host (one device call a turn)
    plays the same greedy episodes as the on-device rollout from the same seeds."""
    seeds = list(range(8))
    rollout = trainer.rollout
    params = warmed[0].params
    traj = jax.device_get(
        jax.jit(
            lambda p: rollout.collect(p, seed_reset_keys(seeds), jax.random.key(0), greedy=True)
        )(params)
    )
    host = evaluate_on_host(rollout, params, ENV_ID, seeds)
    device_success = np.any(traj.success, axis=0)
    np.testing.assert_array_equal(host.episode_success, device_success)
    assert host.mean_turns == pytest.approx(float(np.mean(np.sum(traj.valid, axis=0))))
    played = max(int(np.sum(traj.valid)), 1)
    assert host.format_error_rate == pytest.approx(np.sum(traj.format_error) / played)


def test_the_host_agent_streams_its_response(trainer, warmed):
    agent = HostAgent(trainer.rollout, warmed[0].params)
    env = gemjax.gem.make(ENV_ID)
    observation, _ = env.reset(seed=0)
    agent.reset(1)
    streamed = "".join(agent.stream(observation))
    agent.reset(1)
    assert streamed == agent.act([observation])[0]


AUTO_LOOP = dataclasses.replace(LOOP, auto_reset=True, steps=10, replay_tokens=1024)


@pytest.fixture(scope="module")
def auto_trainer(trainer):
    """The module's trainer with an auto-reset loop of 10 turns a lane."""
    config = dataclasses.replace(CONFIG, loop=AUTO_LOOP)
    rollout = trainer.rollout.with_config(AUTO_LOOP)
    return dataclasses.replace(trainer, config=config, rollout=rollout)


@pytest.fixture(scope="module")
def auto_played(auto_trainer, warmed):
    collect = jax.jit(lambda p, key: auto_trainer.rollout.collect(p, jax.random.split(key, 8), key))
    return jax.device_get(collect(warmed[0].params, jax.random.key(7)))


def test_auto_reset_lanes_play_episode_after_episode(auto_played, trainer):
    traj = auto_played
    assert traj.valid.shape == (AUTO_LOOP.steps, 8)
    assert np.all(traj.valid), "no lane may stop: every prompt fits and episodes restart"
    restarts = 0
    tokenizer = trainer.rollout.bridge.tokenizer

    def reset_text(t, b):
        # GuessTheNumber's reset prompt is its instructions, alike but for the
        # example guess they show.
        text = tokenizer.decode(traj.prompt_ids[t, b, : traj.prompt_length[t, b]])
        return re.sub(r"\\boxed\{\d+\}", "", text)

    first_prompt = reset_text(0, 0)
    for b in range(8):
        turn = 0
        for t in range(AUTO_LOOP.steps):
            assert traj.episode_turn[t, b] == turn
            if turn == 0:
                assert reset_text(t, b) == first_prompt
                restarts += t > 0
            turn = 0 if traj.episode_end[t, b] else turn + 1
            assert turn < AUTO_LOOP.horizon
        # Learned turns are exactly those up to the lane's last episode end.
        ends = np.nonzero(traj.episode_end[:, b])[0]
        last = ends[-1] if ends.size else -1
        np.testing.assert_array_equal(traj.learn[:, b], np.arange(AUTO_LOOP.steps) <= last)
    assert restarts >= 8, "episodes must restart within the rollout"
    # A restarted episode feeds only past the instructions its lane's cache holds.
    restarted = (traj.episode_turn == 0) & (np.arange(AUTO_LOOP.steps)[:, None] > 0)
    assert np.all(traj.prompt_start[restarted] > 0)


def test_sampled_evaluation_plays_one_episode_a_lane(auto_trainer, warmed):
    """The chunks' sampled evaluation plays its fixed episodes once each, auto-reset
    or not, and draws its tokens: it matches neither the greedy evaluation's turns
    nor an auto-reset rollout's lane-turns."""
    state = warmed[0]
    sampled = jax.jit(lambda s: auto_trainer.evaluate(s, greedy=False))(state)
    assert float(sampled.episode_count) == CONFIG.eval_episodes
    assert float(sampled.turns_played) <= CONFIG.eval_episodes * AUTO_LOOP.horizon
    again = jax.jit(lambda s: auto_trainer.evaluate(s, greedy=False))(state)
    assert float(again.episodes.episode_return) == float(sampled.episodes.episode_return)


def test_auto_reset_replay_equals_the_rollout(auto_trainer, warmed, auto_played):
    """The cache kept across a lane's episodes is what the learner's replay sees."""
    replay = jax.jit(auto_trainer.rollout.response_log_probs)
    np.testing.assert_allclose(
        replay(warmed[0].params, auto_played), auto_played.token_log_probs, atol=1e-4
    )


def test_auto_reset_metrics_count_finished_episodes(auto_played):
    traj = auto_played
    metrics = token_metrics(traj)
    finished = int(np.sum(traj.episode_end & traj.learn))
    assert float(metrics.episode_count) == finished > 8
    assert float(metrics.episodes.mean_turns) == pytest.approx(np.sum(traj.learn) / finished)
    wins = np.sum(traj.success & traj.learn)
    assert float(metrics.episodes.success) == pytest.approx(wins / finished)


def test_auto_reset_update_learns_from_finished_episodes(auto_trainer, warmed, auto_played):
    adv = np.asarray(advantages(auto_trainer.config, auto_played))
    assert np.all(adv[~auto_played.learn] == 0.0)
    assert np.any(adv[auto_played.learn] != 0.0)
    state, metrics = jax.jit(auto_trainer.update)(warmed[0])
    assert int(state.update) == int(warmed[0].update) + 1
    assert np.isfinite(float(metrics.loss))
    assert float(metrics.rollout.episode_count) > 0


def test_auto_reset_settings_are_checked():
    with pytest.raises(ValueError, match="set auto_reset"):
        dataclasses.replace(LOOP, steps=8)
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        dataclasses.replace(LOOP, auto_reset=True, steps=0)
    with pytest.raises(ValueError, match="grpo scores groups"):
        dataclasses.replace(CONFIG, algo="grpo", group_size=4, loop=AUTO_LOOP)
    assert dataclasses.replace(LOOP, auto_reset=True).lane_turns == LOOP.horizon
