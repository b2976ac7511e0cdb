"""The paper's listings and the reference library's agents, as they are written.

The paper's Listing 1 calls ``self.sim.act(obs=0)`` and ``self.sim.train(o_prev=0, a=action,
r=0, o_next=0)``; the reference library's earlier agents take ``train(self, o_prev, act, R,
o_next)`` and read their sizes as ``num_legal_actions`` from ``**kwargs`` constructors. Every
agent, wrapper and the reality check accept both names, by keyword or position.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from extended_envs import check_agent, combine, reality_check, run_environment
from extended_envs.agents import ConstantAgent, QLearner, RandomAgent
from extended_envs.core import bind_agent
from extended_envs.envs import IgnoreRewards as LibraryIgnoreRewards
from extended_envs.envs import TemptingButton

ROOT = Path(__file__).resolve().parents[2]


# The paper's Listing 1, verbatim (comments included).
class IgnoreRewards:
    def __init__(self, A):
        # Calling A() creates untrained agent-copies. On initiation, this
        # environment stores one such copy in its internal memory.
        self.sim = A()

    def start(self):
        return 0  # Initial observation 0

    def step(self, action):
        # At each step, use the stored copy (self.sim) to determine how the true
        # agent would behave if all history so far were the same except all
        # rewards were 0. Assumes self.sim has been trained the same as the true
        # agent, except with all rewards 0.
        hypothetical_act = self.sim.act(obs=0)
        reward = 1 if action == hypothetical_act else -1
        # To maintain above assumption, train self.sim as if current reward
        # were 0. True agent will automatically train the same way with the
        # true reward.
        self.sim.train(o_prev=0, a=action, r=0, o_next=0)
        return (reward, 0)  # Observation=0


IgnoreRewards.n_actions, IgnoreRewards.n_obs = 2, 1  # the listing leaves the sizes out


class IgnoreRewardsActR(IgnoreRewards):
    """Listing 1 with the reference library's earlier names (``act=``, ``R=``)."""

    def step(self, action):
        hypothetical_act = self.sim.act(obs=0)
        self.sim.train(o_prev=0, act=action, R=0, o_next=0)
        return (1 if action == hypothetical_act else -1), 0


class IgnoreRewardsPositional(IgnoreRewards):
    def step(self, action):
        hypothetical_act = self.sim.act(0)
        self.sim.train(0, action, 0, 0)
        return (1 if action == hypothetical_act else -1), 0


class ReferenceAgent:
    """An agent as the reference library's earlier agents are written: ``**kwargs``
    constructor reading the sizes under its names, ``train(o_prev, act, R, o_next)``, ``act``'s
    observation not named ``obs``; draws only in ``train``."""

    def __init__(self, **kwargs):
        self.n_actions = kwargs["num_legal_actions"]
        assert self.num_possible_obs == kwargs["num_possible_obs"]
        self.rng = np.random.default_rng(kwargs["seed"])
        self.totals = np.zeros((kwargs["num_possible_obs"], self.n_actions))
        self.draw = self.rng.random()

    def act(self, o):
        if self.draw < 0.2 or not self.totals[o].any():
            return int(self.draw * 5 * self.n_actions) % self.n_actions
        return int(self.totals[o].argmax())

    def train(self, o_prev, act, R, o_next):
        self.totals[o_prev, act] += R
        self.draw = self.rng.random()


@pytest.mark.parametrize("env", [IgnoreRewards, IgnoreRewardsActR, IgnoreRewardsPositional])
def test_listing_1_runs_in_every_call_style(env):
    plain = run_environment(env, QLearner, 3000, seed=0)["reward_per_step"]
    checked = run_environment(env, reality_check(QLearner), 3000, seed=0)["reward_per_step"]
    library = run_environment(LibraryIgnoreRewards, QLearner, 3000, seed=0)["reward_per_step"]
    assert plain == library  # the same rule, however the simulation is called
    assert checked > plain + 0.5


