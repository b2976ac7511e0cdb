"""Exact symmetries of SafeLife levels: the 8 symmetries of the square and translations.

The rules treat the four directions alike and the board wraps, so a level turned or mirrored by
a :class:`Symmetry`, then rolled by a translation, and played with the actions mapped by
:meth:`Symmetry.action` goes through the transformed boards with the same rewards, points and
exits, step for step. Two limits: spawners draw their random numbers by cell position, so a
level with spawners plays alike only in distribution; and on a board one cell high or wide the
agent can toggle itself into a block that keeps its facing unturned.

The only direction a cell holds is the facing of the agent (the orientation bits 12-13 of a
cell with the ``AGENT`` flag, on the board and, should one be there, on the goals); it turns
with the board. Orientation bits of other cells mean nothing to the rules and stay as they are.

Turning a board a quarter turn swaps its height and width; :meth:`Symmetry.keeps_shape` says
which symmetries keep a board's shape (all 8 on a square board, 4 on others).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level

_FACING = np.uint16(cells.ORIENTATION)


@dataclass(frozen=True)
class Symmetry:
    """One of the 8 symmetries of the square: a left-right mirror if ``mirror``, then
    ``turns`` quarter turns clockwise."""

    turns: int = 0
    mirror: bool = False

    def __post_init__(self) -> None:
        if self.turns not in range(4) or not isinstance(self.mirror, bool):
            raise ValueError(f"a symmetry is 0-3 turns and a mirror flag, got {self}")

    def keeps_shape(self, shape: tuple[int, int]) -> bool:
        """Whether a board of ``shape`` keeps its shape under this symmetry."""
        return self.turns % 2 == 0 or shape[0] == shape[1]

    def then(self, other: Symmetry) -> Symmetry:
        """This symmetry followed by ``other``."""
        sign = -1 if other.mirror else 1
        return Symmetry((sign * self.turns + other.turns) % 4, self.mirror != other.mirror)

    def inverse(self) -> Symmetry:
        """The symmetry that undoes this one (mirrors undo themselves)."""
        return Symmetry(self.turns if self.mirror else -self.turns % 4, self.mirror)

    def direction(self, direction: int | np.ndarray) -> int | np.ndarray:
        """Where a direction (0 up, 1 right, 2 down, 3 left) points after this symmetry."""
        return ((-direction if self.mirror else direction) + self.turns) % 4

    def action(self, action: int | np.ndarray) -> int | np.ndarray:
        """The action that does in the transformed level what ``action`` does in the original
        (0 no-op; 1-4 move and 5-8 toggle, up, right, down, left)."""
        action = np.asarray(action)
        group = np.where(action >= 5, 5, 1)
        mapped = np.where(action == 0, 0, group + self.direction(action - group))
        return int(mapped) if mapped.ndim == 0 else mapped

    def point(self, point: tuple[int, int], shape: tuple[int, int]) -> tuple[int, int]:
        """Where cell (row, column) of a board of ``shape`` goes."""
        (row, col), (height, width) = point, shape
        if self.mirror:
            col = width - 1 - col
        for _ in range(self.turns):
            row, col, height, width = col, height - 1 - row, width, height
        return int(row), int(col)

    def apply(self, boards: np.ndarray) -> np.ndarray:
        """Boards of shape ``(..., H, W)`` moved by this symmetry (cell bits unchanged)."""
        if self.mirror:
            boards = boards[..., ::-1]
        return np.rot90(boards, -self.turns, axes=(-2, -1))


IDENTITY = Symmetry()
#: The dihedral group of the square: the 4 turns, then the 4 turns after a mirror.
SYMMETRIES = tuple(Symmetry(turns, mirror) for mirror in (False, True) for turns in range(4))


def transform_cells(
    boards: np.ndarray, symmetry: Symmetry = IDENTITY, shift: tuple[int, int] = (0, 0)
) -> np.ndarray:
    """Boards (or goals) of shape ``(..., H, W)`` moved by ``symmetry``, then rolled by
    ``shift`` (rows, columns) on the wrapped board, with the agent's facing turned to match.
    Returns a new C-contiguous array, as the engine needs."""
    moved = np.ascontiguousarray(np.roll(symmetry.apply(boards), shift, axis=(-2, -1)))
    agents = (moved & cells.AGENT) != 0
    facing = (moved[agents] & _FACING) >> cells.ORIENTATION_BIT
    turned = symmetry.direction(facing.astype(np.int64)).astype(np.uint16)
    moved[agents] = (moved[agents] & ~_FACING) | (turned << cells.ORIENTATION_BIT)
    return moved


def transform_point(
    point: tuple[int, int],
    shape: tuple[int, int],
    symmetry: Symmetry = IDENTITY,
    shift: tuple[int, int] = (0, 0),
) -> tuple[int, int]:
    """Where cell (row, column) of a board of ``shape`` goes under :func:`transform_cells`."""
    row, col = symmetry.point(point, shape)
    height, width = symmetry.apply(np.empty(shape, bool)).shape
    return (row + shift[0]) % height, (col + shift[1]) % width


def transform_level(
    level: Level, symmetry: Symmetry = IDENTITY, shift: tuple[int, int] = (0, 0)
) -> Level:
    """``level`` moved by ``symmetry``, then rolled by ``shift`` (rows, columns); play it with
    ``symmetry.action(a)`` for each action ``a`` of the original."""
    return replace(
        level,
        board=transform_cells(level.board, symmetry, shift),
        goals=transform_cells(level.goals, symmetry, shift),
        agent_loc=transform_point(level.agent_loc, level.shape, symmetry, shift),
    )
