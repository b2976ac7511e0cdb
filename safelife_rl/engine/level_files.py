"""SafeLife level files: one reader and one writer for levels of one agent and of several.

Files are read in every format the original SafeLife writes:

* a single-level file with arrays ``board``, ``goals``, ``agent_locs`` ``(A, 2)`` (row, column)
  or the older ``agent_loc`` (x, y), and optionally ``agent_names`` ``(A,)``, ``spawn_prob``,
  ``min_performance``, ``orientation`` (every agent faces that way), ``points_table`` (one
  ``(8, 9)`` table or one per agent, ``(A, 8, 9)``) and ``name``;
* an archive with one structured array ``levels`` whose records hold the same fields, as the
  benchmark suites (single-agent, ``agent_loc`` as (x, y)) and the multi-agent suites.

They are written as SafeLife 1.2 writes them: ``agent_locs``, ``points_table`` ``(A, 8, 9)``
and, for a :class:`~safelife_rl.engine.multi_agent_levels.MultiAgentLevel`, ``agent_names``.

Every field is checked (type, shape, range, finiteness, cell kinds, the agents); a file that
fails any check, or cannot be read at all, raises
:class:`~safelife_rl.engine.levels.LevelFormatError` naming the file and, in an archive, the
record. Files are read without unpickling anything.
"""

from __future__ import annotations

import os
import tokenize
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import (
    Level,
    LevelFormatError,
    check_level,
    check_one_agent,
    read_numbers,
    whole_numbers,
)
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel, check_agents
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safety_rl_common.errors import UserError
from safety_rl_common.files import atomic_path, check_archive, check_readable_file

#: The game class a written level names, as the original's files do.
GAME_CLASS = "safelife.safelife_game.SafeLifeGame"

# Everything numpy and zipfile raise on a corrupt archive or array header.
_READ_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    ValueError,
    KeyError,
    OSError,
    NotImplementedError,
    OverflowError,
    MemoryError,
    tokenize.TokenError,
)


def _read_number(value: object, label: str, where: str) -> float:
    return float(read_numbers(value, label, where, ()))


