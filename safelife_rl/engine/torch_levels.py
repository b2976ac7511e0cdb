"""Levels held on a torch device, and games started from them at fixed shapes.

:class:`LevelTensors` stacks a list of levels (a fixed suite, or a level bank's levels in each
of their symmetric variants) as tensors on a device, with everything about a level that does
not change as it is played computed once: its counts, available points, exits, whether its
goals move. :func:`start_games` then starts a game of any variant in any translation for each
env of a batch with tensor operations only, so a vector env restarts its ended envs without
leaving the device and without a shape that depends on how many ended.

A level's identity on the device is an integer: its variant (``level * len(symmetries) +
symmetry``, see :attr:`LevelTensors.symmetries`) and its translation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level, check_playable_together
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.scoring import available_points
from safelife_rl.engine.symmetry import IDENTITY, SYMMETRIES, Symmetry, transform_level
from safelife_rl.engine.torch_rules import advance, agent_present, alive_counts, update_exits


@dataclass
class LevelTensors:
    """``V`` level variants of one board shape ``(H, W)`` and agent count ``A`` on ``device``.

    :ivar names: each level's name (variant ``v`` is level ``v // symmetries``).
    :ivar symmetries: the variants of each level: the identity, or those of the 8 symmetries of
        the square that keep the board's shape, in the order of :data:`~.symmetry.SYMMETRIES`.
    :ivar exits: each variant's exit cells as (row, column), ``(V, E, 2)``, ``-1`` rows padding.
    :ivar spawning: whether any variant has a spawner on its board (a fixed fact of the batch:
        spawners are destroyed but never made), and ``moving_goals`` whether any has goals that
        change (only those advance).
    """

    names: list[str]
    symmetries: tuple[Symmetry, ...]
    boards: torch.Tensor  # int32 (V, H, W)
    goals: torch.Tensor  # int32 (V, H, W)
    agent_locs: torch.Tensor  # int64 (V, A, 2)
    spawn_prob: torch.Tensor  # float32 (V,)
    points_table: torch.Tensor  # float64 (V, A, 8, 9)
    initial_counts: torch.Tensor  # int64 (V, 8, 9)
    available_points: torch.Tensor  # float64 (V, A)
    min_performance: torch.Tensor  # float64 (V,)
    moving_goal: torch.Tensor  # bool (V,)
    exits: torch.Tensor  # int64 (V, E, 2)
    spawning: bool
    moving_goals: bool

    @classmethod
    def of(
        cls,
        levels: Sequence[Level | MultiAgentLevel],
        device: torch.device | str = "cpu",
        symmetries: bool = False,
    ) -> LevelTensors:
        """The levels (each in every shape-keeping symmetry, if ``symmetries``) on ``device``."""
        check_playable_together(levels)
        shape = levels[0].shape
        turns = [s for s in SYMMETRIES if s.keeps_shape(shape)] if symmetries else [IDENTITY]
        variants = [
            level if s == IDENTITY else transform_level(level, s) for level in levels for s in turns
        ]
        device = torch.device(device)

        def tensor(values, dtype: torch.dtype) -> torch.Tensor:
            return torch.as_tensor(np.asarray(values), dtype=dtype, device=device)

        boards = np.stack([v.board for v in variants])
        tables = np.stack([v.points_tables for v in variants])
        board_t, goals_t = (
            tensor(boards, torch.int32),
            tensor([v.goals for v in variants], torch.int32),
        )
        counts = alive_counts(board_t, goals_t)
        available = np.stack(
            [
                available_points(boards, counts.cpu().numpy(), tables[:, a])
                for a in range(tables.shape[1])
            ],
            axis=1,
        )
        exit_cells = [
            np.argwhere((v.board & (cells.EXIT | cells.AGENT)) == cells.EXIT) for v in variants
        ]
        exits = np.full((len(variants), max(1, *map(len, exit_cells)), 2), -1, np.int64)
        for k, found in enumerate(exit_cells):
            exits[k, : len(found)] = found
        spawning_goal = ((goals_t & cells.SPAWNING) != 0).flatten(1).any(1)
        moving = spawning_goal | (advance(goals_t) != goals_t).flatten(1).any(1)
        return cls(
            names=[level.name for level in levels],
            symmetries=tuple(turns),
            boards=board_t,
            goals=goals_t,
            agent_locs=tensor([v.agent_locs for v in variants], torch.int64),
            spawn_prob=tensor([v.spawn_prob for v in variants], torch.float32),
            points_table=tensor(tables, torch.float64),
            initial_counts=counts,
            available_points=tensor(available, torch.float64),
            min_performance=tensor([v.min_performance for v in variants], torch.float64),
            moving_goal=moving,
            exits=tensor(exits, torch.int64),
            spawning=bool(((boards & cells.SPAWNING) != 0).any()),
            moving_goals=bool(moving.any()),
        )

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.boards.shape[1:])

    def __len__(self) -> int:
        """The number of levels (not variants)."""
        return len(self.names)


def _roll(boards: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Each board ``(N, H, W)`` rolled by its own ``shift`` (rows, columns) on the wrapped board
    (as ``numpy.roll``)."""
    n, h, w = boards.shape
    rows = (torch.arange(h, device=boards.device) - shift[:, :1]) % h  # (N, H)
    cols = (torch.arange(w, device=boards.device) - shift[:, 1:]) % w  # (N, W)
    index = (rows[:, :, None] * w + cols[:, None, :]).view(n, h * w)
    return boards.view(n, h * w).gather(1, index).view(n, h, w)


