"""PPO and A2C that collect their rollouts without leaving the torch device.

:class:`DevicePPO` and :class:`DeviceA2C` are SB3's ``PPO`` and ``A2C`` with two parts
replaced: the rollout buffer (:class:`~.buffer.TensorRolloutBuffer`, on the device) and
``collect_rollouts``, which steps a :class:`~.adapters.TensorVecEnv` with the policy's action
tensors. Everything else is SB3's own: ``PPO.train``/``A2C.train`` (losses and updates),
``learn``, logging, saving and loading. Given the same seed, envs and initial weights they make
the same updates as stock SB3 (``tests/safelife/test_device_training.py``).

**Actions.** A discrete action space's actions are drawn by :class:`~.sampler.ActionSampler`
(Gumbel-max over a hash of the run's seed, step count, env and action: no generator, the same
draws as the run's as a population member's); other spaces' as SB3 draws them.

**Callbacks.** Nothing in a rollout step waits for the device. At each step
``callback.locals["step"]`` holds the whole :class:`~.adapters.TensorStep` and ``infos`` and
``dones`` are empty; the episodes that ended in the rollout come together at its end: in
``on_rollout_end``, ``callback.locals["episodes"]`` is a list of ``(timesteps, info)``, each
info as the single env's last one with the step count at which the episode ended, in the order
they ended (read from the device in one copy). SB3's ``ep_info_buffer`` gets them then too.
:class:`~safelife_rl.training.callbacks.EpisodeLogger` logs them at their own steps.

**Training.** SB3's ``train`` runs unchanged, its ``.item()`` calls deferred
(:mod:`.deferred`): no sync per minibatch; invalid actions are checked once per rollout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.vec_env import VecEnv

from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.device.captured_policy import (
    CapturedPolicy,
    distribution_and_values,
)
from safelife_rl.training.device.deferred import (
    deferred_scalars,
    no_argument_checks,
    read_deferred,
)
from safelife_rl.training.device.episodes import EpisodeRecorder
from safelife_rl.training.device.sampler import ActionSampler, run_seed
from safety_rl_common.errors import UserError


class DeviceRollouts:
    """Mixin for an SB3 on-policy algorithm: a device rollout buffer, a ``collect_rollouts``
    over a :class:`~.adapters.TensorVecEnv` and a ``train`` that reads SB3's loss statistics
    once (see the module docstring). Adam is fused (no host read of its step count) unless
    ``policy_kwargs["optimizer_kwargs"]`` says otherwise. When the env replays its step as a
    CUDA graph (``compile=cudagraphs``), the policy's network is replayed as one too
    (:class:`~.captured_policy.CapturedPolicy`)."""

    _captured: CapturedPolicy | None = None
    _sampler: ActionSampler | None = None
    #: the seed of the action draws of a run made without a seed (:func:`~.sampler.run_seed`)
    action_seed: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rollout_buffer_class", TensorRolloutBuffer)
        policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
        if policy_kwargs.get("optimizer_class", torch.optim.Adam) is torch.optim.Adam:
            policy_kwargs["optimizer_kwargs"] = {
                "fused": True,
                **(policy_kwargs.get("optimizer_kwargs") or {}),
            }
        kwargs["policy_kwargs"] = policy_kwargs
        super().__init__(*args, **kwargs)

    def _setup_learn(self, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(self.env, TensorVecEnv):
            raise TypeError(
                f"{type(self).__name__} steps a TensorVecEnv (e.g. tensor_vec_env(env_fns) "
                f"of safelife_rl.training.device), got {type(self.env).__name__}"
            )
        result = super()._setup_learn(*args, **kwargs)
        self._last_episode_starts = torch.as_tensor(
            self._last_episode_starts, dtype=torch.bool, device=self.device
        )
        return result

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_captured", "_sampler"]  # type: ignore[misc]

    def _forward(
        self, env: TensorVecEnv
    ) -> Callable[[torch.Tensor], tuple[Distribution, torch.Tensor]]:
        """The rollout's forward pass, the action distribution and values: the policy's, or
        with ``env.cuda_graphs`` with its network captured (once per policy object)."""
        if not env.cuda_graphs:
            return partial(distribution_and_values, self.policy)
        if self._captured is None or self._captured.policy is not self.policy:
            self._captured = CapturedPolicy(self.policy)
        return self._captured

    def _start_draws(self) -> None:
        """At a rollout's start: a discrete space's :class:`~.sampler.ActionSampler` (made
        once) drawing on from the run's step count."""
        if isinstance(self.action_space, spaces.Discrete):
            if self._sampler is None:
                n = int(self.action_space.n)
                self._sampler = ActionSampler([run_seed(self)], self.n_envs, n, self.device)
            self._sampler.start(self.num_timesteps)

    def _draw(self, distribution: Distribution) -> torch.Tensor:
        """The actions of a rollout step: a discrete space's from the run's sampler, others as
        SB3 draws them."""
        if self._sampler is None:
            return distribution.get_actions()
        logits = distribution.distribution.logits  # type: ignore[attr-defined]
        return self._sampler(logits[None])[0]

    def _timeout_bootstraps(
        self, buffer: TensorRolloutBuffer
    ) -> list[tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]]:
        """What a time limit's cut bootstraps: pairs of an estimate of what follows an
        observation and the per-step quantity (``(steps, n_envs)``) it is added to."""
        return [(self.policy.predict_values, buffer.rewards)]

    def _bootstrap_timeouts(self, buffer: TensorRolloutBuffer) -> None:
        """Add ``gamma * V(final observation)`` to the rewards of the steps where a time limit
        cut an episode, as SB3 does for ``TimeLimit.truncated`` (GitHub issue #633), and so for
        each of :meth:`_timeout_bootstraps`: one pass of every env's final observation per
        round of :meth:`~.buffer.TensorRolloutBuffer.cuts` (one when an env is cut at most
        once a rollout), added where it was cut."""
        envs = torch.arange(buffer.n_envs, device=buffer.device)
        with torch.no_grad():
            for steps, cut, final in buffer.cuts():
                for estimate, target in self._timeout_bootstraps(buffer):
                    added = torch.where(cut, self.gamma * estimate(final).flatten(), 0.0)
                    target[steps, envs] += added

    def _read_episodes(self, recorder: EpisodeRecorder) -> list[tuple[int, dict[str, Any]]]:
        """The episodes ``recorder`` holds (one read from the device), added to SB3's episode
        statistics as a rollout's end adds them."""
        episodes = recorder.read()
        self._update_info_buffer(
            [info for _, info in episodes],  # type: ignore[attr-defined]
            np.ones(len(episodes), dtype=bool),
        )
        return episodes

    def collect_rollouts(  # type: ignore[override]
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: TensorRolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        assert isinstance(env, TensorVecEnv), "the device algorithms step a TensorVecEnv"
        assert self._last_obs is not None, "No previous observation was provided"
        self.policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:
            self.policy.reset_noise(env.num_envs)
        callback.on_rollout_start()
        box = isinstance(self.action_space, spaces.Box)
        if box:
            low = torch.as_tensor(self.action_space.low, device=self.device)
            high = torch.as_tensor(self.action_space.high, device=self.device)
        recorder = EpisodeRecorder(env.level_names)
        infos: list[dict[str, Any]] = []  # per step: none (they come at the rollout's end)
        dones = np.zeros(0, dtype=bool)
        forward = self._forward(env)
        self._start_draws()

        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
            with torch.no_grad(), no_argument_checks():
                distribution, values = forward(self._last_obs.to(self.device))
                actions = self._draw(distribution)
                log_probs = distribution.log_prob(actions)
                actions = actions.reshape((-1, *self.action_space.shape))
            clipped_actions = actions
            if box:
                clipped_actions = (
                    self.policy.unscale_action(actions)
                    if self.policy.squash_output
                    else torch.clamp(actions, low, high)
                )
            step = env.step(clipped_actions.to(env.device))
            self.num_timesteps += env.num_envs
            recorder.add(self.num_timesteps, step)
            new_obs = step.observations
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)
            rollout_buffer.add_timeouts(step.truncated.to(self.device), step.final_observations)
            rollout_buffer.add(
                self._last_obs.to(self.device),
                actions,
                step.rewards.to(self.device, torch.float32),
                self._last_episode_starts,
                values,
                log_probs,
            )
            self._last_obs = new_obs
            self._last_episode_starts = (step.terminated | step.truncated).to(self.device)

        env.check_actions()
        self._bootstrap_timeouts(rollout_buffer)
        with torch.no_grad():
            values = self.policy.predict_values(new_obs.to(self.device))
        rollout_buffer.compute_returns_and_advantage(
            last_values=values, dones=self._last_episode_starts
        )
        episodes = self._read_episodes(recorder)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def train(self) -> None:
        """SB3's own ``train``, its loss statistics read once at the end (not per minibatch)
        and ``torch.distributions``' argument checks off."""
        with deferred_scalars(), no_argument_checks():
            super().train()  # type: ignore[misc]
        read_deferred(self.logger.name_to_value)


