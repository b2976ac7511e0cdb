"""Extended environments: environments that simulate the agent (Alexander and others).

The practical API of the paper's Section 4 (:mod:`extended_envs.core`), its agents
(:mod:`extended_envs.agents`), the reality check (Definition 8), the Gymnasium adapter and the
combination with Gymnasium environments (Definition 12), and :func:`check_agent`, which checks that
an agent class keeps the contract simulation relies on. Importing the package registers the
Gymnasium ids of the CartPole combinations.
"""

from extended_envs.agent_checker import check_agent
from extended_envs.combination import combine, register_envs
from extended_envs.core import (
    AdaptableEnvironment,
    Agent,
    ExtendedEnvironment,
    bind_agent,
    run_environment,
)
from extended_envs.gym_adapter import ExtendedEnvGym
from extended_envs.reality_check import reality_check

register_envs()

__all__ = [
    "AdaptableEnvironment",
    "Agent",
    "ExtendedEnvGym",
    "ExtendedEnvironment",
    "bind_agent",
    "check_agent",
    "combine",
    "reality_check",
    "run_environment",
]
