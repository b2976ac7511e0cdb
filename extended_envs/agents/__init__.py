"""Agent classes for extended environments (see :mod:`extended_envs.core` for the contract).

The Stable-Baselines3 agents are imported on first use, so that the tabular and baseline agents
load without torch.
"""

from typing import Any

from extended_envs.agents.qlearner import QLearner
from extended_envs.agents.simple import ConstantAgent, RandomAgent

__all__ = ["A2CAgent", "ConstantAgent", "DQNAgent", "PPOAgent", "QLearner", "RandomAgent"]
_SB3_AGENTS = ("A2CAgent", "DQNAgent", "PPOAgent")


def __getattr__(name: str) -> Any:
    if name in _SB3_AGENTS:
        from extended_envs.agents import sb3

        return getattr(sb3, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
