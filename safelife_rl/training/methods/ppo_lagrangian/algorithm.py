"""PPO-Lagrangian: PPO that maximises reward while keeping each episode's summed cost
(``info["cost"]``, Safety-Gymnasium's convention) within a budget, for discrete or any other
actions SB3's PPO takes.

The constrained problem ``max J_r  s.t.  J_c <= cost_limit`` becomes
``min_{lambda >= 0} max_pi J_r - lambda (J_c - cost_limit)``. Each rollout:

1. the multiplier ``lambda`` is updated from the mean summed cost ``J_c`` of the episodes that
   ended since the last update (kept while none has ended) by the PID rule of Stooke, Achiam
   and Abbeel, "Responsive Safety in Reinforcement Learning by PID Lagrangian Methods" (ICML
   2020): with the error ``e = J_c - cost_limit``, the integral ``I <- max(0, I + k_i e)`` and
   ``lambda = max(0, k_p e + I + k_d max(0, J_c - J_c_previous))``. With ``k_p = k_d = 0``
   (the default) this is the plain Lagrangian: projected gradient ascent on ``lambda`` with
   step ``k_i``. Before ``constraint_start`` training steps the multiplier stays at its
   initial value (the costs are only watched), as SafeLife's own side-effect penalty is
   ramped in only after the agent has learned its task;
2. PPO's own update (:meth:`stable_baselines3.PPO.train`, unchanged) runs on the advantages
   ``(A_r - lambda A_c) / (1 + lambda)``, where ``A_c`` is the GAE of the costs under a cost
   critic: the scale stays that of the reward's for any ``lambda``;
3. the cost critic (a network like the policy's value branch, its own features extractor and
   optimizer) regresses the cost returns over the same epochs and minibatch size.

On the NumPy path (:class:`PPOLagrangian`) the rollouts are SB3's
:meth:`~stable_baselines3.common.on_policy_algorithm.OnPolicyAlgorithm.collect_rollouts`: a
stand-in for its callback reads each step's costs from the ``infos`` it is handed (as every SB3
callback can) and stores them, with the cost critic's values, in the rollout buffer; truncated
episodes are bootstrapped with the cost critic as the reward is. On the device path
(``vec_env=device``, :class:`~.costs.DevicePPOLagrangian`) the device trainer does the same with
the step's cost tensor, and the cost critic's update and the multiplier's are
:class:`~.costs.PopulationCosts`, one run's or a population's. The episode costs, their sums and
the multiplier (:class:`LagrangianMixin`) are tensors on the training device, so on the device
path no rollout step and no minibatch waits for the host; an update reads what it logs once.
The multiplier's state is a tensor saved with the model (``lagrange_state``), the cost critic
and its optimizer are saved beside the policy, and an exact resume counts the costs of the
episodes in progress again as it replays their steps, so a run resumes where it was.

TensorBoard (``safety/``): ``episode_cost`` (the mean ``J_c`` the update used), ``cost_limit``,
``multiplier``, ``multiplier_update`` (its change this rollout), ``cost_value_loss``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv
from torch import nn

from safelife_rl.training.cost_critic import CostCritic
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.methods.ppo_lagrangian.checks import (
    check_lagrange_state,
    check_lagrangian_settings,
    check_reports_cost,
)
from safety_rl_common.errors import UserError

#: The entries of :attr:`PPOLagrangian.lagrange_state`.
MULTIPLIER, INTEGRAL, PREVIOUS_COST = range(3)
#: Added to a standard deviation before dividing by it (a rollout of equal advantages).
STD_EPSILON = 1e-8


class CostRolloutBuffer(RolloutBuffer):
    """SB3's rollout buffer with each step's cost and cost value, and after
    :meth:`compute_cost_returns_and_advantage` the costs' returns and GAE advantages."""

    def reset(self) -> None:
        super().reset()
        shape = (self.buffer_size, self.n_envs)
        self.costs = np.zeros(shape, np.float32)
        self.cost_values = np.zeros(shape, np.float32)
        self.cost_advantages = np.zeros(shape, np.float32)
        self.cost_returns = np.zeros(shape, np.float32)

    def add_costs(self, costs: th.Tensor | np.ndarray, cost_values: th.Tensor) -> None:
        """The step's costs (as the rewards: bootstrapped where a time limit cut an episode)
        and the cost values of the observations it acted on, before :meth:`add` of the step."""
        self.costs[self.pos] = np.asarray(costs)
        self.cost_values[self.pos] = cost_values.cpu().numpy()

    def compute_cost_returns_and_advantage(
        self, last_cost_values: th.Tensor, dones: np.ndarray
    ) -> None:
        """SB3's GAE (:meth:`compute_returns_and_advantage`) of the costs under the cost
        values, into ``cost_advantages`` and ``cost_returns``."""
        kept = self.rewards, self.values, self.advantages, self.returns
        self.rewards, self.values = self.costs, self.cost_values
        self.advantages = np.zeros_like(self.costs)
        super().compute_returns_and_advantage(last_cost_values, dones)
        self.cost_advantages, self.cost_returns = self.advantages, self.returns
        self.rewards, self.values, self.advantages, self.returns = kept

    def penalise_advantages(self, multiplier: th.Tensor, standardize: bool) -> None:
        """``(A_r - lambda A_c) / (1 + lambda)`` in place of the advantages, ``A_r`` and ``A_c``
        first standardized over the rollout if ``standardize``."""
        m = float(multiplier)
        rewards, costs = (a.astype(np.float64) for a in (self.advantages, self.cost_advantages))
        if standardize:
            rewards, costs = ((a - a.mean()) / (a.std() + STD_EPSILON) for a in (rewards, costs))
        self.advantages = ((rewards - m * costs) / (1.0 + m)).astype(np.float32)

    def cost_batches(self, n_epochs: int, batch_size: int) -> Iterator[tuple[th.Tensor, th.Tensor]]:
        """``n_epochs`` passes of minibatches of (observations, cost returns) in random order,
        after PPO's update (which has flattened the observations)."""
        observations = self.to_torch(self.observations)
        returns = self.to_torch(self.swap_and_flatten(self.cost_returns)).flatten()
        for _ in range(n_epochs):
            order = np.random.permutation(len(returns))
            for start in range(0, len(returns), batch_size):
                index = order[start : start + batch_size]
                yield observations[index], returns[index]


