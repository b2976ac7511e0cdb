"""Cost penalty (``method=cost_penalty``): PPO on the reward less ``coefficient`` x the step's
``info["cost"]``, a fixed-multiplier Lagrangian (the fixed-penalty baseline of constrained RL).
It is also the worked example of a method plug-in (``docs/safelife/methods.md``): a vec-env
wrapper, its device twin, the check of its setting, and :data:`METHODS`."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from safelife_rl.training.device.adapters import TensorStep, TensorVecEnv, TensorVecEnvWrapper
from safelife_rl.training.methods.plugin import Method
from safelife_rl.training.methods.ppo_lagrangian.checks import MAX_MULTIPLIER
from safety_rl_common.checks import check, is_number


def check_coefficient(coefficient: Any) -> float:
    check.value(
        "method.coefficient",
        coefficient,
        lambda v: is_number(v) and 0 <= v <= MAX_MULTIPLIER,
        f"a number in [0, {MAX_MULTIPLIER:g}]",
    )
    return float(coefficient)


class CostPenalty(VecEnvWrapper):
    """Rewards less ``coefficient * info["cost"]`` (an env without a cost is refused)."""

    def __init__(self, venv: VecEnv, coefficient: float = 1.0):
        super().__init__(venv)
        self.coefficient = check_coefficient(coefficient)

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        costs = np.array([info["cost"] for info in infos], rewards.dtype)
        return obs, rewards - self.coefficient * costs, dones, infos


class DeviceCostPenalty(TensorVecEnvWrapper):
    """:class:`CostPenalty` on the device vector env: the step's cost tensor, no host sync."""

    def __init__(self, venv: TensorVecEnv, coefficient: float = 1.0):
        super().__init__(venv)
        self.coefficient = check_coefficient(coefficient)

    def step(self, actions: Any) -> TensorStep:  # type: ignore[override]
        step = self.venv.step(actions)
        penalty = self.coefficient * step.costs.to(step.rewards.dtype)
        return step._replace(rewards=step.rewards - penalty)


METHODS = (
    Method(
        "cost_penalty",
        check=lambda cfg: check_coefficient(cfg.method.coefficient),
        device_wrappers={f"{__name__}.CostPenalty": f"{__name__}.DeviceCostPenalty"},
    ),
)
