"""Multi-agent SafeLife, as in the original SafeLife 1.2: several agents on one board, each
with its own location, colour, flags and points table, acting in agent order every step."""

from .game import MultiAgentGame
from .levels import MultiAgentLevel, from_level, load_levels, save_level, save_levels

__all__ = ["MultiAgentGame", "MultiAgentLevel", "from_level", "load_levels", "save_level",
           "save_levels"]