class DevicePPO(DeviceRollouts, PPO):
    """SB3's PPO trained from a :class:`~.adapters.TensorVecEnv` on the device."""


class DeviceA2C(DeviceRollouts, A2C):
    """SB3's A2C trained from a :class:`~.adapters.TensorVecEnv` on the device."""


#: The device algorithm of each SB3 algorithm that has one, by ``_target_`` (the methods'
#: algorithms declare their own twins).
DEVICE_ALGORITHMS = {
    "stable_baselines3.PPO": "safelife_rl.training.device.DevicePPO",
    "stable_baselines3.ppo.PPO": "safelife_rl.training.device.DevicePPO",
    "stable_baselines3.A2C": "safelife_rl.training.device.DeviceA2C",
    "stable_baselines3.a2c.A2C": "safelife_rl.training.device.DeviceA2C",
}


def device_algorithm(target: str, more: Mapping[str, str] | None = None) -> str:
    """The ``_target_`` of the device algorithm for the SB3 algorithm ``target`` (looked up in
    :data:`DEVICE_ALGORITHMS` and ``more``), or a :class:`~safety_rl_common.errors.UserError`
    for one without (e.g. DQN)."""
    twins = {**DEVICE_ALGORITHMS, **(more or {})}
    if target in twins.values():
        return target
    if target not in twins:
        names = sorted({t.rpartition(".")[2] for t in twins})
        raise UserError(
            f"vec_env=device trains the algorithms with a device twin "
            f"({', '.join(names)}), not {target}"
        )
    return twins[target]
