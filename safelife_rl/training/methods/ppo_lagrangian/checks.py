"""The checks of PPO-Lagrangian's settings, of the env it trains on and of a saved multiplier
state: one implementation for the app (before anything is built) and for the algorithm used
alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import torch as th

from safety_rl_common.checks import check, is_int, is_number
from safety_rl_common.errors import UserError

#: The largest multiplier, gain or budget taken: the advantages are divided by ``1 + lambda``,
#: so past this the reward's share is below float32's resolution (and near 1e38 the multiplier
#: overflows to inf and the update to NaN).
MAX_MULTIPLIER = 1e6
#: The settings that are non-negative numbers up to :data:`MAX_MULTIPLIER`.
_NUMBERS = ("cost_limit", "multiplier_init", "multiplier_lr", "pid_kp", "pid_kd")


def check_cost_limit(cost_limit: Any) -> None:
    """Refuse a cost budget that is not a finite non-negative number."""
    check.value(
        "cost_limit",
        cost_limit,
        lambda v: is_number(v) and 0 <= v <= MAX_MULTIPLIER,
        f"a finite non-negative number up to {MAX_MULTIPLIER:g} (a per-episode cost budget)",
    )


def check_lagrangian_settings(settings: Mapping[str, Any], prefix: str = "method.") -> None:
    """Refuse PPO-Lagrangian settings (``cost_limit`` and the multiplier's) of the wrong type or
    out of range; ``prefix`` is how the message names the multiplier's settings."""
    check_cost_limit(settings.get("cost_limit"))
    for name in _NUMBERS[1:]:
        check.value(
            prefix + name,
            settings.get(name),
            lambda v: is_number(v) and 0 <= v <= MAX_MULTIPLIER,
            f"a finite non-negative number up to {MAX_MULTIPLIER:g}",
        )
    check.value(
        prefix + "constraint_start",
        settings.get("constraint_start"),
        lambda v: is_int(v) and v >= 0,
        "a non-negative integer (a training step)",
    )
    check.value(
        prefix + "standardize_advantages",
        settings.get("standardize_advantages"),
        lambda v: isinstance(v, bool),
        "true or false",
    )


def check_lagrange_state(state: Any, source: str) -> None:
    """Refuse a loaded multiplier state (``lagrange_state``: multiplier, integral, previous
    episode cost) that is not three finite non-negative numbers in range."""
    if (
        not isinstance(state, th.Tensor)
        or tuple(state.shape) != (3,)
        or not state.dtype.is_floating_point
    ):
        raise UserError(
            f"{source}: its lagrange_state must be 3 numbers (multiplier, integral, "
            f"previous episode cost), got {getattr(state, 'shape', state)!r}"
        )
    values = state.detach().cpu().double()
    if (
        not bool(th.isfinite(values).all())
        or bool((values < 0).any())
        or bool((values[:2] > MAX_MULTIPLIER).any())
    ):
        raise UserError(
            f"{source}: its lagrange_state {values.tolist()} is not a multiplier "
            f"state (finite, non-negative, the multiplier at most "
            f"{MAX_MULTIPLIER:g})"
        )


def check_reports_cost(info: dict[str, Any], env_name: str) -> None:
    """Refuse an env whose step ``info`` has no ``"cost"``, naming it."""
    if "cost" not in info:
        raise UserError(
            f"method=ppo_lagrangian needs an env that reports a per-step cost in "
            f"info['cost'] (every SafeLife id does); {env_name} does not"
        )


def check_env_reports_cost(make_env: Callable[[], gym.Env], env_name: str) -> None:
    """Step a fresh env from ``make_env`` once and refuse it if it reports no cost."""
    env = make_env()
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        info = env.step(env.action_space.sample())[4]
    finally:
        env.close()
    check_reports_cost(info, env_name)
