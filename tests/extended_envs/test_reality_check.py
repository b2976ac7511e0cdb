"""Reality check (Definition 8, Remark 10) and Theorem 9, by property tests on small agents."""

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extended_envs import Agent, ExtendedEnvironment, bind_agent, reality_check, run_environment
from extended_envs.agents import ConstantAgent, QLearner, RandomAgent

MASK = 2**61 - 1


class HistoryAgent(Agent):
    """A deterministic agent whose action depends on its whole training history and the obs."""

    default_hyperparams = {"salt": 0}

    def __init__(self, n_actions, n_obs, seed=None, **hyperparams):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.state = (self.hyperparams["salt"] * 0x9E3779B97F4A7C15 + 1) & MASK

    @staticmethod
    def mix(state, *values):
        for v in values:
            state = ((state ^ (int(v) + 3)) * 0x100000001B3 + 0x5BD1E995) & MASK
        return state

    def act(self, obs):
        return (self.mix(self.state, obs) >> 17) % self.n_actions

    def train(self, o_prev, a, r, o_next):
        self.state = self.mix(self.state, o_prev, a, r + 1, o_next)


def pi(A, history, obs):
    """pi(x_1 y_1 ... x_n): a fresh instance trained on ``history`` acting on ``obs``."""
    agent = A()
    for transition in history:
        agent.train(*transition)
    return agent.act(obs)


def pi_rc_definition_8(A, history, obs, default_action=None):
    """Definition 8 (Remark 10 with ``default_action``), recursively and from scratch."""

    @lru_cache(maxsize=None)
    def rc(n, obs):  # pi_RC on the first n transitions followed by obs
        prefix = history[:n]
        possible = all(prefix[i][1] == rc(i, prefix[i][0]) for i in range(n))
        if possible:
            return pi(A, prefix, obs)
        return pi(A, (), prefix[0][0]) if default_action is None else default_action

    return rc(len(history), obs)


def pi_rc_theorem_9_1(A, history, obs):
    """Theorem 9 part 1: the condition 'possible for pi_RC' may read 'possible for pi'."""
    possible = all(history[i][1] == pi(A, history[:i], history[i][0]) for i in range(len(history)))
    return pi(A, history, obs) if possible else pi(A, (), history[0][0])


@st.composite
def worlds(draw):
    n_actions = draw(st.integers(2, 3))
    n_obs = draw(st.integers(1, 3))
    A = bind_agent(HistoryAgent, n_actions, n_obs, seed=0, salt=draw(st.integers(0, 10**6)))
    # Each step either follows pi (keeping the history possible) or takes an arbitrary action.
    steps = draw(
        st.lists(
            st.tuples(
                st.integers(0, n_obs - 1),
                st.booleans(),
                st.integers(0, n_actions - 1),
                st.sampled_from([-1, 0, 1]),
                st.integers(0, n_obs - 1),
            ),
            max_size=9,
        )
    )
    follower, history = A(), []
    for o, follow, other, r, o2 in steps:
        a = follower.act(o) if follow else other
        follower.train(o, a, r, o2)
        history.append((o, a, r, o2))
    return A, tuple(history)


def acts_along(agent_class, history, n_obs):
    """The instance's action on every observation after each prefix of ``history``."""
    agent = agent_class()
    table = [[agent.act(o) for o in range(n_obs)]]
    for transition in history:
        agent.train(*transition)
        table.append([agent.act(o) for o in range(n_obs)])
    return table


@settings(max_examples=60, deadline=None)
@given(worlds(), st.sampled_from([None, 0, 1]))
def test_instances_follow_definition_8(world, default_action):
    A, history = world
    table = acts_along(reality_check(A, default_action), history, A.n_obs)
    for n in range(len(history) + 1):
        expected = [pi_rc_definition_8(A, history[:n], o, default_action) for o in range(A.n_obs)]
        assert table[n] == expected


@settings(max_examples=60, deadline=None)
@given(worlds())
def test_alternate_definition_theorem_9_1(world):
    A, history = world
    for o in range(A.n_obs):
        assert pi_rc_definition_8(A, history, o) == pi_rc_theorem_9_1(A, history, o)


@settings(max_examples=60, deadline=None)
@given(worlds(), st.sampled_from([None, 1]))
def test_idempotence_theorem_9_2(world, default_action):
    A, history = world
    once = reality_check(A, default_action)
    twice = reality_check(once, default_action)
    assert acts_along(twice, history, A.n_obs) == acts_along(once, history, A.n_obs)


