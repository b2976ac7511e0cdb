"""The SafeLife level model: the initial state of a level and the rules every level obeys.

:class:`Level` is a level of one agent;
:class:`~safelife_rl.engine.multi_agent_levels.MultiAgentLevel` one of several. Both check
every field when made, raising :class:`LevelFormatError`; :mod:`.level_files` reads and writes
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safety_rl_common.errors import UserError
from safety_rl_common.limits import SIDE_LIMIT

# The bits a cell's flags use; the others (bit 14) mean nothing to the engine.
_CELL_BITS = np.uint16(
    cells.ALIVE
    | cells.AGENT
    | cells.PUSHABLE
    | cells.DESTRUCTIBLE
    | cells.FROZEN
    | cells.PRESERVING
    | cells.INHIBITING
    | cells.SPAWNING
    | cells.EXIT
    | cells.COLORS
    | cells.ORIENTATION
    | cells.PULLABLE
)
#: Largest magnitude of a points-table entry, so that sums over a board stay finite.
MAX_POINTS = 1e6


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
        check_level(
            self.board,
            self.goals,
            self.agent_loc,
            self.spawn_prob,
            self.min_performance,
            self.points_table,
            where,
        )

    @property
    def agent_locs(self) -> tuple[tuple[int, int], ...]:
        """Every agent's (row, column): the one agent's (as multi-agent levels give them)."""
        return (tuple(self.agent_loc),)

    @property
    def points_tables(self) -> np.ndarray:
        """Every agent's points table, ``(1, 8, 9)``."""
        return np.asarray(self.points_table)[None]


def check_playable_together(levels: Sequence[BoardLevel]) -> None:
    """Raise ``ValueError`` unless ``levels`` can be played as one batch: at least one, one
    board shape, as many agents each."""
    if not levels:
        raise ValueError("a game needs at least one level")
    if len({level.shape for level in levels}) != 1:
        raise ValueError("levels played together must share a board shape")
    if len({len(level.agent_locs) for level in levels}) != 1:
        raise ValueError("levels played together must have as many agents each")


def check_level(
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
    check_one_agent(int(np.count_nonzero(board & cells.AGENT)), where)
    check_numbers(spawn_prob, min_performance, where)
    check_points_table(points_table, (8, 9), "points_table", where)


def check_one_agent(count: int, where: str) -> None:
    """A :class:`Level` holds one agent; levels of several are multi-agent levels."""
    if count != 1:
        raise LevelFormatError(
            f"{where}: exactly one agent is supported, found {count} (levels of several "
            "agents load with load_levels(path, multi_agent=True))"
        )


def check_board(board: np.ndarray, goals: np.ndarray, where: str) -> None:
    """Board and goals: non-empty 2-D arrays of one shape whose cells use only known bits."""
    for label, array in (("board", board), ("goals", goals)):
        if array.ndim != 2 or 0 in array.shape:
            raise LevelFormatError(
                f"{where}: {label} must be a non-empty 2-D array, got shape {array.shape}"
            )
    if board.shape != goals.shape:
        raise LevelFormatError(f"{where}: board {board.shape} and goals {goals.shape} differ")
    try:
        SIDE_LIMIT.check(max(board.shape), "a side of the board")
    except UserError as error:
        raise LevelFormatError(f"{where}: {error}") from None
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


def read_numbers(
    value: object, label: str, where: str, shape: tuple[int, ...] | None
) -> np.ndarray:
    """``value`` as a real array of the given shape (``None``: any)."""
    array = np.asarray(value)
    if array.dtype.kind not in "uif":
        raise LevelFormatError(f"{where}: {label} must be numbers, got dtype {array.dtype}")
    if shape is not None and array.shape != shape:
        raise LevelFormatError(f"{where}: {label} must have shape {shape}, got {array.shape}")
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
