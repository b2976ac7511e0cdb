"""The agent's observation: a view of the wrapped board centred on the agent.

The board's 16 bits and the goal colour shifted 16 bits up form one 32-bit word per cell; the
observation picks the chosen bits as binary channels. Exits outside the view are drawn on its
edge in their direction, so the agent always knows which way to go.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from safelife_rl.engine import cells

#: The original channel set: the 16 board bits, then the goal's red, green and blue bits.
DEFAULT_CHANNELS: tuple[int, ...] = tuple(range(16)) + (25, 26, 27)
DEFAULT_VIEW = (15, 15)
_WHITE = cells.COLORS


def combined_cells(board: np.ndarray, goals: np.ndarray, remove_white_goals: bool) -> np.ndarray:
    """Board bits with the goal colour in bits 25-27 (white goals dropped if asked)."""
    goal_colors = goals & _WHITE
    if remove_white_goals:
        goal_colors = np.where(goal_colors == _WHITE, 0, goal_colors)
    return board.astype(np.uint32) | (goal_colors.astype(np.uint32) << 16)


def agent_view(
    combined: np.ndarray,
    center: Sequence[int],
    view_shape: tuple[int, int] = DEFAULT_VIEW,
) -> np.ndarray:
    """Cut the ``view_shape`` window centred on ``center`` (row, column) out of a wrapped board."""
    h, w = view_shape
    bh, bw = combined.shape
    y0, x0 = int(center[0]), int(center[1])
    rows = (np.arange(h) + (y0 - h // 2)) % bh
    cols = (np.arange(w) + (x0 - w // 2)) % bw
    view = combined[rows[:, None], cols[None, :]]
    exit_rows, exit_cols = np.nonzero((combined & (cells.EXIT | cells.AGENT)) == cells.EXIT)
    if len(exit_rows):
        # Offsets wrapped into [-size/2, size/2), then clipped to the view's edge.
        dy = (exit_rows - y0 + bh // 2) % bh - bh // 2
        dx = (exit_cols - x0 + bw // 2) % bw - bw // 2
        vy = np.clip(dy + h // 2, 0, h - 1)
        vx = np.clip(dx + w // 2, 0, w - 1)
        view[vy, vx] = combined[exit_rows, exit_cols]
    return view


def to_channels(view: np.ndarray, channels: Sequence[int] = DEFAULT_CHANNELS) -> np.ndarray:
    """Split the chosen bits of each cell into binary uint8 channels (last axis)."""
    shifts = np.asarray(channels, np.uint32)
    return ((view[..., None] >> shifts) & 1).astype(np.uint8)


@numba.njit(cache=True)
def _observe_kernel(combined, centers, shifts, out):
    n, bh, bw = combined.shape
    h, w = out.shape[1], out.shape[2]
    view = np.empty((h, w), np.uint32)
    for k in range(n):
        y0, x0 = centers[k, 0], centers[k, 1]
        for i in range(h):
            row = (i + y0 - h // 2) % bh
            for j in range(w):
                view[i, j] = combined[k, row, (j + x0 - w // 2) % bw]
        for y in range(bh):  # exits, in row-major order as agent_view draws them
            for x in range(bw):
                cell = combined[k, y, x]
                if (cell & (cells.EXIT | cells.AGENT)) == cells.EXIT:
                    dy = (y - y0 + bh // 2) % bh - bh // 2
                    dx = (x - x0 + bw // 2) % bw - bw // 2
                    view[min(max(dy + h // 2, 0), h - 1), min(max(dx + w // 2, 0), w - 1)] = cell
        for i in range(h):
            for j in range(w):
                for c in range(len(shifts)):
                    out[k, i, j, c] = (view[i, j] >> shifts[c]) & 1


def batch_observations(
    combined: np.ndarray,
    centers: np.ndarray,
    view_shape: tuple[int, int],
    channels: Sequence[int],
) -> np.ndarray:
    """``to_channels(agent_view(combined[k], centers[k], view_shape), channels)`` of every
    board ``k`` of ``combined`` (N, H, W), in one call."""
    out = np.empty((len(combined), *view_shape, len(channels)), np.uint8)
    _observe_kernel(
        np.ascontiguousarray(combined, np.uint32),
        np.ascontiguousarray(centers, np.int64),
        np.asarray(channels, np.uint32),
        out,
    )
    return out
