"""Typed settings of the Hydra apps (``extended_envs/conf/*.yaml``), checked before anything runs.

The YAML files hold the defaults; these dataclasses the types and ranges. A task function reads
its configuration through :func:`typed`, inside :func:`~safelife_rl.common.errors.one_line_errors`, so
a value of the wrong type or out of range ends the command with one line naming the setting,
the value and what is allowed. Booleans are OmegaConf's: ``true/false``, ``yes/no``, ``on/off``
(``reality_check=no`` is false; ``reality_check=maybe`` and ``reality_check=2`` are errors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from extended_envs.checks import check_count, check_seed
from extended_envs.errors import UserError

T = TypeVar("T")


def typed(schema: type[T], cfg: DictConfig) -> T:
    """``cfg`` as a ``schema`` instance, then ``check()``-ed; a UserError naming a bad setting."""
    for field in fields(schema):  # type: ignore[arg-type]
        value = cfg.get(field.name)
        if field.type == "bool" and type(value) in (int, float):  # OmegaConf takes 2 for true
            raise UserError(
                f"setting {field.name}: {value!r} is not a boolean (true/false, yes/no, on/off)"
            )
    settings = OmegaConf.structured(schema)
    key = None
    try:
        for key in cfg:  # one setting at a time, so that an error is the setting's
            settings = OmegaConf.merge(settings, OmegaConf.masked_copy(cfg, [key]))
        key = None
        result = OmegaConf.to_object(settings)
    except OmegaConfBaseException as error:
        problem = str(error.msg).splitlines()[0]
        raise UserError(f"setting {error.full_key or key}: {problem}") from error
    result.check()  # type: ignore[attr-defined]
    return result  # type: ignore[return-value]


def check_seeds(seeds: list[int]) -> None:
    if not seeds:
        raise UserError("seeds must name at least one seed, got []")
    for seed in seeds:
        check_seed(seed, "each of seeds")


@dataclass
class BenchmarkConfig:
    """``extended_envs/conf/benchmark.yaml``."""

    agent: str = MISSING
    steps: int = MISSING
    seeds: list[int] = MISSING
    reality_check: bool = MISSING
    include_slow: bool = MISSING
    only: list[str] = MISSING
    hyperparams: dict[str, Any] = MISSING
    progress: bool = MISSING

    def check(self) -> None:
        check_count("steps", self.steps)
        check_seeds(self.seeds)


@dataclass
class DebateConfig:
    """``extended_envs/conf/debate.yaml``."""

    alice: str = MISSING
    bobs: list[str] = MISSING
    rounds: int = MISSING
    seeds: list[int] = MISSING
    data: list[int] = MISSING
    max_value: int = MISSING
    window: float = MISSING
    alice_hyperparams: dict[str, Any] = MISSING
    bob_hyperparams: dict[str, dict[str, Any]] = MISSING
    progress: bool = MISSING

    def check(self) -> None:
        check_count("rounds", self.rounds)
        check_seeds(self.seeds)
        if not self.bobs:
            raise UserError("bobs must name at least one agent class, got []")
        check_count("max_value", self.max_value, minimum=0)
        if math.isnan(self.window) or not 0 < self.window <= 1:
            raise UserError(f"window must be a number in (0, 1], got {self.window!r}")
