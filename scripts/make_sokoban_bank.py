"""Generate the Sokoban level bank shipped in ``gemjax/envs/data/sokoban/``.

Each level is made exactly as gem-llm's ``SokobanEnv.reset(seed=s)`` makes it: the
same calls, in the same order, to ``random.Random(seed)`` and
``np.random.default_rng(seed)``, and the same accept/reject decisions, so a recorded
seed reproduces GEM's level bit for bit (the tests check this). The code is
gemjax's own (flat cell indices, integer bitmasks, a recursive search over integer
state keys) and is about 15 (6x6) to 30-45 (8x8) times faster than GEM's.

GEM's procedure (``generate_room``, up to 1000 tries on the same two generators):

1. **Topology** (``random``): a start direction (``sample`` of 4), a start cell
   ``(randint(1, d-1), randint(1, d-1))``, then ``num_steps`` steps: with probability
   0.35 (``random() < 0.35``) a new direction (``sample`` of 4); move, clamped to
   ``[1, d-2]``; carve one of 5 small masks (``sample`` of 5) around the cell. The
   border is then forced to walls.
2. **Placement** (``integers``): fewer than ``num_boxes + 2`` floor cells means "next
   try". Otherwise the player takes a uniform floor cell and each of the
   ``num_boxes`` targets a uniform remaining one (row-major order). GEM's "deadlock"
   test on a target cell is a no-op: every box placement succeeds on its first draw.
3. The boxes start on their targets. The try is dropped if some box cannot be
   pushed in any direction (GEM's "frozen deadlock" test, only with 2 or more boxes:
   the destination is free floor or target, the push-from cell is free or the
   player; GEM's breadth-first "player reachable" test adds nothing to that).
4. **Reverse play**: a depth-first search over reverse moves (up, down, left, right)
   from that state. A move goes to a free cell; a box directly behind the player is
   pulled after it. A state is the whole board, so a pulled box differs from an
   unmoved one even on the same cell. The search stops at depth 299 (GEM's
   ``ttl=300`` is decremented first) or when 300,000 states have been seen; each
   state is scored once, when first reached: ``pulls * sum of the boxes' Manhattan
   distances from their own targets``, counted only when no target is covered (by a
   box or by the player). (GEM's ``box_swaps`` was meant to count changes of the
   pulled box, but the recursion passes the parent's ``last_pull`` on, so it counts
   every pull on the path.) The first state with the highest score wins.
5. The try is accepted when that score is positive and the final state passes
   GEM's initial-deadlock test: no box on a "corner" (its odd rule, below) and no
   frozen box. Otherwise the next try.

GEM's corner rule (``is_deadlock_position``) counts the walls around a non-target cell
in the order up, down, left, right: three or more walls, or exactly two whose
indices differ by 1 or 3 (up+down, up+right, down+left, left+right), make a corner.
So corridors count and the up+left and down+right corners do not.

``SokobanEnv.reset(seed=s)`` calls ``generate_room(seed=s + a)`` for ``a = 0..49``
with ``num_steps = int(1.7 * (rows + cols))`` until one succeeds (GEM's 1000 failed
tries raise RuntimeWarning).

Usage::

    python scripts/make_sokoban_bank.py --seed 20251203 --count 5000 --seconds 720 \
        --out gemjax/envs/data/sokoban/bank.npz

Every configuration (``--configs``, default all of :data:`CONFIGS`) takes the
levels ``reset_level(dim, boxes, seed + i)`` for ``i = 0, 1, ...`` until ``--count``
levels or ``--seconds`` seconds. The file (``np.savez_compressed``) holds, per
configuration tag, ``{tag}_state`` uint8[N, d, d] (GEM's initial ``room_state``: 0
wall, 1 floor, 2 target, 4 box, 5 player) and ``{tag}_seed`` int64[N] (the
``reset(seed=...)`` seed that reproduces it). GEM's ``room_fixed`` is the state with
boxes and player replaced by floor: every box and the player start off target.
"""

from __future__ import annotations

import argparse
import functools
import random
import time
from pathlib import Path

import numpy as np

CONFIGS = {"6x6b2": (6, 2), "8x8b4": (8, 4), "8x8b5": (8, 5)}

WALL, FLOOR, TARGET, BOX, PLAYER = 0, 1, 2, 4, 5
P_CHANGE_DIRECTION = 0.35
TRIES = 1000  # generate_room's tries per seed
ATTEMPTS = 50  # reset's seeds per level
TTL = 300  # reverse search depth (decremented before use)
STATE_LIMIT = 300_000  # reverse search states

# GEM's walk directions and carving masks, in GEM's order (only their positions in
# these sequences meet the random generator); a mask is a set of (row, col) offsets.
DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
MASKS = (
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, -1), (1, 0)),
    ((0, 0), (0, 1), (1, 0)),
)


def num_gen_steps(dim: int) -> int:
    """GEM's ``int(1.7 * (rows + cols))``: 20 for 6x6, 27 for 8x8."""
    return int(1.7 * (dim + dim))


