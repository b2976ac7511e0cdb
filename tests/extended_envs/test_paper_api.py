"""Environments and agents of the paper's practical API, without our base classes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from extended_envs import ExtendedEnvGym, bind_agent, combine, reality_check, run_environment
from extended_envs.agents import QLearner
from extended_envs.apps.benchmark import agent_class, run_battery
from extended_envs.core import env_seed
from extended_envs.envs import IgnoreRewards, TemptingButton, minus_rewards

ROOT = Path(__file__).resolve().parents[2]


class PaperIgnoreRewards:
    """The paper's Listing 1, plus a ``seed`` method and a coin from its own generator."""

    n_actions, n_obs = 2, 1

    def __init__(self, A):
        self.sim = A()
        self.seeds = []
        self.rng = np.random.default_rng(12345)  # reseeded by seed()

    def seed(self, seed):
        self.seeds.append(seed)
        self.rng = np.random.default_rng(seed)

    def start(self):
        return 0

    def step(self, action):
        reward = 1 if action == self.sim.act(obs=0) else -1
        self.sim.train(o_prev=0, a=action, r=0, o_next=0)
        return reward + 0.001 * int(self.rng.integers(2)), 0


class PaperQLearner:
    """A tabular epsilon-greedy Q-learner as the paper writes agents: no base class, hyperparameters
    as keyword arguments with defaults, sizes from class attributes, draws taken in ``train``."""

    def __init__(self, epsilon=0.1, learning_rate=0.1, gamma=0.9, seed=None):
        self.epsilon, self.learning_rate, self.gamma = epsilon, learning_rate, gamma
        self.q = np.zeros((self.n_obs, self.n_actions))
        self.rng = np.random.default_rng(seed)
        self.draw = self.rng.random(2)

    def act(self, obs):
        if self.draw[0] < self.epsilon or not self.q[obs].any():
            return int(self.draw[1] * self.n_actions)
        return int(self.q[obs].argmax())

    def train(self, o_prev, a, r, o_next):
        target = r + self.gamma * self.q[o_next].max()
        self.q[o_prev, a] += self.learning_rate * (target - self.q[o_prev, a])
        self.draw = self.rng.random(2)


def test_paper_classes_run_and_are_seeded():
    first = run_environment(PaperIgnoreRewards, PaperQLearner, 300, seed=4)
    again = run_environment(PaperIgnoreRewards, PaperQLearner, 300, seed=4)
    other = run_environment(PaperIgnoreRewards, PaperQLearner, 300, seed=5)
    assert np.array_equal(first["rewards"], again["rewards"])
    assert not np.array_equal(first["rewards"], other["rewards"])
    assert first["env_summary"] == {}
    seen = []

    class Watched(PaperIgnoreRewards):
        def seed(self, seed):
            seen.append(seed)
            super().seed(seed)

    run_environment(Watched, QLearner, 3, seed=4)
    assert seen == [env_seed(4)] and env_seed(4) != 4  # keyed apart from the agents' seed


def test_paper_agent_binding_and_hyperparameters():
    A = bind_agent(PaperQLearner, 3, 5, seed=7, epsilon=0.5)
    assert (A.n_actions, A.n_obs, A.seed) == (3, 5, 7)
    assert A.hyperparams == {"epsilon": 0.5, "learning_rate": 0.1, "gamma": 0.9}
    agent = A()
    assert agent.epsilon == 0.5 and agent.q.shape == (5, 3)
    assert A.rebind(learning_rate=0.05)().learning_rate == 0.05
    with pytest.raises(
        ValueError, match=r"PaperQLearner got unknown hyperparameter\(s\) \['eps'\]"
    ):
        run_environment(TemptingButton, PaperQLearner, 5, seed=0, eps=0.5)
    with pytest.raises(ValueError, match="not an agent class"):
        run_environment(TemptingButton, object, 5, seed=0)
    with pytest.raises(ValueError, match="not an extended environment class: it lacks step"):
        run_environment(
            type("NoStep", (), {"n_actions": 2, "n_obs": 1, "start": None}), QLearner, 5
        )


