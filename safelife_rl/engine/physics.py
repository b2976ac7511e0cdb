"""SafeLife physics: the board update and the agent's actions.

Both work on arrays of boards of shape ``(..., H, W)`` so that many boards advance in one call.
The kernels are compiled with Numba: side-effect scoring advances a board thousands of times per
episode, which interpreted NumPy cannot do fast enough.

The board update is Conway's Game of Life on a wrapped board where every cell counts itself
among its nine neighbours (so a live cell survives with 3 or 4 live cells in its 3x3 block, and a
dead one is born with exactly 3), plus:

* frozen cells never change;
* a live cell next to (or being) a preserving cell never dies;
* a dead cell next to (or being) an inhibiting cell is never born;
* a dead cell next to a spawner comes alive with probability ``spawn_prob``;
* a new cell takes every colour carried by at least two live cells of its block (a spawner's
  colours count twice), and is destructible if at least two live cells of its block are
  destructible (or exits);
* a cell that dies becomes empty, losing all of its flags.
"""

from __future__ import annotations

import numba
import numpy as np

from safelife_rl.engine import cells

_COUNT = 0xF  # low bits of a neighbourhood summary: number of live cells
_SPREAD = cells.PRESERVING | cells.INHIBITING | cells.SPAWNING  # any neighbour has it
# Bit 8 stands for "destructible or exit" in a summary, next to the colour bits; bits 12-15
# mean "at least two live neighbours carry the flag 4 bits below".
_CARRIED = cells.EXIT | cells.COLORS
N_ACTIONS = 9
NOOP_ACTION = 0  # the action that leaves the board to itself (AUP compares every action with it)


@numba.njit(cache=True, inline="always")
def _cell_summary(c: int) -> int:
    # Branch-free so that the loop over a row vectorizes.
    alive = c & cells.ALIVE
    spawning = (c >> 7) & 1  # the SPAWNING bit
    carried = ((c | ((c & cells.DESTRUCTIBLE) << 5)) & _CARRIED) * alive
    return (c & _SPREAD) | carried | (((c & cells.COLORS) << 4) * spawning) | alive


@numba.njit(cache=True, inline="always")
def _combine(a: int, b: int) -> int:
    count = (a & _COUNT) + (b & _COUNT)
    twice = (a & b & _CARRIED) << 4
    return ((a | b | twice) & 0xFFF0) | count


@numba.njit(cache=True)
def _advance_into(b, out, spawn_prob, uniforms, index, summary, rows):
    """One generation of board ``b`` (H, W) into ``out``.

    A cell next to a spawner draws its random number from ``uniforms[index[y, x]]``;
    scratch arrays are (H, W) int64.
    """
    h, w = b.shape
    for y in range(h):
        for x in range(w):
            summary[y, x] = _cell_summary(np.int64(b[y, x]))
    for y in range(h):
        s = summary[y]
        r = rows[y]
        r[0] = _combine(_combine(s[0], s[1 % w]), s[w - 1])
        for x in range(1, w - 1):
            r[x] = _combine(_combine(s[x], s[x + 1]), s[x - 1])
        if w > 1:
            r[w - 1] = _combine(_combine(s[w - 1], s[0]), s[w - 2])
    for y in range(h):
        up = y - 1 if y > 0 else h - 1
        down = y + 1 if y < h - 1 else 0
        for x in range(w):
            nb = _combine(_combine(rows[y, x], rows[up, x]), rows[down, x])
            c = np.int64(b[y, x])
            count = nb & _COUNT
            new = c
            frozen = (c & cells.FROZEN) != 0
            if c & cells.ALIVE:
                if not (frozen or (nb & cells.PRESERVING) != 0 or count == 3 or count == 4):
                    new = 0
            elif not (frozen or (nb & cells.INHIBITING) != 0):
                colors = (nb >> 4) & cells.COLORS
                if count == 3:
                    new = cells.ALIVE | colors | ((nb >> 9) & cells.DESTRUCTIBLE)
                elif (nb & cells.SPAWNING) != 0 and uniforms[index[y, x]] < spawn_prob:
                    new = cells.ALIVE | cells.DESTRUCTIBLE | colors
            out[y, x] = new


@numba.njit(cache=True)
def _advance_kernel(boards, out, spawn_prob, uniforms):
    n, h, w = boards.shape
    summary = np.empty((h, w), np.int64)
    rows = np.empty((h, w), np.int64)
    index = np.arange(h * w).reshape(h, w)
    for k in range(n):
        _advance_into(boards[k], out[k], spawn_prob[k], uniforms[k], index, summary, rows)


@numba.njit(cache=True)
def _add_life(board, counts, weight):
    skip = cells.AGENT | cells.EXIT | cells.FROZEN
    h, w = board.shape
    for y in range(h):
        for x in range(w):
            c = board[y, x]
            if (c & cells.ALIVE) != 0 and (c & skip) == 0:
                counts[y, x, (c & cells.COLORS) >> cells.COLOR_BIT] += weight


