"""Still lifes and oscillators grown cell by cell (SafeLife paper, Appendix A).

The board is held over one oscillation period as ``depth`` layers: layer 0 is the board and
layer ``t`` its state after ``t`` steps. A cell *violates* the pattern when advancing the last
layer does not give back layer 0 there, or when it oscillates where oscillation is not allowed.
Each iteration picks a violating cell (or, once there are none, a seed or any cell until the
pattern is dense enough), tries every other cell type (empty, wall, life, tree) on every cell
that can influence it within ``depth`` steps, and samples one change with probability
``exp(-(change in violations - osc_bonus * change in oscillating cells + penalty) / T)``. The
temperature ``T`` sets how greedy the choice is; the empty-cell penalty keeps the pattern from
staying emptier than ``min_fill``; the penalties of the other types grow linearly with their
share of the pattern. Generation stops when nothing violates and the fill is reached, or fails
after ``max_iter`` iterations per cell and layer.

The kernel follows the plain Game of Life rules of :mod:`safelife_rl.physics` (a cell counts
itself: a live cell survives with 3 or 4 live cells in its block, a dead one is born with 3);
frozen cells never change. That is exact for the cells it makes; other special cells should not
touch a generated pattern (the region painter keeps them apart).

Generation masks (``mask`` argument), one bit each:

* ``NEW_CELL`` (1): the generator may change the cell;
* ``CAN_OSCILLATE`` (2): the cell may change within the period;
* ``INCLUDE_VIOLATIONS`` (4): the cell must come back after the period.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .. import cells

NEW_CELL = 1
CAN_OSCILLATE = 2
INCLUDE_VIOLATIONS = 4

_ALIVE = cells.ALIVE
_FROZEN = cells.FROZEN
#: Cell types the generator places, by type index (empty, wall, life, tree).
CELL_TYPES = np.array(
    [0, cells.FROZEN, cells.ALIVE | cells.DESTRUCTIBLE, cells.FROZEN | cells.ALIVE], np.uint16
)
_OSCILLATING = 3  # a cell was both dead (bit 1) and alive (bit 2) within the period


@numba.njit(cache=True, inline="always")
def _type_index(cell):
    return ((cell & _ALIVE) << 1) | ((cell & _FROZEN) >> 4)


@numba.njit(cache=True, inline="always")
def _next_cell(cell, count):
    """Plain Game-of-Life successor of ``cell`` with ``count`` live cells in its block."""
    if cell & _FROZEN:
        return cell
    if cell & _ALIVE:
        return cell if count == 3 or count == 4 else 0
    return _ALIVE if count == 3 else cell


@numba.njit(cache=True, inline="always")
def _violates(before, after, count):
    """Whether advancing ``before`` (``count`` live in its block) fails to give ``after``."""
    if before & _FROZEN:
        return before != after
    alive_next = (count == 3 or count == 4) if before & _ALIVE else count == 3
    return alive_next != ((after & _ALIVE) != 0)


# Index sets with O(1) add, discard and uniform sampling: ``members[:size]`` holds the set and
# ``where[v]`` the position of ``v`` in ``members``.
@numba.njit(cache=True)
def _set_new(n):
    return np.arange(n), np.arange(n), np.zeros(1, np.int64)


@numba.njit(cache=True)
def _set_add(members, where, size, v):
    k = where[v]
    if k >= size[0]:
        other = members[size[0]]
        members[size[0]] = v
        where[v] = size[0]
        members[k] = other
        where[other] = k
        size[0] += 1


@numba.njit(cache=True)
def _set_discard(members, where, size, v):
    k = where[v]
    if k < size[0]:
        size[0] -= 1
        other = members[size[0]]
        members[size[0]] = v
        where[v] = size[0]
        members[k] = other
        where[other] = k


# The kernels below share, as flat arrays over the N cells: layers (D, N) uint16, counts (D, N)
# live cells in each 3x3 block, osc (N) alive bits seen over the period (1 dead, 2 alive),
# viol (N) violations per cell, mask (N) generation bits.
@numba.njit(cache=True)
def _set_layer_cell(layers, counts, d, i, h, w, new):
    """Set one cell of layer ``d``; 0: unchanged, 1: changed, 2: its alive bit changed."""
    old = layers[d, i]
    if old == new:
        return 0
    layers[d, i] = new
    delta = np.int32(new & _ALIVE) - np.int32(old & _ALIVE)
    if delta == 0:
        return 1
    r, c = i // w, i % w
    for dr in range(-1, 2):
        for dc in range(-1, 2):
            counts[d, ((r + dr) % h) * w + (c + dc) % w] += delta
    return 2


@numba.njit(cache=True)
def _cell_status(layers, counts, mask, i):
    """(oscillation bits, violations) of cell ``i``."""
    depth = layers.shape[0]
    first = layers[0, i]
    osc = 0
    viol = 0
    if not first & _FROZEN:
        seen_alive = False
        seen_dead = False
        for d in range(depth):
            if layers[d, i] & _ALIVE:
                seen_alive = True
            else:
                seen_dead = True
        osc = (2 if seen_alive else 0) | (1 if seen_dead else 0)
        if _violates(layers[depth - 1, i], first, counts[depth - 1, i]):
            viol = 1
    if osc == _OSCILLATING and not mask[i] & CAN_OSCILLATE:
        viol += 1
    return osc, viol


@numba.njit(cache=True)
def _change(layers, counts, osc, viol, mask, h, w, i, new, bad, bad_where, bad_size, track):
    """Set cell ``i`` of the board to ``new`` and update all layers and per-cell statistics.

    Only the cells a change can reach are revisited: the changed cell alone while no alive bit
    flips, one cell further for each layer in which one does.

    :returns: the change in total violations and in the number of oscillating cells.
    """
    changed = _set_layer_cell(layers, counts, 0, i, h, w, new)
    if changed == 0:
        return 0, 0
    r0, c0 = i // w, i % w
    reach = 1 if changed == 2 else 0  # radius of the cells whose inputs changed
    status_reach = reach
    for d in range(1, layers.shape[0]):
        most = 0  # the largest change in this layer (see _set_layer_cell)
        for r in range(r0 - reach, r0 + reach + 1):
            for c in range(c0 - reach, c0 + reach + 1):
                j = (r % h) * w + c % w
                most = max(most, _set_layer_cell(
                    layers, counts, d, j, h, w, _next_cell(layers[d - 1, j], counts[d - 1, j])
                ))
        if most == 0:
            break
        if most == 2:
            reach += 1
        status_reach = reach
    d_viol, d_osc = 0, 0
    for r in range(r0 - status_reach, r0 + status_reach + 1):
        for c in range(c0 - status_reach, c0 + status_reach + 1):
            j = (r % h) * w + c % w
            o, v = _cell_status(layers, counts, mask, j)
            d_viol += v - viol[j]
            d_osc += (o == _OSCILLATING) - (osc[j] == _OSCILLATING)
            viol[j] = v
            osc[j] = o
            if track:
                if v and mask[j] & INCLUDE_VIOLATIONS:
                    _set_add(bad, bad_where, bad_size, j)
                else:
                    _set_discard(bad, bad_where, bad_size, j)
    return d_viol, d_osc


@numba.njit(cache=True)
def _grow(layers, h, w, mask, seeds, rng, rel_max_iter, rel_min_fill, temperature, osc_bonus,
          penalties):
    """Run the generator on ``layers`` in place; returns whether it converged."""
    depth, n = layers.shape
    counts = np.zeros((depth, n), np.int32)
    for d in range(depth):
        for i in range(n):
            if layers[d, i] & _ALIVE:
                r, c = i // w, i % w
                for dr in range(-1, 2):
                    for dc in range(-1, 2):
                        counts[d, ((r + dr) % h) * w + (c + dc) % w] += 1
    osc = np.zeros(n, np.int32)
    viol = np.zeros(n, np.int32)
    bad, bad_where, bad_size = _set_new(n)
    seed_set, seed_where, seed_size = _set_new(n)
    area, area_where, area_size = _set_new(n)
    totals = np.zeros(4, np.int64)
    for i in range(n):
        osc[i], viol[i] = _cell_status(layers, counts, mask, i)
        if viol[i] and mask[i] & INCLUDE_VIOLATIONS:
            _set_add(bad, bad_where, bad_size, i)
        if seeds[i]:
            _set_add(seed_set, seed_where, seed_size, i)
        if mask[i] & NEW_CELL:
            _set_add(area, area_where, area_size, i)
            totals[_type_index(layers[0, i])] += 1
    total_area = area_size[0]
    max_iter = int(rel_max_iter * total_area * depth)
    min_fill = rel_min_fill * total_area
    beta = 1.0 / temperature
    span = 2 * depth + 1
    log_probs = np.empty(3 * span * span)
    choice_cell = np.empty(3 * span * span, np.int64)
    choice_type = np.empty(3 * span * span, np.uint16)
    type_penalty = np.zeros(4)
    for _ in range(max_iter):
        filled = total_area - totals[0]
        if bad_size[0] == 0 and filled >= min_fill:
            return True
        if bad_size[0] > 0:
            target = bad[rng.integers(0, bad_size[0])]
        elif seed_size[0] > 0:
            target = seed_set[rng.integers(0, seed_size[0])]
        else:
            target = area[rng.integers(0, area_size[0])]
        _set_discard(seed_set, seed_where, seed_size, target)
        # Empty cells cost as much as a lone live cell until the pattern nears min_fill.
        t = filled / min_fill if min_fill > 0 else 1.0
        type_penalty[0] = 2.0 if t < 0.9 else (20.0 * (1.0 - t) if t < 1.0 else 0.0)
        for k in range(1, 4):
            share = totals[k] / (filled + 1.0)
            type_penalty[k] = penalties[k, 0] + share * (penalties[k, 1] - penalties[k, 0])
        r0, c0 = target // w, target % w
        count = 0
        best = -1e300
        for r in range(r0 - depth, r0 + depth + 1):
            for c in range(c0 - depth, c0 + depth + 1):
                i = (r % h) * w + c % w
                if not mask[i] & NEW_CELL:
                    continue
                current = layers[0, i]
                first = _type_index(current) + 1
                d_viol, d_osc = 0, 0
                for k in range(first, first + 3):  # the three other types, changed in turn
                    new = CELL_TYPES[k & 3]
                    dv, do = _change(layers, counts, osc, viol, mask, h, w, i, new,
                                     bad, bad_where, bad_size, False)
                    d_viol += dv
                    d_osc += do
                    lp = -beta * (d_viol - osc_bonus * d_osc + type_penalty[k & 3])
                    log_probs[count] = lp
                    choice_cell[count] = i
                    choice_type[count] = new
                    best = max(best, lp)
                    count += 1
                _change(layers, counts, osc, viol, mask, h, w, i, current,
                        bad, bad_where, bad_size, False)
        if count == 0:
            continue
        total = 0.0
        for k in range(count):
            total += math.exp(log_probs[k] - best)
            log_probs[k] = total  # now cumulative probabilities
        pick = rng.random() * total
        for k in range(count):
            if log_probs[k] > pick:
                i = choice_cell[k]
                totals[_type_index(layers[0, i])] -= 1
                totals[_type_index(choice_type[k])] += 1
                _change(layers, counts, osc, viol, mask, h, w, i, choice_type[k],
                        bad, bad_where, bad_size, True)
                break
    filled = total_area - totals[0]
    return bad_size[0] == 0 and filled >= min_fill


@numba.njit(cache=True)
def _evolve_layers(layers, h, w):
    """Fill layers 1.. with the plain Game-of-Life evolution of layer 0."""
    depth, n = layers.shape
    counts = np.zeros(n, np.int32)
    for d in range(1, depth):
        counts[:] = 0
        for i in range(n):
            if layers[d - 1, i] & _ALIVE:
                r, c = i // w, i % w
                for dr in range(-1, 2):
                    for dc in range(-1, 2):
                        counts[((r + dr) % h) * w + (c + dc) % w] += 1
        for i in range(n):
            layers[d, i] = _next_cell(layers[d - 1, i], counts[i])


def grow_pattern(
    board: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    period: int = 1,
    seeds: np.ndarray | None = None,
    max_iter: float = 40,
    min_fill: float = 0.2,
    temperature: float = 0.5,
    osc_bonus: float = 0.3,
    alive: tuple[float, float] = (0.0, 0.0),
    wall: tuple[float, float] = (100.0, 100.0),
    tree: tuple[float, float] = (100.0, 100.0),
) -> tuple[np.ndarray, bool]:
    """Grow a still life (``period=1``) or oscillator onto ``board`` where ``mask`` allows.

    :param board: uint16 ``(H, W)`` board to build on (not modified).
    :param mask: int ``(H, W)`` generation bits (:data:`NEW_CELL`, :data:`CAN_OSCILLATE`,
        :data:`INCLUDE_VIOLATIONS`).
    :param period: layers the pattern is checked over (its period).
    :param seeds: cells to start from (default: every cell with a mask bit).
    :param max_iter: iteration cap per changeable cell and layer.
    :param min_fill: share of the changeable cells that must end up non-empty.
    :param temperature: larger values pick less greedily and give more complex patterns.
    :param osc_bonus: reward per oscillating cell (0 for still lifes).
    :param alive, wall, tree: penalty of each cell type at zero and at full share of the pattern.
    :returns: the new board and whether the generator converged (otherwise the board holds
        the unfinished attempt).
    """
    if period < 1:
        raise ValueError(f"pattern period must be at least 1, got {period}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    h, w = board.shape
    mask = np.ascontiguousarray(mask, np.int64).ravel()
    seeds = mask != 0 if seeds is None else np.ascontiguousarray(seeds).ravel() != 0
    layers = np.zeros((period, h * w), np.uint16)
    layers[0] = board.ravel()
    _evolve_layers(layers, h, w)
    penalties = np.array([(0.0, 0.0), wall, alive, tree], np.float64)  # by type index
    converged = _grow(layers, h, w, mask, seeds, rng, float(max_iter), float(min_fill),
                      float(temperature), float(osc_bonus), penalties)
    return layers[0].reshape(h, w).copy(), bool(converged)
