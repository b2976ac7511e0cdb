"""The practical API: binding agent classes, running environments, seeding, bad input."""

import numpy as np
import pytest
from gymnasium import spaces

from extended_envs import (
    AdaptableEnvironment,
    Agent,
    ExtendedEnvironment,
    bind_agent,
    run_environment,
)
from extended_envs.agents import ConstantAgent, QLearner, RandomAgent
from safety_rl_common.errors import UserError


class IgnoreRewardsListing1(ExtendedEnvironment):
    """The paper's Listing 1, verbatim apart from the base class."""

    n_actions, n_obs = 2, 1

    def __init__(self, A):
        self.sim = A()

    def start(self):
        return 0

    def step(self, action):
        hypothetical_act = self.sim.act(obs=0)
        reward = 1 if action == hypothetical_act else -1
        self.sim.train(o_prev=0, a=action, r=0, o_next=0)
        return (reward, 0)


class CoinRewards(ExtendedEnvironment):
    """Not extended: a random reward each step, from the environment's own generator."""

    n_actions, n_obs = 3, 2

    def start(self):
        return 0

    def step(self, action):
        return float(self.np_random.random()), int(self.np_random.integers(2))


class Recorder(Agent):
    default_hyperparams = {"learning_rate": 0.5, "width": 3}

    def __init__(self, n_actions, n_obs, seed=None, **hyperparams):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.seen = []

    def act(self, obs):
        return 0

    def train(self, o_prev, a, r, o_next):
        self.seen.append((o_prev, a, r, o_next))


def test_bound_class_takes_no_arguments_and_fixes_everything():
    A = bind_agent(Recorder, 4, 5, seed=7, width=9)
    agent = A()
    assert isinstance(agent, Recorder)
    assert (agent.n_actions, agent.n_obs, agent.seed) == (4, 5, 7)
    assert A.hyperparams == agent.hyperparams == {"learning_rate": 0.5, "width": 9}
    assert (A.n_actions, A.n_obs, A.seed) == (4, 5, 7)


def test_unbound_seed_is_drawn_once_per_binding():
    A = bind_agent(RandomAgent, 5, 1)
    assert A().seed == A().seed == A.seed
    first, second = A(), A()
    for _ in range(50):
        assert first.act(0) == second.act(0)
        first.train(0, 0, 0, 0)
        second.train(0, 0, 0, 0)


def test_rebind_changes_only_the_named_hyperparameters():
    A = bind_agent(Recorder, 2, 3, seed=1, width=4)
    B = A.rebind(learning_rate=0.25)
    assert B.hyperparams == {"learning_rate": 0.25, "width": 4}
    assert (B.n_actions, B.n_obs, B.seed) == (2, 3, 1)
    assert A.hyperparams["learning_rate"] == 0.5
    assert bind_agent(A, 2, 3, seed=1).hyperparams == Recorder.default_hyperparams


def test_unknown_hyperparameter_is_named():
    with pytest.raises(UserError, match="learnin_rate"):
        bind_agent(QLearner, 2, 2, learnin_rate=0.1)
    with pytest.raises(UserError, match="learnin_rate"):
        run_environment(CoinRewards, QLearner, 5, learnin_rate=0.1)


@pytest.mark.parametrize("n_actions, n_obs", [(0, 1), (2, 0), (2.5, 1), (2, "x")])
def test_bad_sizes_are_rejected(n_actions, n_obs):
    with pytest.raises(ValueError):
        bind_agent(RandomAgent, n_actions, n_obs)


def test_box_observations_are_accepted():
    box = spaces.Box(-1, 1, (3,))
    assert bind_agent(RandomAgent, 2, box)().n_obs is box


def test_listing_1_rewards_agents_that_ignore_rewards():
    assert run_environment(IgnoreRewardsListing1, ConstantAgent, 100, seed=0)["total_reward"] == 100
    # A random agent ignores rewards too: its simulation draws the same numbers (same seed).
    assert run_environment(IgnoreRewardsListing1, RandomAgent, 100, seed=3)["reward_per_step"] == 1
    q = run_environment(IgnoreRewardsListing1, QLearner, 2000, seed=0)
    assert q["reward_per_step"] < 0.9


