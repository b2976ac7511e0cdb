"""Multi-agent SafeLife, as in the original SafeLife 1.2: several agents on one board, each
with its own location, colour, flags and points table, acting in agent order every step."""

from .env import MULTI_AGENT_TASKS, SafeLifeParallelEnv, make_parallel_env
from .game import MultiAgentGame
from .levels import MultiAgentLevel, from_level, load_levels, save_level, save_levels

__all__ = ["MULTI_AGENT_TASKS", "MultiAgentGame", "MultiAgentLevel", "SafeLifeParallelEnv",
           "from_level", "load_levels", "make_parallel_env", "save_level", "save_levels"]
