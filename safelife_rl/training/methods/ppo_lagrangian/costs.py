"""PPO-Lagrangian on the device path: :class:`DevicePPOLagrangian` (``vec_env=device``) and its
parts of the device trainer (:class:`PopulationCosts`, one run's or a population's): every
member's cost critic run and trained as one stack, its episode costs counted as one tensor, and
its own multiplier, budget and PID gains, as
:class:`~safelife_rl.training.methods.ppo_lagrangian.algorithm.LagrangianMixin` keeps them (the
same steps in the same order for P = 1 and each member of a population)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from safelife_rl.training.device.adapters import TensorStep
from safelife_rl.training.device.algorithms import DevicePPO
from safelife_rl.training.device.stacked import StackedNetworks, StackedOptimizer
from safelife_rl.training.device.trainer import MemberTrainer
from safelife_rl.training.methods.ppo_lagrangian.algorithm import (
    MULTIPLIER,
    LagrangianMixin,
    TensorCostRolloutBuffer,
    count_costs,
    penalised,
)
from safelife_rl.training.methods.ppo_lagrangian.checks import check_reports_cost


class PopulationCosts:
    """The members' cost critics (stacked as their policies are), their episode costs
    (``(P * n_envs,)``: each member's ``_episode_costs`` and ``_ended`` are views of the
    population's) and their multiplier updates.

    :param members: the population's members, every one a PPO-Lagrangian member.
    :param batching: as the policies' (:data:`~.stacked.BATCHING`).
    """

    def __init__(self, members: Sequence[DevicePPOLagrangian], n_envs: int, batching: str):
        self.members, self.n_envs, self.size = list(members), n_envs, len(members)
        self.critics = StackedNetworks([m.cost_critic for m in members], batching)
        self.optimizer = StackedOptimizer(self.critics, [m.cost_optimizer for m in members])
        device = members[0]._episode_costs.device
        self.episode_costs = torch.zeros(self.size * n_envs, dtype=torch.float64, device=device)
        self.ended = torch.zeros((self.size, 2), dtype=torch.float64, device=device)
        for k, member in enumerate(members):
            member._episode_costs = self.episode_costs[k * n_envs : (k + 1) * n_envs]
            member._ended = self.ended[k]

    def set_training_mode(self, mode: bool) -> None:
        self.critics.set_training_mode(mode)
        for member in self.members:
            member.cost_critic.train(mode)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """Each member's cost values of its observations ``(P, n, ...)``, flat ``(P * n,)``."""
        with torch.no_grad():
            return self.critics(obs).flatten()

    def count(self, step: TensorStep) -> tuple[torch.Tensor, torch.Tensor]:
        """Add a step's costs to the episodes' sums, and the sums of the episodes it ended to
        each member's total since its last update (:func:`count_costs`); the step's costs and
        ends."""
        if step.costs is None:
            check_reports_cost({}, self.members[0]._env_name())
        costs, dones = step.costs, step.terminated | step.truncated
        count_costs(self.episode_costs, self.ended, costs, dones)
        return costs, dones

    def record(self, buffer: TensorCostRolloutBuffer, obs: torch.Tensor, step: TensorStep) -> None:
        """A rollout step: its costs counted and stored with the cost values of the
        observations ``(P, n, ...)`` acted on (before the buffer's :meth:`add` of the step)."""
        costs, _ = self.count(step)
        buffer.add_costs(costs, self.values(obs))

    def penalise(self, buffer: TensorCostRolloutBuffer) -> torch.Tensor:
        """Every member's multiplier update, then its advantages (its columns of the buffer)
        penalised by its multiplier; the updates' reports ``(P, 3)``."""
        reports = []
        n = self.n_envs
        for k, member in enumerate(self.members):
            reports.append(member.update_multiplier())
            columns = slice(k * n, (k + 1) * n)
            buffer.advantages[:, columns] = penalised(
                buffer.advantages[:, columns].contiguous(),
                buffer.cost_advantages[:, columns].contiguous(),
                member.lagrange_state[MULTIPLIER],
                member.standardize_advantages,
            )
        return torch.stack(reports)

    def train(self, trainer: MemberTrainer, progress: float) -> torch.Tensor:
        """Every member's cost critic regressed on its cost returns (``n_epochs`` passes of the
        trainer's minibatches, each member's own order); the members' mean losses ``(P,)``."""
        first, buffer = self.members[0], trainer.buffer
        self.set_training_mode(True)
        lr = trainer.set_learning_rates([m.cost_optimizer for m in self.members], progress)
        self.optimizer.set_lr(lr)
        losses = []
        for order in torch.as_tensor(trainer.orders(), device=trainer.device):
            for steps, envs in trainer.minibatches(order):
                values = self.critics(buffer.observations[steps, envs]).flatten(1)
                loss = F.mse_loss(values, buffer.cost_returns[steps, envs], reduction="none")
                loss = loss.mean(1)
                self.optimizer.zero_grad()
                loss.sum().backward()
                self.optimizer.step(first.max_grad_norm)
                losses.append(loss.detach())
        self.optimizer.link_member_states()
        return torch.stack(losses, 1).mean(1)

    def log(self, reports: torch.Tensor, losses: torch.Tensor) -> None:
        """Each member's ``safety/`` scalars, read in one copy."""
        multipliers = torch.stack([m.lagrange_state[MULTIPLIER] for m in self.members])
        read = torch.cat(
            [reports, multipliers[:, None], losses.to(reports.device).double()[:, None]], 1
        ).tolist()
        for member, row in zip(self.members, read):
            member.record_update(row)


class DevicePPOLagrangian(LagrangianMixin, DevicePPO):
    """:class:`~.algorithm.PPOLagrangian` trained from a
    :class:`~safelife_rl.training.device.TensorVecEnv` without leaving the device
    (``vec_env=device``) by the device trainer, with :class:`PopulationCosts` as its parts: the
    costs come as the step's tensor (:attr:`~safelife_rl.training.device.TensorStep.costs`), a
    time limit's cuts bootstrap the costs with the cost critic where they bootstrap the
    rewards, once per rollout, and nothing in a rollout step or a minibatch waits for the
    device."""

    cost_buffer_class = TensorCostRolloutBuffer
    rollout_buffer: TensorCostRolloutBuffer
    #: the device trainer's parts of this algorithm (:class:`~.trainer.MemberTrainer`)
    member_axis_parts = PopulationCosts

    def _step_costs(self, locals_: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """A replayed step's costs (an exact resume's)."""
        step: TensorStep = locals_["step"]
        if step.costs is None:
            check_reports_cost({}, self._env_name())
        return step.costs, step.terminated | step.truncated  # type: ignore[return-value]
