"""Multi-agent SafeLife levels: a board with ``A`` agents, each with a location, a name (its
type in the procedural-generation file, e.g. ``cyan``) and its own points table. Every field is
checked as for single-agent levels, plus the agents: arrays of one length, each agent on the
board at its location, as many agent cells as agents. :mod:`.level_files` reads and writes
them (``load_levels(path, multi_agent=True)``; a single-agent file loads as a level of one
agent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import (
    BoardLevel,
    Level,
    LevelFormatError,
    check_agent,
    check_board,
    check_numbers,
    check_points_table,
    read_numbers,
    whole_numbers,
)


@dataclass(frozen=True, eq=False)
class MultiAgentLevel(BoardLevel):
    """The initial state of one SafeLife level with one or more agents.

    :param board: uint16 ``(H, W)`` cells (each agent's orientation is in its cell's bits).
    :param goals: uint16 ``(H, W)`` goal cells.
    :param agent_locs: each agent's (row, column); the agents act in this order.
    :param agent_names: each agent's name (its type, e.g. ``cyan``).
    :param points_tables: ``(A, 8, 9)``: each agent's points per (goal colour, cell colour or
        empty), finite and within :data:`~safelife_rl.engine.levels.MAX_POINTS`.
    :param spawn_prob: probability that a spawner creates a given live neighbour per step.
    :param min_performance: fraction of its available points each agent needs before it may
        exit (negative: always; at most 1).
    """

    board: np.ndarray
    goals: np.ndarray
    agent_locs: tuple[tuple[int, int], ...]
    agent_names: tuple[str, ...]
    points_tables: np.ndarray
    spawn_prob: float = 0.3
    min_performance: float = -1.0
    name: str = ""

    def __post_init__(self) -> None:
        where = f"level {self.name!r}" if self.name else "level"
        self._check_arrays(where)
        if not len(self.agent_locs):
            raise LevelFormatError(
                f"{where}: a level needs at least one agent, agent_locs is empty"
            )
        locs = whole_numbers(self.agent_locs, "agent_locs", where)
        if locs.ndim != 2 or locs.shape[1] != 2:
            raise LevelFormatError(
                f"{where}: agent_locs must be (row, column) pairs, got shape {locs.shape}"
            )
        names = tuple(self.agent_names)
        if not all(isinstance(name, str) and name for name in names):
            raise LevelFormatError(f"{where}: agent_names must be non-empty strings, got {names}")
        tables = read_numbers(self.points_tables, "points_table", where, None)
        object.__setattr__(self, "agent_locs", tuple((int(r), int(c)) for r, c in locs))
        object.__setattr__(self, "agent_names", names)
        object.__setattr__(self, "points_tables", tables.astype(np.float64))
        check_agents(self.board, self.goals, self.agent_locs, names, tables, where)
        check_numbers(self.spawn_prob, self.min_performance, where)

    @property
    def n_agents(self) -> int:
        return len(self.agent_locs)


def check_agents(
    board: np.ndarray,
    goals: np.ndarray,
    locs: Sequence[tuple[int, int]],
    names: Sequence[str],
    tables: np.ndarray,
    where: str,
) -> None:
    """The agents' rules: arrays of one length, each agent on the board at its own location,
    as many agent cells as agents (and the board's own, :func:`.levels.check_board`)."""
    check_board(board, goals, where)
    lengths = (len(locs), len(names), len(tables) if tables.ndim else 0)
    if len(set(lengths)) != 1:
        raise LevelFormatError(
            f"{where}: agent arrays differ in length: {lengths[0]} agent_locs, {lengths[1]} "
            f"agent_names, {lengths[2]} points tables"
        )
    check_points_table(tables, (len(locs), 8, 9), "points_table", where)
    for i, (loc, name) in enumerate(zip(locs, names)):
        check_agent(board, loc, f"agent {i} ({name})", where)
    if len(set(locs)) != len(locs):
        raise LevelFormatError(f"{where}: two agents share a location: {list(locs)}")
    on_board = int(np.count_nonzero(board & cells.AGENT))
    if on_board != len(locs):
        raise LevelFormatError(
            f"{where}: the board holds {on_board} agent cells but agent_locs lists {len(locs)}"
        )


def from_level(level: Level) -> MultiAgentLevel:
    """A single-agent level as a level of one agent named ``agent0``."""
    return MultiAgentLevel(
        level.board,
        level.goals,
        level.agent_locs,
        ("agent0",),
        level.points_tables,
        level.spawn_prob,
        level.min_performance,
        level.name,
    )
