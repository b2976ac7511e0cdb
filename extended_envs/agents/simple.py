"""Baseline agents that do not learn: uniform random, and one fixed action."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from extended_envs.agents.draws import StepDraws
from extended_envs.checks import check
from extended_envs.core import Agent, Obs
from extended_envs.hyperparams import Allowed, Interval


class RandomAgent(Agent):
    """Uniformly random actions, redrawn at each training step (see :mod:`.draws`)."""

    def __init__(self, n_actions: int, n_obs: Any, seed: int | None = None, **hyperparams: Any):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.draws = StepDraws(np.random.default_rng(self.seed), width=1)

    def act(self, obs: Obs) -> int:
        return int(self.draws.current[0] * self.n_actions)

    def train(
        self,
        o_prev: Obs,
        a: int,
        r: float,
        o_next: Obs,
        terminated: bool = False,
        truncated: bool = False,
    ) -> None:
        self.draws.advance()


class ConstantAgent(Agent):
    """Always the action given by the ``action`` hyperparameter."""

    default_hyperparams: ClassVar[dict[str, Any]] = {"action": 0}
    # and below n_actions, checked on creation
    hyperparam_ranges: ClassVar[dict[str, Allowed]] = {"action": Interval(0, ints=True)}

    def __init__(self, n_actions: int, n_obs: Any, seed: int | None = None, **hyperparams: Any):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.action = int(self.hyperparams["action"])
        check.value(
            "ConstantAgent hyperparameter action",
            self.action,
            lambda v: 0 <= v < n_actions,
            f"an int in range({n_actions}), the environment's actions",
        )

    def act(self, obs: Obs) -> int:
        return self.action

    def train(
        self,
        o_prev: Obs,
        a: int,
        r: float,
        o_next: Obs,
        terminated: bool = False,
        truncated: bool = False,
    ) -> None:
        pass