def _read_cells(value: object, label: str, where: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "ui" or array.ndim != 2:
        raise LevelFormatError(
            f"{where}: {label} must be a 2-D integer array, got {array.dtype} {array.shape}"
        )
    if array.size and (array.min() < 0 or array.max() > 0xFFFF):
        raise LevelFormatError(f"{where}: {label} has values outside 0-65535")
    return array.astype(np.uint16)


def _agent_locs(fields: Mapping[str, Any], where: str) -> np.ndarray:
    """``(A, 2)`` (row, column) from ``agent_locs`` (row, column) or ``agent_loc`` (x, y)."""
    if "agent_locs" not in fields:
        return whole_numbers(fields["agent_loc"], "agent_loc", where, (2,))[None, ::-1]
    locs = whole_numbers(fields["agent_locs"], "agent_locs", where)
    locs = locs[None] if locs.shape == (2,) else locs
    if locs.ndim != 2 or locs.shape[1] != 2:
        raise LevelFormatError(
            f"{where}: agent_locs must be (row, column) pairs, got shape {locs.shape}"
        )
    return locs


def _agent_names(fields: Mapping[str, Any], count: int, where: str) -> tuple[str, ...]:
    if "agent_names" not in fields:
        return tuple(f"agent{i}" for i in range(count))
    names = np.asarray(fields["agent_names"])
    if names.dtype.kind != "U" or names.ndim != 1:
        raise LevelFormatError(
            f"{where}: agent_names must be a 1-D array of strings, got {names.dtype} {names.shape}"
        )
    return tuple(str(name) for name in names)


def _read_name(fields: Mapping[str, Any], where: str, default: str) -> str:
    """The record's ``name`` (one string), or ``default`` if it has none."""
    if "name" not in fields:
        return default
    text = np.asarray(fields["name"])
    if text.dtype.kind != "U" or text.ndim != 0:
        raise LevelFormatError(f"{where}: name must be one string, got {text.dtype} {text.shape}")
    return str(text)


def record_fields(record: object, where: str) -> Mapping[str, Any]:
    """A level record (a structured array's record or a mapping) as a mapping of its fields."""
    if isinstance(record, Mapping):
        return record
    if isinstance(getattr(record, "dtype", None), np.dtype) and record.dtype.names:
        return {key: record[key] for key in record.dtype.names}
    raise LevelFormatError(f"{where}: not a level record (a structured array with fields)")


def level_from_record(
    record: object, where: str, name: str = "", multi_agent: bool = False
) -> Level | MultiAgentLevel:
    """Build a level from a level record or a single-level ``.npz`` mapping; ``where`` (the
    file and record) starts every error message.

    :param multi_agent: make a :class:`MultiAgentLevel` of as many agents as the record has;
        otherwise a :class:`Level`, and a record of several agents is refused.
    """
    fields = record_fields(record, where)
    missing = sorted({"board", "goals"} - set(fields))
    if not set(fields) & {"agent_loc", "agent_locs"}:
        missing.append("agent_locs" if multi_agent else "agent_loc")
    if missing:
        raise LevelFormatError(f"{where}: missing field(s) {', '.join(missing)}")
    board = _read_cells(fields["board"], "board", where).copy()
    goals = _read_cells(fields["goals"], "goals", where).copy()
    locs = _agent_locs(fields, where)
    agent_locs = tuple((int(row), int(col)) for row, col in locs)
    if not multi_agent:
        check_one_agent(len(agent_locs), where)
    spawn_prob = _read_number(fields.get("spawn_prob", 0.3), "spawn_prob", where)
    min_performance = _read_number(fields.get("min_performance", -1.0), "min_performance", where)
    tables = np.tile(DEFAULT_POINTS_TABLE, (len(locs), 1, 1))
    if "points_table" in fields:
        tables = read_numbers(fields["points_table"], "points_table", where, None)
        tables = tables[None] if tables.shape == (8, 9) else tables
    if multi_agent:
        names = _agent_names(fields, len(locs), where)
        check_agents(board, goals, agent_locs, names, tables, where)
    else:  # the one agent's table, (8, 9) once a leading agent axis is dropped
        table = (tables[0] if tables.shape == (1, 8, 9) else tables).astype(np.float64)
        check_level(board, goals, agent_locs[0], spawn_prob, min_performance, table, where)
    if "orientation" in fields:  # every agent faces that way, as in the original
        orientation = int(whole_numbers(fields["orientation"], "orientation", where, ())[()])
        if not 0 <= orientation <= 3:
            raise LevelFormatError(
                f"{where}: orientation {orientation} is not 0-3 (up, right, down, left)"
            )
        rows, cols = locs[:, 0], locs[:, 1]
        board[rows, cols] &= ~np.uint16(cells.ORIENTATION)
        board[rows, cols] |= np.uint16(orientation << cells.ORIENTATION_BIT)
    name = _read_name(fields, where, name)
    if multi_agent:
        return MultiAgentLevel(
            board, goals, agent_locs, names, tables, spawn_prob, min_performance, name
        )
    return Level(board, goals, agent_locs[0], spawn_prob, min_performance, table, name)


def read_npz(path: str | os.PathLike, what: str = "level file") -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file; any failure to read it (not a zip archive, corrupt or
    truncated data, pickled objects) raises :class:`LevelFormatError` naming the file."""
    path = Path(path)
    try:
        check_readable_file(path)  # a missing file raises FileNotFoundError naming it
    except UserError as error:
        raise LevelFormatError(str(error)) from None
    with open(path, "rb") as handle:
        if handle.read(4) not in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip's first record
            raise LevelFormatError(f"{path}: not a {what} (an .npz zip archive)")
        handle.seek(0)
        key = None
        try:
            with zipfile.ZipFile(handle) as archive:
                check_archive(archive, path)
            handle.seek(0)
            with np.load(handle, allow_pickle=False) as data:
                arrays = {}
                for key in data.files:
                    arrays[key] = np.asarray(data[key])
        except UserError as error:
            raise LevelFormatError(str(error)) from None
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


def load_levels(path: str | os.PathLike, multi_agent: bool = False) -> list[Any]:
    """Every level of a ``.npz`` file (single level or archive) or a directory of them:
    :class:`Level` objects, or with ``multi_agent`` :class:`MultiAgentLevel` ones (a
    single-agent file then loads as levels of one agent named ``agent0``)."""
    if not os.fspath(path):
        raise LevelFormatError("levels path is empty: give a .npz level file or a directory")
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.npz"))
        if not files:
            raise LevelFormatError(f"{path}: directory holds no .npz level files")
        return [level for f in files for level in load_levels(f, multi_agent)]
    arrays = read_npz(path)
    if "levels" not in arrays:
        return [level_from_record(arrays, str(path), path.stem, multi_agent)]
    records = arrays["levels"]
    if records.dtype.names is None or records.ndim != 1:
        raise LevelFormatError(
            f"{path}: 'levels' must be a 1-D array of level records, got {records.dtype} "
            f"{records.shape}"
        )
    if not len(records):
        raise LevelFormatError(f"{path}: the archive holds no levels")
    return [
        level_from_record(r, f"{path} level {i}", f"{path.stem}-{i:03d}", multi_agent)
        for i, r in enumerate(records)
    ]


def level_record(level: Level | MultiAgentLevel) -> dict[str, np.ndarray]:
    """The arrays a level is written as (agent names for multi-agent levels only)."""
    names = {"agent_names": np.array(level.agent_names)} if hasattr(level, "agent_names") else {}
    return {
        "board": level.board,
        "goals": level.goals,
        "agent_locs": np.array(level.agent_locs, np.int64),
        **names,
        "points_table": np.asarray(level.points_tables, np.float64),
        "spawn_prob": np.float64(level.spawn_prob),
        "min_performance": np.float64(level.min_performance),
        "class": np.array(GAME_CLASS),
        "name": np.array(level.name),
    }


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays to a compressed ``.npz`` file via a temporary file."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)


def save_level(level: Level | MultiAgentLevel, path: str | os.PathLike) -> None:
    """Save one level as a single-level ``.npz`` file."""
    write_npz(Path(path), level_record(level))


def save_levels(
    levels: Iterable[Level] | Iterable[MultiAgentLevel], path: str | os.PathLike
) -> None:
    """Save levels of one kind, board shape and agent count as an archive (one ``levels``
    record array), as the suites are stored."""
    records = [level_record(level) for level in levels]
    if not records:
        raise ValueError("no levels to save")
    if (
        len(
            {
                tuple((key, value.shape) for key, value in r.items() if value.dtype.kind != "U")
                for r in records
            }
        )
        != 1
    ):
        raise ValueError(
            "levels of one archive must be of one kind and share a board shape and agent count"
        )
    dtype = np.dtype(
        [
            (key, f"<U{max(1, *(r[key].dtype.itemsize // 4 for r in records))}", value.shape)
            if value.dtype.kind == "U"
            else (key, value.dtype, value.shape)
            for key, value in records[0].items()
        ]
    )
    archive = np.zeros(len(records), dtype)
    for row, record in zip(archive, records):
        for key, value in record.items():
            row[key] = value
    write_npz(Path(path), {"levels": archive})
