"""The typed schema of ``conf/train.yaml``'s run settings, so Hydra rejects a bad value (say
``n_envs=many`` or ``vec_env=threads``) with its own message before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore


class VecEnvKind(str, Enum):
    auto = "auto"
    batched = "batched"
    subproc = "subproc"
    dummy = "dummy"


@dataclass
class TrainSchema:
    env: Any = None
    algo: Any = None
    policy: Any = None
    wrappers: Any = None
    callbacks: Any = None
    total_timesteps: int = 2_000_000
    n_envs: int = 16
    seed: int = 0
    device: str = "cpu"
    vec_env: VecEnvKind = VecEnvKind.auto
    torch_threads: int = 1
    log_interval: int = 1
    progress_bar: bool = True
    resume: str | None = None


ConfigStore.instance().store(name="train_schema", node=TrainSchema)
