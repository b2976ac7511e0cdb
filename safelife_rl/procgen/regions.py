"""Painting one region of a level from its list of layers.

Each layer may add, in this order: a fence on the region's edge, spawners, a lattice of trees,
a generated pattern (still life, oscillator or chaos), then turn some of its new walls and trees
movable and some of its new life hard; keep a buffer around life free; and add fountains ringed
by goal walls. A layer paints the board, the goals or both (``target``). Later layers only touch
cells earlier layers left free, so their patterns stay intact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.physics import advance_board
from safelife_rl.procgen.params import COLOR_NAMES, resolve
from safelife_rl.procgen.partition import build_fence, dilate, erode
from safelife_rl.procgen.patterns import CAN_OSCILLATE, INCLUDE_VIOLATIONS, NEW_CELL, grow_pattern

#: Colour bits by colour name.
COLORS = {name: np.uint16(i << cells.COLOR_BIT) for i, name in enumerate(COLOR_NAMES)}
_TREE = cells.KINDS["tree"]
_WALL = cells.KINDS["wall"]
_LIFE = cells.KINDS["life"]
_NO_COLOR = np.uint16(0xFFFF & ~cells.COLORS)


def make_pattern(
    board: np.ndarray,
    mask: np.ndarray,
    seeds: np.ndarray | None,
    rng: np.random.Generator,
    min_fill: float = 0.2,
    max_fill: float | None = None,
    num_retries: int = 10,
    **kwargs: Any,
) -> np.ndarray:
    """A pattern whose fill of the changeable area lies within [min_fill, max_fill].

    Too full a result is retried with a 7% higher ``max_fill``; one that does not converge with
    a 6% lower ``min_fill``. After ``num_retries`` the board comes back unchanged.
    """
    max_fill = 2 * min_fill if max_fill is None else max_fill
    area = (mask & NEW_CELL) > 0
    if not area.any():
        return board
    for _ in range(num_retries + 1):
        new_board, converged = grow_pattern(
            board, mask, rng, seeds=seeds, min_fill=min_fill, **kwargs
        )
        if not converged:
            min_fill *= 0.94
        elif np.count_nonzero(new_board[area]) / np.count_nonzero(area) > max_fill:
            max_fill *= 1.07
        else:
            return new_board
    return board


def _lattice(shape: tuple[int, int], col_skip: float, row_skip: float, stagger: int) -> np.ndarray:
    rows = np.arange(shape[0])[:, None]
    cols = np.arange(shape[1])[None, :]
    return (rows % row_skip < 1) & ((cols + (rows // row_skip) * stagger) % col_skip < 1)


def tree_lattice(shape: tuple[int, int], spec: Any) -> np.ndarray:
    """Cells of a tree lattice; with the default spacing 5 every cell touches about one tree."""
    spec = spec if isinstance(spec, dict) else {}
    spacing = float(spec.get("spacing", 5))
    if not spec.get("stagger", True):
        return _lattice(shape, spacing, spacing, 0)
    if spacing <= 3:
        return _lattice(shape, 3, 3, 1)
    if spacing == 4:
        return _lattice(shape, 10, 1, 3)
    if spacing == 5:
        return _lattice(shape, 13, 1, 5)
    return _lattice(shape, 6, 3, 3)


def _coinflips(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    return rng.random(shape) < p


def populate_region(
    mask: np.ndarray, layers: list[dict[str, Any]], rng: np.random.Generator, where: str = ""
) -> tuple[np.ndarray, np.ndarray]:
    """Board and goals of one region (zero outside ``mask``), painted layer by layer."""
    mask = mask.astype(bool)
    shape = mask.shape
    gen_mask = np.where(mask, NEW_CELL | CAN_OSCILLATE | INCLUDE_VIOLATIONS, 0)
    gen_mask[dilate(mask) & ~mask] = INCLUDE_VIOLATIONS  # nothing may be born just outside
    board = np.zeros(shape, np.uint16)
    foreground = np.zeros(shape, bool)  # cells that go onto the board
    background = np.zeros(shape, bool)  # cells that go into the goals
    goal_color = np.zeros(shape, bool)  # goal cells that keep their colour
    seeds = None
    max_period = 1
    for index, raw in enumerate(layers):
        layer = resolve(raw, rng)
        old_board = board.copy()
        free_before = (gen_mask & NEW_CELL) > 0
        interior = erode(free_before)
        color = COLORS[layer.get("color", "black")]

        if layer.get("fences", 0) > 0:
            fence = build_fence(free_before, rng) & _coinflips(rng, layer["fences"], shape)
            gen_mask[fence] &= ~(NEW_CELL | CAN_OSCILLATE)
            board[fence] = _WALL

        if layer.get("spawners", 0) > 0:
            allowed = free_before & interior
            new = allowed & _coinflips(rng, layer["spawners"], shape)
            if not new.any() and allowed.any():  # at least one spawner
                rows, cols = np.nonzero(allowed)
                k = rng.integers(len(rows))
                new[rows[k], cols[k]] = True
            gen_mask[new] ^= NEW_CELL
            board[new] = cells.KINDS["spawner"] | color

        if layer.get("tree_lattice") not in (None, False):
            trees = tree_lattice(shape, layer["tree_lattice"]) & ((gen_mask & NEW_CELL) > 0)
            board[trees] = _TREE | color

        period = 1
        if "pattern" in layer:
            args = dict(layer["pattern"])
            period = int(args.pop("period", 1))
            if period == 1:  # a still life, even among oscillators
                pattern_mask = gen_mask & ~CAN_OSCILLATE
                args["osc_bonus"] = 0.0
            elif period == 0:  # anything goes: no cell needs to come back
                pattern_mask = gen_mask & ~INCLUDE_VIOLATIONS
                args["osc_bonus"] = 0.0
            elif period < max_period:
                raise ValueError(
                    f"{where} layer {index}: pattern period {period} follows period "
                    f"{max_period}; later layers need period 0, 1 or at least {max_period}"
                )
            else:
                pattern_mask = gen_mask
                max_period = period
            args["max_iter"] = args.get("max_iter", 40)
            for key in ("alive", "wall", "tree"):
                if key in args:
                    args[key] = tuple(args[key])
            board = make_pattern(board, pattern_mask, seeds, rng, period=max_period, **args)
            # Keep later layers off this pattern, and off the neighbours of its oscillating
            # cells, whose changes would reach the pattern within the period.
            states = [board]
            for _ in range(1, max_period):
                states.append(advance_board(states[-1] & ~np.uint16(cells.SPAWNING)))
            occupied = np.stack(states) != 0
            still = occupied.all(0)
            oscillating = occupied.any(0) & ~still
            gen_mask[oscillating] &= ~(NEW_CELL | INCLUDE_VIOLATIONS)
            gen_mask[still | dilate(oscillating)] &= ~(NEW_CELL | CAN_OSCILLATE)
            new_life = (board != old_board) & ((board & cells.ALIVE) > 0)
            board[new_life] |= color
            seeds = ((board & cells.ALIVE) > 0) & mask

        new = board != old_board
        kind = board & _NO_COLOR
        for key, cell_kind, flag in (
            ("movable_walls", _WALL, cells.MOVABLE),
            ("movable_trees", _TREE, cells.MOVABLE),
        ):
            if layer.get(key, 0) > 0:
                board[_coinflips(rng, layer[key], shape) & new & (kind == cell_kind)] |= flag
        if layer.get("hardened_life", 0) > 0:
            hard = _coinflips(rng, layer["hardened_life"], shape) & new & (kind == _LIFE)
            board[hard] &= ~np.uint16(cells.DESTRUCTIBLE)

        buffer_zone = int(layer.get("buffer_zone", 0))
        gen_mask[dilate((board & cells.ALIVE) > 0, buffer_zone)] &= ~NEW_CELL

        target = layer.get("target", "board")
        if target in ("board", "both"):
            foreground |= new
            if period > 0:
                background |= new
                goal_color |= new if target == "both" else False
        else:  # goals; walls and the like stay on the board too
            background |= new
            goal_color |= new
            foreground |= new & ((board & cells.ALIVE) == 0)

        if layer.get("fountains", 0) > 0:
            free = (gen_mask & NEW_CELL) > 0
            fountains = _coinflips(rng, layer["fountains"], shape) & free
            ring = dilate(fountains) & free
            gen_mask[ring] = INCLUDE_VIOLATIONS
            gen_mask[dilate(ring, buffer_zone)] &= ~NEW_CELL
            board[ring] = _WALL | color
            board[fountains] = cells.KINDS["fountain"] | color
            foreground |= fountains
            background |= ring
            goal_color |= ring

    goals = np.where(background, board, 0).astype(np.uint16)
    goals &= ~np.uint16(cells.SPAWNING)
    goals[~goal_color] &= _NO_COLOR
    return np.where(foreground, board, 0).astype(np.uint16), goals
