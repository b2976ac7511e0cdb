"""The training wrappers' rules for a batch of torch games, every env at once, as pure
functions of fixed-shape tensors.

Each rule here is a frozen record of the settings of the Gymnasium wrapper of
:mod:`safelife_rl.envs.wrappers` it batches, read from that wrapper once (:meth:`BatchedRule.of`);
the rule keeps no reference to the wrapper. The scheduled values (the impact penalty's
coefficient, the exit curriculum's fraction) are tensors in the step's
:class:`~safelife_rl.envs.vector_state.StepParams`, which
:meth:`SafeLifeVectorEnv.set_training_steps
<safelife_rl.envs.vector_env.SafeLifeVectorEnv.set_training_steps>` sets from the wrappers'
schedules, so a config makes both alike and one call moves both. The rules do the wrappers'
arithmetic in float64 in the same order, so that the rewards equal the wrapped single envs' bit
for bit (``tests/safelife/test_vector_env.py`` holds them to it).

A rule keeps its per-env state as entries of the vector env's
:class:`~safelife_rl.envs.vector_state.State`: :meth:`start` gives them for games just started
(every env's, the env keeps those of the envs that restart) and :meth:`step` returns the shaped
rewards of a step and the entries after it. Nothing here reads a value back to the host, so the
step compiles to one graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from safelife_rl.engine.departures import cell_weights, departs
from safelife_rl.envs.vector_state import State, StepParams
from safelife_rl.envs.wrappers import ExitBonus, ExitCurriculum, MovementBonus, SideEffectPenalty


@dataclass(frozen=True, eq=False)
class BatchedRule:
    """The rule of one training wrapper for a batch of envs (base: no settings, no state, no
    shaping)."""

    @classmethod
    def of(cls, wrapper: Any, board_shape: tuple[int, int], device: torch.device) -> BatchedRule:
        """The rule of ``wrapper`` for boards of ``board_shape`` on ``device``."""
        return cls()

    def start(self, game: State) -> State:
        """The rule's entries for fresh games ``game`` (every env's)."""
        return {}

    def step(
        self,
        state: State,
        game: State,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        episode_reward: torch.Tensor,
        params: StepParams,
    ) -> tuple[torch.Tensor, State]:
        """The float64 rewards ``(N,)`` of a step after this wrapper, and the rule's entries.

        :param state: the env's state before the step; ``game`` the games after it.
        :param episode_reward: each env's unshaped episode total so far, step included (the
            ``info["reward"]`` of :class:`~safelife_rl.envs.env.SafeLifeEnv`).
        """
        return reward, {}


@dataclass(frozen=True, eq=False)
class BatchedMovementBonus(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.MovementBonus`: each env keeps its last ``period``
    positions, oldest first, and how many it holds."""

    period: int
    #: float64: the bonus of every distance the agent can be from its oldest position
    bonus: torch.Tensor

    @classmethod
    def of(
        cls, wrapper: MovementBonus, board_shape: tuple[int, int], device: torch.device
    ) -> BatchedMovementBonus:
        h, w = board_shape
        period = wrapper.period
        # Distances on wrapped boards: up to h - 1 + w - 1, plus up to period - 1 for a young
        # episode; each bonus made by the wrapper's own float64 expression.
        penalty = wrapper.bonus if wrapper.as_penalty else 0.0
        bonus = torch.tensor(
            [
                wrapper.bonus * (np.int64(d) / period) ** wrapper.power - penalty
                for d in range(h + w + period)
            ],
            dtype=torch.float64,
            device=device,
        )
        return cls(period, bonus)

    def start(self, game: State) -> State:
        here = game["agent_locs"][:, 0]
        positions = here[:, None].expand(-1, self.period, -1).clone()
        return {"positions": positions, "held": torch.ones_like(here[:, 0])}

    def step(
        self,
        state: State,
        game: State,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        episode_reward: torch.Tensor,
        params: StepParams,
    ) -> tuple[torch.Tensor, State]:
        period = self.period
        positions, held = state["positions"], state["held"]
        here = game["agent_locs"][:, 0]
        distance = (here - positions[:, 0]).abs().sum(1) + period - held
        reward = reward + self.bonus[distance]
        slot = torch.arange(period, device=here.device)
        shifted = torch.cat([positions[:, 1:], here[:, None]], 1)
        appended = torch.where(
            (slot == held.clamp(max=period - 1)[:, None])[..., None], here[:, None], positions
        )
        positions = torch.where((held == period)[:, None, None], shifted, appended)
        return reward, {"positions": positions, "held": (held + 1).clamp(max=period)}


