"""SafeLife levels and the original ``.npz`` level formats.

Two formats are read, both written by the original SafeLife:

* a single-level file with arrays ``board``, ``goals``, ``agent_locs`` (row, column) or the older
  ``agent_loc`` (x, y), and optionally ``spawn_prob``, ``min_performance``, ``orientation``,
  ``points_table``;
* an archive with one structured array ``levels`` whose records hold the same fields (with
  ``agent_loc`` as (x, y)), as in the benchmark suites.

Every field is checked (type, shape, range, finiteness, cell kinds); a file that fails any
check, or cannot be read at all, raises :class:`LevelFormatError` naming the file and, in an
archive, the record. Files are read without unpickling anything.
"""

from __future__ import annotations

import os
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from safelife_rl.common.errors import UserError
from safelife_rl.common.files import atomic_path
from safelife_rl.engine import cells
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE

T = TypeVar("T")

GAME_CLASS = "safelife.safelife_game.SafeLifeGame"
# The bits a cell's flags use; the others (bit 14) mean nothing to the engine.
_CELL_BITS = np.uint16(
    cells.ALIVE | cells.AGENT | cells.PUSHABLE | cells.DESTRUCTIBLE | cells.FROZEN
    | cells.PRESERVING | cells.INHIBITING | cells.SPAWNING | cells.EXIT | cells.COLORS
    | cells.ORIENTATION | cells.PULLABLE
)
#: Largest magnitude of a points-table entry, so that sums over a board stay finite.
MAX_POINTS = 1e6

# Everything numpy and zipfile raise on a corrupt archive or array header.
_READ_ERRORS = (
    zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, OSError, NotImplementedError,
    OverflowError, MemoryError, tokenize.TokenError,
)


class LevelFormatError(UserError):
    """A level or trace file, or a level record, that cannot be read as a SafeLife level."""


class BoardLevel:
    """What single- and multi-agent levels share: a uint16 board and goals of one shape."""

    board: np.ndarray
    goals: np.ndarray

    def _check_arrays(self, where: str) -> None:
        for label, array in (("board", self.board), ("goals", self.goals)):
            if not isinstance(array, np.ndarray) or array.dtype != np.uint16:
                dtype = getattr(array, "dtype", type(array).__name__)
                raise LevelFormatError(f"{where}: {label} must be a uint16 array, got {dtype}")

    @property
    def shape(self) -> tuple[int, int]:
        return self.board.shape

    @property
    def is_stochastic(self) -> bool:
        return bool(np.any((self.board | self.goals) & cells.SPAWNING))


@dataclass(frozen=True, eq=False)
class Level(BoardLevel):
    """The initial state of one SafeLife level.

    :param board: uint16 ``(H, W)`` cells (the agent's orientation is in its cell's bits).
    :param goals: uint16 ``(H, W)`` goal cells, evolving by the same rules as the board.
    :param agent_loc: the agent's (row, column).
    :param spawn_prob: probability that a spawner creates a given live neighbour per step.
    :param min_performance: fraction of available points needed to open the exit (negative:
        always open; at most 1).
    :param points_table: ``(8, 9)`` points per (goal colour, cell colour or empty), finite and
        within ``MAX_POINTS``.
    """

    board: np.ndarray
    goals: np.ndarray
    agent_loc: tuple[int, int]
    spawn_prob: float = 0.3
    min_performance: float = -1.0
    points_table: np.ndarray = field(default_factory=lambda: DEFAULT_POINTS_TABLE)
    name: str = ""

    def __post_init__(self) -> None:
        where = f"level {self.name!r}" if self.name else "level"
        loc = tuple(self.agent_loc)
        if len(loc) != 2 or not all(isinstance(v, (int, np.integer)) for v in loc):
            raise LevelFormatError(f"{where}: agent_loc must be two integers, got {self.agent_loc}")
        self._check_arrays(where)
        _check_level(
            self.board, self.goals, self.agent_loc, self.spawn_prob, self.min_performance,
            self.points_table, where,
        )

    @property
    def agent_locs(self) -> tuple[tuple[int, int], ...]:
        """Every agent's (row, column): the one agent's (as multi-agent levels give them)."""
        return (tuple(self.agent_loc),)

    @property
    def points_tables(self) -> np.ndarray:
        """Every agent's points table, ``(1, 8, 9)``."""
        return np.asarray(self.points_table)[None]