def topology(rng: random.Random, dim: int, num_steps: int) -> bytearray:
    """The random-walk floor plan (1 floor, 0 wall) as flat row-major flags.

    GEM draws with ``rng.sample(seq, 1)[0]``; ``rng.choice(seq)`` makes the same single
    ``_randbelow(len(seq))`` draw, faster."""
    direction = rng.choice(DIRECTIONS)
    row, col = rng.randint(1, dim - 1), rng.randint(1, dim - 1)
    floor = bytearray(dim * dim)
    high = dim - 2
    for _ in range(num_steps):
        if rng.random() < P_CHANGE_DIRECTION:
            direction = rng.choice(DIRECTIONS)
        row, col = row + direction[0], col + direction[1]
        row = 1 if row < 1 else high if row > high else row  # clamp to [1, dim - 2]
        col = 1 if col < 1 else high if col > high else col
        for dr, dc in rng.choice(MASKS):
            floor[(row + dr) * dim + col + dc] = 1
    for i in range(dim):
        floor[i] = floor[(dim - 1) * dim + i] = floor[i * dim] = floor[i * dim + dim - 1] = 0
    return floor


def place(nrng: np.random.Generator, floor: bytearray, num_boxes: int) -> tuple[int, int] | None:
    """Player cell and target bitmask drawn as GEM draws them, or None when there are
    too few floor cells (GEM's RuntimeError: no draw is made)."""
    free = [i for i, f in enumerate(floor) if f]
    if len(free) <= num_boxes + 1:
        return None
    player = free.pop(int(nrng.integers(len(free))))
    targets = 0
    for _ in range(num_boxes):
        targets |= 1 << free.pop(int(nrng.integers(len(free))))
    return player, targets


def corner_cells(dim: int, open_cells: int) -> int:
    """Bitmask of the open cells GEM's ``is_deadlock_position`` calls corners (for a
    non-target cell): 3+ walls, or 2 walls whose up/down/left/right indices differ by
    1 or 3."""
    corners = 0
    for c in range(dim * dim):
        if not open_cells >> c & 1:
            continue
        walls = [k for k, d in enumerate((-dim, dim, -1, 1)) if not open_cells >> (c + d) & 1]
        if len(walls) > 2 or (len(walls) == 2 and walls[1] - walls[0] in (1, 3)):
            corners |= 1 << c
    return corners