@dataclass(frozen=True, eq=False)
class BatchedExitBonus(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.ExitBonus`."""

    bonus: float

    @classmethod
    def of(
        cls, wrapper: ExitBonus, board_shape: tuple[int, int], device: torch.device
    ) -> BatchedExitBonus:
        return cls(wrapper.bonus)

    def step(
        self,
        state: State,
        game: State,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        episode_reward: torch.Tensor,
        params: StepParams,
    ) -> tuple[torch.Tensor, State]:
        return torch.where(terminated, reward + self.bonus * episode_reward, reward), {}


@dataclass(frozen=True, eq=False)
class BatchedExitCurriculum(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.ExitCurriculum`: the games it starts need
    ``params["fraction"]`` of their levels' minimum performance (the vector env passes it to
    :func:`~safelife_rl.engine.torch_levels.start_games`)."""


def departed_cells(
    boards: torch.Tensor,
    start: torch.Tensor,
    goals: torch.Tensor,
    locs: torch.Tensor,
    start_locs: torch.Tensor,
    ignore_reward_cells: bool,
) -> torch.Tensor:
    """Which cells of each board have departed from its start board, bool ``(N, H * W)``
    (:func:`safelife_rl.engine.departures.departed_cells` of every board).

    :param locs: the agents' (row, column) now, ``(N, 2)``, and ``start_locs`` at the start.
    """
    n, h, w = boards.shape
    changed = departs(boards, start, goals, ignore_reward_cells).view(n, h * w)
    for y, x in (locs.unbind(1), start_locs.unbind(1)):
        changed = changed.scatter(1, (y * w + x)[:, None], False)
    return changed


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
    <safelife_rl.envs.wrappers.SideEffectPenalty.side_effect_cells>` of every board)."""
    return departed_cells(boards, start, goals, locs, start_locs, ignore_reward_cells).sum(1)


def start_baseline(game: State) -> State:
    """The starting-state baseline of fresh games: their boards and agents' positions, the
    state entries ``start`` and ``start_locs`` that the impact penalty and the cost read."""
    return {"start": game["boards"].clone(), "start_locs": game["agent_locs"][:, 0].clone()}


def start_cost(game: State) -> State:
    """The cost's entries for fresh games: the baseline and the episode's peak departed
    weight so far, ``cost_peak`` (0)."""
    return {
        **start_baseline(game),
        "cost_peak": torch.zeros(
            len(game["boards"]), dtype=torch.float64, device=game["boards"].device
        ),
    }


def step_cost(state: State, game: State) -> tuple[torch.Tensor, State]:
    """The safety cost of a step, float64 ``(N,)``, and the cost's entries after it.

    Each env's cost is :class:`~safelife_rl.envs.env.SafeLifeEnv`'s ``info["cost"]``: how
    much the step raises the episode's peak of the departed cells' weight
    (:mod:`safelife_rl.engine.departures`), so an episode's costs sum to that peak.

    :param state: the env's state before the step; ``game`` the games after it.
    """
    boards, start = game["boards"], state["start"]
    departed = departed_cells(
        boards,
        start,
        game["goals"],
        game["agent_locs"][:, 0],
        state["start_locs"],
        ignore_reward_cells=True,
    )
    weights = torch.maximum(cell_weights(boards), cell_weights(start)).flatten(1)
    weight = (weights * departed).sum(1)
    peak = torch.maximum(state["cost_peak"], weight)
    return peak - state["cost_peak"], {"cost_peak": peak}


@dataclass(frozen=True, eq=False)
class BatchedSideEffectPenalty(BatchedRule):
    """:class:`~safelife_rl.envs.wrappers.SideEffectPenalty`: each env keeps its start
    board and position and the cells it last paid for; the coefficient is
    ``params["penalty"]`` (nothing is paid, and the count stays, while it is 0)."""

    ignore_reward_cells: bool

    @classmethod
    def of(
        cls, wrapper: SideEffectPenalty, board_shape: tuple[int, int], device: torch.device
    ) -> BatchedSideEffectPenalty:
        return cls(wrapper.ignore_reward_cells)

    def start(self, game: State) -> State:
        return {
            **start_baseline(game),
            "last": torch.zeros_like(game["boards"][:, 0, 0], dtype=torch.int64),
        }

    def step(
        self,
        state: State,
        game: State,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        episode_reward: torch.Tensor,
        params: StepParams,
    ) -> tuple[torch.Tensor, State]:
        coefficient, last = params["penalty"], state["last"]
        count = changed_cells(
            game["boards"],
            state["start"],
            game["goals"],
            game["agent_locs"][:, 0],
            state["start_locs"],
            self.ignore_reward_cells,
        )
        paying = coefficient > 0
        reward = torch.where(
            paying, reward - (count - last).to(torch.float64) * coefficient, reward
        )
        return reward, {"last": torch.where(paying, count, last)}


#: The wrappers the device path applies, and their batched rules.
RULES: dict[type, type[BatchedRule]] = {
    MovementBonus: BatchedMovementBonus,
    ExitBonus: BatchedExitBonus,
    ExitCurriculum: BatchedExitCurriculum,
    SideEffectPenalty: BatchedSideEffectPenalty,
}