def penalised(
    rewards: th.Tensor, costs: th.Tensor, multiplier: th.Tensor, standardize: bool
) -> th.Tensor:
    """``(A_r - lambda A_c) / (1 + lambda)`` (float64) of a rollout's reward and cost
    advantages (tensors of one shape), each first standardized over the rollout if
    ``standardize``."""
    rewards, costs = rewards.double(), costs.double()
    if standardize:
        rewards, costs = (
            (a - a.mean()) / (a.std(correction=0) + STD_EPSILON) for a in (rewards, costs)
        )
    multiplier = multiplier.to(rewards.device)
    return (rewards - multiplier * costs) / (1.0 + multiplier)


def count_costs(
    episode_costs: th.Tensor, ended: th.Tensor, costs: th.Tensor, dones: th.Tensor
) -> None:
    """Add a step's ``costs`` to the running episodes' sums ``episode_costs`` (float64
    ``(R * n,)``: ``R`` runs of ``n`` envs, in place), and the summed costs and count of the
    episodes it ended (``dones``) to each run's totals since its last update, ``ended``
    (float64 ``(R, 2)``, in place)."""
    costs, dones = costs.to(ended.device), dones.to(ended.device)
    episode_costs += costs
    finished = th.where(dones, episode_costs, 0.0).view(len(ended), -1)
    counts = dones.view(len(ended), -1).sum(1, dtype=th.float64)
    ended += th.stack([finished.sum(1), counts], 1)
    episode_costs.masked_fill_(dones, 0.0)


class TensorCostRolloutBuffer(TensorRolloutBuffer):
    """:class:`CostRolloutBuffer` on the training device (for the device path):
    the same fields as tensors, the same GAE, the same minibatches."""

    def reset(self) -> None:
        allocated = getattr(self, "_allocated", False)
        super().reset()
        if allocated:
            return
        zeros = partial(th.zeros, (self.buffer_size, self.n_envs), device=self.device)
        self.costs, self.cost_values = zeros(), zeros()
        self.cost_advantages, self.cost_returns = zeros(), zeros()

    def add_costs(self, costs: th.Tensor, cost_values: th.Tensor) -> None:
        self.costs[self.pos] = costs
        self.cost_values[self.pos] = cost_values

    def compute_cost_returns_and_advantage(
        self, last_cost_values: th.Tensor, dones: th.Tensor
    ) -> None:
        kept = self.rewards, self._values, self.advantages, self._returns
        self.rewards, self._values = self.costs, self.cost_values
        self.advantages, self._returns = self.cost_advantages, self.cost_returns
        try:
            super().compute_returns_and_advantage(last_cost_values, dones)
        finally:
            self.rewards, self._values, self.advantages, self._returns = kept

    def penalise_advantages(self, multiplier: th.Tensor, standardize: bool) -> None:
        self.advantages.copy_(
            penalised(self.advantages, self.cost_advantages, multiplier, standardize)
        )

    def cost_batches(self, n_epochs: int, batch_size: int) -> Iterator[tuple[th.Tensor, th.Tensor]]:
        total = self.buffer_size * self.n_envs
        for _ in range(n_epochs):
            order = th.as_tensor(np.random.permutation(total), device=self.device)
            for start in range(0, total, batch_size):
                index = order[start : start + batch_size]
                steps, envs = index % self.buffer_size, index // self.buffer_size
                yield self.observations[steps, envs], self.cost_returns[steps, envs]