def _check_level(
    board: np.ndarray,
    goals: np.ndarray,
    agent_loc: tuple[int, int],
    spawn_prob: float,
    min_performance: float,
    points_table: np.ndarray,
    where: str,
) -> None:
    """The rules every single-agent level obeys, whatever it was made from."""
    check_board(board, goals, where)
    check_agent(board, agent_loc, "agent", where)
    n_agents = int(np.count_nonzero(board & cells.AGENT))
    if n_agents != 1:
        raise LevelFormatError(
            f"{where}: exactly one agent is supported, found {n_agents} (levels of several "
            "agents load with safelife_rl.engine.multi_agent_levels.load_levels)"
        )
    check_numbers(spawn_prob, min_performance, where)
    check_points_table(points_table, (8, 9), "points_table", where)


def check_board(board: np.ndarray, goals: np.ndarray, where: str) -> None:
    """Board and goals: non-empty 2-D arrays of one shape whose cells use only known bits."""
    for label, array in (("board", board), ("goals", goals)):
        if array.ndim != 2 or 0 in array.shape:
            raise LevelFormatError(f"{where}: {label} must be a non-empty 2-D array, got shape "
                                   f"{array.shape}")
    if board.shape != goals.shape:
        raise LevelFormatError(f"{where}: board {board.shape} and goals {goals.shape} differ")
    for label, array in (("board", board), ("goals", goals)):
        if np.any(array & ~_CELL_BITS):
            value = int(array[(array & ~_CELL_BITS) != 0][0])
            raise LevelFormatError(
                f"{where}: {label} has cell {value:#06x} with bits that mean nothing "
                f"(cells use bits 0-13 and 15, see safelife_rl.engine.cells)"
            )


def check_agent(board: np.ndarray, loc: tuple[int, int], label: str, where: str) -> None:
    """An agent (named ``label`` in errors) on the board at ``loc`` (row, column)."""
    row, col = loc
    if not (0 <= row < board.shape[0] and 0 <= col < board.shape[1]):
        raise LevelFormatError(
            f"{where}: {label} location (row {row}, col {col}) is off the board {board.shape}"
        )
    if not board[row, col] & cells.AGENT:
        raise LevelFormatError(f"{where}: no {label} at its location (row {row}, col {col})")


def check_numbers(spawn_prob: float, min_performance: float, where: str) -> None:
    if not (_is_real(spawn_prob) and 0.0 <= spawn_prob <= 1.0):
        raise LevelFormatError(f"{where}: spawn_prob {spawn_prob!r} is not a number in [0, 1]")
    if not (_is_real(min_performance) and -np.inf < min_performance <= 1.0):
        raise LevelFormatError(
            f"{where}: min_performance {min_performance!r} is not a finite number <= 1 "
            "(negative: exit always open)"
        )


def check_points_table(
    points_table: np.ndarray, shape: tuple[int, ...], label: str, where: str
) -> None:
    """Numbers of the given shape, finite and within :data:`MAX_POINTS`."""
    table = np.asarray(points_table)
    if table.shape != shape or table.dtype.kind not in "uif":
        raise LevelFormatError(
            f"{where}: {label} must be {shape} numbers, got {table.dtype} {table.shape}"
        )
    if not np.all(np.abs(table) <= MAX_POINTS):  # also false for NaN
        raise LevelFormatError(
            f"{where}: {label} holds {table[~(np.abs(table) <= MAX_POINTS)][0]}; entries "
            f"must be finite and within +-{MAX_POINTS:g}"
        )


