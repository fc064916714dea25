"""Text parity of ``gemjax.gem`` with gem-llm's Minesweeper, byte for byte.

Every episode resets GEM, lets GEM play the first reveal (which places its mines;
sometimes after a few flags, sometimes on a flagged cell) and copies that state
into ours (``from_gem``); both are then stepped with the same adversarial action
stream (valid and repeated reveals and flags, oracle moves towards a win, out of
bounds and huge coordinates, malformed boxes, odd whitespace, mixed case, unknown
words, non-ASCII digits and letters, several boxes, over-long numbers) and every
5-tuple must be equal (rewards as float32). Streams come from fixed seeds.
"""

from __future__ import annotations

import random
from collections import Counter

import gem
import numpy as np
import pytest

import gemjax
import gemjax.gem as gg
from gemjax import testing
from gemjax.testing import check_step

SLOW = pytest.mark.slow  # left out of the quick tier (-m "not slow"), run in CI

EASY, HARD, RANDOM = (f"game:Minesweeper-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
EPISODES = 250
SEPARATORS = [" "] * 8 + ["\t", "\n", "\u3000", "\xa0", "\x85", "\x1c", "\u2003"]


def box(rng: random.Random, word: str, row: str, col: str) -> str:
    text = "\\boxed{" + word + rng.choice(SEPARATORS) + row + rng.choice(SEPARATORS) + col + "}"
    if rng.random() < 0.2:
        text = f"I will {word} this cell.\n{text}."
    return text


class ActionStream(testing.ActionStream):
    """Adversarial responses for one Minesweeper episode (reads GEM's board)."""

    def __init__(self, rng: random.Random, gem_env, ours: gg.TextEnv, careful: bool) -> None:
        super().__init__(rng, gem_env, ours)
        self.rng, self.env, self.ours = rng, gem_env, ours
        # A careful player mostly plays the right moves (and so sometimes wins).
        careful_kinds = [
            (self.reveal_safe, 40),
            (self.flag_mine, 20),
            (self.flag_any, 3),
            (self.out_of_bounds, 3),
            (self.unknown, 3),
        ]
        self.kinds = (
            careful_kinds
            if careful
            else [
                (self.reveal_hidden, 20),
                (self.reveal_safe, 25),
                (self.flag_mine, 12),
                (self.reveal_any, 6),
                (self.flag_any, 8),
                (self.out_of_bounds, 5),
                (self.mixed_case, 4),
                (self.unknown, 4),
                (self.malformed, 5),
                (self.multi_box, 3),
                (self.non_ascii, 3),
                (self.too_many_digits, 1),
                (self.sampled, 2),
                (self.garbage, 2),
            ]
        )

    def cells(self, predicate) -> list[tuple[int, int]]:
        e = self.env
        return [(r, c) for r in range(e.rows) for c in range(e.cols) if predicate(r, c)]

    def pick(self, predicate) -> tuple[int, int]:
        cells = self.cells(predicate)
        if not cells:
            return self.rng.randrange(self.env.rows), self.rng.randrange(self.env.cols)
        return self.rng.choice(cells)

    def command(self, word: str, cell: tuple[int, int]) -> str:
        return box(self.rng, word, self.digits(cell[0]), self.digits(cell[1]))

    def reveal_hidden(self) -> str:
        e = self.env
        return self.command("reveal", self.pick(lambda r, c: not e.revealed[r][c]))

    def reveal_safe(self) -> str:
        e = self.env
        cell = self.pick(lambda r, c: e.grid[r][c] != -1 and not e.revealed[r][c])
        if e.flags[cell[0]][cell[1]]:
            return self.command("flag", cell)  # unflag it first
        return self.command("reveal", cell)

    def flag_mine(self) -> str:
        e = self.env
        return self.command(
            "flag", self.pick(lambda r, c: e.grid[r][c] == -1 and not e.flags[r][c])
        )

    def reveal_any(self) -> str:
        return self.command("reveal", self.pick(lambda r, c: True))

    def flag_any(self) -> str:
        return self.command("flag", self.pick(lambda r, c: True))

    def out_of_bounds(self) -> str:
        e = self.env
        big = [e.rows, e.cols, 8, 9, 10, 99, 2**31 - 1, 2**31, 10**40 + 3]
        row, col = self.rng.randrange(e.rows), self.rng.randrange(e.cols)
        if self.rng.random() < 0.5:
            row = self.rng.choice(big)
        else:
            col = self.rng.choice(big)
        word = self.rng.choice(["reveal", "flag", "dig"])
        return box(self.rng, word, str(row), self.digits(col))

    def mixed_case(self) -> str:
        word = "".join(
            ch.upper() if self.rng.random() < 0.5 else ch
            for ch in self.rng.choice(["reveal", "flag"])
        )
        return self.command(word, self.pick(lambda r, c: True))

    def unknown(self) -> str:
        word = self.rng.choice(["open", "Dig", "REVEALS", "f", "mark", "unflag", "x", "unknown"])
        return self.command(word, self.pick(lambda r, c: True))

    def malformed(self) -> str:
        r, c = self.pick(lambda r, c: True)
        return self.rng.choice(
            [
                f"\\boxed{{reveal  {r} {c}}}",
                f"\\boxed{{reveal {r}  {c}}}",
                f"\\boxed{{ reveal {r} {c}}}",
                f"\\boxed{{reveal {r} {c} }}",
                f"\\boxed{{reveal {r},{c}}}",
                f"\\boxed{{reveal ({r}, {c})}}",
                f"\\boxed{{reveal -{r} {c}}}",
                f"\\boxed{{reveal {r}}}",
                f"\\boxed{{{r} {c}}}",
                f"\\boxed{{reveal1 {r} {c}}}",
                f"\\boxed {{reveal {r} {c}}}",
                f"boxed{{reveal {r} {c}}}",
                f"reveal {r} {c}",
                "\\boxed{}",
                "",
            ]
        )

    def multi_box(self) -> str:
        a = self.command("reveal", self.pick(lambda r, c: True))
        b = self.command("flag", self.pick(lambda r, c: True))
        return self.rng.choice(
            [f"{a} or {b}", f"{a} \\boxed{{flag 1}}", f"\\boxed{{x}} {a}", f"{a}{b}"]
        )

    def non_ascii(self) -> str:
        r, c = self.pick(lambda r, c: True)
        return self.rng.choice(
            [
                f"\\boxed{{r\u00e9veal {r} {c}}}",
                f"\\boxed{{\u212aeep {r} {c}}}",  # Kelvin sign: not [a-zA-Z]
                f"\\boxed{{\uff52eveal {r} {c}}}",
                box(self.rng, "reveal", chr(0xFF10 + r % 10), chr(0x660 + c % 10)),
            ]
        )

    def too_many_digits(self) -> str:
        return box(
            self.rng,
            "reveal",
            "1",
            self.rng.choice(["0" * 4299 + "1", "0" * 4300 + "1", "7" * 4301]),
        )


def first_reveal(gem_env, rng: random.Random) -> None:
    """GEM's opening: a few flags, maybe a (rejected) reveal of a flagged cell."""
    flagged = []
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        cell = (rng.randrange(gem_env.rows), rng.randrange(gem_env.cols))
        gem_env.step(f"\\boxed{{flag {cell[0]} {cell[1]}}}")
        flagged.append(cell)
    if flagged and rng.random() < 0.5:
        cell = rng.choice(flagged)
    else:
        cell = (rng.randrange(gem_env.rows), rng.randrange(gem_env.cols))
    gem_env.step(f"\\boxed{{reveal {cell[0]} {cell[1]}}}")
    assert not gem_env.first_reveal


# The quick tier (-m "not slow") replays the easy id; CI all three.
@pytest.mark.parametrize(
    ("env_id", "stream_seed"),
    [(EASY, 1), pytest.param(HARD, 2, marks=SLOW), pytest.param(RANDOM, 3, marks=SLOW)],
)
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    sizes: Counter = Counter()
    seen = testing.check_gem_parity(
        gem.make(env_id),
        env_id,
        EPISODES,
        stream_seed,
        stream=lambda rng, gem_env, ours: ActionStream(
            rng, gem_env, ours, careful=rng.random() < 0.3
        ),
        opening=first_reveal,
        on_reset=lambda gem_env: sizes.update([gem_env.rows]),
        extra_turns=(3, 3),  # GEM does not freeze
        turns_past_limit=5,
        describe=lambda gem_env: f"grid {gem_env.grid}",
    )
    required = {
        "format_error",
        "out_of_bounds",
        "mine",
        "reveal_repeat",
        "revealed",
        "flag_revealed",
        "flag[added]",
        "flag[removed]",
        "unknown_command",
        "success",
    }
    assert required <= set(seen), seen
    if env_id == RANDOM:
        assert set(sizes) == {5, 6, 7, 8}, sizes


def test_max_turns_and_last_turn_format_error() -> None:
    """Flag toggles until the limit on every id; on another episode a format error on
    exactly the last turn is truncated, past it is not."""
    for env_id in IDS:
        gem_env = gem.make(env_id)
        gem_env.reset(seed=4)
        first_reveal(gem_env, random.Random(0))
        ours = gg.from_gem(gem_env)
        cell = next(
            (r, c)
            for r in range(gem_env.rows)
            for c in range(gem_env.cols)
            if not gem_env.revealed[r][c]
        )
        start = gem_env.turn_count
        for _ in range(gem_env.max_turns - start + 2):
            action = f"\\boxed{{flag {cell[0]} {cell[1]}}}"
            theirs, mine = gem_env.step(action), ours.step(action)
            assert not check_step(mine, theirs), (env_id, mine, theirs)
        assert theirs[0] == "You have reached the maximum number of turns." and theirs[3]
        for turns_left, truncated in ((1, True), (0, False)):
            gem_env.reset(seed=5)
            first_reveal(gem_env, random.Random(1))
            gem_env.turn_count = gem_env.max_turns - turns_left
            ours.state = ours.kernel.state_from_gem(gem_env)
            theirs, mine = gem_env.step("no box"), ours.step("no box")
            assert not check_step(mine, theirs) and theirs[3] is truncated, (env_id, mine, theirs)


@pytest.mark.parametrize("env_id", IDS)
def test_reset_text_and_suffix(env_id: str) -> None:
    """Our reset texts equal GEM's instructions for our own example cells, and the
    suffix is GEM's empty board of our size."""
    gem_env = gem.make(env_id)
    ours = gg.make(env_id, seed=0)
    examples = set()
    for seed in range(20):
        o_obs, o_info = ours.reset(seed=seed)
        state = ours.state
        n_rows, n_cols = int(state.rows), int(state.cols)
        gem_env.rows, gem_env.cols = n_rows, n_cols
        gem_env.grid = [[0] * n_cols for _ in range(n_rows)]
        gem_env.revealed = [[False] * n_cols for _ in range(n_rows)]
        gem_env.flags = [[False] * n_cols for _ in range(n_rows)]
        rr, rc, fr, fc = (int(v) for v in state.example)
        answers = iter([rr, rc, fr, fc])
        original = random.randint
        random.randint = lambda a, b, it=answers: next(it)
        try:
            expected = gem_env._get_instructions()
        finally:
            random.randint = original
        assert o_obs == expected
        assert (
            o_info == {"suffix": gem_env.get_task_suffix()}
            and ours.get_task_suffix() == o_info["suffix"]
        )
        examples.add((rr, rc, fr, fc))
    assert len(examples) > 10


def test_from_gem_before_the_first_reveal() -> None:
    """Copied before GEM placed its mines: flags carry over, our first reveal places
    ours (outside its 3x3 block, the right number), texts and flags agree with GEM's
    where they do not depend on where the mines are."""
    for env_id in IDS:
        gem_env = gem.make(env_id)
        gem_env.reset(seed=9)
        gem_env.step("\\boxed{flag 0 0}")
        ours = gg.from_gem(gem_env, seed=1)
        assert ours.kernel == gemjax.make(env_id) and ours.env_id == env_id
        state = ours.state
        assert not bool(state.placed) and int(state.turn) == 1 and bool(state.flags[0, 0])
        assert ours.get_task_suffix() == gem_env.get_task_suffix()
        for action in ["\\boxed{flag 1 0}", "\\boxed{reveal 0 0}", "\\boxed{flag 0 0}"]:
            assert not check_step(ours.step(action), gem_env.step(action))
        state = ours.state
        assert bool(state.placed) and int(state.mines.sum()) == gem_env.num_mines
        assert not np.asarray(state.mines)[:2, :2].any()
        mine = ours.step("\\boxed{reveal 1 1}")
        assert mine[0] == "At turn 5, you successfully revealed cell (1, 1)." and mine[1] > 0
    custom = gem.envs.game_env.minesweeper.MinesweeperEnv(rows=4, cols=7, num_mines=3, max_turns=9)
    ours = gg.from_gem(custom)
    assert ours.kernel.config == (4, 7, 3, 9)
    custom.step("\\boxed{reveal 2 3}")
    ours.state = ours.kernel.state_from_gem(custom)
    for action in ["\\boxed{reveal 0 0}", "\\boxed{flag 3 6}", "\\boxed{reveal 3 7}"]:
        assert not check_step(ours.step(action), custom.step(action))


@SLOW
def test_vector_env_autoreset() -> None:
    vec = gg.make_vec([EASY, RANDOM], seed=3)
    obs, infos = vec.reset(seed=3)
    assert all(o.startswith("You are playing the Minesweeper game.") for o in obs)
    assert all(
        i["suffix"].startswith("Here is the current board layout:\n    0  1  2  3  4")
        for i in infos
    )
    obs, rewards, terms, _, infos = vec.step(["nothing", "\\boxed{reveal 0 0}"])
    assert terms[0] and rewards[0] == -0.1 and obs[0].startswith("You are playing")
    assert obs[1] == "At turn 1, you successfully revealed cell (0, 0)." and rewards[1] > 0
    assert " 0  0 " in infos[1]["suffix"]  # the corner is a zero: its block has no mine