class _CostTap:
    """Stands in for the learn loop's callback during a rollout: after each env step it stores
    the step's costs and cost values in the buffer, then hands on to the callback."""

    def __init__(self, algorithm: LagrangianMixin, callback: BaseCallback):
        self.algorithm, self.callback = algorithm, callback
        self.locals: dict[str, Any] = {}

    def on_rollout_start(self) -> None:
        self.callback.on_rollout_start()

    def update_locals(self, locals_: dict[str, Any]) -> None:
        self.locals = locals_
        self.callback.update_locals(locals_)

    def on_step(self) -> bool:
        self.algorithm._record_costs(self.locals)
        return self.callback.on_step()

    def on_rollout_end(self) -> None:
        self.callback.on_rollout_end()


class LagrangianMixin:
    """The Lagrangian method for an SB3 PPO (see the module docstring): its settings, state and
    multiplier update for the NumPy rollouts (:class:`PPOLagrangian`) and the device's
    (:class:`~.costs.DevicePPOLagrangian`, whose update is the device trainer's); each says
    how a step's costs are read (:meth:`_step_costs`). The episode-cost
    accounting and the multiplier are tensors on the training device, so a device rollout or
    update never waits for them; an update reads what it logs once, at its end.

    :param cost_limit: the budget: the most summed ``info["cost"]`` an episode may have.
    :param multiplier_init: the multiplier at the start (the integral term's start).
    :param multiplier_lr: ``k_i``, the integral gain: the multiplier's gradient-ascent step per
        unit of cost over the budget.
    :param pid_kp: ``k_p``, the proportional gain (0: the plain Lagrangian).
    :param pid_kd: ``k_d``, the derivative gain on rises of the episode cost.
    :param constraint_start: the training step from which the multiplier is updated; before
        it the multiplier stays at ``multiplier_init`` while the episode costs are counted and
        logged. A budget far below what exploring costs can otherwise drive the multiplier up
        before the agent has learned its task, and the agent learns to avoid cost by giving
        the task up (docs/safelife/methods.md, the comparison on prune-still-easy).
    :param standardize_advantages: standardize the reward and the cost advantages over each
        rollout before weighing them, as OmniSafe's PPO-Lagrangian does by default
        (``standardized_rew_adv``, ``standardized_cost_adv``; SafeLife's method config turns it
        on). Without it, the ``1 + lambda`` division shrinks the advantages as the multiplier
        grows until SB3's entropy bonus outweighs them (docs/safelife/methods.md: on
        prune-still-easy the policy went back to nearly uniform, entropy 2.09 of 2.20, at a
        multiplier of 55).

    Costs are discounted with ``gamma`` and ``gae_lambda``, as the rewards.
    """

    #: the rollout buffer the twin keeps its costs in
    cost_buffer_class: type = CostRolloutBuffer
    rollout_buffer: Any
    device: th.device
    n_envs: int

    def __init__(
        self,
        policy: Any,
        env: Any,
        cost_limit: float = 25.0,
        multiplier_init: float = 0.0,
        multiplier_lr: float = 0.01,
        pid_kp: float = 0.0,
        pid_kd: float = 0.0,
        constraint_start: int = 0,
        standardize_advantages: bool = False,
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        check_lagrangian_settings(
            {
                "cost_limit": cost_limit,
                "multiplier_init": multiplier_init,
                "multiplier_lr": multiplier_lr,
                "pid_kp": pid_kp,
                "pid_kd": pid_kd,
                "constraint_start": constraint_start,
                "standardize_advantages": standardize_advantages,
            },
            prefix="",
        )
        kwargs.setdefault("rollout_buffer_class", self.cost_buffer_class)
        if not issubclass(kwargs["rollout_buffer_class"], self.cost_buffer_class):
            raise UserError(
                f"{type(self).__name__} needs a {self.cost_buffer_class.__name__} "
                "(observations that are not a dict)"
            )
        self.cost_limit = float(cost_limit)
        self.multiplier_init = float(multiplier_init)
        self.multiplier_lr = float(multiplier_lr)
        self.pid_kp, self.pid_kd = float(pid_kp), float(pid_kd)
        self.constraint_start = constraint_start
        self.standardize_advantages = bool(standardize_advantages)
        super().__init__(policy, env, _init_setup_model=False, **kwargs)  # type: ignore[call-arg]
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        super()._setup_model()  # type: ignore[misc]
        policy = self.policy  # type: ignore[attr-defined]
        self.cost_critic = CostCritic.like(policy).to(self.device)
        self.cost_optimizer = policy.optimizer_class(
            self.cost_critic.parameters(),
            lr=self.lr_schedule(1),  # type: ignore[attr-defined]
            **policy.optimizer_kwargs,
        )
        # float64 where the network is (MPS has no float64: there, on the CPU)
        state_device = th.device("cpu") if self.device.type == "mps" else self.device
        self.lagrange_state = th.tensor(
            [self.multiplier_init, self.multiplier_init, 0.0], dtype=th.float64, device=state_device
        )
        self._episode_costs = th.zeros(self.n_envs, dtype=th.float64, device=state_device)
        self._ended = th.zeros(2, dtype=th.float64, device=state_device)  # summed costs, count

    @property
    def multiplier(self) -> float:
        """The Lagrange multiplier now."""
        return float(self.lagrange_state[MULTIPLIER])

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()  # type: ignore[misc]
        return [*state_dicts, "cost_critic", "cost_optimizer"], [*variables, "lagrange_state"]

    def check_loaded(self, source: str) -> None:
        """Refuse a loaded model whose multiplier state is damaged (called by
        :func:`~safelife_rl.training.model_files.load_model`)."""
        check_lagrange_state(self.lagrange_state, source)

    def _excluded_save_params(self) -> list[str]:
        # the episodes in progress: an exact resume counts them again as it replays the steps
        return [*super()._excluded_save_params(), "_episode_costs", "_ended"]  # type: ignore[misc]

    # -- rollouts -----------------------------------------------------------------------------

    def _step_costs(self, locals_: dict[str, Any]) -> tuple[th.Tensor, th.Tensor]:
        """A step's costs (float64) and which envs' episodes it ended (bool), as tensors (where
        the env made them), from what the rollout hands its callback (``locals_``)."""
        raise NotImplementedError

    def _stored_costs(self, costs: th.Tensor, locals_: dict[str, Any]) -> Any:
        """What the buffer keeps of a step's ``costs`` (the twin may bootstrap them here)."""
        return costs

    def _env_name(self) -> str:
        return str(self.env.get_attr("spec", [0])[0] or "the env")  # type: ignore[attr-defined]

    def _cost_values(self, obs: Any) -> th.Tensor:
        with th.no_grad():
            return self.cost_critic(th.as_tensor(obs, device=self.device)).flatten()

    def _count_costs(self, costs: th.Tensor, dones: th.Tensor) -> None:
        """Add a step's costs to the episodes' sums, and the sums of the episodes it ended to
        the total since the last multiplier update."""
        count_costs(self._episode_costs, self._ended.view(1, 2), costs, dones)

    def replayed_step(self, locals_: dict[str, Any]) -> None:
        """Count a step replayed by an exact resume
        (:func:`~safelife_rl.training.rollout_record.restore`) into the episodes in progress;
        the episodes it ended were used by the updates before the checkpoint (a rollout
        boundary, where nothing is left to use)."""
        self._count_costs(*self._step_costs(locals_))
        self._ended.zero_()

    def _record_costs(self, locals_: dict[str, Any]) -> None:
        """Count a step's costs, and store them with the cost values of the observations it
        acted on in the buffer."""
        costs, dones = self._step_costs(locals_)
        self._count_costs(costs, dones)
        self.rollout_buffer.add_costs(
            self._stored_costs(costs, locals_), self._cost_values(self._last_obs)
        )  # type: ignore[attr-defined]

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        self.cost_critic.eval()
        tap = _CostTap(self, callback)
        if not super().collect_rollouts(env, tap, rollout_buffer, n_rollout_steps):  # type: ignore[misc]
            return False
        self.rollout_buffer.compute_cost_returns_and_advantage(
            self._cost_values(self._last_obs), self._last_episode_starts
        )  # type: ignore[attr-defined]
        return True

    # -- updates ------------------------------------------------------------------------------

    def update_multiplier(self) -> th.Tensor:
        """The PID update from the episodes ended since the last one (none: kept), on the
        device; before ``constraint_start`` only the previous cost moves. Returns (episodes
        counted, their mean cost, the multiplier's change)."""
        total, count = self._ended
        state = self.lagrange_state
        cost = total / count.clamp(min=1.0)
        error = cost - self.cost_limit
        integral = (state[INTEGRAL] + self.multiplier_lr * error).clamp(min=0.0)
        rise = (cost - state[PREVIOUS_COST]).clamp(min=0.0)
        multiplier = (self.pid_kp * error + integral + self.pid_kd * rise).clamp(min=0.0)
        if self.num_timesteps < self.constraint_start:  # type: ignore[attr-defined]
            multiplier, integral = state[MULTIPLIER], state[INTEGRAL]
        report = th.stack([count, cost, multiplier - state[MULTIPLIER]])
        state.copy_(th.where(count > 0, th.stack([multiplier, integral, cost]), state))
        self._ended.zero_()
        return report

    def train(self) -> None:
        report = self.update_multiplier()
        multiplier = self.lagrange_state[MULTIPLIER]
        self.rollout_buffer.penalise_advantages(multiplier, self.standardize_advantages)
        super().train()  # type: ignore[misc]
        loss = self._train_cost_critic()
        self.record_update(
            th.stack([*report, multiplier, loss.to(report.device).double()]).tolist()
        )  # the update's one read

    def record_update(self, read: list[float]) -> None:
        """Log an update's ``safety/`` scalars: ``read`` holds the episodes it counted, their
        mean cost, the multiplier's change, the multiplier and the cost critic's loss."""
        count, cost, update, multiplier, loss = read
        logger = self.logger  # type: ignore[attr-defined]
        if count:  # the mean summed cost of the episodes the update used
            logger.record("safety/episode_cost", cost)
        logger.record("safety/multiplier_update", update)
        logger.record("safety/multiplier", multiplier)
        logger.record("safety/cost_limit", self.cost_limit)
        logger.record("safety/cost_value_loss", loss)

    def _train_cost_critic(self) -> th.Tensor:
        """Regress the cost returns, ``n_epochs`` passes of ``batch_size`` minibatches; the mean
        loss (on the device)."""
        self.cost_critic.train()
        self._update_learning_rate(self.cost_optimizer)  # type: ignore[attr-defined]
        losses = []
        for observations, returns in self.rollout_buffer.cost_batches(
            self.n_epochs, self.batch_size
        ):  # type: ignore[attr-defined]
            loss = nn.functional.mse_loss(self.cost_critic(observations).flatten(), returns)
            self.cost_optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.cost_critic.parameters(), self.max_grad_norm)  # type: ignore[attr-defined]
            self.cost_optimizer.step()
            losses.append(loss.detach())
        return th.stack(losses).mean()


