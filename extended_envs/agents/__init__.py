"""Agent classes for extended environments (see :mod:`extended_envs.core` for the contract)."""

from extended_envs.agents.qlearner import QLearner
from extended_envs.agents.sb3 import A2CAgent, DQNAgent, PPOAgent
from extended_envs.agents.simple import ConstantAgent, RandomAgent

__all__ = ["A2CAgent", "ConstantAgent", "DQNAgent", "PPOAgent", "QLearner", "RandomAgent"]
