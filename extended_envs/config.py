"""Typed settings of the Hydra apps (``extended_envs/conf/*.yaml``), checked before anything runs.

The YAML files hold the defaults; these dataclasses the types and ranges. A task function reads
its configuration through :func:`typed`, inside :func:`~safety_rl_common.errors.one_line_errors`, so
a value of the wrong type or out of range ends the command with one line naming the setting,
the value and what is allowed. Booleans are OmegaConf's: ``true/false``, ``yes/no``, ``on/off``
(``reality_check=no`` is false; ``reality_check=maybe`` and ``reality_check=2`` are errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from extended_envs.checks import check, check_seed
from safety_rl_common.checks import kind_name

T = TypeVar("T")


#: What OmegaConf takes for a boolean.
BOOLEAN = "true or false (or yes/no, on/off)"


def typed(schema: type[T], cfg: DictConfig) -> T:
    """``cfg`` as a ``schema`` instance, then ``check()``-ed; a UserError naming a bad setting."""
    kinds = get_type_hints(schema)
    check.keys(cfg, kinds)
    for name, kind in kinds.items():
        value = cfg.get(name)
        if kind is bool and type(value) in (int, float):  # OmegaConf takes 2 for true
            check.refuse(name, value, BOOLEAN)
    settings = OmegaConf.structured(schema)
    key = None
    try:
        for key in cfg:  # one setting at a time, so that an error is the setting's
            settings = OmegaConf.merge(settings, OmegaConf.masked_copy(cfg, [key]))
        key = None
        result = OmegaConf.to_object(settings)
    except OmegaConfBaseException as error:
        name = error.full_key or str(key)
        field = name.split("[")[0].split(".")[0]
        check.refuse(name, error.value, _allowed(kinds[field], element=name != field))
    result.check()  # type: ignore[attr-defined]
    return result  # type: ignore[return-value]


def _allowed(kind: Any, element: bool) -> str:
    """What a setting of the type ``kind`` (an element of it if ``element``) may be."""
    origin, args = get_origin(kind), get_args(kind)
    if element and args:
        return _allowed(args[-1], element=False)
    return (
        BOOLEAN
        if kind is bool
        else "a list"
        if origin is list
        else "a mapping"
        if origin is dict
        else kind_name(kind)
    )


def check_seeds(seeds: list[int]) -> None:
    check.value("seeds", seeds, lambda v: len(v) > 0, "a non-empty list of seeds")
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
        check.count("steps", self.steps)
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
        check.count("rounds", self.rounds)
        check_seeds(self.seeds)
        check.value("bobs", self.bobs, lambda v: len(v) > 0, "a non-empty list of agent classes")
        check.count("max_value", self.max_value, minimum=0)
        check.value("window", self.window, lambda v: 0 < v <= 1, "a number in (0, 1]")
