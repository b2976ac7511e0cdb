"""A batch of SafeLife games stepped together.

One step executes each agent's action, advances boards and goals one generation, then opens or
closes the exits and scores the boards. The reward is the change in a board's point value while
its agent is active (an agent that has exited earns :data:`~safelife_rl.scoring.EXIT_POINTS`
once and then nothing more).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import cells
from .levels import Level
from .physics import advance_board, execute_actions
from .scoring import EXIT_POINTS, alive_counts, available_points, update_exits


class SafeLifeGame:
    """N games on boards of one shape; arrays carry a leading dimension N.

    :param levels: the starting levels, all of one board shape.
    :param rng: random source for spawners (required only if a level has spawners).
    """

    def __init__(self, levels: Sequence[Level], rng: np.random.Generator | None = None):
        if not levels:
            raise ValueError("a game needs at least one level")
        if len({level.shape for level in levels}) != 1:
            raise ValueError("levels played together must share a board shape")
        self.levels = list(levels)
        self.rng = rng
        # row-major copies: the kernels need them, and a level's arrays may be views
        self.boards = np.stack([level.board for level in levels]).astype(np.uint16, order="C")
        self.goals = np.stack([level.goals for level in levels]).astype(np.uint16, order="C")
        self.agent_locs = np.array([level.agent_loc for level in levels], np.int64)
        self.spawn_prob = np.array([level.spawn_prob for level in levels], np.float64)
        self.points_table = np.stack([level.points_table for level in levels]).astype(np.float64)
        self.initial_counts = alive_counts(self.boards, self.goals)
        self.available_points = available_points(
            self.boards, self.initial_counts, self.points_table
        )
        min_perf = np.array([level.min_performance for level in levels], np.float64)
        self.required_points = np.maximum(0, np.ceil(min_perf * self.available_points))
        self.num_steps = 0
        self.points, self.can_exit = self._score()
        self.initial_points = self.points.copy()
        self.active = self.agent_present()
        self._static_goals = not (self.goals & cells.SPAWNING).any() and np.array_equal(
            advance_board(self.goals, self.spawn_prob), self.goals
        )

    def __len__(self) -> int:
        return len(self.boards)

    def _score(self) -> tuple[np.ndarray, np.ndarray]:
        return update_exits(
            self.boards,
            self.goals,
            self.agent_locs,
            self.points_table,
            self.initial_counts,
            self.required_points,
        )

    def agent_cells(self) -> np.ndarray:
        """The cell under each agent's location, shape (N,)."""
        return self.boards[np.arange(len(self)), self.agent_locs[:, 0], self.agent_locs[:, 1]]

    def agent_present(self) -> np.ndarray:
        """Whether each agent is still on its board (it has neither exited nor been removed)."""
        return (self.agent_cells() & cells.AGENT) > 0

    def has_exited(self) -> np.ndarray:
        """Whether each agent has left through the exit."""
        return (self.agent_cells() & (cells.AGENT | cells.EXIT)) == cells.EXIT

    @property
    def orientation(self) -> np.ndarray:
        """Each agent's facing: 0 up, 1 right, 2 down, 3 left."""
        return (self.agent_cells() & cells.ORIENTATION) >> cells.ORIENTATION_BIT

    def points_earned(self) -> np.ndarray:
        """Points earned since the start, exit bonus included."""
        return self.points - self.initial_points

    def performance(self) -> np.ndarray:
        """Fraction of the available points earned (exit bonus excluded)."""
        earned = self.points_earned() - self.has_exited() * EXIT_POINTS
        return earned / np.maximum(self.available_points, 1)

    def step(self, actions: np.ndarray | Sequence[int] | int) -> tuple[np.ndarray, np.ndarray]:
        """Play one action per game and advance every board one generation.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive.
        """
        execute_actions(self.boards, self.agent_locs, np.broadcast_to(actions, (len(self),)))
        self.boards = advance_board(self.boards, self.spawn_prob, self.rng)
        if not self._static_goals:
            self.goals = advance_board(self.goals, self.spawn_prob, self.rng)
        self.num_steps += 1
        points, self.can_exit = self._score()
        rewards = ((points - self.points) * self.active).astype(np.float32)
        self.points = points
        self.active &= self.agent_present()
        return rewards, ~self.active
