"""A batch of SafeLife games on a torch device: the counterpart of
:class:`safelife_rl.SafeLifeGame`, with the same step (actions, board and goal update, exits,
points) done by :mod:`.torch_rules`.

Every per-agent array has an agent axis ``A`` after the batch axis (locations ``(N, A, 2)``,
actions, rewards, dones ``(N, A)``, points tables ``(N, A, 8, 9)``), so that several agents
per board fit: ``A`` is 1 for single-agent levels, the level's agent count for
:class:`~safelife_rl.engine.multi_agent_levels.MultiAgentLevel` ones.

:func:`play` is the step as a pure function of tensors of fixed shapes: :class:`TorchGame`
steps with it eagerly and the device vector env (:mod:`safelife_rl.envs.vector_env`) inside
its compiled step, so both run the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.observation import DEFAULT_CHANNELS, DEFAULT_VIEW
from safelife_rl.engine.scoring import EXIT_POINTS
from safelife_rl.engine.torch_levels import LevelTensors, start_games
from safelife_rl.engine.torch_observation import agent_views
from safelife_rl.engine.torch_random import BOARD_SPAWNS, GOAL_SPAWNS, cell_uniforms, keys
from safelife_rl.engine.torch_rules import (
    advance,
    agent_cells,
    agent_present,
    check_actions,
    execute_actions,
    exit_candidates,
    update_exits,
)

# Boards per call of the compiled step on a CPU: its fused kernels keep whole-batch temporaries
# (int64 neighbourhood sums), which at 16384 boards leave the caches; devices with their own
# memory take the whole batch.
_COMPILED_CHUNK = 1024
_PLAYED = ("boards", "goals", "agent_locs", "points", "can_exit", "active")  # what a step changes


def play(
    game: dict[str, torch.Tensor],
    actions: torch.Tensor,
    seed: torch.Tensor | int,
    envs: torch.Tensor,
    counter: torch.Tensor,
    spawning: bool,
    moving_goals: bool,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One step of every game: ``game`` holds the per-game tensors (as
    :func:`~.torch_levels.start_games` makes them); returns the games after the step (new
    tensors; ``game`` is left as it was) and the float32 rewards ``(N, A)``, zero for inactive
    agents.

    :param actions: int64 ``(N, A)``, valid (see :func:`~.torch_rules.check_actions`).
    :param seed: the batch's seed, ``envs`` each game's identity and ``counter`` its step
        count: the spawners' random numbers are :mod:`.torch_random`'s of these.
    :param spawning: whether any board may have spawners, and ``moving_goals`` whether any
        game's goals change (facts of the batch's levels, fixed while it plays).
    """
    boards, locs = game["boards"].clone(), game["agent_locs"].clone()
    execute_actions(boards, locs, actions)
    shape = tuple(boards.shape[1:])
    uniforms = cell_uniforms(keys(seed, BOARD_SPAWNS, envs, counter), shape) if spawning else None
    boards = advance(boards, game["spawn_prob"], uniforms)
    goals = game["goals"]
    if moving_goals:
        uniforms = cell_uniforms(keys(seed, GOAL_SPAWNS, envs, counter), shape)
        moved = advance(goals, game["spawn_prob"], uniforms)
        goals = torch.where(game["moving_goal"][:, None, None], moved, goals)
    points, can_exit = update_exits(
        boards,
        goals,
        locs,
        game["points_table"],
        game["initial_counts"],
        game["required_points"],
        game["exits"],
    )
    rewards = ((points - game["points"]) * game["active"]).to(torch.float32)
    active = game["active"] & agent_present(boards, locs)
    return {
        **game,
        "boards": boards,
        "goals": goals,
        "agent_locs": locs,
        "points": points,
        "can_exit": can_exit,
        "active": active,
    }, rewards


def play_into(
    game: dict[str, torch.Tensor],
    actions: torch.Tensor,
    seed: torch.Tensor | int,
    envs: torch.Tensor,
    counter: torch.Tensor,
    spawning: bool,
    moving_goals: bool,
) -> torch.Tensor:
    """:func:`play`, writing the games after the step over ``game``'s tensors in place;
    returns the rewards. The compiled CPU step calls it on slices of the batch, which leaves
    the rest of the batch's state where it is: joining the slices' new states took 40% of a
    step at 16,384 boards."""
    new, rewards = play(game, actions, seed, envs, counter, spawning, moving_goals)
    for name in _PLAYED:
        if new[name] is not game[name]:
            game[name].copy_(new[name])
    return rewards