@numba.njit(cache=True)
def _occupancy_kernel(board, spawn_prob, uniforms, index, counts, deterministic):
    """Advance ``board`` once per row of ``uniforms``, in place; if ``counts`` (H, W, 8) is
    non-empty, count after each step the live cells of each colour that the agent could
    affect (neither agent, exit nor frozen).

    A deterministic board that repeats itself within two steps stays periodic, so the rest of
    the run is then counted without simulating it.
    """
    h, w = board.shape
    summary = np.empty((h, w), np.int64)
    rows = np.empty((h, w), np.int64)
    current = board.copy()
    following = np.empty_like(board)
    older = board.copy()  # the state before ``current`` (deterministic boards only)
    steps = uniforms.shape[0]
    for t in range(steps):
        _advance_into(current, following, spawn_prob, uniforms[t], index, summary, rows)
        if counts.shape[0]:
            _add_life(following, counts, 1)
        if deterministic:
            if t >= 1 and np.array_equal(following, older):
                left = steps - t - 1  # states alternate: current, following, current, ...
                if counts.shape[0]:
                    _add_life(current, counts, (left + 1) // 2)
                    _add_life(following, counts, left // 2)
                board[:, :] = current if left % 2 else following
                return
            older[:, :] = current
        current, following = following, current
    board[:, :] = current


def _as_batch(boards: np.ndarray) -> np.ndarray:
    if boards.ndim < 2:
        raise ValueError(f"boards must have shape (..., H, W), got shape {boards.shape}")
    if boards.dtype != np.uint16:
        raise TypeError(f"boards must have dtype uint16, got {boards.dtype}")
    return boards.reshape((-1,) + boards.shape[-2:])


def _uniforms(boards: np.ndarray, shape: tuple[int, ...], rng: np.random.Generator | None):
    """Random numbers for the spawners (ones, which never spawn, where there are none)."""
    if not np.any(boards & cells.SPAWNING):
        return np.ones(shape, np.float32)
    if rng is None:
        raise ValueError("boards with spawners need a random generator (rng=...)")
    return rng.random(shape, dtype=np.float32)


def advance_board(
    boards: np.ndarray,
    spawn_prob: float | np.ndarray = 0.3,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Advance boards of shape ``(..., H, W)`` one step; returns new boards.

    :param spawn_prob: probability that a spawner creates a given live neighbour, one value or
        one per board.
    :param rng: random source for spawners; required when any board has a spawner.
    """
    batch = _as_batch(np.ascontiguousarray(boards))
    n, h, w = batch.shape
    probs = np.broadcast_to(np.asarray(spawn_prob, np.float32).reshape(-1), (n,))
    uniforms = _uniforms(batch, (n, h * w), rng)
    out = np.empty_like(batch)
    _advance_kernel(batch, out, np.ascontiguousarray(probs), uniforms)
    return out.reshape(boards.shape)


def _spawn_zone(board: np.ndarray) -> np.ndarray:
    """Cells of a (H, W) board with a spawner in their 3x3 block (wrapped)."""
    spawners = (board & cells.SPAWNING) > 0
    zone = np.zeros_like(spawners)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            zone |= np.roll(spawners, (dy, dx), axis=(0, 1))
    return zone


def advance_steps(
    board: np.ndarray,
    steps: int,
    spawn_prob: float = 0.3,
    rng: np.random.Generator | None = None,
    count_life: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Advance one ``(H, W)`` board ``steps`` generations in a single compiled loop.

    :param count_life: also return how often each cell held live cells of each colour
        (shape ``(H, W, 8)``, colour index last), counting live cells that are neither
        frozen, agent nor exit, after every step.
    :returns: the final board and the counts (``None`` unless ``count_life``).
    """
    if board.ndim != 2:
        raise ValueError(f"advance_steps takes one (H, W) board, got shape {board.shape}")
    board = _as_batch(board)[0].copy()
    h, w = board.shape
    # Spawners neither move nor appear without the agent, so only the cells next to them at
    # the start ever need random numbers.
    zone = _spawn_zone(board)
    index = np.full((h, w), -1, np.int64)
    index[zone] = np.arange(np.count_nonzero(zone))
    uniforms = _uniforms(board, (steps, max(1, np.count_nonzero(zone))), rng)
    counts = np.zeros((h, w, 8) if count_life else (0, 0, 8), np.int32)
    _occupancy_kernel(board, np.float32(spawn_prob), uniforms, index, counts, not zone.any())
    return board, counts if count_life else None


@numba.njit(cache=True)
def _wrap(i: int, size: int) -> int:
    return i % size


@numba.njit(cache=True, inline="always")
def _act(b, loc, action):
    """One agent's action on board ``b`` (H, W); its location ``loc`` is updated in place."""
    if action == 0:
        return
    h, w = b.shape
    direction = (action - 1) & 3
    dy = direction - 1 if direction % 2 == 0 else 0
    dx = 2 - direction if direction % 2 == 1 else 0
    y0 = _wrap(loc[0], h)
    x0 = _wrap(loc[1], w)
    y1, x1 = _wrap(y0 + dy, h), _wrap(x0 + dx, w)
    y2, x2 = _wrap(y0 + 2 * dy, h), _wrap(x0 + 2 * dx, w)
    y3, x3 = _wrap(y0 - dy, h), _wrap(x0 - dx, w)
    agent = np.int64(b[y0, x0])
    if (agent & cells.AGENT) == 0:
        return
    agent = (agent & ~cells.ORIENTATION) | (direction << cells.ORIENTATION_BIT)
    b[y0, x0] = agent
    ahead = np.int64(b[y1, x1])
    beyond = np.int64(b[y2, x2])
    can_shove = (agent & cells.PUSHABLE) == 0 and (ahead & cells.PUSHABLE) != 0
    if action >= 5:  # toggle the cell ahead
        if ahead == 0:  # new life takes the agent's colour
            b[y1, x1] = cells.ALIVE | cells.DESTRUCTIBLE | (agent & cells.COLORS)
        elif ahead & cells.DESTRUCTIBLE:
            if ahead & cells.AGENT:  # a destroyed agent turns into a block
                b[y1, x1] = (ahead ^ (cells.AGENT | cells.DESTRUCTIBLE)) | cells.FROZEN
            else:
                b[y1, x1] = 0
        elif can_shove:
            if beyond == 0:
                b[y2, x2] = ahead
                b[y1, x1] = 0
            elif beyond & cells.EXIT:  # shoved out through the exit
                b[y1, x1] = 0
        return
    # Move: step onto an empty cell, push a pushable one, or step onto an open exit (never
    # onto another agent, which is not empty).
    if can_shove:
        if beyond == 0:
            b[y2, x2] = ahead
        elif (beyond & cells.EXIT) == 0:
            return
        b[y1, x1] = agent
    elif ahead == 0:
        b[y1, x1] = agent
    elif (agent & ahead & cells.EXIT) == 0 or (ahead & cells.AGENT) != 0:
        return
    # The agent has left its cell (onto an exit the exit cell stays as it is).
    loc[0] = y1
    loc[1] = x1
    behind = np.int64(b[y3, x3])
    if (agent & cells.PULLABLE) == 0 and (behind & cells.PULLABLE) != 0:
        b[y0, x0] = behind
        b[y3, x3] = 0
    else:
        b[y0, x0] = 0


@numba.njit(cache=True)
def _actions_kernel(boards, locs, actions):
    """Boards (N, H, W), locations (N, A, 2), actions (N, A): the agents of a board act one
    after another in agent order, each seeing what the ones before it did."""
    for k in range(boards.shape[0]):
        for a in range(locs.shape[1]):
            _act(boards[k], locs[k, a], actions[k, a])


def execute_actions(boards: np.ndarray, agent_locs: np.ndarray, actions: np.ndarray | int) -> None:
    """Apply one action per agent in place.

    :param boards: uint16 boards of shape ``(..., H, W)``, C-contiguous (modified in place).
    :param agent_locs: int64 agent positions as (row, column), updated in place: ``(..., 2)``
        for one agent per board or ``(..., A, 2)`` for ``A`` agents per board.
    :param actions: one action per agent, ``(...)`` or ``(..., A)``: 0 no-op, 1-4 move
        up/right/down/left, 5-8 toggle the cell up/right/down/left. Moving or toggling also
        turns the agent to face that way. The agents of a board act in order.
    """
    batch = _as_batch(boards)
    if not boards.flags.c_contiguous:
        raise ValueError("boards must be C-contiguous to be updated in place")
    if agent_locs.dtype != np.int64 or not agent_locs.flags.c_contiguous:
        raise TypeError("agent_locs must be a C-contiguous int64 array")
    n = batch.shape[0]
    lead = boards.shape[:-2]
    if (
        agent_locs.shape[-1:] != (2,)
        or agent_locs.shape[: len(lead)] != lead
        or (agent_locs.ndim not in (len(lead) + 1, len(lead) + 2))
    ):
        raise ValueError(
            f"boards {boards.shape} need agent locations of shape {lead + (2,)} or "
            f"{lead + ('A', 2)}, got {agent_locs.shape}"
        )
    locs = agent_locs.reshape(n, -1, 2)
    acts = np.asarray(actions, dtype=np.int64).reshape(-1)
    if acts.shape[0] != locs.shape[0] * locs.shape[1]:
        raise ValueError(
            f"{n} boards of {locs.shape[1]} agent(s) need one action per agent "
            f"({n * locs.shape[1]}), got {acts.shape[0]} actions"
        )
    bad = (acts < 0) | (acts >= N_ACTIONS)
    if bad.any():
        raise ValueError(f"invalid action {acts[bad][0]}: actions are integers 0-8")
    _actions_kernel(batch, locs, acts.reshape(locs.shape[:2]))