@settings(max_examples=60, deadline=None)
@given(worlds(), st.sampled_from([None, 1]))
def test_traditional_equivalence_theorem_9_3(world, default_action):
    A, history = world
    follower, possible = A(), []
    for o, _, r, o2 in history:  # the same observations and rewards, pi's own actions
        a = follower.act(o)
        follower.train(o, a, r, o2)
        possible.append((o, a, r, o2))
    checked = reality_check(A, default_action)
    assert acts_along(checked, possible, A.n_obs) == acts_along(A, possible, A.n_obs)


class RandomWorld(ExtendedEnvironment):
    """Non-extended: rewards and observations depend on the actions and the env's generator."""

    n_actions, n_obs = 3, 3

    def start(self):
        self.table = self.np_random.integers(-1, 2, size=(self.n_obs, self.n_actions))
        self.obs = 0
        return self.obs

    def step(self, action):
        reward = int(self.table[self.obs, action])
        self.obs = int((self.obs + action + self.np_random.integers(2)) % self.n_obs)
        return reward, self.obs


class RandomExtendedWorld(RandomWorld):
    """Extended: also pays 1 when a simulation trained on scrambled history agrees."""

    def __init__(self, A):
        self.sim = A()

    def step(self, action):
        reward, obs = super().step(action)
        reward += int(self.sim.act(obs) == action)
        self.sim.train(obs, int(self.np_random.integers(self.n_actions)), -reward, obs)
        return reward, obs


AGENTS = [QLearner, RandomAgent, HistoryAgent]


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(AGENTS), st.integers(0, 2**31), st.sampled_from([None, 2]))
def test_equal_results_in_non_extended_environments_theorem_9_5(agent_class, seed, default):
    plain = run_environment(RandomWorld, agent_class, 150, seed=seed)["rewards"]
    checked = run_environment(RandomWorld, reality_check(agent_class, default), 150, seed=seed)
    assert np.array_equal(plain, checked["rewards"])


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(AGENTS), st.integers(0, 2**31))
def test_never_freezes_on_genuine_history_theorem_9_4(agent_class, seed):
    A = reality_check(bind_agent(agent_class, 3, 3, seed=seed))
    agent, env = A(), RandomExtendedWorld(A)
    env.seed(seed)
    obs = env.start()
    for _ in range(150):
        action = agent.act(obs)
        assert action == agent.inner.act(obs)
        reward, next_obs = env.step(action)
        agent.train(obs, action, reward, next_obs)
        obs = next_obs
    assert agent.frozen_action is None
    assert env.sim.frozen_action is not None  # the simulation was shown an impossible history


def test_frozen_instance_repeats_its_first_action_and_stops_training():
    checked = reality_check(bind_agent(HistoryAgent, 3, 2, seed=0))()
    first = checked.act(1)
    checked.train(1, (first + 1) % 3, 0, 0)
    assert checked.frozen_action == first
    state = checked.inner.state
    checked.train(0, 0, 1, 1)
    assert checked.inner.state == state
    assert [checked.act(o) for o in (0, 1)] == [first, first]


def test_reality_check_keeps_binding_and_rebinds():
    A = bind_agent(QLearner, 2, 3, seed=5, learning_rate=0.4)
    checked = reality_check(A)
    assert (checked.n_actions, checked.n_obs, checked.seed) == (2, 3, 5)
    assert checked.hyperparams == A.hyperparams
    assert checked().inner.learning_rate == 0.4
    halved = checked.rebind(learning_rate=0.2)
    assert halved().inner.learning_rate == 0.2
    assert halved.__name__ == "RealityCheck[QLearner]"


def test_default_action_must_be_an_action():
    with pytest.raises(ValueError, match="default_action"):
        reality_check(bind_agent(ConstantAgent, 2, 1), default_action=2)()


def test_reality_check_helps_q_learning_ignore_rewards():
    """Section 5's worked example: Q_RC's simulation freezes, and Q learns its frozen action."""
    from extended_envs.envs import IgnoreRewards

    plain = run_environment(IgnoreRewards, QLearner, 3000, seed=0)["reward_per_step"]
    checked = run_environment(IgnoreRewards, reality_check(QLearner), 3000, seed=0)
    assert checked["reward_per_step"] > plain + 0.2


def test_reality_check_passes_episode_ends_to_the_wrapped_agent():
    checked = reality_check(bind_agent(QLearner, 2, 3, seed=0, learning_rate=1.0, epsilon=0.0))()
    plain = bind_agent(QLearner, 2, 3, seed=0, learning_rate=1.0, epsilon=0.0)()
    for agent in (checked, plain):
        agent.train(1, agent.act(1), 4.0, 2)
        agent.train(0, agent.act(0), 1.0, 1, terminated=True)
        agent.train(2, agent.act(2), 1.0, 1, truncated=True)
    assert checked.frozen_action is None
    assert checked.inner.q == plain.q
    assert plain.q[0][plain.act(0)] == 1.0  # the terminal transition did not bootstrap
