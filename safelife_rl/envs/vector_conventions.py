"""Gymnasium's vector-env conventions that both SafeLife vector envs keep (the batched NumPy
:class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` and the device
:class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`), checked as ``SyncVectorEnv`` checks
them."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_action_batch(shape: tuple[int, ...], num_envs: int) -> None:
    """Actions of ``shape`` are one per env, or an error as Gymnasium's vector envs raise: a
    ``TypeError`` for a single action (they cannot iterate over it), else a ``ValueError``."""
    if shape == (num_envs,):
        return
    if shape == ():
        raise TypeError(f"actions must be a batch of {num_envs} actions, one per env; got one")
    raise ValueError(f"need one action per env, shape ({num_envs},); got shape {shape}")


def check_reset_mask(mask: Any, num_envs: int) -> np.ndarray:
    """``options["reset_mask"]`` as Gymnasium's vector envs take it: a bool array, one per env,
    at least one ``True``."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
        raise TypeError(f"options['reset_mask'] must be a NumPy bool array, got {mask!r}")
    if mask.shape != (num_envs,) or not mask.any():
        raise ValueError(
            f"options['reset_mask'] must mark at least one of {num_envs} envs, got {mask!r}"
        )
    return mask
