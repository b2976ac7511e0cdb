"""N single-agent SafeLife games in stacked arrays, stepped and observed in one Numba call each.

:class:`SlotBatch` is the engine under
:class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` (``vec_env=batched``):
each slot is one env's game, whose state arrays become views of the batch's, so the env still
sees (and renders, scores and resets) its own game.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.observation import batch_observations, combined_cells
from safelife_rl.engine.physics import advance_board, execute_actions
from safelife_rl.engine.scoring import update_exits


class SlotBatch:
    """The state of N games of one board and one agent each in stacked arrays, stepped
    together; per-agent arrays lead with (N, 1) as a game's do.

    :meth:`adopt` takes over a freshly reset :class:`~safelife_rl.engine.game.SafeLifeGame` of
    one board and one agent into slot ``i``: its state arrays become views of the batch's, so the
    game object (which the env, its wrappers, rendering and side-effect scoring read) always shows
    the current state. Each slot keeps its game's own random generator and step count, which a
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
        self.agent_locs = np.zeros((n, 1, 2), np.int64)
        self.spawn_prob = np.zeros(n, np.float64)
        self.points_table = np.zeros((n, 1, 8, 9), np.float64)
        self.initial_counts = np.zeros((n, 8, 9), np.int64)
        self.required_points = np.zeros((n, 1), np.float64)
        self.points = np.zeros((n, 1), np.float64)
        self.can_exit = np.zeros((n, 1), bool)
        self.active = np.zeros((n, 1), bool)
        self.moving_goals = np.zeros(n, bool)

    def adopt(self, index: int, game: SafeLifeGame) -> None:
        """Put a one-board, one-agent ``game`` into slot ``index`` (replacing the game there)."""
        if game.agent_locs.shape[:2] != (1, 1):
            raise ValueError(
                f"a batch slot holds one board of one agent, got a game of "
                f"{len(game)} board(s) of {game.n_agents} agent(s)"
            )
        shape = game.boards.shape[1:]
        if self.boards is None:
            self._allocate(shape)
        elif shape != self.boards.shape[1:]:
            raise ValueError(
                f"vec_env=batched plays all boards in one array, but a level of shape {shape} "
                f"came after boards of shape {self.boards.shape[1:]}; use vec_env=dummy"
            )
        for name in (
            "boards",
            "goals",
            "agent_locs",
            "required_points",
            "points",
            "can_exit",
            "active",
        ):
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
            inactive, both ``(N, 1)``.
        """
        if any(game is None for game in self.games):
            raise RuntimeError("every slot needs a game before the batch steps")
        execute_actions(self.boards, self.agent_locs, actions)
        self._advance(self.boards, np.arange(self.size))
        self._advance(self.goals, np.flatnonzero(self.moving_goals))
        for game in self.games:
            game.num_steps += 1
        points, self.can_exit[:] = update_exits(
            self.boards,
            self.goals,
            self.agent_locs,
            self.points_table,
            self.initial_counts,
            self.required_points,
        )
        rewards = ((points - self.points) * self.active).astype(np.float32)
        self.points[:] = points
        games = np.arange(self.size)[:, None]
        present = self.boards[games, self.agent_locs[..., 0], self.agent_locs[..., 1]]
        self.active &= (present & cells.AGENT) > 0
        return rewards, ~self.active

    def observe(
        self, view_shape: tuple[int, int], channels: Sequence[int], remove_white_goals: bool
    ) -> np.ndarray:
        """Every slot's observation, as :class:`SafeLifeEnv` observes its game."""
        combined = combined_cells(self.boards, self.goals, remove_white_goals)
        return batch_observations(combined, self.agent_locs[:, 0], view_shape, channels)
