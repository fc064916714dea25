"""The batch axis sharded over 8 (forced host) devices gives one device's numbers."""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np
    from jax.sharding import Mesh
    from gemjax.train import TrainConfig, make_train

    assert jax.device_count() == 8, jax.devices()
    config = TrainConfig(env_id="game:GuessTheNumber-v0-easy", num_updates=2, eval_every=2,
                         num_episodes=32, num_transitions=64, hidden=(16,), eval_episodes=32)
    results = {}
    for name, devices in (("sharded", jax.devices()), ("single", jax.devices()[:1])):
        trainer = make_train(config, Mesh(np.array(devices), ("batch",)))
        state = trainer.init(jax.random.key(0))
        traj = jax.jit(trainer.rollout.collect)(
            state.params, jax.random.split(jax.random.key(1), 32), jax.random.key(2))
        assert len(traj.valid.sharding.device_set) == len(devices), traj.valid.sharding
        results[name] = jax.jit(trainer.chunk)(state)
    (a_state, a_metrics), (b_state, b_metrics) = results["sharded"], results["single"]
    for x, y in zip(jax.tree.leaves((a_state.params, a_metrics)),
                    jax.tree.leaves((b_state.params, b_metrics))):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5)
    moved = jax.tree.leaves(jax.tree.map(lambda p, q: float(abs(p - q).max()),
                                         a_state.params, trainer.init(jax.random.key(0)).params))
    assert max(moved) > 1e-4, moved
    print("SHARDED_MATCHES_SINGLE")
    """
)


@pytest.mark.slow
def test_sharded_training_matches_one_device():
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags.strip()}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SHARDED_MATCHES_SINGLE" in done.stdout
