"""Text parity of ``gemjax.gem`` with gem-llm's Sudoku, byte for byte.

Every episode resets GEM (its 9x9 solution counter swapped for an exact, faster one:
the RNG calls and so the puzzles are unchanged) and copies its state into ours
(``from_gem``); both are then stepped with the same adversarial action stream
(correct, wrong and repeated placements, givens, out of bounds and 40-digit numbers,
malformed boxes, odd and Unicode whitespace, Unicode digits, several boxes,
over-long numbers, garbage) and every 5-tuple must be equal (rewards as float32).
Streams come from fixed seeds.
"""

from __future__ import annotations

import importlib.util
import random
from collections import Counter
from pathlib import Path

import gem
import pytest

import gemjax.gem as gg
from gemjax import testing
from gemjax.testing import check_step

SLOW = pytest.mark.slow  # left out of the quick tier (-m "not slow"), run in CI

EASY, HARD, RANDOM = (f"game:Sudoku-v0-{v}" for v in ("easy", "hard", "random"))
IDS = (EASY, HARD, RANDOM)
EPISODES = {EASY: 250, HARD: 80, RANDOM: 140}
SEPARATORS = [" "] * 10 + ["\t", "\n", "\u3000", "\xa0", "\x85", "\x1c", "\u2003"]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_sudoku_bank.py"


