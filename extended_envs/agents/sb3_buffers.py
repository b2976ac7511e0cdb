"""SB3 buffers that sample with the owning agent's NumPy generator instead of the global one."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.buffers import ReplayBuffer, RolloutBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples, RolloutBufferSamples
from stable_baselines3.common.vec_env import VecNormalize


class SeededReplayBuffer(ReplayBuffer):
    """:class:`ReplayBuffer` drawing minibatch indices from ``rng``.

    With one environment SB3's ``_get_samples`` draws its environment index from a range of one,
    which NumPy answers without touching the global generator.
    """

    def __init__(self, *args: Any, rng: np.random.Generator, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.optimize_memory_usage or self.n_envs != 1:
            raise ValueError("SeededReplayBuffer supports one env and no memory optimisation")
        self.rng = rng

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        upper_bound = self.buffer_size if self.full else self.pos
        return self._get_samples(self.rng.integers(0, upper_bound, size=batch_size), env=env)

    def _get_samples(
        self, batch_inds: np.ndarray, env: VecNormalize | None = None
    ) -> ReplayBufferSamples:
        """SB3's samples for one environment and no normalisation, without its extra copies.

        Indexing with ``batch_inds`` already copies, so the arrays become tensors as they are.
        """
        if env is not None:
            return super()._get_samples(batch_inds, env)
        dones = self.dones[batch_inds, 0] * (1 - self.timeouts[batch_inds, 0])
        data = (
            self.observations[batch_inds, 0],
            self.actions[batch_inds, 0],
            self.next_observations[batch_inds, 0],
            dones.reshape(-1, 1),
            self.rewards[batch_inds, 0].reshape(-1, 1),
        )
        return ReplayBufferSamples(*(torch.from_numpy(array) for array in data))


class SeededRolloutBuffer(RolloutBuffer):
    """:class:`RolloutBuffer` shuffling minibatches with ``rng``."""

    def __init__(self, *args: Any, rng: np.random.Generator, **kwargs: Any) -> None:
        self.rng = rng
        super().__init__(*args, **kwargs)

    def get(self, batch_size: int | None = None) -> Generator[RolloutBufferSamples, None, None]:
        assert self.full, "the rollout buffer is read only when full"
        n = self.buffer_size * self.n_envs
        indices = self.rng.permutation(n)
        if not self.generator_ready:
            for name in ("observations", "actions", "values", "log_probs", "advantages", "returns"):
                self.__dict__[name] = self.swap_and_flatten(self.__dict__[name])
            self.generator_ready = True
        batch_size = n if batch_size is None else batch_size
        for start in range(0, n, batch_size):
            yield self._get_samples(indices[start : start + batch_size])
