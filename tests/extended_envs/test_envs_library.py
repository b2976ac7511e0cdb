"""The library as a whole: names, the battery, minus_rewards, seeding, Definition 11."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import extended_envs.envs as envs
from extended_envs.agents import ConstantAgent, QLearner, RandomAgent
from extended_envs.core import (
    AdaptableEnvironment,
    Agent,
    ExtendedEnvironment,
    bind_agent,
    run_environment,
)
from extended_envs.envs import ALL_ENVIRONMENTS, battery, is_slow, minus_rewards

NAMES = """FalseMemories IgnoreRewards IgnoreRewards2 IgnoreRewards3 IgnoreObservations
IgnoreActions IncentivizeZero PunishSlowAgent PunishNondeterministicAgent CryingBaby CryingBaby2
TemptingButton TemptingButtonVariation ThirdActionForbidden ShiftedRewards DelayedRewards Repeater
AfterImages SelfRecognition LimitedMemory CensoredObservation NthRewardMultipliedByN
AdversarialSequencePredictor AdversarialSequenceEvader IncentivizeLearningRate ReverseHistory
FlipEveryOther DejaVu""".split()

SLOW = {"PunishSlowAgent", "ReverseHistory", "DejaVu"}
ADAPTABLE = {
    "IgnoreRewards",
    "IgnoreRewards2",
    "IgnoreRewards3",
    "IgnoreActions",
    "Repeater",
    "PunishNondeterministicAgent",
    "IncentivizeLearningRate",
}
by_name = pytest.mark.parametrize("env_class", ALL_ENVIRONMENTS, ids=lambda e: e.__name__)


def test_every_environment_of_the_paper_and_library_is_importable_by_name():
    assert [env.__name__ for env in ALL_ENVIRONMENTS] == NAMES
    for name in NAMES:
        assert getattr(envs, name).__name__ == name
        assert name in envs.__all__


@by_name
def test_environment_classes_follow_the_api(env_class):
    assert issubclass(env_class, ExtendedEnvironment)
    assert isinstance(env_class.n_actions, int) and isinstance(env_class.n_obs, int)
    assert is_slow(env_class) == (env_class.__name__ in SLOW)
    assert issubclass(env_class, AdaptableEnvironment) == (env_class.__name__ in ADAPTABLE)


def test_battery_pairs_each_environment_with_its_negation():
    default = battery()
    assert len(default) == 2 * (len(NAMES) - len(SLOW))
    assert [e.__name__ for e in default[:4]] == [
        "FalseMemories",
        "minus_rewards(FalseMemories)",
        "IgnoreRewards",
        "minus_rewards(IgnoreRewards)",
    ]
    assert not any(is_slow(e) for e in default)
    everything = battery(include_slow=True)
    assert len(everything) == 2 * len(NAMES)
    assert {e.__name__ for e in everything} >= {f"minus_rewards({name})" for name in SLOW}


@by_name
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rewards_stay_in_minus_one_to_one_and_observations_in_range(env_class, seed):
    for agent_class in (RandomAgent, QLearner):
        registry = []

        class Watched(agent_class):
            def train(self, o_prev, a, r, o_next):
                registry.append((o_prev, o_next))
                super().train(o_prev, a, r, o_next)

        result = run_environment(env_class, Watched, 30, seed=seed)
        assert np.all(np.abs(result["rewards"]) <= 1)
        assert all(0 <= o < env_class.n_obs for pair in registry for o in pair)


@by_name
def test_same_seed_same_run_and_minus_rewards_negates_it(env_class):
    first = run_environment(env_class, RandomAgent, 40, seed=11)["rewards"]
    again = run_environment(env_class, RandomAgent, 40, seed=11)["rewards"]
    negated = run_environment(minus_rewards(env_class), RandomAgent, 40, seed=11)["rewards"]
    np.testing.assert_array_equal(first, again)
    # a random agent ignores rewards, so the negated run is the same run with rewards negated
    np.testing.assert_array_equal(negated, -first)


@pytest.mark.parametrize(
    "name",
    [
        "IgnoreObservations",
        "TemptingButton",
        "AfterImages",
        "CensoredObservation",
        "SelfRecognition",
    ],
)
def test_seed_drives_random_observations(name):
    env_class = envs.BY_NAME[name]

    def observations(seed):
        A = bind_agent(ConstantAgent, env_class.n_actions, env_class.n_obs, seed=0)
        env = env_class(A)
        env.seed(seed)
        return [env.start()] + [env.step(0)[1] for _ in range(60)]

    assert observations(1) == observations(1)
    assert observations(1) != observations(2)


def test_minus_rewards_class():
    negated = minus_rewards(envs.TemptingButton)
    assert negated is minus_rewards(envs.TemptingButton)
    assert negated.__name__ == "minus_rewards(TemptingButton)"
    assert (negated.n_actions, negated.n_obs) == (2, 2)
    assert is_slow(minus_rewards(envs.DejaVu)) and not is_slow(negated)


def test_minus_rewards_changes_what_a_learner_learns():
    plain = run_environment(envs.TemptingButton, QLearner, 3000, seed=0)["reward_per_step"]
    negated = run_environment(minus_rewards(envs.TemptingButton), QLearner, 3000, seed=0)
    assert plain < 0 and negated["reward_per_step"] > 0
    assert negated["reward_per_step"] != pytest.approx(-plain)


class Recorder(Agent):
    def __init__(self, n_actions, n_obs, seed=None, **hp):
        super().__init__(n_actions, n_obs, seed, **hp)
        self.log = []

    def act(self, obs):
        return len(self.log) % 2

    def train(self, o_prev, a, r, o_next):
        self.log.append(r)


TRAINED_REWARDS = {
    "IgnoreRewards": {0},
    "IgnoreRewards3": {0},
    "IgnoreRewards2": {-7},
    "IgnoreActions": {-7},
    "Repeater": {-7},
    "PunishNondeterministicAgent": {-7},
}


@pytest.mark.parametrize("name", sorted(TRAINED_REWARDS))
def test_adaptable_environments_split_step_as_definition_11(name):
    """``outcome`` never trains the copy; ``train_sim`` trains it on the reward it is given."""
    env_class = envs.BY_NAME[name]
    env = env_class(bind_agent(Recorder, 2, 1, seed=0))
    assert set(vars(env)) == {"sim"}  # __init__ only sets self.sim
    env.seed(0)
    env.start()
    for action in (0, 1, 1):
        before = list(env.sim.log)
        reward, obs = env.outcome(action)
        assert reward in (-1, 0, 1) and obs == 0
        assert env.sim.log == before
        env.train_sim(action, -7, obs)  # as if a combination had redefined the reward to -7
    assert set(env.sim.log) == TRAINED_REWARDS[name]


def test_incentivize_learning_rate_is_adaptable_with_a_learning_rate():
    env = envs.IncentivizeLearningRate(bind_agent(QLearner, 2, 1, seed=0, learning_rate=0.2))
    assert set(vars(env)) == {"sim"}
    assert env.sim.hyperparams["learning_rate"] == 0.1
