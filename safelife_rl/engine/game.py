"""A batch of SafeLife games stepped together on the CPU (the Numba backend).

One step executes every agent's action, one after another in agent order (each agent sees what
the ones before it did: it cannot enter a cell another occupies, life it creates takes its
colour, it may destroy a destructible agent), then advances boards and goals one generation and
opens or closes the exits. Each agent scores the board with its own points table; its reward is
the change in its points while it is active, and it may exit once the points it has earned
reach its share ``ceil(min_performance * its available points)``. An agent that exits (or is
destroyed) leaves the board, earns :data:`~safelife_rl.engine.scoring.EXIT_POINTS` once and is
done. A single-agent level is a game of one agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level, check_playable_together
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.observation import (
    DEFAULT_CHANNELS,
    DEFAULT_VIEW,
    batch_observations,
    combined_cells,
)
from safelife_rl.engine.physics import advance_board, execute_actions
from safelife_rl.engine.scoring import EXIT_POINTS, alive_counts, available_points, update_exits
from safety_rl_common.errors import UserError


class SafeLifeGame:
    """N games of A agents each on boards of one shape (a
    :class:`~safelife_rl.engine.game_batch.GameBatch`): per-game arrays lead with N, per-agent
    arrays with (N, A); A is 1 for :class:`Level` levels.

    :param levels: the starting levels (single-agent or multi-agent), all of one board shape
        and agent count.
    :param rng: random source for spawners (required only if a level has spawners).
    """

    def __init__(
        self, levels: Sequence[Level | MultiAgentLevel], rng: np.random.Generator | None = None
    ):
        check_playable_together(levels)
        self.levels = list(levels)
        self.rng = rng
        # row-major copies: the kernels need them, and a level's arrays may be views
        self.boards = np.stack([level.board for level in levels]).astype(np.uint16, order="C")
        self.goals = np.stack([level.goals for level in levels]).astype(np.uint16, order="C")
        self.agent_locs = np.array([level.agent_locs for level in levels], np.int64)
        self.spawn_prob = np.array([level.spawn_prob for level in levels], np.float64)
        self.points_table = np.stack([level.points_tables for level in levels]).astype(np.float64)
        self.initial_counts = alive_counts(self.boards, self.goals)
        # the agents' tables first, so that one call scores them all: (A, N) -> (N, A)
        per_agent = available_points(
            self.boards, self.initial_counts, np.moveaxis(self.points_table, 1, 0)
        )
        self.available_points = per_agent.T.copy()
        min_perf = np.array([[level.min_performance] for level in levels], np.float64)
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

    @property
    def n_agents(self) -> int:
        return self.agent_locs.shape[1]

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
        """The cell under each agent's location, ``(N, A)``."""
        games = np.arange(len(self))[:, None]
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

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray]:
        """Play one action per agent, ``(N, A)`` integers 0-8 (``(A,)`` for a single game,
        one integer for every agent), and advance every board one generation.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive, both ``(N, A)``.
        """
        actions = np.asarray(actions)
        shape = self.active.shape
        if (
            actions.ndim
            and actions.shape != shape
            and not (len(self) == 1 and actions.shape == shape[1:])
        ):
            raise UserError(
                f"{shape[0]} game(s) of {shape[1]} agents need one action per agent, shape "
                f"{shape}, got shape {actions.shape}"
            )
        if actions.dtype.kind not in "ui":
            raise UserError(f"actions must be integers 0-8, got dtype {actions.dtype}")
        execute_actions(self.boards, self.agent_locs, np.broadcast_to(actions, shape))
        self.boards = advance_board(self.boards, self.spawn_prob, self.rng)
        if not self._static_goals:
            self.goals = advance_board(self.goals, self.spawn_prob, self.rng)
        self.num_steps += 1
        points, self.can_exit = self._score()
        rewards = ((points - self.points) * self.active).astype(np.float32)
        self.points = points
        self.active &= self.agent_present()
        return rewards, ~self.active

    def observe(
        self,
        view_shape: tuple[int, int] = DEFAULT_VIEW,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        remove_white_goals: bool = True,
    ) -> np.ndarray:
        """Each agent's view, uint8 ``(N, A) + view_shape + (len(channels),)`` (see
        :mod:`safelife_rl.engine.observation`)."""
        combined = np.repeat(
            combined_cells(self.boards, self.goals, remove_white_goals), self.n_agents, axis=0
        )
        views = batch_observations(combined, self.agent_locs.reshape(-1, 2), view_shape, channels)
        return views.reshape(self.agent_locs.shape[:2] + views.shape[1:])
