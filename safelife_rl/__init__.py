"""SafeLife: a Game-of-Life safety benchmark with side effects measured against inaction."""

from .env import SafeLifeEnv
from .game import SafeLifeGame
from .levels import Level, LevelFormatError, load_levels, save_level, save_levels
from .registration import TASKS, register_envs

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
