"""Extended environments: environments that simulate the agent (Alexander et al.)."""

from extended_envs.core import (
    AdaptableEnvironment,
    Agent,
    ExtendedEnvironment,
    bind_agent,
    run_environment,
)

__all__ = ["AdaptableEnvironment", "Agent", "ExtendedEnvironment", "bind_agent", "run_environment"]
