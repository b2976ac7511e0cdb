"""Transforms of environment classes."""

from __future__ import annotations

from functools import cache
from typing import Any

from extended_envs.core import Agent, ExtendedEnvironment, env_summary, seed_env


@cache
def minus_rewards(env_class: type) -> type[ExtendedEnvironment]:
    """The environment class identical to ``env_class`` except that every reward is negated.

    The battery pairs each environment with its negation so that an agent ignoring rewards
    scores exactly 0 overall. Randomness is untouched: with the same seed, both versions
    draw the same observations. The same class is returned for the same argument.
    ``env_class`` may be any class of the paper's API (its seeding, episode ends and summary
    are passed through).
    """

    class MinusRewards(ExtendedEnvironment):
        n_actions = env_class.n_actions
        n_obs = env_class.n_obs
        slow = getattr(env_class, "slow", False)

        def __init__(self, A: type[Agent]) -> None:
            self.underlying = env_class(A)

        def seed(self, seed: int | None) -> None:
            seed_env(self.underlying, seed)

        @property  # type: ignore[override]
        def episode_end(self) -> Any:
            return getattr(self.underlying, "episode_end", None)

        def summary(self) -> dict[str, Any]:
            return env_summary(self.underlying)

        def start(self) -> Any:
            return self.underlying.start()

        def step(self, action: int) -> tuple[float, Any]:
            reward, obs = self.underlying.step(action)
            return -reward, obs

    MinusRewards.__name__ = MinusRewards.__qualname__ = f"minus_rewards({env_class.__name__})"
    return MinusRewards
