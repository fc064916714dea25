"""Generate the 9x9 Sudoku bank shipped in ``gemjax/envs/data/sudoku/``.

Each entry is made exactly as gem-llm's ``SudokuEnv`` makes a puzzle, with the same
calls to a ``random.Random`` (so with ``random.Random(seed)`` it reproduces GEM's
``reset(seed=seed)`` puzzle bit for bit; the tests check this):

1. a full grid by randomised backtracking: the first empty cell in row-major order
   takes the numbers ``1..9`` in ``rng.shuffle`` order, the first that is safe (row,
   column, box) and extends to a full grid;
2. the cells in ``rng.shuffle`` order; GEM pops them from the end, blanks each and
   keeps it blank only if the puzzle still has exactly one solution.

GEM stops after ``clues`` attempts (50 for ``-hard``). The bank records all 81
attempts: per cell its attempt index and whether its removal stuck, so a puzzle for
any ``clues`` is the cells with ``attempt < clues`` that stuck (later attempts never
change earlier ones). Uniqueness is decided by an exact solver (bitmasks, fewest
candidates first) that counts solutions up to 2, as GEM's does.

Usage::

    python scripts/make_sudoku_bank.py --seconds 480 --seed 20250801 \
        --out gemjax/envs/data/sudoku/bank9.npz

The file holds ``solution`` uint8[N, 81] (digits, row-major), ``attempt`` uint8[N, 81]
(each cell's attempt index) and ``removed`` bool[N, 81] (packed with ``np.packbits``
as uint8[N, 11]), plus ``seed`` and ``count``.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

SIDE, BOX = 9, 3
CELLS = SIDE * SIDE
FULL = (1 << SIDE) - 1
ROW = [i // SIDE for i in range(CELLS)]
COL = [i % SIDE for i in range(CELLS)]
BLK = [BOX * (ROW[i] // BOX) + COL[i] // BOX for i in range(CELLS)]


def full_grid(rng: random.Random) -> list[int]:
    """GEM's ``_fill_grid``: row-major randomised backtracking (same RNG calls)."""
    grid = [0] * CELLS
    rows, cols, blks = [0] * SIDE, [0] * SIDE, [0] * SIDE

    def fill(i: int) -> bool:
        if i == CELLS:
            return True
        numbers = list(range(1, SIDE + 1))
        rng.shuffle(numbers)
        r, c, b = ROW[i], COL[i], BLK[i]
        for n in numbers:
            bit = 1 << (n - 1)
            if (rows[r] | cols[c] | blks[b]) & bit:
                continue
            grid[i] = n
            rows[r] |= bit
            cols[c] |= bit
            blks[b] |= bit
            if fill(i + 1):
                return True
            grid[i] = 0
            rows[r] &= ~bit
            cols[c] &= ~bit
            blks[b] &= ~bit
        return False

    fill(0)
    return grid


def count_solutions(puzzle: list[int], limit: int = 2) -> int:
    """Solutions of ``puzzle`` (0 = empty), counted up to ``limit``."""
    rows, cols, blks = [0] * SIDE, [0] * SIDE, [0] * SIDE
    empty = []
    for i, v in enumerate(puzzle):
        if v:
            bit = 1 << (v - 1)
            rows[ROW[i]] |= bit
            cols[COL[i]] |= bit
            blks[BLK[i]] |= bit
        else:
            empty.append(i)

    def search(empty: list[int]) -> int:
        if not empty:
            return 1
        best, best_free, best_count = -1, 0, 10
        for k, i in enumerate(empty):
            free = FULL & ~(rows[ROW[i]] | cols[COL[i]] | blks[BLK[i]])
            count = free.bit_count()
            if count < best_count:
                best, best_free, best_count = k, free, count
                if count <= 1:
                    break
        if best_count == 0:
            return 0
        i = empty[best]
        rest = empty[:best] + empty[best + 1 :]
        r, c, b = ROW[i], COL[i], BLK[i]
        found = 0
        free = best_free
        while free:
            bit = free & -free
            free ^= bit
            rows[r] |= bit
            cols[c] |= bit
            blks[b] |= bit
            found += search(rest)
            rows[r] ^= bit
            cols[c] ^= bit
            blks[b] ^= bit
            if found >= limit:
                break
        return found

    return search(empty)


def generate(rng: random.Random, attempts: int = CELLS) -> tuple[list[int], list[int], list[bool]]:
    """One GEM puzzle process: ``(solution, attempt index per cell, removed per cell)``
    over the first ``attempts`` removal attempts (cells never attempted get index
    ``attempts`` and removed False)."""
    solution = full_grid(rng)
    order = list(range(CELLS))
    rng.shuffle(order)  # GEM shuffles its list of (row, col) cells: same permutation
    puzzle = solution.copy()
    attempt, removed = [attempts] * CELLS, [False] * CELLS
    for t in range(attempts):
        i = order.pop()
        attempt[i] = t
        puzzle[i] = 0
        if count_solutions(puzzle) == 1:
            removed[i] = True
        else:
            puzzle[i] = solution[i]
    return solution, attempt, removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=480.0)
    parser.add_argument("--seed", type=int, default=20250801)
    parser.add_argument("--max-count", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path("gemjax/envs/data/sudoku/bank9.npz"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    solutions, attempts, removed = [], [], []
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds and len(solutions) < args.max_count:
        s, a, r = generate(rng)
        solutions.append(s)
        attempts.append(a)
        removed.append(r)
        if len(solutions) % 200 == 0:
            rate = len(solutions) / (time.perf_counter() - start)
            print(f"{len(solutions)} puzzles ({rate:.1f}/s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        solution=np.asarray(solutions, np.uint8),
        attempt=np.asarray(attempts, np.uint8),
        removed=np.packbits(np.asarray(removed, np.bool_), axis=1),
        seed=np.int64(args.seed),
        count=np.int64(len(solutions)),
    )
    elapsed = time.perf_counter() - start
    print(f"wrote {len(solutions)} puzzles to {args.out} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
