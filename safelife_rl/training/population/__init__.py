"""Population training: many independent PPO runs of one task as one batch on one device
(:class:`PopulationPPO`)."""

from safelife_rl.training.device.stacked import StackedNetworks
from safelife_rl.training.population.members import (
    MemberEnv,
    MemberRandom,
)
from safelife_rl.training.population.trainer import PopulationPPO

__all__ = [
    "MemberEnv",
    "MemberRandom",
    "PopulationPPO",
    "StackedNetworks",
]
