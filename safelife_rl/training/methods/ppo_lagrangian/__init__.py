"""PPO-Lagrangian: PPO that keeps each episode's summed ``info["cost"]`` within a budget
(``cost_limit``) through a (PID) Lagrange multiplier, ``method=ppo_lagrangian``
(:mod:`.algorithm`; ``docs/safelife/methods.md``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from omegaconf import OmegaConf

from safelife_rl.training.envs import make_env, multi_agent_task
from safelife_rl.training.methods.plugin import Method
from safelife_rl.training.methods.ppo_lagrangian.algorithm import (
    CostRolloutBuffer,
    PPOLagrangian,
    TensorCostRolloutBuffer,
)
from safelife_rl.training.methods.ppo_lagrangian.checks import (
    check_cost_limit,
    check_env_reports_cost,
    check_lagrangian_settings,
)
from safelife_rl.training.methods.ppo_lagrangian.costs import DevicePPOLagrangian, PopulationCosts
from safety_rl_common.errors import UserError


def _check(cfg: Any) -> None:
    settings = OmegaConf.to_container(cfg.method, resolve=True)
    check_lagrangian_settings({**settings, "cost_limit": cfg.get("cost_limit")})
    start, total = settings["constraint_start"], cfg.get("total_timesteps")
    if isinstance(total, int) and start >= total:
        raise UserError(
            f"method.constraint_start ({start}) must be below total_timesteps "
            f"({total}): the budget would never be enforced"
        )


def _check_env(cfg: Any) -> None:
    """Single-agent envs that report ``info["cost"]`` (one env is made and stepped once)."""
    if multi_agent_task(cfg.env.id) is not None:
        raise UserError(
            f"method=ppo_lagrangian trains single-agent envs; {cfg.env.id} is multi-agent"
        )
    plain = partial(OmegaConf.to_container, resolve=True)
    check_env_reports_cost(
        partial(make_env, cfg.env.id, plain(cfg.env.kwargs), plain(cfg.wrappers)), cfg.env.id
    )


_DEVICE = "safelife_rl.training.methods.ppo_lagrangian.DevicePPOLagrangian"
METHODS = (
    Method(
        "ppo_lagrangian",
        check=_check,
        check_env=_check_env,
        cost_limit=True,
        device_algorithms={
            "safelife_rl.training.PPOLagrangian": _DEVICE,
            "safelife_rl.training.methods.ppo_lagrangian.PPOLagrangian": _DEVICE,
        },
    ),
)

__all__ = [
    "METHODS",
    "CostRolloutBuffer",
    "DevicePPOLagrangian",
    "PPOLagrangian",
    "PopulationCosts",
    "TensorCostRolloutBuffer",
    "check_cost_limit",
]