def _wrapped(points: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """``(row, column)`` points ``(..., 2)`` wrapped onto an ``h`` x ``w`` board (no host
    tensor of the board's size: its copy to the device would block every restart)."""
    return torch.stack([points[..., 0] % h, points[..., 1] % w], -1)


def start_games(
    levels: LevelTensors,
    variant: torch.Tensor,
    shift: torch.Tensor | None = None,
    fraction: torch.Tensor | float = 1.0,
) -> dict[str, torch.Tensor]:
    """The state of a fresh game of ``variant[k]`` rolled by ``shift[k]`` for each env ``k``:
    the per-game tensors of :class:`~.torch_game.TorchGame` (exits opened or not, points
    scored, as a new game starts) plus ``exits``, each env's exit cells as flat indices
    (``-1`` padding).

    :param fraction: scales the levels' minimum performance (the exit curriculum); 1 keeps it.
    """
    h, w = levels.shape
    boards, goals = levels.boards[variant], levels.goals[variant]
    locs, exits = levels.agent_locs[variant], levels.exits[variant]
    if shift is not None:
        boards, goals = _roll(boards, shift), _roll(goals, shift)
        locs = _wrapped(locs + shift[:, None], h, w)
        exits = torch.where(exits >= 0, _wrapped(exits + shift[:, None], h, w), exits)
    available = levels.available_points[variant]
    min_performance = levels.min_performance[variant] * fraction
    required = (min_performance[:, None] * available).ceil().clamp(min=0)
    counts = levels.initial_counts[variant]
    table = levels.points_table[variant]
    boards = boards.clone()
    exits = torch.where(exits[..., 0] >= 0, exits[..., 0] * w + exits[..., 1], -1)
    points, can_exit = update_exits(boards, goals, locs, table, counts, required, exits)
    return {
        "boards": boards,
        "goals": goals,
        "agent_locs": locs,
        "spawn_prob": levels.spawn_prob[variant],
        "points_table": table,
        "initial_counts": counts,
        "available_points": available,
        "required_points": required,
        "points": points,
        "can_exit": can_exit,
        "initial_points": points.clone(),
        "active": agent_present(boards, locs),
        "moving_goal": levels.moving_goal[variant],
        "exits": exits,
    }
