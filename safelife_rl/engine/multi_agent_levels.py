"""Multi-agent SafeLife levels and their ``.npz`` formats.

A multi-agent level is a board with ``A`` agents, each with a location, a name (its type in
the procedural-generation file, e.g. ``cyan``) and its own points table. Files are written as
the original SafeLife 1.2 writes them: a single-level file with arrays ``board``, ``goals``,
``agent_locs`` ``(A, 2)`` (row, column), ``agent_names`` ``(A,)``, ``points_table``
``(A, 8, 9)``, ``spawn_prob``, ``min_performance``; or an archive with one structured array
``levels`` of such records. A single-agent file loads as a level of one agent. Every field is
checked as for single-agent levels, plus the agents: arrays of one length, each agent on the
board at its location, as many agent cells as agents.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import (
    GAME_CLASS,
    BoardLevel,
    Level,
    LevelFormatError,
    check_agent,
    check_board,
    check_numbers,
    check_points_table,
    read_cells,
    read_levels,
    read_name,
    read_number,
    read_numbers,
    record_fields,
    whole_numbers,
    write_npz,
)
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE


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
            raise LevelFormatError(f"{where}: a level needs at least one agent, agent_locs is "
                                   "empty")
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
        _check_agents(self.board, self.goals, self.agent_locs, names, tables, where)
        check_numbers(self.spawn_prob, self.min_performance, where)

    @property
    def n_agents(self) -> int:
        return len(self.agent_locs)


def _check_agents(
    board: np.ndarray,
    goals: np.ndarray,
    locs: Sequence[tuple[int, int]],
    names: Sequence[str],
    tables: np.ndarray,
    where: str,
) -> None:
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
    return MultiAgentLevel(level.board, level.goals, level.agent_locs, ("agent0",),
                           level.points_tables, level.spawn_prob, level.min_performance,
                           level.name)


def level_from_record(record: object, where: str, name: str = "") -> MultiAgentLevel:
    """Build a level from a level record or a single-level ``.npz`` mapping (multi-agent
    fields, or the single-agent ``agent_loc`` (x, y)); ``where`` starts every error message."""
    fields = record_fields(record, where)
    missing = sorted({"board", "goals"} - set(fields))
    if not set(fields) & {"agent_loc", "agent_locs"}:
        missing.append("agent_locs")
    if missing:
        raise LevelFormatError(f"{where}: missing field(s) {', '.join(missing)}")
    board = read_cells(fields["board"], "board", where).copy()
    goals = read_cells(fields["goals"], "goals", where).copy()
    if "agent_locs" in fields:
        locs = whole_numbers(fields["agent_locs"], "agent_locs", where)
    else:
        locs = whole_numbers(fields["agent_loc"], "agent_loc", where, (2,))[None, ::-1]
    locs = locs.reshape(-1, 2) if locs.ndim == 1 and locs.shape == (2,) else locs
    if locs.ndim != 2 or locs.shape[1] != 2:
        raise LevelFormatError(
            f"{where}: agent_locs must be (row, column) pairs, got shape {locs.shape}"
        )
    names = _agent_names(fields, len(locs), where)
    tables = np.tile(DEFAULT_POINTS_TABLE, (len(locs), 1, 1))
    if "points_table" in fields:
        tables = read_numbers(fields["points_table"], "points_table", where, None)
        if tables.shape == (8, 9):  # one table, as single-agent files may hold
            tables = tables[None]
    spawn_prob = read_number(fields.get("spawn_prob", 0.3), "spawn_prob", where)
    min_performance = read_number(fields.get("min_performance", -1.0), "min_performance", where)
    agent_locs = tuple((int(r), int(c)) for r, c in locs)
    _check_agents(board, goals, agent_locs, names, tables, where)
    if "orientation" in fields:  # every agent faces that way, as in the original
        orientation = int(whole_numbers(fields["orientation"], "orientation", where, ())[()])
        if not 0 <= orientation <= 3:
            raise LevelFormatError(
                f"{where}: orientation {orientation} is not 0-3 (up, right, down, left)"
            )
        rows, cols = locs[:, 0], locs[:, 1]
        board[rows, cols] &= ~np.uint16(cells.ORIENTATION)
        board[rows, cols] |= np.uint16(orientation << cells.ORIENTATION_BIT)
    return MultiAgentLevel(board, goals, agent_locs, names, tables, spawn_prob,
                           min_performance, read_name(fields, where, name))


def _agent_names(fields: Mapping[str, Any], count: int, where: str) -> tuple[str, ...]:
    if "agent_names" not in fields:
        return tuple(f"agent{i}" for i in range(count))
    names = np.asarray(fields["agent_names"])
    if names.dtype.kind != "U" or names.ndim != 1:
        raise LevelFormatError(
            f"{where}: agent_names must be a 1-D array of strings, got {names.dtype} "
            f"{names.shape}"
        )
    return tuple(str(name) for name in names)


def load_levels(path: str | os.PathLike) -> list[MultiAgentLevel]:
    """Load every level of a ``.npz`` file (single level or archive) or a directory of them."""
    return read_levels(path, level_from_record)


def _record(level: MultiAgentLevel) -> dict[str, np.ndarray]:
    return {
        "board": level.board,
        "goals": level.goals,
        "agent_locs": np.array(level.agent_locs, np.int64),
        "agent_names": np.array(level.agent_names),
        "points_table": level.points_tables,
        "spawn_prob": np.float64(level.spawn_prob),
        "min_performance": np.float64(level.min_performance),
        "class": np.array(GAME_CLASS),
        "name": np.array(level.name),
    }


def save_level(level: MultiAgentLevel, path: str | os.PathLike) -> None:
    """Save one level as an original-style single-level ``.npz`` file."""
    write_npz(Path(path), _record(level))


def save_levels(levels: Iterable[MultiAgentLevel], path: str | os.PathLike) -> None:
    """Save levels of one board shape and agent count as an archive (a ``levels`` array)."""
    levels = list(levels)
    if not levels:
        raise ValueError("no levels to save")
    shape, count = levels[0].shape, levels[0].n_agents
    if any(level.shape != shape or level.n_agents != count for level in levels):
        raise ValueError("levels of one archive must share a board shape and agent count")
    name_len = max(1, max(len(level.name) for level in levels))
    agent_len = max(len(name) for level in levels for name in level.agent_names)
    dtype = np.dtype([
        ("board", "<u2", shape),
        ("goals", "<u2", shape),
        ("agent_locs", "<i8", (count, 2)),
        ("agent_names", f"<U{agent_len}", (count,)),
        ("points_table", "<f8", (count, 8, 9)),
        ("spawn_prob", "<f8"),
        ("min_performance", "<f8"),
        ("class", f"<U{len(GAME_CLASS)}"),
        ("name", f"<U{name_len}"),
    ])
    records = np.zeros(len(levels), dtype)
    for record, level in zip(records, levels):
        for key, value in _record(level).items():
            record[key] = value
    write_npz(Path(path), {"levels": records})