@pytest.mark.parametrize(
    "agent", [QLearner, RandomAgent, ConstantAgent, ReferenceAgent, reality_check(QLearner),
              reality_check(ReferenceAgent)],
    ids=lambda a: a.__name__,
)  # fmt: skip
def test_every_agent_trains_alike_in_every_call_style(agent):
    A = bind_agent(agent, 3, 4, seed=1)
    history = [(o % 4, (o * 7) % 3, (o % 3) - 1, (o + 1) % 4) for o in range(40)]
    styles = [
        lambda x, o, a, r, n: x.train(o, a, r, n),
        lambda x, o, a, r, n: x.train(o_prev=o, a=a, r=r, o_next=n),
        lambda x, o, a, r, n: x.train(o_prev=o, act=a, R=r, o_next=n),
        lambda x, o, a, r, n: x.train(o, act=a, R=r, o_next=n),
        lambda x, o, a, r, n: x.train(o, a, r, n, terminated=False, truncated=False),
    ]
    actions = []
    for style in styles:
        instance, acted = A(), []
        for transition in history:
            acted.append(instance.act(obs=transition[0]))
            style(instance, *transition)
        actions.append(acted)
    assert all(acted == actions[0] for acted in actions)
    with pytest.raises(TypeError, match="multiple values for argument 'a'"):
        A().train(0, 1, 0, 0, act=1)
    with pytest.raises(TypeError, match=r"missing argument\(s\) \['r'\]"):
        A().train(o_prev=0, act=1, o_next=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'reward'"):
        A().train(0, 1, o_next=0, reward=0)


def test_reference_agents_run_everywhere():
    first = run_environment(TemptingButton, ReferenceAgent, 300, seed=3)
    again = run_environment(TemptingButton, ReferenceAgent, 300, seed=3)
    assert np.array_equal(first["rewards"], again["rewards"])
    check_agent(ReferenceAgent)
    check_agent(reality_check(ReferenceAgent))
    plain = run_environment(IgnoreRewards, ReferenceAgent, 500, seed=0)["reward_per_step"]
    checked = run_environment(IgnoreRewards, reality_check(ReferenceAgent), 500, seed=0)
    assert checked["reward_per_step"] > plain


class PaperAdaptableActR:
    """Definition 11's halves calling the simulation with ``act=``/``R=``."""

    n_actions, n_obs = 2, 1

    def __init__(self, A):
        self.sim = A()

    def start(self):
        return 0

    def outcome(self, action):
        return (1 if action == self.sim.act(obs=0) else -1), 0

    def train_sim(self, action, reward, obs):
        self.sim.train(o_prev=0, act=action, R=0, o_next=obs)

    def step(self, action):
        reward, obs = self.outcome(action)
        self.train_sim(action, reward, obs)
        return reward, obs


def test_combination_accepts_the_reference_names():
    C = combine("CartPole-v1", PaperAdaptableActR, {"max_episode_steps": 30})
    result = run_environment(C, RandomAgent, 60, seed=0)
    assert result["num_steps"] == 60 and len(result["env_summary"]["episode_lengths"]) >= 1


BROKEN_MODULE = """
class NeedsEnv:
    def __init__(self, **kwargs):
        self.n = kwargs["env"].num_legal_actions
    def act(self, obs):
        return 0
    def train(self, o_prev, act, R, o_next):
        pass

class Reference:
    def __init__(self, **kwargs):
        self.n = kwargs["num_legal_actions"]
    def act(self, obs):
        return 0
    def train(self, o_prev, act, R, o_next):
        pass
"""


def test_benchmark_cli_runs_reference_agents_and_names_their_errors(tmp_path):
    (tmp_path / "reference_agents.py").write_text(BROKEN_MODULE)

    def benchmark(agent: str, folder: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "extended_envs", "benchmark", f"agent=reference_agents.{agent}",
             "steps=20", "only=[TemptingButton]", "progress=false",
             f"hydra.run.dir={tmp_path / folder}"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
        )  # fmt: skip

    ran = benchmark("Reference", "ok")
    assert ran.returncode == 0, ran.stderr
    assert "Agent `Reference`" in ran.stdout
    refused = benchmark("NeedsEnv", "refused")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert "Traceback" not in refused.stderr
    assert lines[-1].startswith(
        "python -m extended_envs benchmark: error: check_agent: NeedsEnv raised KeyError: 'env' at "
        "reference_agents.py:4"
    )