def _pad_exits(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two batches' exit cells ``(N, E)`` padded with ``-1`` to the wider ``E`` of the two."""
    width = max(a.shape[1], b.shape[1])
    return (
        torch.nn.functional.pad(a, (0, width - a.shape[1]), value=-1),
        torch.nn.functional.pad(b, (0, width - b.shape[1]), value=-1),
    )


class _GameEntry:
    """A read-only attribute of :class:`TorchGame` served from its ``game`` dict. Declared on
    the class, so that ``isinstance(game, GameBatch)`` finds it on Python 3.12 (a runtime
    protocol's check looks attributes up statically there, never through ``__getattr__``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, game: TorchGame | None, owner: type | None = None) -> Any:
        return self if game is None else game.game[self.name]


class TorchGame:
    """N games on boards of one shape, stepped together on ``device``.

    :param levels: the starting levels, all of one board shape.
    :param seed: seed of the spawners' random numbers (:mod:`.torch_random`): game ``k``'s
        numbers at step ``t`` depend on ``seed``, ``k`` and ``t`` only, on every device.
    :param device: where the state lives and the steps run.
    :param compile: step with ``torch.compile(play, fullgraph=True)``: the same results bit for
        bit (the first step of each batch size takes the compile time, tens of seconds on a
        CPU). On a CPU it steps the batch a chunk at a time, in place: the state tensors are
        updated where they are, not replaced.
    """

    def __init__(
        self,
        levels: Sequence[Level | MultiAgentLevel],
        seed: int = 0,
        device: torch.device | str = "cpu",
        compile: bool = False,
    ):
        self.device = torch.device(device)
        tensors = LevelTensors.of(levels, self.device)
        self.levels = list(levels)
        self.seed = int(seed)
        self.num_steps = 0
        # Facts of the batch (spawners are destroyed, never made): a copy of some games keeps
        # them, which stays correct (each game's own goals advance only if they move).
        self._spawning, self._moving_goals = tensors.spawning, tensors.moving_goals
        self.game = start_games(tensors, torch.arange(len(levels), device=self.device))
        # The compiled step on a CPU goes through the batch in place, a chunk at a time.
        self._chunked = compile and self.device.type == "cpu"
        step = play_into if self._chunked else play
        self._play = torch.compile(step, fullgraph=True, dynamic=False) if compile else step

    boards = _GameEntry()
    goals = _GameEntry()
    agent_locs = _GameEntry()
    spawn_prob = _GameEntry()
    points = _GameEntry()
    can_exit = _GameEntry()
    active = _GameEntry()
    available_points = _GameEntry()
    required_points = _GameEntry()

    def __getattr__(self, name: str) -> torch.Tensor:
        game = self.__dict__.get("game")
        if game is not None and name in game:
            return game[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __len__(self) -> int:
        return len(self.levels)

    def replace(
        self, indices: Sequence[int] | torch.Tensor, levels: Sequence[Level | MultiAgentLevel]
    ) -> None:
        """Start new games in place: game ``indices[k]`` becomes a fresh game of ``levels[k]``,
        exactly as a new ``TorchGame`` of those levels starts (the other games go on).

        :attr:`num_steps` counts the batch's steps and goes on.
        """
        index = torch.as_tensor(indices, dtype=torch.int64, device=self.device)
        if len(index) != len(levels):
            raise ValueError(f"{len(index)} games to replace but {len(levels)} levels")
        if not len(levels):
            return
        if levels[0].shape != self.boards.shape[1:]:
            raise ValueError(
                f"levels played together must share a board shape: a level of "
                f"shape {levels[0].shape} cannot replace boards of shape "
                f"{tuple(self.boards.shape[1:])}"
            )
        fresh = TorchGame(levels, device=self.device)
        self.game["exits"], fresh.game["exits"] = _pad_exits(self.exits, fresh.exits)
        self.game = {
            name: value.index_put((index,), fresh.game[name]) for name, value in self.game.items()
        }
        for k, level in zip(index.tolist(), levels):
            self.levels[k] = level
        self._spawning |= fresh._spawning
        self._moving_goals |= fresh._moving_goals

    def select(self, indices: Sequence[int] | torch.Tensor) -> TorchGame:
        """A copy of games ``indices`` (their state as it is now), e.g. to score them apart."""
        index = torch.as_tensor(indices, dtype=torch.int64, device=self.device)
        part = object.__new__(TorchGame)
        part.__dict__.update(self.__dict__)
        part.game = {name: value[index] for name, value in self.game.items()}
        part.levels = [self.levels[k] for k in index.tolist()]
        return part

    def agent_cells(self) -> torch.Tensor:
        """The cell under each agent's location, ``(N, A)``."""
        return agent_cells(self.boards, self.agent_locs)

    def agent_present(self) -> torch.Tensor:
        """Whether each agent is still on its board (it has neither exited nor been removed)."""
        return agent_present(self.boards, self.agent_locs)

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

    def step(
        self, actions: torch.Tensor | np.ndarray | Sequence[int] | int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Play one action per agent (``(N, A)``, or anything that broadcasts to it) and
        advance every board and its goals one generation.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive, both ``(N, A)``.
        """
        actions = torch.as_tensor(actions, device=self.device)
        check_actions(actions)
        actions = actions.to(torch.int64).broadcast_to(self.active.shape)
        envs = torch.arange(len(self), device=self.device)
        counter = torch.full_like(envs, self.num_steps)
        if not self._chunked:
            self.game, rewards = self._play(
                self.game, actions, self.seed, envs, counter, self._spawning, self._moving_goals
            )
        else:
            rewards = torch.cat(
                [
                    self._play(
                        {name: value[k : k + _COMPILED_CHUNK] for name, value in self.game.items()},
                        actions[k : k + _COMPILED_CHUNK],
                        self.seed,
                        envs[k : k + _COMPILED_CHUNK],
                        counter[k : k + _COMPILED_CHUNK],
                        self._spawning,
                        self._moving_goals,
                    )
                    for k in range(0, len(self), _COMPILED_CHUNK)
                ]
            )
        self.num_steps += 1
        return rewards, ~self.active

    def observe(
        self,
        view_shape: tuple[int, int] = DEFAULT_VIEW,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        remove_white_goals: bool = True,
    ) -> torch.Tensor:
        """Each agent's view, uint8 ``(N, A) + view_shape + (len(channels),)`` (see
        :func:`.torch_observation.agent_views`)."""
        w = self.boards.shape[2]
        agents = self.agent_locs[..., 0] * w + self.agent_locs[..., 1]
        return agent_views(
            self.boards,
            self.goals,
            self.agent_locs,
            view_shape,
            channels,
            remove_white_goals,
            exit_candidates(self.exits, agents),
        )