def cells_of(mask: int) -> list[int]:
    """The set bits of ``mask``, ascending (row-major order)."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def is_frozen(dim: int, open_cells: int, boxes: int, player: int) -> bool:
    """GEM's ``detect_frozen_deadlocks``: with 2+ boxes, some box has no direction with
    a free destination (floor/target) and a push-from cell that is free or the
    player (all cells involved are inside the board: boxes are never on the border)."""
    if boxes.bit_count() < 2:
        return False
    blocked = ~open_cells | boxes
    occupied = blocked | 1 << player
    for b in cells_of(boxes):
        if all(occupied >> (b + d) & 1 or blocked >> (b - d) & 1 for d in (-dim, dim, -1, 1)):
            return True
    return False


@functools.cache
def board_tables(dim: int) -> tuple[list[list[int]], list[int]]:
    """Per board size: Manhattan distances between cells and the cells' bits."""
    n_cells = dim * dim
    rows, cols = [c // dim for c in range(n_cells)], [c % dim for c in range(n_cells)]
    dist = [
        [abs(rows[a] - rows[b]) + abs(cols[a] - cols[b]) for b in range(n_cells)]
        for a in range(n_cells)
    ]
    return dist, [1 << c for c in range(n_cells)]


def reverse_play(dim: int, open_cells: int, targets: int, player: int) -> tuple[int, int, int]:
    """GEM's reverse-play search from the solved state (boxes on ``targets``, player
    at ``player``): ``(best score, best player cell, best box bitmask)``.

    Keys are ints ``(pulled boxes, all boxes, player)``: unmoved boxes sit on their
    own targets, so this is GEM's whole-board state. ``origin[c]`` is the target of
    the box on cell ``c`` (set on each pull and undone on return); ``disp`` is the
    summed Manhattan distance, updated per pull.
    """
    n_cells = dim * dim
    shift = n_cells.bit_length()
    dist, bit = board_tables(dim)
    moves = [
        tuple((c + d, c - d) for d in (-dim, dim, -1, 1) if open_cells >> (c + d) & 1)
        if open_cells >> c & 1
        else ()
        for c in range(n_cells)
    ]
    origin = [-1] * n_cells
    for t in cells_of(targets):
        origin[t] = t
    explored: set[int] = set()
    add = explored.add
    best = [0, player, targets]  # GEM's root scores 0 (boxes on targets); only > 0 counts

    def visit(p: int, boxes: int, moved: int, swaps: int, disp: int, ttl: int) -> None:
        # called on a state first reached, ttl already decremented and positive
        if not targets & (boxes | bit[p]):
            score = swaps * disp
            if score > best[0]:
                best[0], best[1], best[2] = score, p, boxes
        if ttl <= 1:  # every child would return at once
            return
        ttl -= 1
        base = (moved << n_cells | boxes) << shift
        for n, b in moves[p]:
            if boxes & bit[n]:
                continue
            if boxes & bit[b]:  # pull the box on b to p
                n_boxes = boxes ^ bit[b] ^ bit[p]
                n_moved = moved & ~bit[b] | bit[p]
                key = (n_moved << n_cells | n_boxes) << shift | n
                if key in explored or len(explored) >= STATE_LIMIT:
                    continue
                add(key)
                o = origin[b]
                saved, origin[p] = origin[p], o
                visit(n, n_boxes, n_moved, swaps + 1, disp + dist[p][o] - dist[b][o], ttl)
                origin[p] = saved
            else:
                key = base | n
                if key in explored or len(explored) >= STATE_LIMIT:
                    continue
                add(key)
                visit(n, boxes, moved, swaps, disp, ttl)

    add(targets << shift | player)
    visit(player, targets, 0, 0, 0, TTL - 1)
    return best[0], best[1], best[2]


def generate_room(
    dim: int, num_steps: int, num_boxes: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """GEM's ``generate_room(dim=(dim, dim), num_steps, num_boxes, seed=seed)``:
    ``(room_fixed, room_state)`` as uint8[dim, dim]. Raises RuntimeWarning after 1000
    failed tries, as GEM does."""
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    for _ in range(TRIES):
        floor = topology(rng, dim, num_steps)
        placed = place(nrng, floor, num_boxes)
        if placed is None:
            continue
        player, targets = placed
        open_cells = sum(1 << c for c, f in enumerate(floor) if f)
        if is_frozen(dim, open_cells, targets, player):
            continue
        score, p, boxes = reverse_play(dim, open_cells, targets, player)
        if score <= 0:
            continue
        if boxes & corner_cells(dim, open_cells) or is_frozen(dim, open_cells, boxes, p):
            continue  # (accepted boxes are off target, so GEM's corner test applies)
        fixed = np.frombuffer(bytes(floor), np.uint8).copy()
        fixed[cells_of(targets)] = TARGET
        state = fixed.copy()
        state[cells_of(boxes)] = BOX
        state[p] = PLAYER
        return fixed.reshape(dim, dim), state.reshape(dim, dim)
    raise RuntimeWarning(f"Could not generate a room without deadlocks after {TRIES} tries")


def reset_level(dim: int, num_boxes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """GEM's ``SokobanEnv(dim_room=(dim, dim), num_boxes=num_boxes).reset(seed=seed)``
    level: ``(room_fixed, room_state)``. Raises RuntimeError after 50 seeds."""
    for attempt in range(ATTEMPTS):
        try:
            return generate_room(dim, num_gen_steps(dim), num_boxes, seed + attempt)
        except RuntimeWarning:
            continue
    raise RuntimeError(f"Failed to generate valid room after {ATTEMPTS} attempts")


def make_config(
    tag: str, base: int, count: int | None, seconds: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Levels ``reset_level(dim, boxes, base + i)``, ``i = 0, 1, ...``, of configuration
    ``tag`` until ``count`` levels or ``seconds`` seconds: ``(states, seeds)``."""
    dim, boxes = CONFIGS[tag]
    states, seeds = [], []
    start = last = time.perf_counter()
    while (count is None or len(states) < count) and (
        seconds is None or time.perf_counter() - start < seconds
    ):
        seed = base + len(states)
        fixed, state = reset_level(dim, boxes, seed)
        derived = np.where(state >= BOX, FLOOR, state)
        assert np.array_equal(derived, fixed), (tag, seed)  # box and player off target
        states.append(state)
        seeds.append(seed)
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            rate = len(states) / (last - start)
            print(f"{tag}: {len(states)} levels ({rate:.2f}/s)", flush=True)
    elapsed = time.perf_counter() - start
    print(f"{tag}: {len(states)} levels in {elapsed:.1f} s", flush=True)
    return np.asarray(states, np.uint8).reshape(-1, dim, dim), np.asarray(seeds, np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=20251203, help="base seed")
    parser.add_argument("--count", type=int, default=None, help="levels per configuration (cap)")
    parser.add_argument(
        "--seconds", type=float, default=None, help="seconds per configuration (cap)"
    )
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--out", type=Path, default=Path("gemjax/envs/data/sokoban/bank.npz"))
    args = parser.parse_args()
    if args.count is None and args.seconds is None:
        parser.error("give --count and/or --seconds")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for tag in args.configs:
        arrays[f"{tag}_state"], arrays[f"{tag}_seed"] = make_config(
            tag, args.seed, args.count, args.seconds
        )
        np.savez_compressed(args.out, **arrays)  # after each configuration
    sizes = ", ".join(f"{tag} {len(arrays[f'{tag}_seed'])}" for tag in args.configs)
    print(f"wrote {args.out}: {sizes}")


if __name__ == "__main__":
    main()
