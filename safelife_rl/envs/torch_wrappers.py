"""The training wrappers' rules for a batch of torch games, every env at once.

Each rule here is built from the Gymnasium wrapper of :mod:`safelife_rl.envs.wrappers` it
batches and reads its settings (and, for the scheduled ones, its current schedule value) from
that wrapper object, so a config makes both alike and :meth:`ScheduledWrapper.set_training_steps
<safelife_rl.envs.wrappers.ScheduledWrapper.set_training_steps>` moves both schedules. The
rules do the wrappers' arithmetic in float64 in the same order, so that the rewards equal the
wrapped single envs' bit for bit (``tests/safelife/test_vector_env.py`` holds them to it).

A rule keeps its per-env state as tensors on the game's device; :meth:`reset` starts the envs
``index`` afresh (after :meth:`TorchGame.replace <.torch_game.TorchGame.replace>` gave them new
levels) and :meth:`step` adds its shaping to the rewards of a step of every env.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.envs.wrappers import ExitBonus, ExitCurriculum, MovementBonus, SideEffectPenalty

# The bits and cells the impact penalty ignores (see SideEffectPenalty).
_KEPT_BITS = 0xFFFF & ~(cells.AGENT | cells.FREEZING | cells.FROZEN | cells.DESTRUCTIBLE)
_RED_LIFE = cells.ALIVE | cells.RED


class BatchedRule:
    """The rule of one training wrapper for ``n`` envs (base: no state, no shaping)."""

    def __init__(self, wrapper: object, game: TorchGame):
        self.wrapper = wrapper

    def reset(self, game: TorchGame, index: torch.Tensor, levels: Sequence[Level]) -> None:
        """Envs ``index`` start the episodes of ``levels`` (their games already replaced)."""

    def step(self, game: TorchGame, reward: torch.Tensor, terminated: torch.Tensor,
             episode_reward: torch.Tensor) -> torch.Tensor:
        """The float64 rewards ``(N,)`` of a step after this wrapper.

        :param episode_reward: each env's unshaped episode total so far, step included (the
            ``info["reward"]`` of :class:`~safelife_rl.envs.env.SafeLifeEnv`).
        """
        return reward


class BatchedMovementBonus(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.MovementBonus`: each env keeps its last ``period``
    positions, oldest first, and how many it holds."""

    wrapper: MovementBonus

    def __init__(self, wrapper: MovementBonus, game: TorchGame):
        super().__init__(wrapper, game)
        n, h, w = game.boards.shape
        period = wrapper.period
        self.positions = torch.zeros((n, period, 2), dtype=torch.int64, device=game.device)
        self.held = torch.zeros(n, dtype=torch.int64, device=game.device)
        # The bonus of every distance the agent can be from its oldest position (wrapped
        # positions: up to h - 1 + w - 1, plus up to period - 1 for a young episode), made by
        # the wrapper's own float64 expression.
        penalty = wrapper.bonus if wrapper.as_penalty else 0.0
        self.bonus = torch.tensor(
            [wrapper.bonus * (np.int64(d) / period) ** wrapper.power - penalty
             for d in range(h + w + period)], dtype=torch.float64, device=game.device,
        )

    def reset(self, game: TorchGame, index: torch.Tensor, levels: Sequence[Level]) -> None:
        self.positions[index] = game.agent_locs[index, 0, None]
        self.held[index] = 1

    def step(self, game: TorchGame, reward: torch.Tensor, terminated: torch.Tensor,
             episode_reward: torch.Tensor) -> torch.Tensor:
        period = self.wrapper.period
        here = game.agent_locs[:, 0]
        distance = (here - self.positions[:, 0]).abs().sum(1) + period - self.held
        reward = reward + self.bonus[distance]
        full = self.held == period
        shifted = torch.cat([self.positions[:, 1:], here[:, None]], 1)
        appended = self.positions.clone()
        rows = torch.arange(len(here), device=here.device)
        appended[rows, self.held.clamp(max=period - 1)] = here
        self.positions = torch.where(full[:, None, None], shifted, appended)
        self.held = (self.held + 1).clamp(max=period)
        return reward


