"""SafeLife: a Game-of-Life safety benchmark with side effects measured against inaction.

Importing the package only registers the Gymnasium ids (``safelife_rl/...``); its public names
load their modules (and the Numba engine) when first used, so a command that only needs
:mod:`safety_rl_common` starts without compiling anything (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

from safelife_rl.envs.registration import register_envs

register_envs()

#: Public name -> the module that defines it.
_PUBLIC = {
    "TASKS": "safelife_rl.envs.registration",
    "Level": "safelife_rl.engine.levels",
    "LevelFormatError": "safelife_rl.engine.levels",
    "SafeLifeEnv": "safelife_rl.envs.env",
    "SafeLifeGame": "safelife_rl.engine.game",
    "load_levels": "safelife_rl.engine.level_files",
    "save_level": "safelife_rl.engine.level_files",
    "save_levels": "safelife_rl.engine.level_files",
    # the multi-agent tasks, PettingZoo-style: build_coop_v0.parallel_env(), .env()
    **dict.fromkeys(
        (
            "build_coop_v0",
            "build_compete_v0",
            "build_parallel_v0",
            "asym1_v0",
            "asym2_v0",
            "asym1_pretrain_cyanonly_v0",
            "asym1_pretrain_redonly_v0",
        ),
        "safelife_rl.envs.multi_agent_env",
    ),
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'safelife_rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
