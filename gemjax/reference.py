"""Reference optima: what a perfect (or best-probability) player scores on a game,
computed from the game's own rules and params.

* GuessTheNumber: an exact dynamic programme over the size of the interval still
  possible (:func:`guess_the_number_optimum`).
* Mastermind: an exact search over guess trees with memoisation on the set of codes
  still possible and branch-and-bound pruning (:func:`mastermind_optimum`), for code
  spaces of at most :data:`MAX_SEARCH_CODES` codes.
* Minesweeper: a player that reveals the cell of lowest mine probability, the
  probabilities exact by enumerating every mine placement consistent with the board
  (:func:`mine_probabilities`), played on boards drawn by the kernel's own reset
  (:func:`play_minesweeper`). It is a strong player, not a proven optimum.
* Sudoku: a player that knows the unique solution fills one empty cell a turn, so
  its turns are the puzzle's empty cells (:func:`sudoku_empty_cells`, from the
  kernel's reset distribution).
* Any game with an action mask: uniform random play over the moves the mask allows
  (:func:`masked_random_play`), the floor a policy trained with ``mask_invalid``
  starts from.

Intervals are 95% intervals: Wilson's for rates, the normal approximation for means.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gemjax.core import ActionMasking, EpisodeOutcomes
from gemjax.envs.minesweeper import FLAG, FLAGGED, HIDDEN, REVEAL, Minesweeper
from gemjax.envs.sudoku import Sudoku
from gemjax.registry import make
from gemjax.spaces import Discrete, MultiDiscrete

Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile
MAX_SEARCH_CODES = 64  # Mastermind's exact search keeps code sets as bit masks
MAX_CONFIGURATIONS = 200_000  # mine placements enumerated per Minesweeper decision


@dataclass(frozen=True)
class Estimate:
    """A sampled figure with its 95% interval ``[low, high]``, from ``samples`` draws."""

    value: float
    low: float
    high: float
    samples: int


def rate_estimate(successes: int, samples: int) -> Estimate:
    """The rate ``successes / samples`` with Wilson's 95% score interval.

    Raises:
        ValueError: ``samples < 1`` or ``successes`` outside ``0..samples``.
    """
    if samples < 1 or not 0 <= successes <= samples:
        raise ValueError(f"need 0 <= successes <= samples, samples >= 1; got {successes}/{samples}")
    p = successes / samples
    scale = 1 + Z_95**2 / samples
    centre = (p + Z_95**2 / (2 * samples)) / scale
    half = Z_95 * math.sqrt(p * (1 - p) / samples + Z_95**2 / (4 * samples**2)) / scale
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), samples)


def mean_estimate(values: np.ndarray) -> Estimate:
    """The mean of ``values`` (float[n], ``n >= 2``) with a normal 95% interval."""
    values = np.asarray(values, np.float64)
    if values.ndim != 1 or values.size < 2:
        raise ValueError(f"need a 1-d sample of at least 2 values, got shape {values.shape}")
    mean = float(values.mean())
    half = Z_95 * float(values.std(ddof=1)) / math.sqrt(values.size)
    return Estimate(mean, mean - half, mean + half, int(values.size))


# --- GuessTheNumber -------------------------------------------------------------------


@dataclass(frozen=True)
class GuessTheNumberOptimum:
    """The best play of GuessTheNumber on ``[min_number, max_number]``.

    Attributes:
        numbers: how many targets the range holds.
        success: the highest success probability within ``max_turns``.
        expected_turns: the fewest expected turns among strategies with that success
            (an unfound target counts ``max_turns``); targets are uniform.
        worst_turns: the fewest turns that find every target (balanced bisection).
    """

    numbers: int
    success: float
    expected_turns: float
    worst_turns: int


@functools.cache
def _bisection_search(candidates: int, turns: int) -> tuple[int, int]:
    """``(found, total turns)`` of the best play on ``candidates`` contiguous numbers
    with ``turns`` turns left: the most targets found, then the fewest turns summed
    over all targets (an unfound target is charged every turn). A guess inside the
    interval splits it into the numbers below and above; a guess outside it (or a
    repeat) only spends a turn, so it is never better."""
    if candidates == 0 or turns == 0:
        return 0, 0
    best = (0, 0)
    for below in range(candidates // 2 + 1):  # the split and its mirror score alike
        found_low, turns_low = _bisection_search(below, turns - 1)
        found_high, turns_high = _bisection_search(candidates - 1 - below, turns - 1)
        option = (1 + found_low + found_high, candidates + turns_low + turns_high)
        if below == 0 or (-option[0], option[1]) < (-best[0], best[1]):
            best = option
    return best


def guess_the_number_optimum(
    min_number: int, max_number: int, max_turns: int
) -> GuessTheNumberOptimum:
    """Exact optimum of GuessTheNumber (uniform target in ``[min_number, max_number]``,
    higher/lower hints, ``max_turns`` turns), by a dynamic programme over interval
    sizes: O(n^2 log n) for ``n`` numbers (more turns than ``ceil(log2(n + 1))``
    never help, so the turns are capped there).

    Raises:
        ValueError: an empty range or ``max_turns < 1``.
    """
    numbers = max_number - min_number + 1
    if numbers < 1 or max_turns < 1:
        raise ValueError(
            f"need min_number <= max_number and max_turns >= 1, got "
            f"[{min_number}, {max_number}] and {max_turns}"
        )
    worst = numbers.bit_length()  # ceil(log2(numbers + 1))
    found, total = _bisection_search(numbers, min(max_turns, worst))
    return GuessTheNumberOptimum(
        numbers=numbers,
        success=found / numbers,
        expected_turns=total / numbers,
        worst_turns=worst,
    )


# --- Mastermind -----------------------------------------------------------------------


@dataclass(frozen=True)
class MastermindOptimum:
    """The best play of a Mastermind code space (uniform secret code).

    Attributes:
        codes: the number of possible secret codes.
        guesses: the number of guesses the game accepts (every in-range sequence).
        success: 1.0: the optimal tree found fits the turn limit (checked).
        expected_turns: the fewest expected guesses to find the code, the last (right)
            guess included.
        worst_turns: the deepest branch of the optimal guess tree found.
        first_guess: the optimal tree's first guess.
    """

    codes: int
    guesses: int
    success: float
    expected_turns: float
    worst_turns: int
    first_guess: tuple[int, ...]


def peg_score(code: Sequence[int], guess: Sequence[int]) -> tuple[int, int]:
    """``(black, white)`` of ``guess`` against ``code`` by the multiset rule (the
    kernel's :func:`gemjax.envs.mastermind.pegs`)."""
    black = sum(c == g for c, g in zip(code, guess, strict=True))
    common = sum(min(code.count(v), guess.count(v)) for v in set(guess))
    return black, common - black


def mastermind_spaces(
    code_length: int, num_numbers: int, duplicate_numbers: bool
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """``(codes, guesses)``: the secret codes the kernel draws (distinct entries unless
    ``duplicate_numbers``) and the guesses it accepts (any entries in
    ``1..num_numbers``), each a list of tuples in lexicographic order."""
    guesses = list(itertools.product(range(1, num_numbers + 1), repeat=code_length))
    codes = [g for g in guesses if duplicate_numbers or len(set(g)) == code_length]
    return codes, guesses


class _GuessTreeSearch:
    """Exact minimum of the summed guesses over a set of codes (a bit mask over
    ``codes``), memoised per set, with branch-and-bound: a guess is dropped as soon as
    its cost so far plus a lower bound on the rest reaches the best found."""

    def __init__(self, codes: list[tuple[int, ...]], guesses: list[tuple[int, ...]]) -> None:
        self.codes, self.guesses = codes, guesses
        self.classes: list[list[int]] = []  # per guess: the masks of its feedback classes
        self.wins: list[int] = []  # per guess: the mask of the code equal to it (or 0)
        for guess in guesses:
            by_feedback: dict[tuple[int, int], int] = {}
            for index, code in enumerate(codes):
                if code == guess:
                    continue
                feedback = peg_score(code, guess)
                by_feedback[feedback] = by_feedback.get(feedback, 0) | (1 << index)
            self.classes.append(list(by_feedback.values()))
            self.wins.append(sum(1 << i for i, code in enumerate(codes) if code == guess))
        self.memo: dict[int, tuple[int, int]] = {}  # set -> (cost, best guess index)

    @staticmethod
    def lower_bound(size: int) -> int:
        """Summed guesses of ``size`` codes can be no fewer than ``2 size - 1``: at
        most one code is found by a set's first guess, the rest need two or more."""
        return 2 * size - 1 if size else 0

    def cost(self, codes: int) -> int:
        """The fewest guesses summed over the codes of the set ``codes`` (non-empty)."""
        if codes in self.memo:
            return self.memo[codes][0]
        size = codes.bit_count()
        if size == 1:
            self.memo[codes] = (1, self.guesses.index(self.codes[codes.bit_length() - 1]))
            return 1
        best, best_guess = math.inf, -1
        for index, classes in enumerate(self.classes):
            parts = sorted((p for m in classes if (p := codes & m)), key=int.bit_count)
            if len(parts) == 1 and parts[0] == codes:
                continue  # no information: the same set one turn later
            remaining = sum(self.lower_bound(p.bit_count()) for p in parts)
            total = size
            for part in parts:
                if total + remaining >= best:
                    break
                remaining -= self.lower_bound(part.bit_count())
                total += self.cost(part)
            else:
                if total < best:
                    best, best_guess = total, index
        self.memo[codes] = (int(best), best_guess)
        return int(best)

    def depth(self, codes: int) -> int:
        """The deepest branch of the memoised optimal tree of ``codes`` (solved)."""
        if codes.bit_count() == 1:
            return 1
        guess = self.memo[codes][1]
        parts = [p for m in self.classes[guess] if (p := codes & m)]
        return 1 + max((self.depth(p) for p in parts), default=0)

    def solve(self) -> tuple[int, int, tuple[int, ...]]:
        """``(summed guesses, worst depth, first guess)`` over all the codes."""
        everything = (1 << len(self.codes)) - 1
        total = self.cost(everything)
        return total, self.depth(everything), self.guesses[self.memo[everything][1]]


def mastermind_optimum(
    code_length: int, num_numbers: int, duplicate_numbers: bool, max_turns: int
) -> MastermindOptimum:
    """Exact minimum expected number of guesses of Mastermind (uniform secret code;
    guesses may be any in-range sequence, as the kernel accepts), by a search over
    guess trees. The tree found fits ``max_turns`` or this raises, so success is 1.0.

    Raises:
        ValueError: more than :data:`MAX_SEARCH_CODES` codes (the search is
            exponential), or an optimal tree deeper than ``max_turns`` (the turn limit
            would bind, which this search does not model).
    """
    codes, guesses = mastermind_spaces(code_length, num_numbers, duplicate_numbers)
    if not 1 <= len(codes) <= MAX_SEARCH_CODES:
        raise ValueError(
            f"the exact search handles 1..{MAX_SEARCH_CODES} codes, got {len(codes)} "
            f"(length {code_length}, numbers 1..{num_numbers})"
        )
    total, depth, first = _GuessTreeSearch(codes, guesses).solve()
    if depth > max_turns:
        raise ValueError(f"the optimal tree needs {depth} turns, more than max_turns {max_turns}")
    return MastermindOptimum(
        codes=len(codes),
        guesses=len(guesses),
        success=1.0,
        expected_turns=total / len(codes),
        worst_turns=depth,
        first_guess=first,
    )


def _reset_batch(env_id: str, kind: type, count: int, seed: int) -> tuple[Any, ...]:
    """``(env, params, keys, state, timestep)``: ``count`` episodes of ``env_id`` reset
    by the kernel (vmapped and jitted) from ``split(jax.random.key(seed), count)``.

    Raises:
        ValueError: ``env_id`` is not a fixed-size game of class ``kind``, or
            ``count < 2``.
    """
    env = make(env_id)
    if not isinstance(env, kind) or env.randomize:
        raise ValueError(f"{env_id!r} is not a fixed-size {kind.__name__} id")
    if count < 2:
        raise ValueError(f"need at least 2 episodes, got {count}")
    params = env.default_params
    keys = jax.random.split(jax.random.key(seed), count)
    state, ts = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params)
    return env, params, keys, state, ts


# --- Minesweeper ----------------------------------------------------------------------


@functools.cache
def _placements(cells: int, mines: int) -> np.ndarray:
    """bool[C(cells, mines), cells]: every placement of ``mines`` mines on ``cells``."""
    table = np.zeros((math.comb(cells, mines), cells), np.bool_)
    for row, chosen in enumerate(itertools.combinations(range(cells), mines)):
        table[row, list(chosen)] = True
    return table


def _neighbourhoods(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``(adjacent, closed)``: bool[R*C, R*C], cells within one step of each other
    (king moves), without and with the cell itself."""
    rows, cols = np.divmod(np.arange(shape[0] * shape[1]), shape[1])
    closed = (np.abs(rows[:, None] - rows) <= 1) & (np.abs(cols[:, None] - cols) <= 1)
    return closed & ~np.eye(closed.shape[0], dtype=np.bool_), closed


def _consistent_placements(board: np.ndarray, num_mines: int) -> tuple[np.ndarray, np.ndarray]:
    """``(hidden, placements)``: int[H] the flat indices of the hidden cells (flagged
    included) and bool[P, H] every placement of ``num_mines`` mines on them that gives
    the revealed numbers."""
    board = np.asarray(board)
    adjacent, _ = _neighbourhoods(board.shape)
    flat = board.reshape(-1)
    hidden = np.flatnonzero((flat == HIDDEN) | (flat == FLAGGED))
    clues = np.flatnonzero(flat <= 8)
    if math.comb(hidden.size, num_mines) > MAX_CONFIGURATIONS:
        raise ValueError(
            f"{math.comb(hidden.size, num_mines)} placements of {num_mines} mines on "
            f"{hidden.size} hidden cells: more than {MAX_CONFIGURATIONS} to enumerate"
        )
    placements = _placements(hidden.size, num_mines)
    counts = placements.astype(np.int32) @ adjacent[np.ix_(hidden, clues)].astype(np.int32)
    consistent = placements[np.all(counts == flat[clues], axis=1)]
    if consistent.shape[0] == 0:
        raise ValueError("no placement of the mines gives this board's numbers")
    return hidden, consistent


def mine_probabilities(board: np.ndarray, num_mines: int) -> np.ndarray:
    """float64[R, C]: each cell's probability of holding a mine given what the board
    shows (int8[R, C] codes as the kernel's observation: 0..8 revealed, 9 hidden, 10
    flagged, 12 off the board), 0 for revealed and off-board cells.

    Exact after the first reveal: the mines are a uniform subset of the cells outside
    the first reveal's 3x3 block, which that reveal opens, so given the numbers every
    consistent placement on the hidden cells is equally likely. Flags carry no
    information (flagged cells count as hidden).

    Raises:
        ValueError: no placement gives the numbers, or too many to enumerate.
    """
    hidden, placements = _consistent_placements(board, num_mines)
    probabilities = np.zeros(np.asarray(board).size)
    probabilities[hidden] = placements.mean(axis=0)
    return probabilities.reshape(np.asarray(board).shape)


def _opening_probabilities(board: np.ndarray, num_mines: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mine, opening)``: float64[R*C] per cell the mine probability and the
    probability that it is safe with no mine around (revealing it opens a region);
    zeros off the hidden cells."""
    hidden, placements = _consistent_placements(board, num_mines)
    _, closed = _neighbourhoods(np.asarray(board).shape)
    around = placements.astype(np.int32) @ closed[np.ix_(hidden, hidden)].astype(np.int32)
    mine, opening = np.zeros((2, np.asarray(board).size))
    mine[hidden] = placements.mean(axis=0)
    opening[hidden] = (around == 0).mean(axis=0)
    return mine, opening


def choose_move(
    board: np.ndarray, num_mines: int, flag_mines: bool, first_cell: tuple[int, int]
) -> tuple[int, int, int]:
    """The best-probability player's move ``(command, row, col)`` on ``board``
    (int8[R, C] observation codes).

    Before any reveal it reveals ``first_cell`` (always safe under GEM's rules). Then
    it reveals the unflagged hidden cell of lowest mine probability, ties to the one
    most likely to open a region, then row-major order. With ``flag_mines`` it first
    flags every certain mine, and when only one safe cell can remain it flags the
    other hidden cells before revealing it, so that the board-clearing reveal finds
    every mine flagged (GEM's success). Its success is a lower bound on a flagging
    player's: a reveal that opens a region can clear the board before an uncertain
    mine is flagged.

    Raises:
        ValueError: an inconsistent board, or no unflagged hidden cell.
    """
    board = np.asarray(board)
    flat = board.reshape(-1)
    if not np.any(flat <= 8):
        return REVEAL, first_cell[0], first_cell[1]
    mine, opening = _opening_probabilities(board, num_mines)
    unflagged = np.flatnonzero(flat == HIDDEN)
    if unflagged.size == 0:
        raise ValueError("every hidden cell is flagged: no move to choose")
    order = np.lexsort((unflagged, -opening[unflagged], mine[unflagged]))
    best = unflagged[order[0]]
    command, cell = REVEAL, best
    if flag_mines:
        unflagged_mines = num_mines - int(np.sum(flat == FLAGGED))
        certain = unflagged[mine[unflagged] >= 1.0 - 1e-9]
        if unflagged.size == unflagged_mines + 1 and unflagged.size > 1:
            command, cell = FLAG, unflagged[unflagged != best][0]
        elif certain.size:
            command, cell = FLAG, certain[0]
    row, col = divmod(int(cell), board.shape[1])
    return command, row, col


@dataclass(frozen=True)
class MinesweeperPlay:
    """The best-probability player over boards drawn by the kernel's reset.

    Attributes:
        boards: boards played.
        cleared: rate of boards with every safe cell revealed.
        gem_success: rate of GEM successes (every mine flagged and every safe cell
            revealed); 0 unless the player flags.
        mean_return: mean episode return under GEM's rewards (the fraction of safe
            cells revealed; a mine pays ``fail``, 0).
        mean_turns: mean turns per episode (until cleared, a mine, or the limit).
    """

    boards: int
    cleared: Estimate
    gem_success: Estimate
    mean_return: Estimate
    mean_turns: float


def play_minesweeper(
    env_id: str = "game:Minesweeper-v0-easy",
    num_boards: int = 1000,
    seed: int = 0,
    flag_mines: bool = False,
    first_cell: tuple[int, int] | None = None,
) -> MinesweeperPlay:
    """Play ``num_boards`` boards of ``env_id`` (a fixed-size Minesweeper id) with
    :func:`choose_move`, the kernel stepping every board (vmapped, batch
    ``num_boards``) and the player deciding on the host. Boards come from
    ``jax.random.split(jax.random.key(seed), num_boards)``; ``first_cell`` defaults
    to the centre. A board ends at a mine, the turn limit, or when it is cleared
    (nothing is left to gain: a clearing reveal that finds a mine unflagged is not a
    success, and no reveal is left to make; GEM's success also ends it).

    Raises:
        ValueError: not a Minesweeper id, the ``-random`` variant, or ``num_boards < 2``.
    """
    env, params, keys, state, ts = _reset_batch(env_id, Minesweeper, num_boards, seed)
    rows, cols, num_mines, max_turns = env.config
    first_cell = first_cell or (rows // 2, cols // 2)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    done = np.zeros(num_boards, np.bool_)
    returns, turns = np.zeros(num_boards), np.zeros(num_boards, np.int32)
    cleared, success = np.zeros(num_boards, np.bool_), np.zeros(num_boards, np.bool_)
    for turn in range(max_turns):
        boards = np.asarray(ts.observation["board"])
        moves = np.array(
            [
                choose_move(boards[i], num_mines, flag_mines, first_cell)
                if not done[i]
                else (REVEAL, 0, 0)
                for i in range(num_boards)
            ],
            np.int32,
        )
        state, ts = step(keys, state, moves, params)
        live = ~done
        returns[live] += np.asarray(ts.reward)[live]
        turns[live] = turn + 1
        now_cleared = np.asarray(ts.observation["revealed"]).sum(axis=(1, 2)) == (
            rows * cols - num_mines
        )
        cleared |= live & now_cleared
        success |= live & np.asarray(ts.info["success"])
        ended = np.asarray(ts.terminated) | now_cleared
        done |= live & ended
        if done.all():
            break
    return MinesweeperPlay(
        boards=num_boards,
        cleared=rate_estimate(int(cleared.sum()), num_boards),
        gem_success=rate_estimate(int(success.sum()), num_boards),
        mean_return=mean_estimate(returns),
        mean_turns=float(turns.mean()),
    )


# --- Sudoku ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SudokuOptimum:
    """A player that knows the solution, over puzzles drawn by the kernel's reset.

    Attributes:
        puzzles: puzzles drawn.
        mean_turns: mean empty cells, the turns of that player (one fill a turn).
        max_empty: the most empty cells drawn.
        success: rate of puzzles with no more empty cells than ``max_turns``.
    """

    puzzles: int
    mean_turns: Estimate
    max_empty: int
    success: float


def sudoku_empty_cells(
    env_id: str = "game:Sudoku-v0-easy", num_puzzles: int = 10_000, seed: int = 0
) -> SudokuOptimum:
    """Draw ``num_puzzles`` puzzles of ``env_id`` (a fixed-size Sudoku id) with the
    kernel's reset (vmapped, from ``jax.random.split(jax.random.key(seed), n)``) and
    count their empty cells.

    Raises:
        ValueError: not a Sudoku id, the ``-random`` variant, or ``num_puzzles < 2``.
    """
    _, params, _, state, _ = _reset_batch(env_id, Sudoku, num_puzzles, seed)
    empty = np.asarray(state.num_empty)
    return SudokuOptimum(
        puzzles=num_puzzles,
        mean_turns=mean_estimate(empty.astype(np.float64)),
        max_empty=int(empty.max()),
        success=float(np.mean(empty <= int(params.max_turns))),
    )


# --- Random play over an action mask --------------------------------------------------


@dataclass(frozen=True)
class MaskedRandomPlay:
    """Uniform random play over a game's action mask, on episodes drawn by the
    kernel's reset.

    Attributes:
        episodes: episodes played.
        success: rate of GEM successes.
        mean_turns: mean turns per episode (until it ends or the turn limit).
        mean_return: mean episode return under GEM's rewards.
        outcomes: the rate of each of the game's :class:`~gemjax.core.EpisodeOutcomes`
            (Minesweeper's ``cleared``; empty for other games).
    """

    episodes: int
    success: Estimate
    mean_turns: Estimate
    mean_return: Estimate
    outcomes: dict[str, Estimate]


def masked_random_play(env_id: str, num_episodes: int = 10_000, seed: int = 0) -> MaskedRandomPlay:
    """Play ``num_episodes`` episodes of ``env_id`` (a fixed-size game with
    ``valid_action_mask``) for its ``max_turns``, each turn drawing uniformly among
    the moves the mask allows (batched, one jitted scan). Resets from
    ``jax.random.split`` of ``jax.random.key(seed)``'s first half; the moves from its
    second.

    Raises:
        ValueError: the game has no mask, its mask gives a ``MultiDiscrete`` space's
            components rather than their combinations, it draws its configuration
            per reset (``-random``), or ``num_episodes < 2``.
    """
    env = make(env_id)
    if not isinstance(env, ActionMasking):
        raise ValueError(f"{env_id!r} has no valid_action_mask")
    if getattr(env, "randomize", False):
        raise ValueError(f"{env_id!r} draws its configuration per reset: name a fixed id")
    if num_episodes < 2:
        raise ValueError(f"need at least 2 episodes, got {num_episodes}")
    params = env.default_params
    space = env.action_space(params)
    shape: tuple[int, ...]
    if isinstance(space, Discrete):
        shape, start = (space.n,), np.asarray(space.start)
    elif isinstance(space, MultiDiscrete):
        shape, start = tuple(space.nvec), np.asarray(space.start)
    else:
        raise ValueError(f"{env_id!r} has no discrete action space: {space!r}")
    reset_key, move_key = jax.random.split(jax.random.key(seed))
    state, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(reset_key, num_episodes), params
    )
    mask_shape = jax.eval_shape(env.valid_action_mask, jax.tree.map(lambda x: x[0], state)).shape
    if mask_shape != shape:
        raise ValueError(
            f"{env_id!r}'s mask is bool{list(mask_shape)}, not the combinations of its "
            f"action space, bool{list(shape)}"
        )
    outcomes = jax.vmap(env.outcomes) if isinstance(env, EpisodeOutcomes) else lambda s: {}
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def turn(carry: tuple[Any, ...], key: jax.Array) -> tuple[tuple[Any, ...], None]:
        state, running, won, turns, returns, achieved = carry
        allowed = jax.vmap(env.valid_action_mask)(state).reshape(num_episodes, -1)
        flat = jax.random.categorical(key, jnp.where(allowed, 0.0, -jnp.inf))
        actions = jnp.stack(jnp.unravel_index(flat, shape), axis=-1) + start
        actions = actions[:, 0] if isinstance(space, Discrete) else actions
        keys = jax.random.split(jax.random.fold_in(key, 1), num_episodes)
        state, ts = step(keys, state, actions.astype(jnp.int32), params)
        # A lane with no move left is over (nothing is legal to play).
        running = running & jnp.any(allowed, axis=-1)
        won = won | (running & ts.info["success"])
        turns = turns + running
        returns = returns + jnp.where(running, ts.reward, 0.0)
        achieved = {name: achieved[name] | (running & now) for name, now in outcomes(state).items()}
        running = running & ~(ts.terminated | ts.truncated)
        return (state, running, won, turns, returns, achieved), None

    @jax.jit
    def play(state: Any) -> tuple[Any, ...]:
        lanes = jnp.ones((num_episodes,), jnp.bool_)
        start_outcomes = {name: ~lanes for name in outcomes(state)}
        zeros = jnp.zeros((num_episodes,), jnp.float32)
        carry = (state, lanes, ~lanes, zeros.astype(jnp.int32), zeros, start_outcomes)
        keys = jax.random.split(move_key, int(params.max_turns))
        return jax.lax.scan(turn, carry, keys)[0]

    _, _, won, turns, returns, achieved = jax.device_get(play(state))
    return MaskedRandomPlay(
        episodes=num_episodes,
        success=rate_estimate(int(won.sum()), num_episodes),
        mean_turns=mean_estimate(turns.astype(np.float64)),
        mean_return=mean_estimate(returns.astype(np.float64)),
        outcomes={name: rate_estimate(int(v.sum()), num_episodes) for name, v in achieved.items()},
    )


__all__ = [
    "MAX_CONFIGURATIONS",
    "MAX_SEARCH_CODES",
    "Estimate",
    "GuessTheNumberOptimum",
    "MaskedRandomPlay",
    "MastermindOptimum",
    "MinesweeperPlay",
    "SudokuOptimum",
    "choose_move",
    "guess_the_number_optimum",
    "masked_random_play",
    "mastermind_optimum",
    "mastermind_spaces",
    "mean_estimate",
    "mine_probabilities",
    "peg_score",
    "play_minesweeper",
    "rate_estimate",
    "sudoku_empty_cells",
]
