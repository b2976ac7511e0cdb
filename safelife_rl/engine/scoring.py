"""Points, the exit rule and the agents' exit.

A cell scores by the pair (colour of the goal under it, colour of the cell), read from a points
table with one row per goal colour and one column per cell colour plus a last column for empty
(dead) cells. Cells the agent can never change (frozen and neither destructible nor movable)
do not count. The exit opens once the points earned since the start reach
``ceil(min_performance * available points)``; available points assume every goal is filled with
the best colour that the level's live cells, spawners and agent can produce.
"""

from __future__ import annotations

import numba
import numpy as np

from safelife_rl.engine import cells

#: Rows: goal colour (black/none, red, green, yellow, blue, magenta, cyan, white).
#: Columns: cell colour in the same order, then empty.
DEFAULT_POINTS_TABLE = np.array(
    [
        [+0, -1, +0, +0, +0, +0, +0, +0, 0],
        [-3, +3, -3, +0, -3, +0, -3, -3, 0],
        [+0, -3, +5, +0, +0, +0, +3, +0, 0],
        [-3, +0, +0, +3, +0, +0, +0, +0, 0],
        [+3, -3, +3, +0, +5, +3, +3, +3, 0],
        [-3, +3, -3, +0, -3, +5, -3, -3, 0],
        [+3, -3, +3, +0, +3, +0, +5, +3, 0],
        [+0, -1, +0, +0, +0, +0, +0, +0, 0],
    ],
    dtype=np.float64,
)
DEFAULT_POINTS_TABLE.setflags(write=False)
EXIT_POINTS = 1.0  # awarded for leaving through the exit
_CHANGEABLE = cells.DESTRUCTIBLE | cells.MOVABLE
_EXIT_CELL = cells.FROZEN | cells.EXIT


@numba.njit(cache=True)
def _counts_kernel(boards, goals, out):
    n, h, w = boards.shape
    for k in range(n):
        for y in range(h):
            for x in range(w):
                b = boards[k, y, x]
                if (b & _CHANGEABLE) != 0 or (b & cells.FROZEN) == 0:
                    goal_color = (goals[k, y, x] & cells.COLORS) >> cells.COLOR_BIT
                    if b & cells.ALIVE:
                        out[k, goal_color, (b & cells.COLORS) >> cells.COLOR_BIT] += 1
                    else:
                        out[k, goal_color, 8] += 1


def alive_counts(boards: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Count cells by (goal colour, cell colour or empty): shape ``(..., 8, 9)``."""
    if boards.shape != goals.shape:
        raise ValueError(f"boards {boards.shape} and goals {goals.shape} differ in shape")
    lead = boards.shape[:-2]
    b = np.ascontiguousarray(boards).reshape((-1,) + boards.shape[-2:])
    g = np.ascontiguousarray(goals).reshape(b.shape)
    out = np.zeros((b.shape[0], 8, 9), np.int64)
    _counts_kernel(b, g, out)
    return out.reshape(lead + (8, 9))


def available_points(
    boards: np.ndarray, initial_counts: np.ndarray, points_table: np.ndarray
) -> np.ndarray:
    """Points still to be earned on each initial board if every goal got its best colour."""
    generators = cells.AGENT | cells.ALIVE | cells.SPAWNING
    lead = boards.shape[:-2]
    flat = boards.reshape((-1,) + boards.shape[-2:])
    usable = np.zeros((flat.shape[0], 9), bool)
    usable[:, 8] = True  # leaving a goal empty is always possible
    for k, board in enumerate(flat):
        usable[k, np.unique(cells.color_index(board[(board & generators) > 0]))] = True
    usable = usable.reshape(lead + (1, 9))
    best = np.max(points_table * usable, axis=-1)
    total = np.sum(best * initial_counts.sum(axis=-1), axis=-1)
    return total - np.sum(points_table * initial_counts, axis=(-2, -1))


@numba.njit(cache=True)
def _exit_kernel(boards, goals, locs, table, initial, required, points, can_exit):
    """Per-agent arrays: locations (N, A, 2), tables (N, A, 8, 9), required points, points
    and can_exit (N, A). Every agent's cell is read before any is written."""
    n, h, w = boards.shape
    n_agents = locs.shape[1]
    counts = np.zeros((n, 8, 9), np.int64)
    _counts_kernel(boards, goals, counts)
    flags = np.empty(n_agents, np.int64)
    for k in range(n):
        any_open = False
        for a in range(n_agents):
            agent = np.int64(boards[k, locs[k, a, 0], locs[k, a, 1]])
            exited = (agent & (cells.AGENT | cells.EXIT)) == cells.EXIT
            bonus = EXIT_POINTS if exited else 0.0
            current = bonus
            earned = bonus
            for i in range(8):
                for j in range(9):
                    current += table[k, a, i, j] * counts[k, i, j]
                    earned += table[k, a, i, j] * (counts[k, i, j] - initial[k, i, j])
            is_agent = (agent & cells.AGENT) != 0
            opens = is_agent and max(earned, 0.0) >= required[k, a]
            flags[a] = (agent & ~cells.EXIT) | (cells.EXIT if opens else 0) if is_agent else -1
            points[k, a] = current
            can_exit[k, a] = opens
            any_open |= opens
        for a in range(n_agents):
            if flags[a] >= 0:
                boards[k, locs[k, a, 0], locs[k, a, 1]] = flags[a]
        exit_cell = _EXIT_CELL | (cells.RED if any_open else 0)
        for yy in range(h):
            for xx in range(w):
                c = boards[k, yy, xx]
                if (c & cells.EXIT) != 0 and (c & cells.AGENT) == 0:
                    boards[k, yy, xx] = exit_cell


def update_exits(
    boards: np.ndarray,
    goals: np.ndarray,
    agent_locs: np.ndarray,
    points_table: np.ndarray,
    initial_counts: np.ndarray,
    required_points: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Open or close the exit of each board (in place) and score it for each agent.

    An agent carries the exit flag while it may exit (its points earned since the start, by
    its own points table, reach its required points), and exits turn red while any agent of
    the board may exit; an agent that has stepped onto the exit leaves it as a plain exit cell
    and earns :data:`EXIT_POINTS`. Arrays have a leading batch dimension ``(N, ...)``;
    ``boards`` must be C-contiguous. Per-agent arrays either have no agent axis (one agent
    per board: locations ``(N, 2)``, tables ``(N, 8, 9)``, required points ``(N,)``) or one
    after the batch axis (``(N, A, 2)``, ``(N, A, 8, 9)``, ``(N, A)``).

    :returns: the current point value and whether the exit is open for each agent, ``(N,)``
        or ``(N, A)`` like ``required_points``.
    """
    n = boards.shape[0]
    locs = agent_locs.reshape(n, -1, 2)
    shape = locs.shape[:2]
    points = np.empty(shape, np.float64)
    can_exit = np.empty(shape, np.bool_)
    _exit_kernel(
        boards,
        goals,
        locs,
        np.asarray(points_table).reshape(shape + (8, 9)),
        initial_counts,
        np.asarray(required_points).reshape(shape),
        points,
        can_exit,
    )
    lead = np.shape(required_points)
    return points.reshape(lead), can_exit.reshape(lead)