def test_run_result_fields():
    result = run_environment(CoinRewards, RandomAgent, 50, seed=11)
    assert result["num_steps"] == 50 and result["seed"] == 11
    assert result["rewards"].shape == (50,)
    assert result["total_reward"] == pytest.approx(result["rewards"].sum())
    assert result["reward_per_step"] == pytest.approx(result["total_reward"] / 50)
    assert result["env_summary"] == {}


def test_same_seed_same_run_different_seed_different_run():
    a = run_environment(CoinRewards, QLearner, 200, seed=5)["rewards"]
    b = run_environment(CoinRewards, QLearner, 200, seed=5)["rewards"]
    c = run_environment(CoinRewards, QLearner, 200, seed=6)["rewards"]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_environment_randomness_comes_from_the_run_seed():
    A = bind_agent(Recorder, 3, 2, seed=0)
    env_rewards = run_environment(CoinRewards, A, 4, seed=2)["rewards"]
    env = CoinRewards(A)
    env.seed(2)
    assert env.start() == 0
    assert [env.step(0)[0] for _ in range(4)] == list(env_rewards)


class GuessTheCoin(ExtendedEnvironment):
    """+1 when the action equals a coin the environment flips from its own generator, else -1."""

    n_actions, n_obs = 2, 1

    def start(self):
        self.coin = int(self.np_random.integers(2))
        return 0

    def step(self, action):
        reward = 1.0 if action == self.coin else -1.0
        self.coin = int(self.np_random.integers(2))
        return reward, 0


@pytest.mark.parametrize("seed", range(5))
def test_environment_and_agent_streams_are_independent(seed):
    # With one stream for both, RandomAgent's draws would be the environment's coins.
    result = run_environment(GuessTheCoin, RandomAgent, 400, seed=seed)
    assert abs(result["reward_per_step"]) < 0.2
    env = GuessTheCoin(bind_agent(RandomAgent, 2, 1, seed))
    env.seed(seed)
    agent_streams = [np.random.default_rng(seed), *map(np.random.default_rng,
                     np.random.SeedSequence(seed).spawn(2))]  # fmt: skip
    env_draws = env.np_random.random(8)
    for stream in agent_streams:
        assert not np.isin(env_draws, stream.random(64)).any()


class Bad(ExtendedEnvironment):
    n_actions, n_obs = 2, 1

    def start(self):
        return 0

    def step(self, action):
        return 0, 0


@pytest.mark.parametrize("action", [2, -1, 0.0, "0"])
def test_invalid_action_is_a_clear_error(action):
    class Wrong(ConstantAgent):
        def act(self, obs):
            return action

    with pytest.raises(ValueError, match="invalid action"):
        run_environment(Bad, Wrong, 3, seed=0)


def test_num_steps_must_be_positive():
    with pytest.raises(ValueError, match="num_steps"):
        run_environment(Bad, RandomAgent, 0)


def test_hyperparameters_for_a_bound_class_are_refused():
    with pytest.raises(TypeError, match="bound"):
        run_environment(Bad, bind_agent(QLearner, 2, 1), 3, learning_rate=0.2)


class Halves(AdaptableEnvironment):
    n_actions, n_obs = 2, 1

    def __init__(self, A):
        self.sim = A()

    def start(self):
        return 0

    def outcome(self, action):
        self.calls = ["outcome"]
        return (1 if action == self.sim.act(0) else -1), 0

    def train_sim(self, action, reward, obs):
        self.calls.append(("train_sim", action, reward, obs))
        self.sim.train(0, action, reward, obs)


def test_adaptable_step_is_outcome_then_train_sim():
    env = Halves(bind_agent(ConstantAgent, 2, 1, action=1))
    env.start()
    assert env.step(0) == (-1, 0)
    assert env.calls == ["outcome", ("train_sim", 0, -1, 0)]
