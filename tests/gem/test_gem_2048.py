"""Text parity of ``gemjax.gem`` with gem-llm's Game2048, byte for byte.

Every episode resets GEM and copies its state into ours (``from_gem``); both are
stepped with the same adversarial stream (moves that change GEM's board, any
direction in any case, words that only ``re.IGNORECASE`` reads as directions,
malformed boxes, several boxes, GEM's own samples) and every 5-tuple must be equal
(rewards as float32). GEM draws each spawn from its global RNG; the harness replays
it (``gemjax.testing.replay_draw``) before our step. Streams come from fixed seeds.
"""

from __future__ import annotations

import random

import gem
import pytest
from tiers import seeded

import gemjax.gem as gg
from gemjax import testing
from gemjax.envs.game_2048 import DIRECTIONS

EASY, HARD, EXTREME, RANDOM = (
    f"game:Game2048-v0-{v}" for v in ("easy", "hard", "extreme-hard", "random")
)
EPISODES = {EASY: 40, HARD: 20, EXTREME: 10, RANDOM: 60}


class ActionStream(testing.ActionStream):
    """Adversarial responses for one Game2048 episode (reads GEM's board)."""

    def __init__(self, rng: random.Random, gem_env, ours: gg.TextEnv) -> None:
        super().__init__(rng, gem_env, ours)
        self.kinds = [
            (self.changing_move, 40),
            (self.any_case, 8),
            (self.lookalike, 1),
            (self.malformed, 1),
            (self.multi_box, 1),
            (self.sampled, 2),
        ]

    def changing_move(self) -> str:
        """A direction that changes GEM's board (merging first when it can)."""
        valid = [d for d in DIRECTIONS if self.gem_env._is_valid_move(d)]
        return self.boxed(self.rng.choice(valid or list(DIRECTIONS)), prose=0.1)

    def any_case(self) -> str:
        word = self.rng.choice(DIRECTIONS)
        return self.boxed("".join(c.upper() if self.rng.random() < 0.5 else c for c in word))

    def lookalike(self) -> str:
        """``right`` and ``left`` with letters Python's ``IGNORECASE`` matches but
        ``str.lower()`` keeps apart (GEM echoes them as unchanged moves)."""
        return self.boxed(self.rng.choice(["r\u0130ght", "r\u0131ght", "R\u0130GHT"]))

    def malformed(self) -> str:
        word = self.rng.choice(DIRECTIONS)
        return self.rng.choice(
            [f"\\boxed{{ {word}}}", f"\\boxed{{{word}.}}", f"\\boxed{{{word[:-1]}}}", word]
        )


@pytest.mark.parametrize(("env_id", "stream_seed"), seeded((EASY, HARD, EXTREME, RANDOM)))
def test_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    """Mostly moves that change the board, so episodes run to the turn limit or the
    target (the random variant's 16 and 32 are reached)."""
    gem_env = gem.make(env_id)
    seen = testing.check_gem_parity(
        gem_env,
        env_id,
        EPISODES[env_id],
        stream_seed,
        stream=ActionStream,
        extra_turns=(2, 2),
        describe=lambda gem_env: repr(gem_env.board),
    )
    names = {name.split("[")[0] for name in seen}
    assert "other" not in names, seen
    assert {"moved", "unchanged", "format_error", "unknown_move", "max_turns"} <= names, seen
    if env_id == RANDOM:
        assert "success" in names, seen


@pytest.mark.parametrize("env_id", [EASY, RANDOM])
def test_reset_text_and_suffix(env_id: str) -> None:
    """Our reset texts equal GEM's instructions for our own configuration and example
    direction, and our suffix is GEM's for our board."""
    gem_env = gem.make(env_id)
    ours = gg.make(env_id, seed=0)
    examples = set()
    for seed in range(24):
        obs, info = ours.reset(seed=seed)
        state = ours.state
        example = DIRECTIONS[int(state.example)]
        examples.add(example)
        gem_env.target_tile, gem_env.max_turns = int(state.target_tile), int(state.max_turns)
        gem_env.board = [[2 ** int(v) if v else 0 for v in row] for row in state.board.tolist()]
        gem_env.sample_random_action = lambda example=example: f"\\boxed{{{example}}}"
        assert obs == gem_env._get_instructions()
        assert info == {"suffix": gem_env.get_task_suffix()}
    assert examples == set(DIRECTIONS)
