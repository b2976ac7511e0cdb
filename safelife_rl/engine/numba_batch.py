"""N single-board SafeLife games in stacked arrays, stepped and observed in one Numba call each.

:class:`SlotBatch` is the engine under :class:`~safelife_rl.training.batched.BatchedSafeLifeVecEnv`:
each slot is one env's game, whose state arrays become views of the batch's, so the env still
sees (and renders, scores and resets) its own game.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.observation import combined_cells
from safelife_rl.engine.physics import advance_board, execute_actions
from safelife_rl.engine.scoring import update_exits


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
    board ``k`` of ``combined`` (N, H, W) (see :mod:`safelife_rl.engine.observation`), in one call."""
    out = np.empty((len(combined), *view_shape, len(channels)), np.uint8)
    _observe_kernel(np.ascontiguousarray(combined, np.uint32), np.ascontiguousarray(centers,
                    np.int64), np.asarray(channels, np.uint32), out)
    return out


class SlotBatch:
    """The state of N single-board games in stacked arrays, stepped together.

    :meth:`adopt` takes over a freshly reset :class:`~safelife_rl.engine.game.SafeLifeGame` of one
    board into slot ``i``: its state arrays become views of the batch's, so the game object
    (which the env, its wrappers, rendering and side-effect scoring read) always shows the
    current state. Each slot keeps its game's own random generator and step count, which a
    batched ``SafeLifeGame`` (one generator, one step count) cannot.
    """

    def __init__(self, size: int):
        self.size = size
        self.games: list[SafeLifeGame | None] = [None] * size
        self.boards: np.ndarray | None = None

    def _allocate(self, shape: tuple[int, int]) -> None:
        n = self.size
        self.boards = np.zeros((n, *shape), np.uint16)
        self.goals = np.zeros((n, *shape), np.uint16)
        self.agent_locs = np.zeros((n, 2), np.int64)
        self.spawn_prob = np.zeros(n, np.float64)
        self.points_table = np.zeros((n, 8, 9), np.float64)
        self.initial_counts = np.zeros((n, 8, 9), np.int64)
        self.required_points = np.zeros(n, np.float64)
        self.points = np.zeros(n, np.float64)
        self.can_exit = np.zeros(n, bool)
        self.active = np.zeros(n, bool)
        self.moving_goals = np.zeros(n, bool)

    def adopt(self, index: int, game: SafeLifeGame) -> None:
        """Put a one-board ``game`` into slot ``index`` (replacing the game there)."""
        if len(game) != 1:
            raise ValueError(f"a batch slot holds one board, got a game of {len(game)}")
        shape = game.boards.shape[1:]
        if self.boards is None:
            self._allocate(shape)
        elif shape != self.boards.shape[1:]:
            raise ValueError(
                f"vec_env=batched plays all boards in one array, but a level of shape {shape} "
                f"came after boards of shape {self.boards.shape[1:]}; use vec_env=dummy"
            )
        for name in ("boards", "goals", "agent_locs", "required_points", "points",
                     "can_exit", "active"):
            batch = getattr(self, name)
            batch[index] = getattr(game, name)[0]
            setattr(game, name, batch[index : index + 1])
        self.spawn_prob[index] = game.spawn_prob[0]
        self.points_table[index] = game.points_table[0]
        self.initial_counts[index] = game.initial_counts[0]
        goals = self.goals[index]
        self.moving_goals[index] = bool((goals & cells.SPAWNING).any()) or not np.array_equal(
            advance_board(goals, self.spawn_prob[index]), goals
        )
        self.games[index] = game

    def _advance(self, boards: np.ndarray, which: np.ndarray) -> None:
        """Advance ``boards[which]`` in place: boards without spawners in one call, each board
        with spawners on its own game's generator (drawing what the game alone would draw)."""
        spawning = (boards[which] & cells.SPAWNING).any(axis=(1, 2))
        plain, random = which[~spawning], which[spawning]
        if len(plain):
            boards[plain] = advance_board(boards[plain], self.spawn_prob[plain])
        for k in random:
            boards[k] = advance_board(boards[k], self.spawn_prob[k], self.games[k].rng)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step of every slot, as :meth:`SafeLifeGame.step` steps a game.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive.
        """
        if any(game is None for game in self.games):
            raise RuntimeError("every slot needs a game before the batch steps")
        execute_actions(self.boards, self.agent_locs, actions)
        self._advance(self.boards, np.arange(self.size))
        self._advance(self.goals, np.flatnonzero(self.moving_goals))
        for game in self.games:
            game.num_steps += 1
        points, self.can_exit[:] = update_exits(
            self.boards, self.goals, self.agent_locs, self.points_table,
            self.initial_counts, self.required_points,
        )
        rewards = ((points - self.points) * self.active).astype(np.float32)
        self.points[:] = points
        present = self.boards[np.arange(self.size), self.agent_locs[:, 0], self.agent_locs[:, 1]]
        self.active &= (present & cells.AGENT) > 0
        return rewards, ~self.active

    def observe(
        self, view_shape: tuple[int, int], channels: Sequence[int], remove_white_goals: bool
    ) -> np.ndarray:
        """Every slot's observation, as :class:`SafeLifeEnv` observes its game."""
        combined = combined_cells(self.boards, self.goals, remove_white_goals)
        return batch_observations(combined, self.agent_locs, view_shape, channels)
