"""A batch of SafeLife games on a torch device: the counterpart of
:class:`safelife_rl.SafeLifeGame`, with the same step (actions, board and goal update, exits,
points) done by :mod:`.torch_rules`.

Every per-agent array has an agent axis ``A`` after the batch axis (locations ``(N, A, 2)``,
actions, rewards, dones ``(N, A)``, points tables ``(N, A, 8, 9)``), so that several agents
per board fit: ``A`` is 1 for single-agent levels, the level's agent count for
:class:`~safelife_rl.engine.multi_agent_levels.MultiAgentLevel` ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.observation import DEFAULT_CHANNELS, DEFAULT_VIEW
from safelife_rl.engine.scoring import EXIT_POINTS, available_points
from safelife_rl.engine.torch_observation import agent_views
from safelife_rl.engine.torch_rules import (
    advance,
    alive_counts,
    check_actions,
    execute_actions,
    spawn_uniforms,
    update_exits,
)


class TorchGame:
    """N games on boards of one shape, stepped together on ``device``.

    :param levels: the starting levels, all of one board shape.
    :param seed: seed of the torch generator the spawners draw from, so that a batch's
        random numbers are reproducible (on one kind of device).
    :param device: where the state lives and the steps run.
    """

    def __init__(self, levels: Sequence[Level | MultiAgentLevel], seed: int = 0,
                 device: torch.device | str = "cpu"):
        if not levels:
            raise ValueError("a game needs at least one level")
        if len({level.shape for level in levels}) != 1:
            raise ValueError("levels played together must share a board shape")
        if len({len(level.agent_locs) for level in levels}) != 1:
            raise ValueError("levels played together must have as many agents each")
        self.levels = list(levels)
        self.device = torch.device(device)
        self.generator = torch.Generator(self.device).manual_seed(seed)

        def tensor(values, dtype: torch.dtype) -> torch.Tensor:
            return torch.as_tensor(np.asarray(values), dtype=dtype, device=self.device)

        self.boards = tensor([level.board for level in levels], torch.int32)
        self.goals = tensor([level.goals for level in levels], torch.int32)
        self.agent_locs = tensor([level.agent_locs for level in levels], torch.int64)
        self.spawn_prob = tensor([level.spawn_prob for level in levels], torch.float32)
        tables = np.stack([level.points_tables for level in levels])
        self.points_table = tensor(tables, torch.float64)
        self.initial_counts = alive_counts(self.boards, self.goals)
        boards, counts = np.stack([level.board for level in levels]), self.initial_counts.cpu()
        available = [available_points(boards, counts.numpy(), tables[:, a])
                     for a in range(tables.shape[1])]
        min_perf = tensor([[level.min_performance] for level in levels], torch.float64)
        self.available_points = tensor(np.stack(available, axis=1), torch.float64)
        self.required_points = (min_perf * self.available_points).ceil().clamp(min=0)
        self.num_steps = 0
        self.points, self.can_exit = self._score()
        self.initial_points = self.points.clone()
        self.active = self.agent_present()
        # Spawners can be destroyed but never made, and nothing but the rules changes goals,
        # so these hold for the whole game; most goals are still lifes, and only the others
        # advance (by index).
        self._spawning_boards = bool(((self.boards & cells.SPAWNING) != 0).any())
        self._spawning_goal = ((self.goals & cells.SPAWNING) != 0).flatten(1).any(1)
        changing = (advance(self.goals) != self.goals).flatten(1).any(1)
        self._moving_goal = self._spawning_goal | changing
        self._moving_goals = self._moving_goal.nonzero()[:, 0]
        self._spawning_goals = bool(self._spawning_goal.any())

    #: The state of each game, indexed by game along the first axis (see :meth:`replace`).
    _PER_GAME = ("boards", "goals", "agent_locs", "spawn_prob", "points_table", "initial_counts",
                 "available_points", "required_points", "points", "can_exit", "initial_points",
                 "active", "_spawning_goal", "_moving_goal")

    def __len__(self) -> int:
        return len(self.boards)

    def replace(self, indices: Sequence[int] | torch.Tensor, levels: Sequence[Level | MultiAgentLevel]) -> None:
        """Start new games in place: game ``indices[k]`` becomes a fresh game of ``levels[k]``,
        exactly as a new ``TorchGame`` of those levels starts (the other games go on).

        :attr:`num_steps` counts the batch's steps and goes on; keep per-game step counts
        apart where games restart (as :mod:`.vector_env` does).
        """
        index = torch.as_tensor(indices, dtype=torch.int64, device=self.device)
        if len(index) != len(levels):
            raise ValueError(f"{len(index)} games to replace but {len(levels)} levels")
        if not len(levels):
            return
        if levels[0].shape != self.boards.shape[1:]:
            raise ValueError(f"levels played together must share a board shape: a level of "
                             f"shape {levels[0].shape} cannot replace boards of shape "
                             f"{tuple(self.boards.shape[1:])}")
        fresh = TorchGame(levels, device=self.device)
        for name in self._PER_GAME:
            getattr(self, name)[index] = getattr(fresh, name)
        for k, level in zip(index.tolist(), levels):
            self.levels[k] = level
        # Spawners are never made, so a batch that had none keeps none until a level brings them.
        self._spawning_boards |= fresh._spawning_boards
        self._moving_goals = self._moving_goal.nonzero()[:, 0]
        self._spawning_goals = bool(self._spawning_goal.any())

    def select(self, indices: Sequence[int] | torch.Tensor) -> TorchGame:
        """A copy of games ``indices`` (their state as it is now), e.g. to score them apart."""
        index = torch.as_tensor(indices, dtype=torch.int64, device=self.device)
        part = object.__new__(TorchGame)
        part.__dict__.update(self.__dict__)
        for name in self._PER_GAME:
            setattr(part, name, getattr(self, name)[index])
        part.levels = [self.levels[k] for k in index.tolist()]
        part._moving_goals = part._moving_goal.nonzero()[:, 0]
        part.generator = torch.Generator(self.device).manual_seed(0)
        return part

    def _score(self) -> tuple[torch.Tensor, torch.Tensor]:
        return update_exits(self.boards, self.goals, self.agent_locs, self.points_table,
                            self.initial_counts, self.required_points)

    def _advance(self, boards: torch.Tensor, spawn_prob: torch.Tensor,
                 spawning: bool) -> torch.Tensor:
        uniforms = spawn_uniforms(boards, self.generator) if spawning else None
        return advance(boards, spawn_prob, uniforms)

    def agent_cells(self) -> torch.Tensor:
        """The cell under each agent's location, ``(N, A)``."""
        n, h, w = self.boards.shape
        index = self.agent_locs[..., 0] * w + self.agent_locs[..., 1]
        return self.boards.view(n, h * w).gather(1, index)

    def agent_present(self) -> torch.Tensor:
        """Whether each agent is still on its board (it has neither exited nor been removed)."""
        return (self.agent_cells() & cells.AGENT) != 0

    def has_exited(self) -> torch.Tensor:
        """Whether each agent has left through the exit."""
        return (self.agent_cells() & (cells.AGENT | cells.EXIT)) == cells.EXIT

    def points_earned(self) -> torch.Tensor:
        """Points earned since the start, exit bonus included, ``(N, A)``."""
        return self.points - self.initial_points

    def performance(self) -> torch.Tensor:
        """Fraction of the available points earned (exit bonus excluded), ``(N, A)``."""
        earned = self.points_earned() - self.has_exited() * EXIT_POINTS
        return earned / self.available_points.clamp(min=1)

    def step(self, actions: torch.Tensor | np.ndarray | Sequence[int] | int
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Play one action per agent (``(N, A)``, or anything that broadcasts to it) and
        advance every board and its goals one generation.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive, both ``(N, A)``.
        """
        actions = torch.as_tensor(actions, device=self.device)
        check_actions(actions)
        actions = actions.to(torch.int64).broadcast_to(self.active.shape)
        execute_actions(self.boards, self.agent_locs, actions)
        self.boards = self._advance(self.boards, self.spawn_prob, self._spawning_boards)
        moving = self._moving_goals
        if len(moving):
            self.goals[moving] = self._advance(
                self.goals[moving], self.spawn_prob[moving], self._spawning_goals
            )
        self.num_steps += 1
        points, self.can_exit = self._score()
        rewards = ((points - self.points) * self.active).to(torch.float32)
        self.points = points
        self.active &= self.agent_present()
        return rewards, ~self.active

    def observe(
        self,
        view_shape: tuple[int, int] = DEFAULT_VIEW,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        remove_white_goals: bool = True,
    ) -> torch.Tensor:
        """Each agent's view, uint8 ``(N, A) + view_shape + (len(channels),)`` (see
        :func:`.torch_observation.agent_views`)."""
        return agent_views(self.boards, self.goals, self.agent_locs, view_shape, channels,
                           remove_white_goals)