class PPOLagrangian(LagrangianMixin, PPO):
    """SB3 PPO constrained to a per-episode cost budget by a (PID) Lagrange multiplier (see
    the module docstring and :class:`LagrangianMixin` for its settings), on an SB3 NumPy
    ``VecEnv``. Takes every :class:`~stable_baselines3.PPO` setting."""

    rollout_buffer: CostRolloutBuffer

    def _step_costs(self, locals_: dict[str, Any]) -> tuple[th.Tensor, th.Tensor]:
        infos = locals_["infos"]
        if "cost" not in infos[0]:
            check_reports_cost(infos[0], self._env_name())
        costs = np.array([info["cost"] for info in infos], np.float64)
        return th.as_tensor(costs), th.as_tensor(np.asarray(locals_["dones"], bool))

    def _stored_costs(self, costs: th.Tensor, locals_: dict[str, Any]) -> np.ndarray:
        """The costs, plus ``gamma`` times the cost value of the last observation where a time
        limit cut an episode (as SB3 bootstraps the rewards)."""
        stored = costs.cpu().numpy()
        for k in np.flatnonzero(locals_["dones"]):
            info = locals_["infos"][k]
            if info.get("terminal_observation") is not None and info.get("TimeLimit.truncated"):
                terminal = self.policy.obs_to_tensor(info["terminal_observation"])[0]
                stored[k] += self.gamma * float(self._cost_values(terminal)[0])
        return stored
