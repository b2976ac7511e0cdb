"""A batch of SafeLife games stepped together.

One step executes each agent's action, advances boards and goals one generation, then opens or
closes the exits and scores the boards. The reward is the change in a board's point value while
its agent is active (an agent that has exited earns :data:`~safelife_rl.engine.scoring.EXIT_POINTS`
once and then nothing more).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level
from safelife_rl.engine.physics import advance_board, execute_actions
from safelife_rl.engine.scoring import EXIT_POINTS, alive_counts, available_points, update_exits


class GameBatch:
    """What every batch of games shares, one agent a game or several: boards, goals, spawners,
    scores and the step. Per-agent arrays lead with N for one agent a game (this module's
    :class:`SafeLifeGame`) and with (N, A) for several (:class:`~safelife_rl.engine.multi_agent_game.
    MultiAgentGame`); the kernels take either.

    :param levels: the starting levels, all of one board shape.
    :param rng: random source for spawners (required only if a level has spawners).
    :param locs_of: a level's agent location ``(2,)`` (row, column), or locations ``(A, 2)``.
    :param table_of: a level's points table ``(8, 9)``, or one per agent ``(A, 8, 9)``.
    """

    def __init__(self, levels: Sequence, rng: np.random.Generator | None,
                 locs_of: Callable[[Any], Any], table_of: Callable[[Any], Any]):
        if not levels:
            raise ValueError("a game needs at least one level")
        if len({level.shape for level in levels}) != 1:
            raise ValueError("levels played together must share a board shape")
        self.levels = list(levels)
        self.rng = rng
        # row-major copies: the kernels need them, and a level's arrays may be views
        self.boards = np.stack([level.board for level in levels]).astype(np.uint16, order="C")
        self.goals = np.stack([level.goals for level in levels]).astype(np.uint16, order="C")
        self.agent_locs = np.array([locs_of(level) for level in levels], np.int64)
        self.spawn_prob = np.array([level.spawn_prob for level in levels], np.float64)
        self.points_table = np.stack([table_of(level) for level in levels]).astype(np.float64)
        self.initial_counts = alive_counts(self.boards, self.goals)
        # agents' tables moved first, so that one call scores them all: (N,) or (A, N) -> (N, A)
        per_agent = available_points(
            self.boards, self.initial_counts, np.moveaxis(self.points_table, -3, 0)
        )
        self.available_points = np.moveaxis(per_agent, 0, -1)
        min_perf = np.array([level.min_performance for level in levels], np.float64)
        min_perf = min_perf.reshape((-1,) + (1,) * (self.available_points.ndim - 1))
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
        """The cell under each agent's location, shape (N,) or (N, A)."""
        games = np.arange(len(self)).reshape((-1,) + (1,) * (self.agent_locs.ndim - 2))
        return self.boards[games, self.agent_locs[..., 0], self.agent_locs[..., 1]]

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
        """Each agent's points earned since the start, exit bonus included."""
        return self.points - self.initial_points

    def performance(self) -> np.ndarray:
        """Each agent's fraction of its available points earned (exit bonus excluded)."""
        earned = self.points_earned() - self.has_exited() * EXIT_POINTS
        return earned / np.maximum(self.available_points, 1)

    def _play(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Execute ``actions`` (shaped as ``agent_locs`` less its last axis), advance every
        board one generation and score it; returns rewards (float32, zero for inactive agents)
        and whether each agent is now inactive."""
        execute_actions(self.boards, self.agent_locs, actions)
        self.boards = advance_board(self.boards, self.spawn_prob, self.rng)
        if not self._static_goals:
            self.goals = advance_board(self.goals, self.spawn_prob, self.rng)
        self.num_steps += 1
        points, self.can_exit = self._score()
        rewards = ((points - self.points) * self.active).astype(np.float32)
        self.points = points
        self.active &= self.agent_present()
        return rewards, ~self.active


class SafeLifeGame(GameBatch):
    """N games of one agent each on boards of one shape; arrays carry a leading dimension N.

    :param levels: the starting levels, all of one board shape.
    :param rng: random source for spawners (required only if a level has spawners).
    """

    def __init__(self, levels: Sequence[Level], rng: np.random.Generator | None = None):
        super().__init__(levels, rng, lambda level: level.agent_loc,
                         lambda level: level.points_table)

    def step(self, actions: np.ndarray | Sequence[int] | int) -> tuple[np.ndarray, np.ndarray]:
        """Play one action per game and advance every board one generation.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive.
        """
        return self._play(np.broadcast_to(actions, (len(self),)))
