"""Building training and evaluation environments from plain config dictionaries.

Everything here takes plain Python containers (not OmegaConf nodes) so that the env factories
pickle into ``SubprocVecEnv`` workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import gymnasium as gym
from hydra.utils import instantiate
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

VEC_ENV_KINDS = ("subproc", "dummy")


def make_env(
    env_id: str,
    kwargs: Mapping[str, Any] | None = None,
    wrappers: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> gym.Env:
    """``gym.make(env_id, **kwargs)`` (values with ``_target_`` instantiated first), then each
    wrapper config in order (``None`` skips one), then SB3's ``Monitor`` for episode totals."""
    import safelife_rl  # noqa: F401  (registers the ids in a fresh worker process)

    kwargs = instantiate(dict(kwargs or {}), _convert_="all")
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    for config in (wrappers or {}).values():
        if config is not None:
            env = instantiate(config, env, _convert_="all")
    return Monitor(env)


def make_vec_env(
    env_id: str,
    kwargs: Mapping[str, Any] | None,
    wrappers: Mapping[str, Mapping[str, Any] | None] | None,
    n_envs: int,
    kind: str = "subproc",
    start_method: str | None = "fork",
) -> VecEnv:
    """``n_envs`` copies of :func:`make_env`: in worker processes (``kind="subproc"``, used when
    ``n_envs`` > 1) or in this process (``"dummy"``). Seed them through the algorithm."""
    kind = getattr(kind, "value", kind)  # the config schema's enum, or its plain string
    if kind not in VEC_ENV_KINDS:
        raise ValueError(f"vec_env must be one of {VEC_ENV_KINDS}, got {kind!r}")
    if n_envs < 1:
        raise ValueError(f"n_envs must be positive, got {n_envs}")
    factories = [partial(make_env, env_id, kwargs, wrappers) for _ in range(n_envs)]
    if kind == "subproc" and n_envs > 1:
        return SubprocVecEnv(factories, start_method=start_method)
    return DummyVecEnv(factories)