def _is_real(value: object) -> bool:
    return np.ndim(value) == 0 and np.asarray(value).dtype.kind in "uif"


def read_numbers(value: object, label: str, where: str, shape: tuple[int, ...] | None) -> np.ndarray:
    """``value`` as a real array of the given shape (``None``: any)."""
    array = np.asarray(value)
    if array.dtype.kind not in "uif":
        raise LevelFormatError(f"{where}: {label} must be numbers, got dtype {array.dtype}")
    if shape is not None and array.shape != shape:
        raise LevelFormatError(
            f"{where}: {label} must have shape {shape}, got {array.shape}"
        )
    return array


def whole_numbers(
    value: object, label: str, where: str, shape: tuple[int, ...] | None = None
) -> np.ndarray:
    """``value`` as an int64 array; fractions, NaN and values beyond int64 are refused."""
    array = read_numbers(value, label, where, shape)
    if array.dtype.kind == "f":
        bad = ~(np.isfinite(array) & (array == np.round(array)) & (np.abs(array) < 2.0**63))
        if bad.any():
            raise LevelFormatError(
                f"{where}: {label} must be whole numbers, got {array[bad].flat[0]}"
            )
    elif array.dtype == np.uint64 and array.size and array.max() >= 2**63:
        raise LevelFormatError(f"{where}: {label} holds {array.max()}, beyond int64")
    return array.astype(np.int64)


def read_number(value: object, label: str, where: str) -> float:
    return float(read_numbers(value, label, where, ()))


