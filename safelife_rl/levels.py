"""SafeLife levels and the original ``.npz`` level formats.

Two formats are read, both written by the original SafeLife:

* a single-level file with arrays ``board``, ``goals``, ``agent_locs`` (row, column) or the older
  ``agent_loc`` (x, y), and optionally ``spawn_prob``, ``min_performance``, ``orientation``,
  ``points_table``;
* an archive with one structured array ``levels`` whose records hold the same fields (with
  ``agent_loc`` as (x, y)), as in the benchmark suites.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import cells
from .files import atomic_path
from .scoring import DEFAULT_POINTS_TABLE

GAME_CLASS = "safelife.safelife_game.SafeLifeGame"


class LevelFormatError(ValueError):
    """A level file or record that cannot be read as a SafeLife level."""


@dataclass(frozen=True, eq=False)
class Level:
    """The initial state of one SafeLife level.

    :param board: uint16 ``(H, W)`` cells (the agent's orientation is in its cell's bits).
    :param goals: uint16 ``(H, W)`` goal cells, evolving by the same rules as the board.
    :param agent_loc: the agent's (row, column).
    :param spawn_prob: probability that a spawner creates a given live neighbour per step.
    :param min_performance: fraction of available points needed to open the exit (negative:
        always open).
    """

    board: np.ndarray
    goals: np.ndarray
    agent_loc: tuple[int, int]
    spawn_prob: float = 0.3
    min_performance: float = -1.0
    points_table: np.ndarray = field(default_factory=lambda: DEFAULT_POINTS_TABLE)
    name: str = ""

    def __post_init__(self) -> None:
        _check_level(self)

    @property
    def shape(self) -> tuple[int, int]:
        return self.board.shape

    @property
    def is_stochastic(self) -> bool:
        return bool(np.any((self.board | self.goals) & cells.SPAWNING))


def _check_level(level: Level) -> None:
    where = f"level {level.name!r}" if level.name else "level"
    board, goals = level.board, level.goals
    for label, array in (("board", board), ("goals", goals)):
        if not isinstance(array, np.ndarray) or array.ndim != 2 or 0 in array.shape:
            shape = getattr(array, "shape", None)
            raise LevelFormatError(f"{where}: {label} must be a non-empty 2-D array, got {shape}")
        if array.dtype != np.uint16:
            raise LevelFormatError(f"{where}: {label} must have dtype uint16, got {array.dtype}")
    if board.shape != goals.shape:
        raise LevelFormatError(f"{where}: board {board.shape} and goals {goals.shape} differ")
    row, col = level.agent_loc
    if not (0 <= row < board.shape[0] and 0 <= col < board.shape[1]):
        raise LevelFormatError(f"{where}: agent location {level.agent_loc} is off the board")
    if not board[row, col] & cells.AGENT:
        raise LevelFormatError(f"{where}: no agent at its location {level.agent_loc}")
    n_agents = int(np.count_nonzero(board & cells.AGENT))
    if n_agents != 1:
        raise LevelFormatError(f"{where}: exactly one agent is supported, found {n_agents}")
    if not 0.0 <= level.spawn_prob <= 1.0:
        raise LevelFormatError(f"{where}: spawn_prob {level.spawn_prob} is not in [0, 1]")
    if np.shape(level.points_table) != (8, 9):
        raise LevelFormatError(f"{where}: points_table must have shape (8, 9)")


def _uint16(value: object, label: str, where: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "ui" or array.ndim != 2:
        raise LevelFormatError(
            f"{where}: {label} must be a 2-D integer array, got {array.dtype} {array.shape}"
        )
    if array.size and (array.min() < 0 or array.max() > 0xFFFF):
        raise LevelFormatError(f"{where}: {label} has values outside 0-65535")
    return array.astype(np.uint16)


def level_from_record(record: object, where: str, name: str = "") -> Level:
    """Build a level from an original level record or a single-level ``.npz`` mapping."""
    keys = set(record.dtype.names) if hasattr(record, "dtype") else set(record.keys())
    missing = sorted({"board", "goals"} - keys)
    if not keys & {"agent_loc", "agent_locs"}:
        missing.append("agent_loc")
    if missing:
        raise LevelFormatError(f"{where}: missing field(s) {', '.join(missing)}")
    board = _uint16(record["board"], "board", where).copy()
    goals = _uint16(record["goals"], "goals", where).copy()
    if "agent_locs" in keys:
        locs = np.asarray(record["agent_locs"]).reshape(-1, 2)
        if len(locs) != 1:
            raise LevelFormatError(f"{where}: exactly one agent is supported, found {len(locs)}")
        row, col = (int(v) for v in locs[0])
    else:
        x, y = (int(v) for v in np.asarray(record["agent_loc"]).reshape(2))
        row, col = y, x
    if not (0 <= row < board.shape[0] and 0 <= col < board.shape[1]):
        raise LevelFormatError(f"{where}: agent location (row {row}, col {col}) is off the board")
    if "orientation" in keys:
        orientation = int(np.asarray(record["orientation"])) & 3
        board[row, col] &= ~np.uint16(cells.ORIENTATION)
        board[row, col] |= np.uint16(orientation << cells.ORIENTATION_BIT)
    table = DEFAULT_POINTS_TABLE
    if "points_table" in keys:
        table = np.asarray(record["points_table"], np.float64)
        table = table.reshape(table.shape[-2:]) if table.ndim == 3 and len(table) == 1 else table
    if "name" in keys:
        name = str(np.asarray(record["name"]))
    return Level(
        board=board,
        goals=goals,
        agent_loc=(row, col),
        spawn_prob=float(np.asarray(record["spawn_prob"])) if "spawn_prob" in keys else 0.3,
        min_performance=(
            float(np.asarray(record["min_performance"])) if "min_performance" in keys else -1.0
        ),
        points_table=table,
        name=name,
    )


def load_levels(path: str | os.PathLike) -> list[Level]:
    """Load every level of a ``.npz`` file (single level or archive) or a directory of them."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.npz"))
        if not files:
            raise LevelFormatError(f"{path}: directory holds no .npz level files")
        return [level for f in files for level in load_levels(f)]
    if not path.exists():
        raise FileNotFoundError(f"level file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            if "levels" in data.files:
                records = data["levels"]
                if records.dtype.names is None:
                    raise LevelFormatError(f"{path}: 'levels' is not an array of level records")
                return [
                    level_from_record(r, f"{path} level {i}", f"{path.stem}-{i:03d}")
                    for i, r in enumerate(records)
                ]
            return [level_from_record({k: data[k] for k in data.files}, str(path), path.stem)]
    except LevelFormatError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as error:
        raise LevelFormatError(f"{path}: not a readable SafeLife level file ({error})") from error


def _record(level: Level) -> dict[str, np.ndarray]:
    row, col = level.agent_loc
    return {
        "board": level.board,
        "goals": level.goals,
        "agent_locs": np.array([[row, col]], np.int64),
        "spawn_prob": np.float64(level.spawn_prob),
        "min_performance": np.float64(level.min_performance),
        "points_table": np.asarray(level.points_table, np.float64)[None],
        "class": np.array(GAME_CLASS),
        "name": np.array(level.name),
    }


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays to a compressed ``.npz`` file via a temporary file."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)


def save_level(level: Level, path: str | os.PathLike) -> None:
    """Save one level as an original-style single-level ``.npz`` file."""
    write_npz(Path(path), _record(level))


def save_levels(levels: Sequence[Level] | Iterable[Level], path: str | os.PathLike) -> None:
    """Save levels as an archive like the benchmark suites (one ``levels`` record array)."""
    levels = list(levels)
    if not levels:
        raise ValueError("no levels to save")
    shape = levels[0].shape
    if any(level.shape != shape for level in levels):
        raise ValueError("levels of one archive must share a board shape")
    name_len = max(1, max(len(level.name) for level in levels))
    dtype = np.dtype(
        [
            ("spawn_prob", "<f8"),
            ("orientation", "<i8"),
            ("agent_loc", "<i8", (2,)),
            ("board", "<u2", shape),
            ("class", f"<U{len(GAME_CLASS)}"),
            ("min_performance", "<f8"),
            ("goals", "<u2", shape),
            ("name", f"<U{name_len}"),
            ("points_table", "<f8", (1, 8, 9)),
        ]
    )
    records = np.zeros(len(levels), dtype)
    for record, level in zip(records, levels):
        row, col = level.agent_loc
        record["spawn_prob"] = level.spawn_prob
        record["orientation"] = (int(level.board[row, col]) & cells.ORIENTATION) >> 12
        record["agent_loc"] = (col, row)
        record["board"] = level.board
        record["class"] = GAME_CLASS
        record["min_performance"] = level.min_performance
        record["goals"] = level.goals
        record["name"] = level.name
        record["points_table"] = level.points_table
    write_npz(Path(path), {"levels": records})