class BatchedExitBonus(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.ExitBonus`."""

    wrapper: ExitBonus

    def step(self, game: TorchGame, reward: torch.Tensor, terminated: torch.Tensor,
             episode_reward: torch.Tensor) -> torch.Tensor:
        return torch.where(terminated, reward + self.wrapper.bonus * episode_reward, reward)


class BatchedExitCurriculum(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.ExitCurriculum`: scales the required points of
    the games it starts."""

    wrapper: ExitCurriculum

    def reset(self, game: TorchGame, index: torch.Tensor, levels: Sequence[Level]) -> None:
        fraction = self.wrapper.ramp(self.wrapper.training_steps)
        min_performance = torch.tensor([level.min_performance for level in levels],
                                       dtype=torch.float64, device=game.device) * fraction
        required = (min_performance[:, None] * game.available_points[index]).ceil()
        game.required_points[index] = required.clamp(min=0)


def changed_cells(
    boards: torch.Tensor,
    start: torch.Tensor,
    goals: torch.Tensor,
    locs: torch.Tensor,
    start_locs: torch.Tensor,
    ignore_reward_cells: bool,
) -> torch.Tensor:
    """How many cells of each board count as departed from its start board, int64 ``(N,)``
    (:meth:`SideEffectPenalty.side_effect_cells
    <safelife_rl.envs.wrappers.SideEffectPenalty.side_effect_cells>` of every board).

    :param locs: the agents' (row, column) now, ``(N, 2)``, and ``start_locs`` at the start.
    """
    board, begin = boards & _KEPT_BITS, start & _KEPT_BITS
    changed = (board != begin) & (((boards | start) & cells.EXIT) == 0)
    if ignore_reward_cells:
        red_removed = ((begin & _RED_LIFE) == _RED_LIFE) & ((board & _RED_LIFE) != _RED_LIFE)
        goal_filled = ((goals & cells.COLORS) != 0) & ((board & cells.ALIVE) != 0)
        changed &= ~(red_removed | goal_filled)
    n, h, w = boards.shape
    changed = changed.view(n, h * w)
    for y, x in (locs.unbind(1), start_locs.unbind(1)):
        changed = changed.scatter(1, (y * w + x)[:, None], False)
    return changed.sum(1)


class BatchedSideEffectPenalty(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.SideEffectPenalty`: each env keeps its start
    board and position and the cells it last paid for."""

    wrapper: SideEffectPenalty

    def __init__(self, wrapper: SideEffectPenalty, game: TorchGame):
        super().__init__(wrapper, game)
        self.start = game.boards.clone()
        self.start_locs = game.agent_locs[:, 0].clone()
        self.last = torch.zeros(len(game), dtype=torch.int64, device=game.device)

    def reset(self, game: TorchGame, index: torch.Tensor, levels: Sequence[Level]) -> None:
        self.start[index] = game.boards[index]
        self.start_locs[index] = game.agent_locs[index, 0]
        self.last[index] = 0

    def step(self, game: TorchGame, reward: torch.Tensor, terminated: torch.Tensor,
             episode_reward: torch.Tensor) -> torch.Tensor:
        coefficient = self.wrapper.coefficient()
        if coefficient > 0:
            count = changed_cells(game.boards, self.start, game.goals, game.agent_locs[:, 0],
                                  self.start_locs, self.wrapper.ignore_reward_cells)
            reward = reward - (count - self.last).to(torch.float64) * coefficient
            self.last = count
        return reward


#: The wrappers the device path applies, and their batched rules.
RULES: dict[type, type[BatchedRule]] = {
    MovementBonus: BatchedMovementBonus,
    ExitBonus: BatchedExitBonus,
    ExitCurriculum: BatchedExitCurriculum,
    SideEffectPenalty: BatchedSideEffectPenalty,
}
