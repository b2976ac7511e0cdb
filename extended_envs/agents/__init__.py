"""Agent classes for extended environments (see :mod:`extended_envs.core` for the contract)."""

from extended_envs.agents.simple import ConstantAgent, RandomAgent

__all__ = ["ConstantAgent", "RandomAgent"]
