"""The reference optima (gemjax.reference) against brute force and the kernels."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gemjax.envs.mastermind import pegs
from gemjax.envs.minesweeper import FLAG, HIDDEN, REVEAL
from gemjax.reference import (
    choose_move,
    guess_the_number_optimum,
    masked_random_play,
    mastermind_optimum,
    mastermind_spaces,
    mean_estimate,
    mine_probabilities,
    peg_score,
    play_minesweeper,
    rate_estimate,
    sudoku_empty_cells,
)


def brute_force_guess_the_number(
    candidates: frozenset[int], guessed: frozenset[int], turns: int, numbers: range
) -> tuple[int, int]:
    """``(found, summed turns)``, lexicographically best, over every guess in range at
    every turn (repeats included), targets uniform over ``candidates``."""
    if not candidates or turns == 0:
        return 0, 0
    best = None
    for guess in numbers:
        if guess in guessed:
            found, total = brute_force_guess_the_number(candidates, guessed, turns - 1, numbers)
        else:
            low = frozenset(t for t in candidates if t < guess)
            high = frozenset(t for t in candidates if t > guess)
            seen = guessed | {guess}
            found_low, total_low = brute_force_guess_the_number(low, seen, turns - 1, numbers)
            found_high, total_high = brute_force_guess_the_number(high, seen, turns - 1, numbers)
            found, total = int(guess in candidates) + found_low + found_high, total_low + total_high
        option = (found, total + len(candidates))
        if best is None or (-option[0], option[1]) < (-best[0], best[1]):
            best = option
    return best


def test_guess_the_number_one_to_fifty() -> None:
    for max_turns in (7, 50):  # the hard id and the discount experiment's
        optimum = guess_the_number_optimum(1, 50, max_turns)
        assert optimum.expected_turns == pytest.approx(243 / 50, abs=1e-12)  # 4.86
        assert optimum.success == 1.0
        assert optimum.worst_turns == 6
    assert guess_the_number_optimum(1, 50, 5).success == 31 / 50  # 2**5 - 1 targets


@pytest.mark.parametrize("numbers", range(1, 7))
@pytest.mark.parametrize("max_turns", range(1, 5))
def test_guess_the_number_against_brute_force(numbers: int, max_turns: int) -> None:
    span = range(1, numbers + 1)
    found, total = brute_force_guess_the_number(frozenset(span), frozenset(), max_turns, span)
    optimum = guess_the_number_optimum(1, numbers, max_turns)
    assert optimum.success == found / numbers
    assert optimum.expected_turns == pytest.approx(total / numbers, abs=1e-12)


def test_guess_the_number_rejects_empty_range() -> None:
    with pytest.raises(ValueError, match="min_number <= max_number"):
        guess_the_number_optimum(5, 4, 7)


def brute_force_mastermind(codes: tuple, guesses: list, used: frozenset, turns: int) -> float:
    """The fewest guesses summed over ``codes`` within ``turns`` turns, trying every
    guess not made before at every node (no memo, no pruning); inf if impossible."""
    if not codes:
        return 0
    if turns == 0:
        return math.inf
    best = math.inf
    for guess in guesses:
        if guess in used:
            continue
        classes: dict[tuple[int, int], list] = {}
        for code in codes:
            if code != guess:
                classes.setdefault(peg_score(code, guess), []).append(code)
        total = len(codes) + sum(
            brute_force_mastermind(tuple(part), guesses, used | {guess}, turns - 1)
            for part in classes.values()
        )
        best = min(best, total)
    return best


@pytest.mark.parametrize(
    ("length", "numbers", "duplicates"), [(2, 3, False), (2, 2, True), (1, 4, False)]
)
def test_mastermind_against_brute_force(length: int, numbers: int, duplicates: bool) -> None:
    codes, guesses = mastermind_spaces(length, numbers, duplicates)
    optimum = mastermind_optimum(length, numbers, duplicates, max_turns=10)
    exhaustive = brute_force_mastermind(tuple(codes), guesses, frozenset(), optimum.worst_turns + 1)
    assert optimum.expected_turns == pytest.approx(exhaustive / len(codes), abs=1e-12)
    assert optimum.codes == len(codes)


def test_mastermind_easy() -> None:
    optimum = mastermind_optimum(2, 6, False, max_turns=10)
    assert (optimum.codes, optimum.guesses) == (30, 36)
    assert optimum.expected_turns == pytest.approx(103 / 30, abs=1e-12)  # 3.433...
    assert optimum.worst_turns <= 10


def test_mastermind_limits() -> None:
    with pytest.raises(ValueError, match="codes"):
        mastermind_optimum(4, 6, False, max_turns=20)
    with pytest.raises(ValueError, match="max_turns"):
        mastermind_optimum(2, 6, False, max_turns=2)


def test_peg_score_matches_the_kernel() -> None:
    codes, guesses = mastermind_spaces(2, 6, True)
    pairs = list(itertools.product(codes, guesses))
    code = jnp.asarray([c for c, _ in pairs], jnp.int32)
    guess = jnp.asarray([g for _, g in pairs], jnp.int32)
    kernel = np.asarray(jax.vmap(lambda c, g: pegs(c, g, jnp.int32(2), 6))(code, guess))
    assert [tuple(map(int, row)) for row in kernel] == [peg_score(c, g) for c, g in pairs]


# One mine on a 3x3 board; the three 1s all touch (1, 2), so it is the mine.
CERTAIN_MINE = np.array([[0, 1, HIDDEN], [0, 1, HIDDEN], [0, 1, HIDDEN]], np.int8)


def test_mine_probabilities_certain_mine() -> None:
    probabilities = mine_probabilities(CERTAIN_MINE, num_mines=1)
    expected = np.zeros((3, 3))
    expected[1, 2] = 1.0
    np.testing.assert_allclose(probabilities, expected)


def test_player_never_reveals_a_known_mine() -> None:
    assert choose_move(CERTAIN_MINE, 1, flag_mines=False, first_cell=(1, 1)) == (REVEAL, 0, 2)
    assert choose_move(CERTAIN_MINE, 1, flag_mines=True, first_cell=(1, 1)) == (FLAG, 1, 2)
    flagged = CERTAIN_MINE.copy()
    flagged[1, 2] = 10
    assert choose_move(flagged, 1, flag_mines=True, first_cell=(1, 1)) == (REVEAL, 0, 2)


def test_first_move_and_inconsistent_board() -> None:
    hidden = np.full((5, 5), HIDDEN, np.int8)
    assert choose_move(hidden, 5, flag_mines=False, first_cell=(2, 2)) == (REVEAL, 2, 2)
    impossible = CERTAIN_MINE.copy()
    impossible[0, 0] = 3  # a corner cell cannot touch three mines here
    with pytest.raises(ValueError, match="no placement"):
        mine_probabilities(impossible, num_mines=1)


def test_probabilities_agree_with_kernel_boards() -> None:
    """On boards the kernel deals and opens at the centre, every true mine has a
    positive probability (so cells of probability 0 are safe) and every cell of
    probability 1 is a mine."""
    from gemjax.registry import make

    env = make("game:Minesweeper-v0-easy")
    params = env.default_params
    keys = jax.random.split(jax.random.key(3), 16)
    state, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    centre = jnp.broadcast_to(jnp.asarray([REVEAL, 2, 2], jnp.int32), (16, 3))
    state, ts = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(keys, state, centre, params)
    for board, mines in zip(
        np.asarray(ts.observation["board"]), np.asarray(state.mines), strict=True
    ):
        probabilities = mine_probabilities(board, num_mines=5)
        assert np.all(probabilities[mines] > 0)
        assert np.all(mines[probabilities == 1])
        assert probabilities.sum() == pytest.approx(5)


def test_play_minesweeper_small() -> None:
    plain = play_minesweeper(num_boards=8, seed=1)
    flagging = play_minesweeper(num_boards=8, seed=1, flag_mines=True)
    assert plain.gem_success.value == 0.0  # success needs flags
    assert plain.cleared.value == flagging.cleared.value  # the same reveals
    assert flagging.gem_success.value <= flagging.cleared.value
    assert 0.0 <= plain.mean_return.value <= 1.0
    with pytest.raises(ValueError, match="fixed-size Minesweeper"):
        play_minesweeper("game:Sudoku-v0-easy", num_boards=8)


def test_sudoku_empty_cells() -> None:
    optimum = sudoku_empty_cells(num_puzzles=64, seed=0)
    assert optimum.success == 1.0
    assert 1 <= optimum.mean_turns.low <= optimum.mean_turns.value <= optimum.mean_turns.high
    assert optimum.max_empty <= 10  # at most `clues` removals


def test_masked_random_play() -> None:
    """Random play over Sudoku's mask fills the grid: each turn fills a cell or rules
    out one of its candidates, and 15 turns are nearly always enough; over
    GuessTheNumber-hard's (no repeated guess) it wins some games within 7 turns.
    A game without a mask, a ``-random`` id or fewer than 2 episodes is refused."""
    sudoku = masked_random_play("game:Sudoku-v0-easy", num_episodes=256, seed=0)
    assert sudoku.success.value > 0.9 and 8 <= sudoku.mean_turns.value <= 15
    assert sudoku.mean_return.value > 0.9 and sudoku.outcomes == {}
    guess = masked_random_play("game:GuessTheNumber-v0-hard", num_episodes=256, seed=0)
    assert 0.0 < guess.success.value < 0.5 and guess.mean_turns.value <= 7
    mines = masked_random_play("game:Minesweeper-v0-easy", num_episodes=64, seed=0)
    assert set(mines.outcomes) == {"cleared"} and mines.success.value == 0.0
    for env_id, episodes, match in (
        ("game:Mastermind-v0-easy", 8, "no valid_action_mask"),
        ("game:Sudoku-v0-random", 8, "per reset"),
        ("game:Sudoku-v0-easy", 1, "at least 2"),
    ):
        with pytest.raises(ValueError, match=match):
            masked_random_play(env_id, num_episodes=episodes)


def test_intervals() -> None:
    none = rate_estimate(0, 10)
    assert none.value == 0.0 and none.low == 0.0
    assert none.high == pytest.approx(0.2775, abs=1e-4)  # Wilson's 0/10
    assert rate_estimate(5, 10).low == pytest.approx(1 - rate_estimate(5, 10).high)
    with pytest.raises(ValueError):
        rate_estimate(11, 10)
    mean = mean_estimate(np.array([1.0, 2.0, 3.0]))
    assert mean.value == 2.0 and mean.low < 2.0 < mean.high
