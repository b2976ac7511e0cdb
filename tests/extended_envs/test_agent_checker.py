"""check_agent: agents whose act changes them or draws randomness, or that are not
semi-deterministic, are named; the library's agents pass."""

from __future__ import annotations

import random

import numpy as np
import pytest
from gymnasium import spaces

from extended_envs import check_agent, reality_check
from extended_envs.agents import A2CAgent, ConstantAgent, DQNAgent, PPOAgent, QLearner, RandomAgent
from extended_envs.core import Agent


@pytest.mark.parametrize(
    "agent", [QLearner, RandomAgent, ConstantAgent, DQNAgent, PPOAgent, A2CAgent],
    ids=lambda a: a.__name__,
)  # fmt: skip
def test_library_agents_pass(agent):
    check_agent(agent)
    check_agent(reality_check(agent), steps=10)


def test_box_observations():
    box = spaces.Box(low=-np.inf, high=np.inf, shape=(5,), dtype=np.float32)
    check_agent(DQNAgent, n_actions=4, n_obs=box, steps=10, learning_starts=5)


class EpsilonGreedyInAct(QLearner):
    """QLearner with its exploration drawn in act: the bug the checker is for."""

    def __init__(self, n_actions, n_obs, seed=None, **hyperparams):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.rng = np.random.default_rng(self.seed)

    def act(self, obs):
        if self.rng.random() < self.epsilon or not any(self.q[obs]):
            return int(self.rng.integers(self.n_actions))
        values = self.q[obs]
        return values.index(max(values))


class Unseeded:
    """Draws only in train, but from OS entropy: copies disagree."""

    def __init__(self):
        self.rng = np.random.default_rng()
        self.action = 0

    def act(self, obs):
        return self.action

    def train(self, o_prev, a, r, o_next):
        self.action = int(self.rng.integers(self.n_actions))


class GlobalDraws(Agent):
    def act(self, obs):
        return random.randrange(self.n_actions) * 0

    def train(self, o_prev, a, r, o_next):
        pass


class CountsQuestions:
    """Deterministic, but its answers depend on how often it was asked."""

    def __init__(self):
        self.asked = 0

    def act(self, obs):
        self.asked += 1
        return (self.asked // 2) % self.n_actions

    def train(self, o_prev, a, r, o_next):
        pass


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (EpsilonGreedyInAct, "act must not change the agent or draw randomness"),
        (Unseeded, "is not semi-deterministic: two identically trained instances acted"),
        (GlobalDraws, "used NumPy's or Python's global random generator in act"),
        (CountsQuestions, "act must not change the agent"),
    ],
)
def test_broken_agents_are_named(agent, message):
    with pytest.raises(ValueError, match=f"check_agent: {agent.__name__} .*{message}"):
        check_agent(agent)


def test_bad_arguments():
    with pytest.raises(ValueError, match="not an agent class"):
        check_agent(int)
    with pytest.raises(ValueError, match="steps"):
        check_agent(QLearner, steps=0)
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        check_agent(QLearner, eps=0.1)
