"""SB3's rollout buffer with its storage as torch tensors on the training device."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.type_aliases import RolloutBufferSamples


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a NumPy dtype (a space's)."""
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


class TensorRolloutBuffer(RolloutBuffer):
    """A :class:`~stable_baselines3.common.buffers.RolloutBuffer` that keeps the rollout on
    ``device``: :meth:`add` takes tensors (observations in the observation space's dtype, so
    SafeLife's uint8 views stay uint8), the returns and advantages are computed there, and
    :meth:`get` yields ``RolloutBufferSamples`` of device tensors, so ``PPO.train`` and
    ``A2C.train`` run unchanged. It computes exactly what the NumPy buffer computes, in the
    same order: the same flattening (env-major) and the same minibatches, drawn with
    ``np.random.permutation`` as SB3 draws them.

    ``values`` and ``returns`` read as flat NumPy arrays (one copy to the host), as the
    trainers' ``explained_variance`` wants them.
    """

    def reset(self) -> None:
        """Start a new rollout; the storage is allocated at the first reset only (every entry
        is written again before it is read)."""
        self.generator_ready = False
        self.pos, self.full = 0, False
        if getattr(self, "_allocated", False):
            return
        steps, n, device = self.buffer_size, self.n_envs, self.device
        obs_dtype = torch_dtype(self.observation_space.dtype)
        action_dtype = torch_dtype(self.action_space.dtype)

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros((steps, n, *shape), dtype=dtype, device=device)

        self.observations = zeros(*self.obs_shape, dtype=obs_dtype)
        self.actions = zeros(self.action_dim, dtype=action_dtype)
        self.rewards = zeros()
        self.episode_starts = zeros()
        self.log_probs = zeros()
        self.advantages = zeros()
        self._values = zeros()
        self._returns = zeros()
        #: where a time limit cut an episode, and the observations it ended on there (kept
        #: for bootstrapping once per rollout; an entry is read only where it was cut)
        self.timeouts = zeros(dtype=torch.bool)
        self.final_observations = torch.zeros_like(self.observations)
        self._allocated = True

    @property
    def values(self) -> np.ndarray:  # type: ignore[override]
        return self._values.flatten().cpu().numpy()

    @property
    def returns(self) -> np.ndarray:  # type: ignore[override]
        return self._returns.flatten().cpu().numpy()

    def add(  # type: ignore[override]
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        episode_start: torch.Tensor,
        value: torch.Tensor,
        log_prob: torch.Tensor,
    ) -> None:
        if isinstance(self.observation_space, spaces.Discrete):
            obs = obs.reshape((self.n_envs, *self.obs_shape))
        self.observations[self.pos] = obs
        self.actions[self.pos] = action.reshape((self.n_envs, self.action_dim))
        self.rewards[self.pos] = reward
        self.episode_starts[self.pos] = episode_start
        self._values[self.pos] = value.flatten()
        self.log_probs[self.pos] = log_prob.flatten()
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True

    def add_timeouts(self, truncated: torch.Tensor, final_obs: torch.Tensor | None) -> None:
        """Keep the step's time-limit cuts (and final observations, when the env gives them:
        a device env at every step, separate envs when some env ended) for the :meth:`add`
        that follows."""
        self.timeouts[self.pos] = truncated
        if final_obs is not None:
            self.final_observations[self.pos] = final_obs

    def cuts(self, rounds: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Where a time limit cut an episode in the rollout, in ``rounds`` rounds of fixed
        shape, read nowhere: round ``k`` gives each env's ``k``-th cut as its step, whether it
        has one (else the step is 0) and its final observation, stacked over the rounds:
        ``(rounds, n_envs)``, ``(rounds, n_envs)`` and ``(rounds, n_envs, ...)``. An env's
        cuts past ``rounds`` are left out: ``rounds`` must bound them (the trainer's
        :meth:`~.trainer.MemberTrainer.cut_rounds`)."""
        rank = self.timeouts.cumsum(0, dtype=torch.int32)
        order = torch.arange(1, rounds + 1, dtype=torch.int32, device=self.device)
        # (rounds, steps, n_envs): the step where each env was cut for the k-th time
        at = (self.timeouts & (rank == order[:, None, None])).to(torch.uint8)
        steps = at.argmax(1)
        envs = torch.arange(self.n_envs, device=self.device)
        return steps, at.amax(1).bool(), self.final_observations[steps, envs]

    def compute_returns_and_advantage(  # type: ignore[override]
        self, last_values: torch.Tensor, dones: torch.Tensor
    ) -> None:
        """GAE(lambda) advantages and lambda-returns, as SB3's buffer computes them (same
        float32 operations in the same order)."""
        last_values = last_values.flatten().to(self.device, torch.float32)
        last_gae_lam: torch.Tensor | float = 0.0
        for step in reversed(range(self.buffer_size)):
            if step == self.buffer_size - 1:
                next_non_terminal = 1.0 - dones.to(self.device, torch.float32)
                next_values = last_values
            else:
                next_non_terminal = 1.0 - self.episode_starts[step + 1]
                next_values = self._values[step + 1]
            delta = (
                self.rewards[step]
                + self.gamma * next_values * next_non_terminal
                - self._values[step]
            )
            last_gae_lam = delta + self.gamma * self.gae_lambda * next_non_terminal * last_gae_lam
            self.advantages[step] = last_gae_lam
        torch.add(self.advantages, self._values, out=self._returns)

    def get(  # type: ignore[override]
        self, batch_size: int | None = None
    ) -> Generator[RolloutBufferSamples, None, None]:
        assert self.full, "the rollout buffer is not full"
        total = self.buffer_size * self.n_envs
        indices = torch.as_tensor(np.random.permutation(total), device=self.device)
        self.generator_ready = True
        if batch_size is None:
            batch_size = total
        for start in range(0, total, batch_size):
            yield self._get_samples(indices[start : start + batch_size])

    def _get_samples(  # type: ignore[override]
        self, batch_inds: torch.Tensor, env: Any = None
    ) -> RolloutBufferSamples:
        """The samples at flat indices ``batch_inds`` of SB3's env-major flattening
        (``env * buffer_size + step``), read in place: the rollout is never copied."""
        steps, envs = batch_inds % self.buffer_size, batch_inds // self.buffer_size
        return RolloutBufferSamples(
            self.observations[steps, envs],
            self.actions[steps, envs].to(torch.float32),
            self._values[steps, envs],
            self.log_probs[steps, envs],
            self.advantages[steps, envs],
            self._returns[steps, envs],
        )
