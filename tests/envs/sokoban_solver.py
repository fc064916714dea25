"""An independent Sokoban solver for the tests, written apart from the kernel and
from the bank's generator: breadth-first search over pushes (a node is the box cells
and the region the player can walk to), so a solution has the fewest pushes; the
walks between pushes are shortest paths."""

from __future__ import annotations

from collections import deque

import numpy as np

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
Cell = tuple[int, int]


def level_of(fixed: np.ndarray, state: np.ndarray) -> tuple:
    """``(open cells, targets, player, boxes)`` of GEM's ``room_fixed`` and
    ``room_state`` (codes 0 wall, 1 floor, 2 target; 3/4 boxes, 5 player)."""
    rows, cols = fixed.shape
    cells = [(r, c) for r in range(rows) for c in range(cols)]
    open_cells = frozenset(p for p in cells if fixed[p] != 0)
    targets = frozenset(p for p in cells if fixed[p] == 2)
    (player,) = [p for p in cells if state[p] == 5]
    boxes = frozenset(p for p in cells if state[p] in (3, 4))
    return open_cells, targets, player, boxes


def walks(open_cells: frozenset, boxes: frozenset, start: Cell) -> dict[Cell, list[str]]:
    """Every cell the player reaches from ``start`` without pushing, with a shortest
    walk there."""
    paths: dict[Cell, list[str]] = {start: []}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for name, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt in open_cells and nxt not in boxes and nxt not in paths:
                paths[nxt] = [*paths[cell], name]
                queue.append(nxt)
    return paths


def solve(fixed: np.ndarray, state: np.ndarray, budget: int = 100_000) -> list[str] | None:
    """A list of moves with the fewest pushes that puts every box on a target (``[]``
    when they all are), or None when none exists or the search passes ``budget``
    nodes."""
    open_cells, targets, player, boxes = level_of(fixed, state)

    def key(boxes: frozenset, player: Cell) -> tuple:
        return boxes, min(walks(open_cells, boxes, player))

    start = (boxes, player)
    parent: dict = {key(*start): None}
    queue = deque([(start, [])])
    while queue:
        (placed, position), moves = queue.popleft()
        if placed <= targets:
            return moves
        reach = walks(open_cells, placed, position)
        for box in placed:
            for name, (dr, dc) in MOVES.items():
                behind, beyond = (box[0] - dr, box[1] - dc), (box[0] + dr, box[1] + dc)
                if behind not in reach or beyond not in open_cells or beyond in placed:
                    continue
                pushed = (placed - {box}) | {beyond}
                node = key(pushed, box)
                if node in parent:
                    continue
                parent[node] = True
                if len(parent) > budget:
                    return None
                queue.append(((pushed, box), [*moves, *reach[behind], name]))
    return None
