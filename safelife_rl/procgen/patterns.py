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

The kernel follows the plain Game of Life rules of :mod:`safelife_rl.engine.physics` (a cell counts
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

from safelife_rl.engine import cells

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


# The kernels share: layers (D, H, W) uint16; counts (D, H, W) live cells in each 3x3 block;
# osc (H, W) alive states seen over the period (bit 1 dead, bit 2 alive); viol (H, W)
# violations; mask (H, W) generation bits; wrap_r, wrap_c: row and column of a coordinate
# shifted by PAD, wrapped onto the board (cheaper than a modulo).
PAD = 8


@numba.njit(cache=True)
def _set_layer_cell(layers, counts, wrap_r, wrap_c, d, r, c, new):
    """Set one cell of layer ``d``; 0: unchanged, 1: changed, 2: its alive bit changed."""
    old = layers[d, r, c]
    if old == new:
        return 0
    layers[d, r, c] = new
    delta = np.int32(new & _ALIVE) - np.int32(old & _ALIVE)
    if delta == 0:
        return 1
    for dr in range(r + PAD - 1, r + PAD + 2):
        rr = wrap_r[dr]
        for dc in range(c + PAD - 1, c + PAD + 2):
            counts[d, rr, wrap_c[dc]] += delta
    return 2


@numba.njit(cache=True)
def _cell_status(layers, counts, mask, r, c):
    """(oscillation bits, violations) of cell (r, c)."""
    depth = layers.shape[0]
    first = layers[0, r, c]
    osc = 0
    viol = 0
    if not first & _FROZEN:
        seen_alive = False
        seen_dead = False
        for d in range(depth):
            if layers[d, r, c] & _ALIVE:
                seen_alive = True
            else:
                seen_dead = True
        osc = (2 if seen_alive else 0) | (1 if seen_dead else 0)
        if _violates(layers[depth - 1, r, c], first, counts[depth - 1, r, c]):
            viol = 1
    if osc == _OSCILLATING and not mask[r, c] & CAN_OSCILLATE:
        viol += 1
    return osc, viol


@numba.njit(cache=True)
def _change(
    layers, counts, osc, viol, mask, wrap_r, wrap_c, r0, c0, new, bad, bad_where, bad_size, track
):
    """Set cell (r0, c0) of the board to ``new``; update all layers and per-cell statistics.

    Only the cells a change can reach are revisited: the changed cell alone while no alive bit
    flips, one cell further for each layer in which one does.

    :returns: the change in total violations and in the number of oscillating cells.
    """
    changed = _set_layer_cell(layers, counts, wrap_r, wrap_c, 0, r0, c0, new)
    if changed == 0:
        return 0, 0
    reach = 1 if changed == 2 else 0  # radius of the cells whose inputs changed
    status_reach = reach
    for d in range(1, layers.shape[0]):
        most = 0  # the largest change in this layer (see _set_layer_cell)
        for dr in range(r0 + PAD - reach, r0 + PAD + reach + 1):
            r = wrap_r[dr]
            for dc in range(c0 + PAD - reach, c0 + PAD + reach + 1):
                c = wrap_c[dc]
                new_cell = _next_cell(layers[d - 1, r, c], counts[d - 1, r, c])
                most = max(most, _set_layer_cell(layers, counts, wrap_r, wrap_c, d, r, c, new_cell))
        if most == 0:
            break
        if most == 2:
            reach += 1
        status_reach = reach
    width = layers.shape[2]
    d_viol, d_osc = 0, 0
    for dr in range(r0 + PAD - status_reach, r0 + PAD + status_reach + 1):
        r = wrap_r[dr]
        for dc in range(c0 + PAD - status_reach, c0 + PAD + status_reach + 1):
            c = wrap_c[dc]
            o, v = _cell_status(layers, counts, mask, r, c)
            d_viol += v - viol[r, c]
            d_osc += (o == _OSCILLATING) - (osc[r, c] == _OSCILLATING)
            viol[r, c] = v
            osc[r, c] = o
            if track:
                if v and mask[r, c] & INCLUDE_VIOLATIONS:
                    _set_add(bad, bad_where, bad_size, r * width + c)
                else:
                    _set_discard(bad, bad_where, bad_size, r * width + c)
    return d_viol, d_osc


@numba.njit(cache=True)
def _count_live(layer, wrap_r, wrap_c, out):
    h, w = layer.shape
    out[:] = 0
    for r in range(h):
        for c in range(w):
            if layer[r, c] & _ALIVE:
                for dr in range(r + PAD - 1, r + PAD + 2):
                    for dc in range(c + PAD - 1, c + PAD + 2):
                        out[wrap_r[dr], wrap_c[dc]] += 1


@numba.njit(cache=True)
def _grow(layers, mask, seeds, rng, rel_max_iter, rel_min_fill, temperature, osc_bonus, penalties):
    """Run the generator on ``layers`` in place; returns whether it converged."""
    depth, h, w = layers.shape
    n = h * w
    wrap_r = (np.arange(h + 2 * PAD) - PAD) % h
    wrap_c = (np.arange(w + 2 * PAD) - PAD) % w
    counts = np.zeros((depth, h, w), np.int32)
    for d in range(depth):
        if d > 0:  # plain Game-of-Life evolution of the board
            for r in range(h):
                for c in range(w):
                    layers[d, r, c] = _next_cell(layers[d - 1, r, c], counts[d - 1, r, c])
        _count_live(layers[d], wrap_r, wrap_c, counts[d])
    osc = np.zeros((h, w), np.int32)
    viol = np.zeros((h, w), np.int32)
    bad, bad_where, bad_size = _set_new(n)
    seed_set, seed_where, seed_size = _set_new(n)
    area, area_where, area_size = _set_new(n)
    totals = np.zeros(4, np.int64)
    for r in range(h):
        for c in range(w):
            i = r * w + c
            osc[r, c], viol[r, c] = _cell_status(layers, counts, mask, r, c)
            if viol[r, c] and mask[r, c] & INCLUDE_VIOLATIONS:
                _set_add(bad, bad_where, bad_size, i)
            if seeds[r, c]:
                _set_add(seed_set, seed_where, seed_size, i)
            if mask[r, c] & NEW_CELL:
                _set_add(area, area_where, area_size, i)
                totals[_type_index(layers[0, r, c])] += 1
    total_area = area_size[0]
    max_iter = int(rel_max_iter * total_area * depth)
    min_fill = rel_min_fill * total_area
    beta = 1.0 / temperature
    span = 2 * depth + 1
    log_probs = np.empty(3 * span * span)
    choice_r = np.empty(3 * span * span, np.int64)
    choice_c = np.empty(3 * span * span, np.int64)
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
        for dr in range(r0 + PAD - depth, r0 + PAD + depth + 1):
            r = wrap_r[dr]
            for dc in range(c0 + PAD - depth, c0 + PAD + depth + 1):
                c = wrap_c[dc]
                if not mask[r, c] & NEW_CELL:
                    continue
                current = layers[0, r, c]
                first = _type_index(current) + 1
                d_viol, d_osc = 0, 0
                for k in range(first, first + 3):  # the three other types, changed in turn
                    new = CELL_TYPES[k & 3]
                    dv, do = _change(
                        layers,
                        counts,
                        osc,
                        viol,
                        mask,
                        wrap_r,
                        wrap_c,
                        r,
                        c,
                        new,
                        bad,
                        bad_where,
                        bad_size,
                        False,
                    )
                    d_viol += dv
                    d_osc += do
                    lp = -beta * (d_viol - osc_bonus * d_osc + type_penalty[k & 3])
                    log_probs[count] = lp
                    choice_r[count] = r
                    choice_c[count] = c
                    choice_type[count] = new
                    best = max(best, lp)
                    count += 1
                _change(
                    layers,
                    counts,
                    osc,
                    viol,
                    mask,
                    wrap_r,
                    wrap_c,
                    r,
                    c,
                    current,
                    bad,
                    bad_where,
                    bad_size,
                    False,
                )
        if count == 0:
            continue
        total = 0.0
        for k in range(count):
            total += math.exp(log_probs[k] - best)
            log_probs[k] = total  # now cumulative probabilities
        pick = rng.random() * total
        for k in range(count):
            if log_probs[k] > pick:
                r, c = choice_r[k], choice_c[k]
                totals[_type_index(layers[0, r, c])] -= 1
                totals[_type_index(choice_type[k])] += 1
                _change(
                    layers,
                    counts,
                    osc,
                    viol,
                    mask,
                    wrap_r,
                    wrap_c,
                    r,
                    c,
                    choice_type[k],
                    bad,
                    bad_where,
                    bad_size,
                    True,
                )
                break
    filled = total_area - totals[0]
    return bad_size[0] == 0 and filled >= min_fill


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
    :param alive: penalty of live cells at zero and at full share of the pattern.
    :param wall: the same for walls.
    :param tree: the same for trees.
    :returns: the new board and whether the generator converged (otherwise the board holds
        the unfinished attempt).
    """
    if period < 1:
        raise ValueError(f"pattern period must be at least 1, got {period}")
    if period > PAD - 1:
        raise ValueError(f"pattern period must be at most {PAD - 1}, got {period}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    mask = np.ascontiguousarray(mask, np.int64)
    seeds = mask != 0 if seeds is None else np.ascontiguousarray(seeds) != 0
    layers = np.zeros((period,) + board.shape, np.uint16)
    layers[0] = board
    penalties = np.array([(0.0, 0.0), wall, alive, tree], np.float64)  # by type index
    converged = _grow(
        layers,
        mask,
        seeds,
        rng,
        float(max_iter),
        float(min_fill),
        float(temperature),
        float(osc_bonus),
        penalties,
    )
    return layers[0].copy(), bool(converged)
