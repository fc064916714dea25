"""``gemjax.benchmark``: compiled random rollouts."""

import gemjax
from gemjax.benchmark import CompiledRollout

GAME = "game:GuessTheNumber-v0-easy"


def test_compiled_rollout_runs_the_env_that_wrap_returns():
    given = []

    def one_turn_game(env):
        given.append(env.name)
        return gemjax.make(GAME, max_turns=1)

    _, episodes = CompiledRollout(GAME, 8, 5, wrap=one_turn_game).run(0)
    assert given == [gemjax.make(GAME).name]
    assert episodes == 8 * 5  # every step ends a one-turn episode
    _, unwrapped = CompiledRollout(GAME, 8, 5).run(0)
    assert 0 < unwrapped < 8 * 5
