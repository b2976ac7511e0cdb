"""A population member as its own SB3 model (its single run's
:class:`~safelife_rl.training.device.DevicePPO` or PPO-Lagrangian's device algorithm) sees the
world: its envs (a view of its group of the population's vector env), its shared schedules and
its random streams."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices

from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.training.device.adapters import Forwarding, TensorVecEnv


class SharedSchedules:
    """The population's scheduled values (impact penalty, exit curriculum), which every
    member's clock sets to the same step count: the vector env hears each count once."""

    def __init__(self, vector: SafeLifeVectorEnv):
        self.vector = vector
        self.steps: float | None = None
        self.values: dict[str, float] = {}

    def set_training_steps(self, steps: float) -> dict[str, float]:
        if steps != self.steps:
            self.values, self.steps = self.vector.set_training_steps(steps), steps
        return self.values


class MemberEnv(Forwarding, TensorVecEnv):
    """Member ``index``'s envs: group ``index`` of the population's vector env (a
    :class:`~safelife_rl.training.device.GymnasiumTensorVecEnv` of a grouped
    :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`). The population steps them; the
    member's model reads its spaces and size, its seed (:meth:`seed`) and first observations
    (:meth:`reset`), and its callbacks the ``schedules`` all members share."""

    def __init__(self, venv: TensorVecEnv, index: int, size: int, schedules: SharedSchedules):
        self.venv = venv
        self.index = index
        self.schedules = schedules
        self.given_seed: int | None = None
        self.first_obs: torch.Tensor | None = None
        super().__init__(size, venv.observation_space, venv.action_space, venv.device)

    def reset(self) -> torch.Tensor:  # type: ignore[override]
        if self.first_obs is None:
            raise RuntimeError("the population resets its envs before its members start")
        return self.first_obs

    def step(self, actions: torch.Tensor) -> Any:  # type: ignore[override]
        raise RuntimeError("a population member's envs step with the whole population's")

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        self.given_seed = seed
        return [seed] * self.num_envs

    def env_method(
        self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any
    ) -> list[Any]:
        """``set_training_steps`` goes to the shared schedules (once per step count, whichever
        member's clock calls first); the rest to the population's env."""
        if method_name == "set_training_steps":
            values = self.schedules.set_training_steps(*args, **kwargs)
            if "side_effect_penalty" in values:  # the member's own
                values = {
                    **values,
                    "side_effect_penalty": self.schedules.vector.group_penalty(self.index),
                }
            return [values] * self.num_envs
        return self.venv.env_method(method_name, *args, indices=indices, **kwargs)

    @property
    def level_names(self) -> list[str] | None:
        return self.venv.level_names

    def close(self) -> None:
        """The population closes its env."""


@dataclass
class MemberRandom:
    """A member's random streams where its single run would have them after its model was
    built: torch's on the training device (its record holds it where a single run's holds the
    global one; discrete actions are drawn without it) and NumPy's (minibatch order)."""

    torch: torch.Generator
    numpy: np.random.RandomState

    @classmethod
    def capture(cls, device: torch.device) -> MemberRandom:
        """The global streams now (right after a member's model seeded them and built its
        network), as the member's own."""
        generator = torch.Generator(device)
        if device.type == "cuda":
            generator.set_state(torch.cuda.get_rng_state(device))
        else:
            generator.set_state(torch.get_rng_state())
        stream = np.random.RandomState()
        stream.set_state(np.random.get_state())
        return cls(generator, stream)
