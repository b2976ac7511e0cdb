"""Checks of what crosses between an extended environment and its agents, and of run settings.

Actions are ints in ``range(n_actions)``; observations ints in ``range(n_obs)`` or arrays in
the ``Box`` ``n_obs``; rewards finite numbers. ``bool`` is none of these (``True`` is an int
in Python, but an agent or environment that returns one has a bug). A bad value raises
:class:`~safety_rl_common.errors.UserError` naming who produced it, the value and what is
allowed.

The loops call these only when a fast test inline (``type(x) is int`` and a range test) fails,
so the common case costs a comparison or two: QLearner steps take about 2 microseconds.

Run settings are checked by :data:`~safety_rl_common.checks.check`, the three packages'
settings checks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from safety_rl_common.checks import check, is_int, is_number
from safety_rl_common.errors import UserError

Obs = Any  # int in range(n_obs), or an ndarray in a Box space
ObsSpec = int | spaces.Box


__all__ = ["check", "check_action", "check_obs", "check_reward", "check_seed"]


def check_action(action: Any, n_actions: int, source: str = "the agent") -> int:
    """``action`` as an int, or a UserError naming ``source`` and the value."""
    if isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
        action = action.item()
    if not is_int(action) or not 0 <= action < n_actions:
        raise UserError(
            f"{source} gave invalid action {action!r}: actions are ints in range({n_actions})"
        )
    return int(action)


def check_obs(obs: Any, n_obs: ObsSpec, source: str = "the environment") -> Obs:
    """``obs`` (an int as a Python int), or a UserError naming ``source`` and the value."""
    if isinstance(n_obs, spaces.Box):
        if isinstance(obs, np.ndarray) and obs.shape == n_obs.shape and n_obs.contains(obs):
            return obs
        raise UserError(
            f"{source} gave invalid observation {obs!r}: observations are arrays of shape "
            f"{n_obs.shape} in {n_obs}"
        )
    if not is_int(obs) or not 0 <= obs < n_obs:
        raise UserError(
            f"{source} gave invalid observation {obs!r}: observations are ints in range({n_obs})"
        )
    return int(obs)


def check_reward(reward: Any, source: str = "the environment") -> float:
    """``reward`` as a float, or a UserError naming ``source`` and the value."""
    if is_number(reward) and math.isfinite(reward):
        return float(reward)
    raise UserError(f"{source} gave invalid reward {reward!r}: rewards are finite numbers")


def check_seed(value: Any, name: str = "seed") -> int:
    """A seed: an int in ``[0, 2**64)`` (what NumPy and torch take)."""
    check.value(name, value, lambda v: is_int(v) and 0 <= v < 2**64, "an integer in [0, 2**64)")
    return int(value)
