"""Procedural SafeLife levels from the original generator's parameter schema.

``generate_level("append-still", seed)`` makes one level; :class:`ProceduralLevels` is the
level source the registered environments draw a new level from at each reset;
:func:`generate_levels` makes many, optionally in worker processes.
"""

from safelife_rl.procgen.generator import generate_level
from safelife_rl.procgen.params import LEVEL_TYPES, ParamsError, load_params
from safelife_rl.procgen.source import ProceduralLevels, generate_levels, iter_levels

__all__ = [
    "LEVEL_TYPES",
    "ParamsError",
    "ProceduralLevels",
    "generate_level",
    "generate_levels",
    "iter_levels",
    "load_params",
]
