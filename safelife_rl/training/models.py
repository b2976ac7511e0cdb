"""Building the SB3 model a run's config describes (the config's algorithm, or its device twin)."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm

from safelife_rl.training.device import device_algorithm
from safelife_rl.training.methods import device_twins


def training_target(cfg: DictConfig) -> str:
    """The class the run trains with: the config's algorithm, or its device twin, which steps
    the tensor env, with ``vec_env=device``."""
    if cfg.get("vec_env") == "device":
        return device_algorithm(cfg.algo._target_, device_twins("algorithms"))
    return cfg.algo._target_


def build_model(cfg: DictConfig, env: Any) -> BaseAlgorithm:
    return instantiate(
        OmegaConf.merge(cfg.algo, {"_target_": training_target(cfg)}),
        policy=cfg.policy.name,
        env=env,
        policy_kwargs=instantiate(cfg.policy.kwargs, _convert_="all"),
        seed=cfg.seed,
        device=cfg.device,
        verbose=0,
        _convert_="all",
    )
