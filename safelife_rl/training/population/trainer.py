"""Population training: P independent PPO runs in one process, their envs stepped as one
device vector env and their networks run and updated as one batch.

Each member is an ordinary SB3 model (:class:`~.members.PopulationMember`, a ``DevicePPO``)
with its own seed, impact penalty, callbacks, logger and run folder; :class:`PopulationPPO`
drives them in lockstep as SB3's ``learn`` drives one: a rollout of every member's envs (one
vector-env step and one batched forward pass per step), then one PPO update of every member
(each member's own minibatch order, advantages, losses, gradient clipping and Adam moments,
computed as stacked tensors; one fused Adam over the stacked parameters is P Adams).

**Exactness.** Each member's actions and envs are its own: its actions drawn by one batched
:class:`~safelife_rl.training.device.sampler.ActionSampler` from its seed and step count as its
single run draws them, its minibatches from its own NumPy stream, its group of the vector
env. Run member by member (``batching="loop"``, the CPU's default), each
member makes its single DevicePPO run's updates bit for bit (on the CPU; the tests check it).
Batched with ``torch.func.vmap`` (CUDA's default), the convolutions and products of all members
run in other kernels, whose sums round otherwise: about 1e-9 relative per forward pass, a few
1e-7 in the weights after a few updates; a population of one is always its run bit for bit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import explained_variance
from torch.distributions import Categorical
from tqdm import tqdm

from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.training.device.adapters import GymnasiumTensorVecEnv, TensorVecEnv
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.device.deferred import no_argument_checks
from safelife_rl.training.device.episodes import EpisodeRecorder
from safelife_rl.training.device.sampler import ActionSampler, run_seed
from safelife_rl.training.methods.ppo_lagrangian.algorithm import TensorCostRolloutBuffer
from safelife_rl.training.population.costs import PopulationCosts
from safelife_rl.training.population.members import (
    MemberEnv,
    MemberRandom,
    PopulationLagrangianMember,
    PopulationMember,
    SharedSchedules,
)
from safelife_rl.training.population.record import RecordedActions
from safelife_rl.training.population.stacked import (
    PolicyHeads,
    StackedNetworks,
    StackedOptimizer,
)
from safety_rl_common.errors import UserError

#: The PPO settings every member must share (they shape the batched update).
SHARED = (
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "normalize_advantage",
    "target_kl",
    "n_envs",
    "use_sde",
)


class PopulationPPO:
    """P PPO members trained together; see the module docstring.

    :param env: a :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` of ``P`` groups
        (one per member, ``n_envs`` envs each).
    :param make_member: builds member ``k``'s model on its env view and seed (a
        :class:`~.members.PopulationMember` as a single run would build its ``DevicePPO``).
    :param seeds: the members' seeds.
    :param penalties: the members' impact penalties (``None``: the env's wrapper's, for all).
    :param batching: how the members' networks run together
        (:data:`~.stacked.BATCHING`: ``vmap`` on CUDA, member by member elsewhere by default).
    """

    def __init__(
        self,
        env: SafeLifeVectorEnv,
        make_member: Callable[[TensorVecEnv, int], PopulationMember],
        seeds: Sequence[int],
        penalties: Sequence[float] | None = None,
        batching: str = "auto",
    ):
        if env.groups != len(seeds):
            raise UserError(f"{len(seeds)} members need an env of {len(seeds)} groups")
        self.env = env
        self.venv = GymnasiumTensorVecEnv(env)
        self.size, self.n_envs = len(seeds), env.group_size
        if penalties is not None:
            env.set_group_penalties(penalties)
        self.members: list[PopulationMember] = []
        self.random: list[MemberRandom] = []
        self.schedules = SharedSchedules(env)
        for k, seed in enumerate(seeds):
            member = make_member(MemberEnv(self.venv, k, self.n_envs, self.schedules), int(seed))
            self.random.append(MemberRandom.capture(member.device))
            self.members.append(member)
        self._check_members()
        first = self.members[0]
        self.device = first.device
        self.sampler = ActionSampler(
            [run_seed(member) for member in self.members],
            self.n_envs,
            int(env.single_action_space.n),
            self.device,
        )
        self.stacked = StackedNetworks([PolicyHeads(m.policy) for m in self.members], batching)
        self.optimizer = StackedOptimizer(self.stacked, [m.policy.optimizer for m in self.members])
        #: PPO-Lagrangian's parts, if the members are PPO-Lagrangian's
        self.costs: PopulationCosts | None = None
        if isinstance(first, PopulationLagrangianMember):
            self.costs = PopulationCosts(self.members, self.n_envs, self.stacked.batching)  # type: ignore[arg-type]
        buffer_class = TensorRolloutBuffer if self.costs is None else TensorCostRolloutBuffer
        self.buffer = buffer_class(
            first.n_steps,
            first.observation_space,
            first.action_space,
            self.device,
            gae_lambda=first.gae_lambda,
            gamma=first.gamma,
            n_envs=self.size * self.n_envs,
        )
        self.buffer.reset()
        #: each member's steps at the last rollout boundary (trained on every step it counts)
        self.trained_steps = 0
        self._last_obs: torch.Tensor | None = None
        self._last_starts: torch.Tensor | None = None
        #: every action sent to the envs (the members' rollout records read their columns)
        self.recorded = RecordedActions(self.size * self.n_envs)

    def _check_members(self) -> None:
        first = self.members[0]
        for k, member in enumerate(self.members):
            if not isinstance(member, PopulationMember):
                raise UserError(f"member {k} is a {type(member).__name__}, not a PopulationMember")
            if type(member) is not type(first):
                raise UserError(
                    f"member {k} is a {type(member).__name__}, member 0 a "
                    f"{type(first).__name__}: a population's members train one algorithm"
                )
            for name in SHARED:
                if getattr(member, name) != getattr(first, name):
                    raise UserError(
                        f"the members differ in {name} ({getattr(first, name)!r} and "
                        f"{getattr(member, name)!r}): a population batches them as one"
                    )
        if first.target_kl is not None:
            raise UserError("a population trains without target_kl (no member stops early)")
        if first.n_envs != self.n_envs:
            raise UserError(f"the members have {first.n_envs} envs, their groups {self.n_envs}")

    # -- learning -----------------------------------------------------------------------------

    def learn(
        self,
        total_timesteps: int,
        callbacks: Sequence[BaseCallback | None] | None = None,
        log_interval: int = 1,
        progress_bar: bool = False,
        reset_num_timesteps: bool = True,
    ) -> PopulationPPO:
        """Train every member ``total_timesteps`` more steps of its own, as
        ``model.learn(total_timesteps, callback, reset_num_timesteps=...)`` trains one (the
        step counts from 0, or on from the members' own, all equal).

        :param callbacks: one per member (or ``None``), each seeing its member's model, steps,
            episodes (``locals["episodes"]`` at a rollout's end) and logger.
        """
        callbacks = list(callbacks or [None] * self.size)
        if len(callbacks) != self.size:
            raise UserError(f"need one callback per member ({self.size}), got {len(callbacks)}")
        if reset_num_timesteps or self._last_obs is None:  # else: on from :meth:`replay`
            obs, _ = self.env.reset(seed=[m.env.given_seed for m in self.members])
            self._last_obs = torch.as_tensor(obs, device=self.device)
            self._last_starts = torch.ones(len(obs), dtype=torch.bool, device=self.device)
            for k, member in enumerate(self.members):
                member.env.first_obs = self._part(self._last_obs, k)
        started = []
        for member, callback in zip(self.members, callbacks):
            total, started_callback = member._setup_learn(
                total_timesteps, callback, reset_num_timesteps, "run", False
            )
            started.append(started_callback)
        for callback in started:
            callback.on_training_start(locals(), globals())
        iteration = 0
        self.trained_steps = self.members[0].num_timesteps
        bar = tqdm(
            total=total,
            initial=self.trained_steps,
            disable=not progress_bar,
            unit="steps",
            desc="population",
        )
        while self.members[0].num_timesteps < total:
            if not self._collect_rollouts(started):
                break
            iteration += 1
            bar.update(self.n_envs * self.members[0].n_steps)
            for member in self.members:
                member._update_current_progress_remaining(member.num_timesteps, total)
                if log_interval and iteration % log_interval == 0:
                    member.dump_logs(iteration)
            self._train()
            self.trained_steps = self.members[0].num_timesteps
        bar.close()
        for callback in started:
            callback.on_training_end()
        return self

    def _part(self, tensor: torch.Tensor, k: int) -> torch.Tensor:
        return tensor[k * self.n_envs : (k + 1) * self.n_envs]

    def _sample(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's actions, drawn in one batch as its single run draws them, and their
        log-probabilities: ``(P, n)`` each."""
        distribution = Categorical(logits=logits)
        actions = self.sampler(distribution.logits)
        return actions, distribution.log_prob(actions)

    def _collect_rollouts(self, callbacks: list[BaseCallback]) -> bool:
        """One rollout of every member, into the stacked buffer (DevicePPO's
        ``collect_rollouts`` for P members at once)."""
        first = self.members[0]
        buffer, n = self.buffer, self.n_envs
        for member in self.members:
            member.policy.set_training_mode(False)
        self.stacked.set_training_mode(False)
        if self.costs is not None:
            self.costs.set_training_mode(False)
        buffer.reset()
        for callback in callbacks:
            callback.on_rollout_start()
        recorder = EpisodeRecorder(self.venv.level_names)
        obs, starts = self._last_obs, self._last_starts
        no_dones = np.zeros(0, dtype=bool)
        assert obs is not None and starts is not None
        self.sampler.start(first.num_timesteps)
        taken = []
        for _ in range(first.n_steps):
            with torch.no_grad(), no_argument_checks():
                logits, values = self.stacked(self._by_member(obs))
                actions, log_probs = self._sample(logits)
            taken.append(actions.flatten())
            step = self.venv.step(taken[-1])
            for member in self.members:
                member.num_timesteps += n
            recorder.add(first.num_timesteps, step)
            for k, callback in enumerate(callbacks):
                # as DevicePPO's: the episodes come at the rollout's end, none per step
                callback.update_locals(
                    {"actions": actions[k], "step": step, "infos": [], "dones": no_dones}
                )
                if not callback.on_step():
                    return False
            if self.costs is not None:
                self.costs.record(buffer, self._by_member(obs), step)  # type: ignore[arg-type]
            buffer.add_timeouts(step.truncated, step.final_observations)
            buffer.add(
                obs,
                actions.reshape(-1, 1),
                step.rewards.to(torch.float32),
                starts,
                values.flatten(),
                log_probs.flatten(),
            )
            obs, starts = step.observations, step.terminated | step.truncated
        self.venv.check_actions()
        self._bootstrap_timeouts()
        with torch.no_grad():
            last_values = self.stacked(self._by_member(obs))[1]
        buffer.compute_returns_and_advantage(last_values.flatten(), starts)
        self.recorded.add(torch.stack(taken))
        self._set_last(obs, starts)
        for episodes, callback in zip(self._deliver_episodes(recorder), callbacks):
            callback.update_locals({"episodes": episodes})
            callback.on_rollout_end()
        if self.costs is not None:
            self.buffer.compute_cost_returns_and_advantage(  # type: ignore[attr-defined]
                self.costs.values(self._by_member(obs)), starts
            )
        return True

    def _by_member(self, tensor: torch.Tensor) -> torch.Tensor:
        """A tensor of all envs ``(P * n, ...)`` as ``(P, n, ...)``."""
        return tensor.view(self.size, self.n_envs, *tensor.shape[1:])

    def _set_last(self, obs: torch.Tensor, starts: torch.Tensor) -> None:
        """Where the next rollout starts: the population's and each member's view."""
        self._last_obs, self._last_starts = obs, starts
        for k, member in enumerate(self.members):
            member._last_obs = self._part(obs, k)
            member._last_episode_starts = self._part(starts, k)

    def _deliver_episodes(
        self, recorder: EpisodeRecorder
    ) -> list[list[tuple[int, dict[str, Any]]]]:
        """The episodes ``recorder`` holds (one read), into each member's SB3 episode
        statistics; each member's as ``(timesteps, info)``."""
        by_member: list[list[tuple[int, dict[str, Any]]]] = [[] for _ in range(self.size)]
        for timesteps, index, info in recorder.read_by_env():
            by_member[index // self.n_envs].append((timesteps, info))
        for member, episodes in zip(self.members, by_member):
            member._update_info_buffer(  # type: ignore[attr-defined]
                [info for _, info in episodes], np.ones(len(episodes), dtype=bool)
            )
        return by_member

    def replay(self, actions: np.ndarray, starts: set[int], offset: int) -> None:
        """Bring the fresh envs to where the members' saved records left them: step them with
        the recorded ``actions`` ``(steps, P * n_envs)`` as the population stepped them (the
        schedules told the step count at each rollout start in ``starts``), refilling each
        member's episode statistics. :meth:`learn` (``reset_num_timesteps=False``) goes on
        from there."""
        n = self.n_envs
        for member in self.members:
            member.ep_info_buffer = deque(maxlen=member._stats_window_size)
            member.ep_success_buffer = deque(maxlen=member._stats_window_size)
        self.schedules.set_training_steps(0)
        obs, _ = self.env.reset(seed=[m.env.given_seed for m in self.members])
        obs = torch.as_tensor(obs, device=self.device)
        ended = torch.ones(len(obs), dtype=torch.bool, device=self.device)
        recorder = EpisodeRecorder(self.venv.level_names)
        for t, taken in enumerate(actions):
            if t in starts:
                self._deliver_episodes(recorder)
                self.schedules.set_training_steps(offset + t * n)
            step = self.venv.step(torch.as_tensor(taken, device=self.device))
            recorder.add(offset + (t + 1) * n, step)
            if self.costs is not None:  # the episodes in progress (those ended were used)
                self.costs.count(step)
            obs, ended = step.observations, step.terminated | step.truncated
        if self.costs is not None:
            self.costs.ended.zero_()
        self._deliver_episodes(recorder)
        self._set_last(obs, ended)
        self.recorded.continue_from(actions)

    def _bootstrap_timeouts(self) -> None:
        """``gamma * V(final observation)`` added where a time limit cut an episode, as a
        member's single run adds it (DevicePPO's): one stacked pass of every env's final
        observation per round of cuts, added where it was cut."""
        buffer, gamma = self.buffer, self.members[0].gamma
        envs = torch.arange(buffer.n_envs, device=self.device)
        with torch.no_grad():
            for steps, cut, final in buffer.cuts():
                values = self.stacked(self._by_member(final))[1].flatten()
                buffer.rewards[steps, envs] += torch.where(cut, gamma * values, 0.0)
                if self.costs is not None:
                    cost_values = self.costs.values(self._by_member(final))
                    buffer.costs[steps, envs] += torch.where(cut, gamma * cost_values, 0.0)  # type: ignore[attr-defined]

    def _minibatch_indices(self, total: int) -> torch.Tensor:
        """Each member's permutation of its rollout's flat indices (SB3's env-major order),
        drawn from the member's NumPy stream as SB3's buffer draws it: ``(P, total)``."""
        order = np.stack([random.numpy.permutation(total) for random in self.random])
        return torch.as_tensor(order, device=self.device)

    def _minibatches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One epoch's minibatches, each member's drawn in its own order: the (steps, envs)
        indices ``(P, batch_size)`` of each."""
        buffer, n = self.buffer, self.n_envs
        steps_per_rollout = buffer.buffer_size
        total = steps_per_rollout * n
        offsets = (torch.arange(self.size, device=self.device) * n)[:, None]
        order = self._minibatch_indices(total)
        for start in range(0, total, self.members[0].batch_size):
            flat = order[:, start : start + self.members[0].batch_size]
            yield flat % steps_per_rollout, flat // steps_per_rollout + offsets

    def _train(self) -> None:
        """One update of every member: SB3's ``PPO.train`` batched over members (after the
        members' multiplier updates and penalised advantages, and followed by their cost
        critics' regression, for PPO-Lagrangian's)."""
        first, buffer = self.members[0], self.buffer
        progress = first._current_progress_remaining
        reports = self.costs.penalise(buffer) if self.costs is not None else None  # type: ignore[arg-type]
        for member in self.members:
            member.policy.set_training_mode(True)
            member._update_learning_rate(member.policy.optimizer)
        self.stacked.set_training_mode(True)
        self.optimizer.set_lr(first.lr_schedule(progress))
        clip_range = first.clip_range(progress)
        clip_range_vf = first.clip_range_vf(progress) if first.clip_range_vf is not None else None
        stats: dict[str, list[torch.Tensor]] = {
            key: [] for key in ("entropy", "pg", "value", "kl", "clip")
        }
        loss = torch.zeros(self.size, device=self.device)
        for _ in range(first.n_epochs):
            stats["kl"] = []  # SB3 logs the last epoch's approximate KL
            for steps, envs in self._minibatches():
                obs = buffer.observations[steps, envs]
                actions = buffer.actions[steps, envs].to(torch.float32).long().flatten(1)
                old_values = buffer._values[steps, envs]
                old_log_prob = buffer.log_probs[steps, envs]
                advantages, returns = buffer.advantages[steps, envs], buffer._returns[steps, envs]
                with no_argument_checks():
                    logits, values = self.stacked(obs)
                    values = values.flatten(1)
                    distribution = Categorical(logits=logits)
                    log_prob, entropy = distribution.log_prob(actions), distribution.entropy()
                if first.normalize_advantage and advantages.shape[1] > 1:
                    advantages = (advantages - advantages.mean(1, keepdim=True)) / (
                        advantages.std(1, keepdim=True) + 1e-8
                    )
                ratio = torch.exp(log_prob - old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean(1)
                clip_fraction = torch.mean((torch.abs(ratio - 1) > clip_range).float(), 1)
                values_pred = values
                if clip_range_vf is not None:
                    values_pred = old_values + torch.clamp(
                        values - old_values, -clip_range_vf, clip_range_vf
                    )
                value_loss = F.mse_loss(returns, values_pred, reduction="none").mean(1)
                entropy_loss = -torch.mean(entropy, 1)
                loss = policy_loss + first.ent_coef * entropy_loss + first.vf_coef * value_loss
                with torch.no_grad():
                    log_ratio = log_prob - old_log_prob
                    kl = torch.mean((torch.exp(log_ratio) - 1) - log_ratio, 1)
                for key, value in zip(
                    stats, (entropy_loss, policy_loss, value_loss, kl, clip_fraction)
                ):
                    stats[key].append(value.detach())
                self.optimizer.zero_grad()
                loss.sum().backward()
                self.optimizer.step(first.max_grad_norm)
            for member in self.members:
                member._n_updates += 1
        self.optimizer.link_member_states()
        self._log_training(stats, loss.detach(), clip_range, clip_range_vf)
        if self.costs is not None:
            assert reports is not None
            losses = self.costs.train(buffer, self._minibatches, progress)  # type: ignore[arg-type]
            self.costs.log(reports, losses)

    def adopt_member_states(self) -> None:
        """Take the members' optimizer states into the stacked optimizers, after their weights
        (in place, in the stacks) and optimizer states were loaded from their checkpoints."""
        self.optimizer.adopt_member_states()
        if self.costs is not None:
            self.costs.optimizer.adopt_member_states()

    def _log_training(
        self,
        stats: dict[str, list[torch.Tensor]],
        loss: torch.Tensor,
        clip_range: float,
        clip_range_vf: float | None,
    ) -> None:
        """Each member's ``train/`` scalars as SB3's PPO records them, read in one copy."""
        means = [_in_order_mean(values) for values in stats.values()]
        host = torch.stack([*means, loss]).cpu().numpy()
        values = self.buffer._values.view(self.buffer.buffer_size, self.size, self.n_envs)
        returns = self.buffer._returns.view(self.buffer.buffer_size, self.size, self.n_envs)
        values, returns = values.cpu().numpy(), returns.cpu().numpy()
        names = ("entropy_loss", "policy_gradient_loss", "value_loss", "approx_kl", "clip_fraction")
        for k, member in enumerate(self.members):
            logger = member.logger
            for row, name in enumerate(names):
                logger.record(f"train/{name}", float(host[row, k]))
            logger.record("train/loss", float(host[-1, k]))
            logger.record(
                "train/explained_variance",
                explained_variance(values[:, k].flatten(), returns[:, k].flatten()),
            )
            logger.record("train/n_updates", member._n_updates, exclude="tensorboard")
            logger.record("train/clip_range", clip_range)
            if clip_range_vf is not None:
                logger.record("train/clip_range_vf", clip_range_vf)


def _in_order_mean(values: list[torch.Tensor]) -> torch.Tensor:
    """The mean of per-minibatch values ``(P,)`` as a device run's ``np.mean`` of SB3's deferred
    scalars makes it (:mod:`~safelife_rl.training.device.deferred`): summed in order, then
    divided, in their precision."""
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total / len(values)
