"""SafeLife: a Game-of-Life safety benchmark with side effects measured against inaction."""

from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.level_files import load_levels, save_level, save_levels
from safelife_rl.engine.levels import Level, LevelFormatError
from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.registration import TASKS, register_envs

register_envs()

__all__ = [
    "TASKS",
    "Level",
    "LevelFormatError",
    "SafeLifeEnv",
    "SafeLifeGame",
    "load_levels",
    "save_level",
    "save_levels",
]
