"""PPO and A2C that collect their rollouts without leaving the torch device.

:class:`DevicePPO` and :class:`DeviceA2C` are SB3's ``PPO`` and ``A2C`` with two parts
replaced: the rollout buffer (:class:`~.buffer.TensorRolloutBuffer`, on the device) and
``collect_rollouts``, which steps a :class:`~.adapters.TensorVecEnv` with the policy's action
tensors. Everything else is SB3's own: ``PPO.train``/``A2C.train`` (losses and updates),
``learn``, logging, saving and loading. Given the same seed, envs and initial weights they make
the same updates as stock SB3 (``tests/safelife/test_device_training.py``).

**Callbacks.** At each step ``callback.locals`` holds, as SB3's do, ``infos`` and ``dones``,
but only for the envs whose episodes ended in that step (``dones`` all ``True``, one per info;
the infos are built on the CPU only then), so ``zip(locals["dones"], locals["infos"])`` visits
every finished episode; ``step`` holds the whole :class:`~.adapters.TensorStep`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from safelife_rl.common.errors import UserError
from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.device.buffer import TensorRolloutBuffer


class DeviceRollouts:
    """Mixin for an SB3 on-policy algorithm: a device rollout buffer and a
    ``collect_rollouts`` over a :class:`~.adapters.TensorVecEnv` (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rollout_buffer_class", TensorRolloutBuffer)
        super().__init__(*args, **kwargs)

    def _setup_learn(self, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(self.env, TensorVecEnv):
            raise TypeError(f"{type(self).__name__} steps a TensorVecEnv (wrap an SB3 VecEnv in "
                            f"NumpyVecEnvAdapter), got {type(self.env).__name__}")
        result = super()._setup_learn(*args, **kwargs)
        self._last_episode_starts = torch.as_tensor(
            self._last_episode_starts, dtype=torch.bool, device=self.device
        )
        return result

    def _bootstrap_timeouts(self, step: Any, rewards: torch.Tensor) -> torch.Tensor:
        """Add ``gamma * V(final observation)`` to the rewards of envs cut off by a time limit,
        as SB3 does for ``TimeLimit.truncated`` (GitHub issue #633)."""
        if step.final_observations is None or not bool(step.truncated.any()):
            return rewards
        index = step.truncated.to(self.device).nonzero()[:, 0]
        final = step.final_observations.to(self.device)[index]
        with torch.no_grad():
            values = self.policy.predict_values(final).flatten()
        rewards = rewards.clone()
        rewards[index] += self.gamma * values
        return rewards

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

        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
            with torch.no_grad():
                actions, values, log_probs = self.policy(self._last_obs.to(self.device))
            clipped_actions = actions
            if box:
                clipped_actions = (self.policy.unscale_action(actions) if self.policy.squash_output
                                   else torch.clamp(actions, low, high))
            step = env.step(clipped_actions.to(env.device))
            self.num_timesteps += env.num_envs
            new_obs = step.observations
            infos = list(step.infos.values())
            dones = np.ones(len(infos), dtype=bool)
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)
            rewards = self._bootstrap_timeouts(step, step.rewards.to(self.device))
            rollout_buffer.add(self._last_obs.to(self.device), actions, rewards,
                               self._last_episode_starts, values, log_probs)
            self._last_obs = new_obs
            self._last_episode_starts = (step.terminated | step.truncated).to(self.device)

        with torch.no_grad():
            values = self.policy.predict_values(new_obs.to(self.device))
        rollout_buffer.compute_returns_and_advantage(last_values=values,
                                                     dones=self._last_episode_starts)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True


class DevicePPO(DeviceRollouts, PPO):
    """SB3's PPO trained from a :class:`~.adapters.TensorVecEnv` on the device."""


class DeviceA2C(DeviceRollouts, A2C):
    """SB3's A2C trained from a :class:`~.adapters.TensorVecEnv` on the device."""


#: The device algorithm of each SB3 algorithm that has one, by ``_target_``.
DEVICE_ALGORITHMS = {
    "stable_baselines3.PPO": "safelife_rl.training.device.DevicePPO",
    "stable_baselines3.ppo.PPO": "safelife_rl.training.device.DevicePPO",
    "stable_baselines3.A2C": "safelife_rl.training.device.DeviceA2C",
    "stable_baselines3.a2c.A2C": "safelife_rl.training.device.DeviceA2C",
}


def device_algorithm(target: str) -> str:
    """The ``_target_`` of the device algorithm for the SB3 algorithm ``target``, or a
    :class:`~safelife_rl.common.errors.UserError` for one without (e.g. DQN)."""
    if target in DEVICE_ALGORITHMS.values():
        return target
    if target not in DEVICE_ALGORITHMS:
        raise UserError(f"vec_env=device trains PPO or A2C (algo=ppo or algo=a2c), not {target}")
    return DEVICE_ALGORITHMS[target]