def _bank_script():
    spec = importlib.util.spec_from_file_location("make_sudoku_bank", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_gem(env_id: str):
    """``gem.make(env_id)`` whose 9x9 uniqueness checks use the bank script's exact
    counter (GEM's takes 0.3 s per puzzle here; the decisions are the same)."""
    env = gem.make(env_id)
    count = _bank_script().count_solutions
    original = env._count_solutions

    def fast_count(grid, solutions, limit=2):
        if len(grid) != 9:
            return original(grid, solutions, limit)
        solutions.extend([None] * count([v for row in grid for v in row], limit))
        return len(solutions)

    env._count_solutions = fast_count
    return env


class ActionStream(testing.ActionStream):
    """Adversarial responses for one Sudoku episode (reads GEM's board)."""

    leading_zeros = 0.08

    def __init__(self, rng: random.Random, gem_env, ours: gg.TextEnv, careful: bool) -> None:
        super().__init__(rng, gem_env, ours)
        self.rng, self.env, self.ours = rng, gem_env, ours
        self.kinds = (
            [(self.correct, 90), (self.wrong, 4), (self.filled, 3), (self.out_of_bounds, 3)]
            if careful
            else [
                (self.correct, 25),
                (self.wrong, 20),
                (self.filled, 15),
                (self.out_of_bounds, 8),
                (self.malformed, 5),
                (self.multi_box, 4),
                (self.non_ascii, 4),
                (self.too_many_digits, 1),
                (self.sampled, 3),
                (self.garbage, 2),
            ]
        )

    def cell(self, empty: bool | None) -> tuple[int, int]:
        e = self.env
        cells = [
            (r, c)
            for r in range(e.scale)
            for c in range(e.scale)
            if empty is None or (e.board[r][c] == 0) == empty
        ]
        if not cells:
            return self.rng.randrange(e.scale), self.rng.randrange(e.scale)
        return self.rng.choice(cells)

    def box(self, *numbers: str) -> str:
        seps = [self.rng.choice(SEPARATORS) for _ in numbers[1:]]
        inner = numbers[0] + "".join(s + n for s, n in zip(seps, numbers[1:], strict=True))
        text = "\\boxed{" + inner + "}"
        if self.rng.random() < 0.2:
            text = f"I place a number.\n{text}."
        return text

    def move(self, r: int, c: int, n: int) -> str:
        return self.box(self.digits(r + 1), self.digits(c + 1), self.digits(n))

    def correct(self) -> str:
        r, c = self.cell(True)
        return self.move(r, c, self.env.full_grid[r][c])

    def wrong(self) -> str:
        r, c = self.cell(True)
        others = [n for n in range(1, self.env.scale + 1) if n != self.env.full_grid[r][c]]
        return self.move(r, c, self.rng.choice(others))

    def filled(self) -> str:
        r, c = self.cell(False)
        return self.move(r, c, self.rng.randint(1, self.env.scale))

    def out_of_bounds(self) -> str:
        s = self.env.scale
        big = [0, s + 1, 5, 9, 10, 99, 2**31 - 1, 2**31, 10**40 + 3]
        fields = [self.rng.randint(1, s) for _ in range(3)]
        fields[self.rng.randrange(3)] = self.rng.choice(big)
        return self.box(*(self.digits(v) if v < 100 else str(v) for v in fields))

    def malformed(self) -> str:
        r, c, n = (self.rng.randint(1, 9) for _ in range(3))
        return self.rng.choice(
            [
                f"\\boxed{{{r}  {c} {n}}}",
                f"\\boxed{{ {r} {c} {n}}}",
                f"\\boxed{{{r} {c} {n} }}",
                f"\\boxed{{{r},{c},{n}}}",
                f"\\boxed{{{r} {c}}}",
                f"\\boxed{{{r} {c} {n} 1}}",
                f"\\boxed{{-{r} {c} {n}}}",
                f"\\boxed{{R{r} C{c} {n}}}",
                f"\\boxed {{{r} {c} {n}}}",
                f"boxed{{{r} {c} {n}}}",
                f"{r} {c} {n}",
                "\\boxed{}",
                "",
            ]
        )

    def multi_box(self) -> str:
        a, b = self.correct(), self.wrong()
        return self.rng.choice(
            [f"{a} or {b}", f"{a} \\boxed{{1 2}}", f"\\boxed{{x}} {a}", f"{a}{b}", f"{b} {a}"]
        )

    def non_ascii(self) -> str:
        r, c = self.cell(None)
        return self.rng.choice(
            [
                self.box(chr(0xFF10 + r + 1), chr(0x660 + c + 1), "1"),
                f"\\boxed{{{r + 1}\u2003{c + 1}\u30001}}",
                f"\\boxed{{{r + 1} {c + 1} \u00b9}}",  # superscript one: not \d
                f"Réponse : \\boxed{{{r + 1} {c + 1} 2}} ✓",
            ]
        )

    def too_many_digits(self) -> str:
        last = self.rng.choice(["0" * 4299 + "1", "0" * 4300 + "1", "7" * 4301])
        return self.box("1", "1", last)


# The quick tier (-m "not slow") replays the easy id; CI all three.
@pytest.mark.parametrize(
    ("env_id", "stream_seed"),
    [(EASY, 1), pytest.param(HARD, 2, marks=SLOW), pytest.param(RANDOM, 3, marks=SLOW)],
)
def test_step_parity_on_adversarial_streams(env_id: str, stream_seed: int) -> None:
    scales: Counter = Counter()
    seen = testing.check_gem_parity(
        make_gem(env_id),
        env_id,
        EPISODES[env_id],
        stream_seed,
        stream=lambda rng, gem_env, ours: ActionStream(
            rng, gem_env, ours, careful=rng.random() < 0.3
        ),
        on_reset=lambda gem_env: scales.update([gem_env.scale]),
        extra_turns=(3, 3),  # GEM does not freeze
        turns_past_limit=5,
        describe=lambda gem_env: f"board {gem_env.board}",
    )
    required = {
        "format_error",
        "out_of_bounds",
        "filled",
        "correct",
        "violation",
        "success",
        "max_turns",
    }
    assert required <= set(seen), seen
    if env_id == RANDOM:
        assert set(scales) == {4, 9}, scales


@pytest.mark.parametrize("env_id", IDS)
def test_reset_text_and_last_turn_format_error(env_id: str) -> None:
    """Our own resets print GEM's instructions and GEM's board for our puzzle; a format
    error on exactly the last turn is truncated, past it is not."""
    gem_env = make_gem(env_id)
    ours = gg.make(env_id, seed=0)
    for seed in range(6):
        obs, info = ours.reset(seed=seed)
        state = ours.state
        n = int(state.scale)
        gem_env.scale = n
        gem_env.board = state.board[:n, :n].tolist()
        assert obs == gem_env._get_instructions()
        assert info == {"suffix": gem_env.get_task_suffix()}
    for turns_left, truncated in ((1, True), (0, False)):
        gem_env.reset(seed=5)
        gem_env.turn_count = gem_env.max_turns - turns_left
        mirror = gg.from_gem(gem_env)
        theirs, mine = gem_env.step("no box"), mirror.step("no box")
        assert not check_step(mine, theirs) and theirs[3] is truncated, (env_id, mine, theirs)


@SLOW
def test_vector_env_autoreset() -> None:
    vec = gg.make_vec([EASY, EASY], seed=3)
    obs, infos = vec.reset(seed=3)
    assert all(o.startswith("You are playing A simple version of Sudoku.") for o in obs)
    assert infos[1]["suffix"].startswith(
        "Here is the current board layout:\n   C1 C2   C3 C4  \nR1 "
    )
    obs, rewards, terms, _, _ = vec.step(["nothing", "\\boxed{5 1 1}"])
    assert terms[0] and rewards[0] == -0.1 and obs[0].startswith("You are playing")
    assert obs[1] == "At turn 1, you tried to place 1 at R5 C1, which is out of bounds."
