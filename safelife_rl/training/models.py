"""Building the SB3 model a run's config describes (the config's algorithm, or its device twin)."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm

from safelife_rl.training.methods import device_twins
from safety_rl_common.errors import UserError


def device_algorithm(target: str) -> str:
    """The ``_target_`` of the device algorithm (a model the device trainer trains) for the SB3
    algorithm ``target``, as the methods declare them (:func:`device_twins`), or a
    :class:`~safety_rl_common.errors.UserError` for one without (A2C, DQN: the NumPy path
    trains them)."""
    twins = device_twins("algorithms")
    if target in twins.values():
        return target
    if target not in twins:
        names = sorted({t.rpartition(".")[2] for t in twins})
        raise UserError(
            f"vec_env=device trains {' and '.join(names)}, not {target}: use vec_env=batched"
        )
    return twins[target]


def training_target(cfg: DictConfig) -> str:
    """The class the run trains with: the config's algorithm, or its device twin, which steps
    the tensor env, with ``vec_env=device``."""
    if cfg.get("vec_env") == "device":
        return device_algorithm(cfg.algo._target_)
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
