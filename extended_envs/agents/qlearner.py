"""Tabular epsilon-greedy Q-learning (the paper's "Q" agent)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from extended_envs.agents.draws import StepDraws
from extended_envs.core import Agent, Obs
from extended_envs.hyperparams import POSITIVE_UNIT, UNIT, Allowed


class QLearner(Agent):
    """One-step Q-learning over a table of ``n_obs`` x ``n_actions`` values.

    Acts uniformly at random with probability ``epsilon`` and while every value of the
    observation is still 0 (as the library's Q-learner does); otherwise greedily (lowest action on
    ties). Hyperparameters: ``learning_rate``, ``gamma``, ``epsilon``.
    """

    discrete_obs_only: ClassVar[bool] = True
    default_hyperparams: ClassVar[dict[str, Any]] = {
        "learning_rate": 0.1,
        "gamma": 0.9,
        "epsilon": 0.1,
    }
    hyperparam_ranges: ClassVar[dict[str, Allowed]] = {
        "learning_rate": POSITIVE_UNIT,
        "gamma": UNIT,
        "epsilon": UNIT,
    }

    def __init__(self, n_actions: int, n_obs: Any, seed: int | None = None, **hyperparams: Any):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.learning_rate = float(self.hyperparams["learning_rate"])
        self.gamma = float(self.hyperparams["gamma"])
        self.epsilon = float(self.hyperparams["epsilon"])
        self.q = [[0.0] * n_actions for _ in range(n_obs)]
        self.draws = StepDraws(np.random.default_rng(self.seed), width=2)

    def act(self, obs: Obs) -> int:
        values = self.q[obs]
        explore, pick = self.draws.current
        if explore < self.epsilon or not any(values):
            return int(pick * self.n_actions)
        return values.index(max(values))

    def train(
        self,
        o_prev: Obs,
        a: int,
        r: float,
        o_next: Obs,
        terminated: bool = False,
        truncated: bool = False,
    ) -> None:
        target = r if terminated else r + self.gamma * max(self.q[o_next])
        self.q[o_prev][a] += self.learning_rate * (target - self.q[o_prev][a])
        self.draws.advance()