def test_paper_classes_through_reality_check_gym_and_minus_rewards():
    plain = run_environment(IgnoreRewards, PaperQLearner, 2000, seed=0)["reward_per_step"]
    checked = run_environment(IgnoreRewards, reality_check(PaperQLearner), 2000, seed=0)
    assert checked["reward_per_step"] > plain + 0.3
    negated = run_environment(minus_rewards(PaperIgnoreRewards), BoxAgent, 50, seed=1)
    rewards = run_environment(PaperIgnoreRewards, BoxAgent, 50, seed=1)["rewards"]
    assert np.array_equal(negated["rewards"], -rewards)  # the same coins: seeded through
    assert len(set(rewards)) == 2
    env = ExtendedEnvGym(PaperIgnoreRewards, PaperQLearner, use_reality_check=True)
    env.reset(seed=0)
    assert env.env.seeds == [env_seed(env.run_seed)]
    assert env.step(1)[1] in (-1, 1, -0.999, 1.001)
    rows = run_battery(PaperQLearner, 20, [0], [TemptingButton, PaperIgnoreRewards])
    assert [row["env"] for row in rows] == ["TemptingButton", "PaperIgnoreRewards"]


class PaperAdaptable:
    """IgnoreRewards in Definition 11's two halves, without a base class."""

    n_actions, n_obs = 1, 1

    def __init__(self, A):
        self.sim = A()

    def start(self):
        return 0

    def outcome(self, action):
        return (1 if action == self.sim.act(obs=0) else -1), 0

    def train_sim(self, action, reward, obs):
        self.sim.train(o_prev=0, a=action, r=0, o_next=0)

    def step(self, action):
        reward, obs = self.outcome(action)
        self.train_sim(action, reward, obs)
        return reward, obs


class BoxAgent:
    """Pushes the cart toward the pole's lean (action 0 on int observations); four-argument
    ``train``."""

    def act(self, obs):
        return int(obs[2] > 0) if isinstance(obs, np.ndarray) else 0

    def train(self, o_prev, a, r, o_next):
        pass


def test_paper_classes_combine_with_gymnasium():
    C = combine("CartPole-v1", PaperAdaptable, {"max_episode_steps": 50})
    result = run_environment(C, BoxAgent, 120, seed=0)
    assert result["total_reward"] == 120  # E's single action always matches the simulation
    assert sum(result["env_summary"]["episode_lengths"]) <= 120
    with pytest.raises(TypeError, match="outcome"):
        combine("CartPole-v1", PaperIgnoreRewards)


USER_MODULE = """
class MyAgent:
    def __init__(self, action=1):
        self.action = action
    def act(self, obs):
        return self.action
    def train(self, o_prev, a, r, o_next):
        pass

class DrawsInAct:
    def __init__(self, seed=None):
        import numpy as np
        self.rng = np.random.default_rng(seed)
    def act(self, obs):
        return int(self.rng.integers(self.n_actions))
    def train(self, o_prev, a, r, o_next):
        pass

NOT_A_CLASS = 3
"""


def test_benchmark_takes_an_agent_class_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "my_agents.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert agent_class("my_agents.MyAgent").__name__ == "MyAgent"
    for bad, message in [
        ("my_agents.NOT_A_CLASS", "is not an agent class"),
        ("my_agents.Missing", "has no 'Missing'"),
        ("no_such_module_xyz.Agent", "cannot import module 'no_such_module_xyz'"),
        ("my_agents.MyAgent; rm", "is not an import path module.Class"),
        ("my_agents..MyAgent", "is not an import path module.Class"),
        ("Qlerner", "unknown agent 'Qlerner'"),
    ]:
        with pytest.raises(ValueError, match=message):
            agent_class(bad)
    run = subprocess.run(
        [sys.executable, "-m", "extended_envs", "benchmark", "agent=my_agents.MyAgent", "steps=20",
         "only=[TemptingButton]", "progress=false", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Agent `MyAgent`" in run.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "extended_envs", "benchmark", "agent=my_agents.DrawsInAct",
         "steps=20", f"hydra.run.dir={tmp_path / 'refused'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert refused.returncode == 2
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m extended_envs benchmark: error: check_agent: DrawsInAct")
