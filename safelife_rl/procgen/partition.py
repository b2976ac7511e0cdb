"""Splitting the board into separate regions, and fencing a region in.

Regions grow by a Dirichlet-like process: each step either starts a new region (weight
``alpha``, only while fewer than ``max_regions`` exist) or grows an existing one (weight: the
size of its perimeter) by a random perimeter cell. A cell joins only if that keeps it clear of
every other region, so regions end up separated by a buffer (label 0) about two cells wide.
"""

from __future__ import annotations

import numba
import numpy as np

_TINY = 1e-10  # weight of the moves that are allowed but should almost never happen


@numba.njit(cache=True)
def _wrap(i, size):
    return i % size


@numba.njit(cache=True)
def _accepts(board, h, w, r0, c0, label):
    """Whether cell (r0, c0) may join region ``label`` (0: start a new region).

    Rejected if it touches another region, or if a cell around it would both touch another
    region and have more than two occupied neighbours.
    """
    window = np.zeros((5, 5), np.int64)
    for dr in range(5):
        for dc in range(5):
            window[dr, dc] = board[_wrap(r0 + dr - 2, h), _wrap(c0 + dc - 2, w)]
    window[2, 2] = label if label > 0 else -1
    for ar in range(1, 4):
        for ac in range(1, 4):
            occupied = 0
            foreign = 0
            for dr in range(-1, 2):
                for dc in range(-1, 2):
                    if dr == 0 and dc == 0:
                        continue
                    v = window[ar + dr, ac + dc]
                    occupied += v != 0
                    foreign += v > 0 and v != label
            if foreign > 0 and (occupied > 2 or (ar == 2 and ac == 2)):
                return False
    return True


@numba.njit(cache=True)
def _partition(h, w, alpha, min_regions, max_regions, rng):
    n = h * w
    slots = max_regions + 1  # perimeter 0: cells where a new region may start
    members = np.empty((slots, n), np.int64)
    where = np.empty((slots, n), np.int64)
    size = np.zeros(slots, np.int64)
    tried = np.zeros((slots, n), np.bool_)
    for k in range(slots):
        members[k] = np.arange(n)
        where[k] = np.arange(n)
    size[0] = n
    board = np.zeros((h, w), np.int64)
    regions = 0
    weights = np.zeros(slots)
    while True:
        weights[0] = min(alpha, size[0]) if regions < max_regions and size[0] > 0 else 0.0
        for k in range(1, regions + 1):
            weights[k] = size[k] if regions >= min_regions else (_TINY if size[k] else 0.0)
        total = weights[: regions + 1].sum()
        if total <= 0:
            return board
        pick = rng.random() * total
        k = 0
        while k < regions and pick >= weights[k]:
            pick -= weights[k]
            k += 1
        cell = members[k, rng.integers(0, size[k])]
        for s in (0, k):  # the cell leaves perimeter 0 and perimeter k
            pos = where[s, cell]
            if pos < size[s]:
                size[s] -= 1
                last = members[s, size[s]]
                members[s, size[s]] = cell
                where[s, cell] = size[s]
                members[s, pos] = last
                where[s, last] = pos
        if tried[k, cell]:
            continue
        tried[0, cell] = True
        tried[k, cell] = True
        r, c = cell // w, cell % w
        if not _accepts(board, h, w, r, c, k):
            continue
        if k == 0:
            regions += 1
            k = regions
        board[r, c] = k
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            r2, c2 = _wrap(r + dr, h), _wrap(c + dc, w)
            if board[r2, c2] == 0:
                j = r2 * w + c2
                pos = where[k, j]
                if pos >= size[k]:
                    other = members[k, size[k]]
                    members[k, size[k]] = j
                    where[k, j] = size[k]
                    members[k, pos] = other
                    where[k, other] = pos
                    size[k] += 1


def partition_board(
    shape: tuple[int, int],
    rng: np.random.Generator,
    min_regions: int = 2,
    max_regions: int = 5,
    alpha: float = 1.0,
) -> np.ndarray:
    """Region labels 1, 2, ... of every cell of a wrapped board, 0 for the buffer between."""
    if not 1 <= min_regions <= max_regions:
        raise ValueError(f"need 1 <= min_regions <= max_regions, got {min_regions}, {max_regions}")
    h, w = shape
    return _partition(int(h), int(w), float(alpha), int(min_regions), int(max_regions), rng)


def dilate(mask: np.ndarray, radius: int = 1) -> np.ndarray:
    """Cells within ``radius`` (in both axes) of a true cell, on the wrapped board."""
    out = mask.astype(bool)
    for axis in (0, 1):
        grown = out.copy()
        for shift in range(1, radius + 1):
            grown |= np.roll(out, shift, axis) | np.roll(out, -shift, axis)
        out = grown
    return out


def erode(mask: np.ndarray, radius: int = 1) -> np.ndarray:
    """Cells whose whole neighbourhood of ``radius`` is true."""
    return ~dilate(~mask.astype(bool), radius)


def _block_sum(values: np.ndarray) -> np.ndarray:
    """Sum over each cell's wrapped 3x3 block."""
    rows = values + np.roll(values, 1, 0) + np.roll(values, -1, 0)
    return rows + np.roll(rows, 1, 1) + np.roll(rows, -1, 1)


def build_fence(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Walls on the edge of ``mask`` such that no cell outside has three inside neighbours.

    No life inside can then cause a birth outside. Edge cells are tried in random order and
    fenced while some outside neighbour still has three or more; then fences whose removal
    leaves every outside neighbour below two are taken away again.
    """
    inside = mask.astype(bool)
    h, w = inside.shape
    counts = _block_sum(inside.astype(np.int64))
    edge_r, edge_c = np.nonzero(inside & (counts < 9))
    counts[inside] = 0  # from now on: inside neighbours of each outside cell
    fence = np.zeros((h, w), bool)
    offsets = np.array([-1, 0, 1])

    def block(r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        return ((r + offsets) % h)[:, None], ((c + offsets) % w)[None, :]

    for k in rng.permutation(len(edge_r)):
        rows, cols = block(edge_r[k], edge_c[k])
        if (counts[rows, cols] >= 3).any():
            counts[rows, cols] -= 1
            fence[edge_r[k], edge_c[k]] = True
    fence_r, fence_c = np.nonzero(fence)
    for k in rng.permutation(len(fence_r)):
        rows, cols = block(fence_r[k], fence_c[k])
        if (counts[rows, cols] < 2).all():
            counts[rows, cols] += 1
            fence[fence_r[k], fence_c[k]] = False
    return fence