def read_cells(value: object, label: str, where: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "ui" or array.ndim != 2:
        raise LevelFormatError(
            f"{where}: {label} must be a 2-D integer array, got {array.dtype} {array.shape}"
        )
    if array.size and (array.min() < 0 or array.max() > 0xFFFF):
        raise LevelFormatError(f"{where}: {label} has values outside 0-65535")
    return array.astype(np.uint16)


def _agent_loc(fields: Mapping[str, Any], where: str) -> tuple[int, int]:
    """(row, column) from ``agent_locs`` (row, column) or ``agent_loc`` (x, y)."""
    if "agent_locs" in fields:
        locs = whole_numbers(fields["agent_locs"], "agent_locs", where)
        if locs.ndim not in (1, 2) or locs.shape[-1] != 2:
            raise LevelFormatError(
                f"{where}: agent_locs must be (row, column) pairs, got shape {locs.shape}"
            )
        locs = locs.reshape(-1, 2)
        if len(locs) != 1:
            raise LevelFormatError(
                f"{where}: exactly one agent is supported, found {len(locs)} (levels of several "
                "agents load with safelife_rl.engine.multi_agent_levels.load_levels)"
            )
        return int(locs[0, 0]), int(locs[0, 1])
    x, y = whole_numbers(fields["agent_loc"], "agent_loc", where, (2,))
    return int(y), int(x)


def record_fields(record: object, where: str) -> Mapping[str, Any]:
    """A level record (a structured array's record or a mapping) as a mapping of its fields."""
    if isinstance(record, Mapping):
        return record
    if isinstance(getattr(record, "dtype", None), np.dtype) and record.dtype.names:
        return {key: record[key] for key in record.dtype.names}
    raise LevelFormatError(f"{where}: not a level record (a structured array with fields)")


def level_from_record(record: object, where: str, name: str = "") -> Level:
    """Build a level from an original level record or a single-level ``.npz`` mapping;
    ``where`` (the file and record) starts every error message."""
    fields = record_fields(record, where)
    missing = sorted({"board", "goals"} - set(fields))
    if not set(fields) & {"agent_loc", "agent_locs"}:
        missing.append("agent_loc")
    if missing:
        raise LevelFormatError(f"{where}: missing field(s) {', '.join(missing)}")
    board = read_cells(fields["board"], "board", where).copy()
    goals = read_cells(fields["goals"], "goals", where).copy()
    agent_loc = _agent_loc(fields, where)
    spawn_prob = read_number(fields.get("spawn_prob", 0.3), "spawn_prob", where)
    min_performance = read_number(fields.get("min_performance", -1.0), "min_performance", where)
    table = DEFAULT_POINTS_TABLE
    if "points_table" in fields:
        table = read_numbers(fields["points_table"], "points_table", where, None)
        table = table.reshape(table.shape[1:]) if table.shape == (1, 8, 9) else table
        table = table.astype(np.float64)
    _check_level(board, goals, agent_loc, spawn_prob, min_performance, table, where)
    if "orientation" in fields:
        orientation = int(whole_numbers(fields["orientation"], "orientation", where, ())[()])
        if not 0 <= orientation <= 3:
            raise LevelFormatError(
                f"{where}: orientation {orientation} is not 0-3 (up, right, down, left)"
            )
        board[agent_loc] &= ~np.uint16(cells.ORIENTATION)
        board[agent_loc] |= np.uint16(orientation << cells.ORIENTATION_BIT)
    name = read_name(fields, where, name)
    return Level(board, goals, agent_loc, spawn_prob, min_performance, table, name)


def read_name(fields: Mapping[str, Any], where: str, default: str) -> str:
    """The record's ``name`` (one string), or ``default`` if it has none."""
    if "name" not in fields:
        return default
    text = np.asarray(fields["name"])
    if text.dtype.kind != "U" or text.ndim != 0:
        raise LevelFormatError(f"{where}: name must be one string, got {text.dtype} {text.shape}")
    return str(text)


def read_npz(path: str | os.PathLike, what: str = "level file") -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file; any failure to read it (not a zip archive, corrupt or
    truncated data, pickled objects) raises :class:`LevelFormatError` naming the file."""
    path = Path(path)
    with open(path, "rb") as handle:  # a missing file raises FileNotFoundError naming it
        if handle.read(4) not in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip's first record
            raise LevelFormatError(f"{path}: not a {what} (an .npz zip archive)")
        handle.seek(0)
        key = None
        try:
            with np.load(handle, allow_pickle=False) as data:
                arrays = {}
                for key in data.files:
                    arrays[key] = np.asarray(data[key])
        except _READ_ERRORS as error:
            member = f" (array {key!r})" if key is not None else ""
            if isinstance(error, ValueError) and "allow_pickle" in str(error):
                raise LevelFormatError(
                    f"{path}: holds pickled Python objects{member}, which are never loaded"
                ) from error
            detail = str(error) if len(str(error)) <= 120 else f"{str(error)[:120]}..."
            raise LevelFormatError(
                f"{path}: not a readable {what}{member}: {type(error).__name__}: {detail}"
            ) from error
    return arrays


def load_levels(path: str | os.PathLike) -> list[Level]:
    """Load every level of a ``.npz`` file (single level or archive) or a directory of them."""
    return read_levels(path, level_from_record)


def read_levels(path: str | os.PathLike, from_record: Callable[[Any, str, str], T]) -> list[T]:
    """Every level of a ``.npz`` file (single level or archive) or a directory of them, each
    made by ``from_record(fields, where, name)`` (one-agent and multi-agent levels share this
    reader and the file formats)."""
    if not os.fspath(path):
        raise LevelFormatError("levels path is empty: give a .npz level file or a directory")
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.npz"))
        if not files:
            raise LevelFormatError(f"{path}: directory holds no .npz level files")
        return [level for f in files for level in read_levels(f, from_record)]
    arrays = read_npz(path)
    if "levels" not in arrays:
        return [from_record(arrays, str(path), path.stem)]
    records = arrays["levels"]
    if records.dtype.names is None or records.ndim != 1:
        raise LevelFormatError(
            f"{path}: 'levels' must be a 1-D array of level records, got {records.dtype} "
            f"{records.shape}"
        )
    if not len(records):
        raise LevelFormatError(f"{path}: the archive holds no levels")
    return [
        from_record(r, f"{path} level {i}", f"{path.stem}-{i:03d}")
        for i, r in enumerate(records)
    ]


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
