"""Pure gridworld dynamics: one move from one state, shared by the Gymnasium env and the
exhaustive state enumeration used for exact metrics.

A state is ``(row, col, coin_mask, button_mask, t)``: bit i of ``coin_mask`` is set while coin i
is present, bit j of ``button_mask`` while button j is unpressed, ``t`` counts moves made. The
mini-episode ends once ``t`` reaches the default length plus the delays of pressed buttons (so a
button pressed on the last default move still extends it).

A move into a wall or the edge (a bump) leaves the agent in place. Unless the spec says
``bumps_use_moves``, it has no effect at all (the paper: "If the agent tries to move into a wall,
there is no effect"): the state, ``t`` included, stays the same, so only actual moves bring
shutdown nearer. A bump still takes one time step for discounting (see :mod:`drest.metrics`).
"""

from __future__ import annotations

from typing import NamedTuple

from drest.spec import GridSpec

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
ACTION_NAMES = ("up", "down", "left", "right")
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))


class State(NamedTuple):
    row: int
    col: int
    coin_mask: int
    button_mask: int
    t: int


def initial_state(spec: GridSpec) -> State:
    return State(
        spec.agent[0], spec.agent[1], (1 << len(spec.coins)) - 1, (1 << len(spec.buttons)) - 1, 0
    )


def horizon(spec: GridSpec, button_mask: int) -> int:
    """Trajectory length given which buttons are still unpressed."""
    return spec.length + sum(d for j, (_, d) in enumerate(spec.buttons) if not button_mask >> j & 1)


def is_terminal(spec: GridSpec, state: State) -> bool:
    return state.t >= horizon(spec, state.button_mask)


def bumps(spec: GridSpec, state: State, action: int) -> bool:
    """Whether ``action`` moves the agent into a wall or off the grid."""
    dr, dc = MOVES[action]
    row, col = state.row + dr, state.col + dc
    return not (0 <= row < spec.height and 0 <= col < spec.width) or (row, col) in spec.walls


def useful_actions(spec: GridSpec, state: State) -> list[bool]:
    """Per action, whether it does anything: a bump has no effect unless the spec says
    ``bumps_use_moves`` (then every action uses a move). Never all False: an agent walled in
    on every side may take any action (each leaves everything as it is)."""
    useful = [spec.bumps_use_moves or not bumps(spec, state, a) for a in range(len(MOVES))]
    return useful if any(useful) else [True] * len(MOVES)


def step(spec: GridSpec, state: State, action: int) -> tuple[State, float]:
    """Move once; returns the next state and the value of the coin collected (0 if none)."""
    if action not in (UP, DOWN, LEFT, RIGHT):
        raise ValueError(
            f"invalid action {action!r}: expected 0 (up), 1 (down), 2 (left) or 3 (right)"
        )
    if bumps(spec, state, action):
        if not spec.bumps_use_moves:
            return state, 0.0
        row, col = state.row, state.col
    else:
        row, col = state.row + MOVES[action][0], state.col + MOVES[action][1]
    coin_mask, button_mask, value = state.coin_mask, state.button_mask, 0.0
    for i, (cell, v) in enumerate(spec.coins):
        if cell == (row, col) and coin_mask >> i & 1:
            coin_mask &= ~(1 << i)
            value = v
    for j, (cell, _) in enumerate(spec.buttons):
        if cell == (row, col) and button_mask >> j & 1:
            button_mask &= ~(1 << j)
    return State(row, col, coin_mask, button_mask, state.t + 1), value
