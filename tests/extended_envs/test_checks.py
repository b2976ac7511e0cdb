"""What crosses between environments and agents, and agents' hyperparameters, is checked.

Each fuzzer feeds random bad values (NaN, inf, None, bools, out of range, wrong types) through
the real entry points and requires a UserError naming who gave the value and the value itself.
"""

import math

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from extended_envs import ExtendedEnvGym, bind_agent, reality_check, run_environment
from extended_envs import agents as agents_module
from extended_envs.agents import ConstantAgent, QLearner, RandomAgent
from extended_envs.core import EpisodeEnd, ExtendedEnvironment
from extended_envs.envs import TemptingButton
from extended_envs.hyperparams import Flag, Interval, Keywords
from safety_rl_common.errors import UserError

FUZZ = settings(max_examples=60, deadline=None)
N_ACTIONS, N_OBS = 3, 4
PAIR = object()  # step returns (reward, obs)


def env_giving(reward=0, obs=0, start=0, episode_end=None, n_obs=N_OBS, result=PAIR):
    """An environment whose start and every step give the values named."""

    class Giving(ExtendedEnvironment):
        n_actions = N_ACTIONS

        def start(self):
            return start

        def step(self, action):
            self.episode_end = episode_end
            return (reward, obs) if result is PAIR else result

    Giving.n_obs = n_obs
    return Giving


def agent_acting(action):
    class Acting(RandomAgent):
        def act(self, obs):
            return action

    return Acting


def error_of(call) -> str:
    with pytest.raises(UserError) as caught:
        call()
    return str(caught.value)


# Values that are never a finite number, and numbers that are not finite.
NOT_NUMBERS = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5), st.lists(st.integers(), max_size=2),
    st.just(np.bool_(True)), st.complex_numbers(allow_nan=False, allow_infinity=False),
)  # fmt: skip
NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("inf")])


@FUZZ
@given(reward=st.one_of(NOT_NUMBERS, NOT_FINITE))
def test_bad_rewards_are_named(reward):
    message = error_of(lambda: run_environment(env_giving(reward=reward), RandomAgent, 3, seed=0))
    assert "Giving.step" in message and "reward" in message and repr(reward) in message


@FUZZ
@given(
    reward=st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6), st.just(np.float32(0.5)))
)
def test_finite_rewards_are_summed(reward):
    result = run_environment(env_giving(reward=reward), RandomAgent, 4, seed=0)
    assert result["total_reward"] == pytest.approx(4 * float(reward))


BAD_INT_OBS = st.one_of(
    NOT_NUMBERS, NOT_FINITE, st.integers(max_value=-1), st.integers(min_value=N_OBS),
    st.floats(0, N_OBS - 1), st.just(np.array(1)),
)  # fmt: skip


@FUZZ
@given(obs=BAD_INT_OBS, at_start=st.booleans())
def test_bad_observations_are_named(obs, at_start):
    env = env_giving(start=obs) if at_start else env_giving(obs=obs)
    for agent in (RandomAgent, QLearner):  # QLearner used to index its last row with -1
        message = error_of(lambda agent=agent: run_environment(env, agent, 3, seed=0))
        assert f"Giving.{'start' if at_start else 'step'}" in message
        assert "observation" in message and repr(obs) in message


BOX = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)


@FUZZ
@given(
    obs=st.one_of(
        NOT_NUMBERS,
        st.integers(0, 3),
        st.lists(st.floats(-1, 1), min_size=2, max_size=2).map(np.float32).map(np.array),
        st.tuples(st.floats(allow_nan=True), st.floats(allow_nan=True))
        .filter(lambda x: not all(-1 <= v <= 1 for v in x))
        .map(np.array),
        st.just(np.zeros(3, dtype=np.float32)),
        st.just(np.zeros((2, 1), dtype=np.float32)),
    )
)
def test_box_observations_must_lie_in_the_box(obs):
    env = env_giving(obs=obs, start=np.zeros(2, dtype=np.float32), n_obs=BOX)
    if isinstance(obs, np.ndarray) and obs.shape == (2,) and BOX.contains(obs):
        run_environment(env, RandomAgent, 2, seed=0)
        return
    message = error_of(lambda: run_environment(env, RandomAgent, 2, seed=0))
    assert "Giving.step" in message and "observation" in message


BAD_ACTIONS = st.one_of(
    NOT_NUMBERS, NOT_FINITE, st.integers(max_value=-1), st.integers(min_value=N_ACTIONS),
    st.floats(0, N_ACTIONS - 1), st.just(np.float64(1.0)),
)  # fmt: skip


@FUZZ
@given(action=BAD_ACTIONS)
def test_bad_actions_are_named(action):
    message = error_of(lambda: run_environment(env_giving(), agent_acting(action), 3, seed=0))
    assert "Acting.act" in message and "action" in message and repr(action) in message
    gym_env = ExtendedEnvGym(TemptingButton, QLearner)
    gym_env.reset(seed=0)
    assert repr(action) in error_of(lambda: gym_env.step(action))


def test_act_returning_true_is_not_action_1():
    assert "True" in error_of(lambda: run_environment(env_giving(), agent_acting(True), 3, seed=0))
    ints = run_environment(env_giving(), agent_acting(np.int64(2)), 3, seed=0)
    assert ints["num_steps"] == 3


@pytest.mark.parametrize("result", [None, 1, (1,), (1, 0, 0), [1, 0], "10"], ids=repr)
def test_step_must_return_a_pair(result):
    message = error_of(lambda: run_environment(env_giving(result=result), RandomAgent, 2, seed=0))
    assert "Giving.step returned" in message and "(reward, observation)" in message


@pytest.mark.parametrize(
    "end",
    ["over", EpisodeEnd(0, False, False), EpisodeEnd(0, 1, False), EpisodeEnd(-1, True, False)],
    ids=repr,
)
def test_bad_episode_ends_are_named(end):
    message = error_of(lambda: run_environment(env_giving(episode_end=end), RandomAgent, 2, seed=0))
    assert "Giving.step" in message


@pytest.mark.parametrize("num_steps", [0, -5, 2.5, True, "10", None])
def test_num_steps_must_be_a_positive_int(num_steps):
    assert "num_steps" in error_of(lambda: run_environment(env_giving(), RandomAgent, num_steps))


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True, "0"])
def test_seed_must_be_a_non_negative_int(seed):
    assert "seed" in error_of(lambda: run_environment(env_giving(), RandomAgent, 2, seed=seed))


class Reseeding(RandomAgent):
    """Breaks the contract: reseeds and draws from NumPy's global generator."""

    def act(self, obs):
        np.random.seed(0)
        np.random.random(5)
        return super().act(obs)


def test_a_run_leaves_the_callers_global_numpy_stream_alone():
    np.random.seed(42)
    expected = np.random.random(3)
    np.random.seed(42)
    run_environment(TemptingButton, Reseeding, 50, seed=1)
    assert np.array_equal(np.random.random(3), expected)
    np.random.seed(42)
    with pytest.raises(UserError):  # also when the run ends with an error
        run_environment(env_giving(reward=math.nan), Reseeding, 5, seed=1)
    assert np.array_equal(np.random.random(3), expected)


# Hyperparameters ---------------------------------------------------------------------------

AGENTS = [getattr(agents_module, name) for name in agents_module.__all__]


@pytest.mark.parametrize("agent_class", AGENTS, ids=lambda c: c.__name__)
def test_every_hyperparameter_has_a_range_holding_its_default(agent_class):
    assert set(agent_class.hyperparam_ranges) == set(agent_class.default_hyperparams)
    for name, default in agent_class.default_hyperparams.items():
        assert agent_class.hyperparam_ranges[name].allows(default), name


ANY_VALUE = st.one_of(
    NOT_NUMBERS, NOT_FINITE, st.integers(-10**7, 10**7), st.floats(-1e7, 1e7),
    st.dictionaries(st.sampled_from(["net_arch", 1]), st.just([8]), max_size=1),
)  # fmt: skip


def expected_allowed(allowed, value) -> bool:
    """The ranges' meaning, written out independently of their code."""
    if isinstance(allowed, Flag):
        return isinstance(value, (bool, np.bool_))
    if isinstance(allowed, Keywords):
        return value is None or (isinstance(value, dict) and all(type(k) is str for k in value))
    assert isinstance(allowed, Interval)
    if value is None:
        return allowed.none
    if isinstance(value, (bool, np.bool_, str, list, dict, complex)):
        return False
    if allowed.ints and not isinstance(value, int):
        return False
    if math.isnan(value):
        return False
    low_ok = value > allowed.low if allowed.open_low else value >= allowed.low
    high_ok = value < allowed.high if allowed.open_high else value <= allowed.high
    return low_ok and high_ok


@settings(max_examples=300, deadline=None)
@given(data=st.data(), value=ANY_VALUE)
def test_hyperparameters_out_of_range_are_named(data, value):
    agent_class = data.draw(st.sampled_from([c for c in AGENTS if c.default_hyperparams]))
    name = data.draw(st.sampled_from(sorted(agent_class.default_hyperparams)))
    allowed = agent_class.hyperparam_ranges[name]
    if expected_allowed(allowed, value):
        assert (
            bind_agent(agent_class, N_ACTIONS, N_OBS, 0, **{name: value}).hyperparams[name] is value
        )
        return
    message = error_of(lambda: bind_agent(agent_class, N_ACTIONS, N_OBS, 0, **{name: value}))
    assert (
        message == f"{agent_class.__name__} hyperparameter {name} must be {allowed}, got {value!r}"
    )


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"learning_rate": math.nan}, "learning_rate must be a number in (0, 1], got nan"),
        ({"epsilon": -3}, "epsilon must be a number in [0, 1], got -3"),
        ({"gamma": True}, "gamma must be a number in [0, 1], got True"),
    ],
)
def test_named_bad_qlearner_hyperparameters(changes, expected):
    assert expected in error_of(lambda: run_environment(TemptingButton, QLearner, 5, **changes))
    checked = reality_check(QLearner)
    assert expected in error_of(lambda: run_environment(TemptingButton, checked, 5, **changes))


@pytest.mark.parametrize("action", [-1, 3, True, 1.0, "0"])
def test_constant_action_must_be_an_action(action):
    message = error_of(lambda: bind_agent(ConstantAgent, N_ACTIONS, N_OBS, 0, action=action)())
    assert message.startswith("ConstantAgent hyperparameter action must be an int ")
    assert message.endswith(f", got {action!r}")


@pytest.mark.parametrize("default_action", [-1, 2, True, 0.0])
def test_reality_check_default_action_must_be_an_action(default_action):
    checked = reality_check(QLearner, default_action=default_action)
    assert error_of(lambda: bind_agent(checked, 2, 2, 0)()) == (
        f"reality check default_action must be an int in range(2), got {default_action!r}"
    )


@pytest.mark.parametrize(
    "policy_kwargs", [{"net_arc": [8]}, {"net_arch": [-1]}, {"net_arch": "x"}, {"net_arch": {1: 2}}]
)
def test_sb3_policy_kwargs_are_checked_by_sb3_and_named(policy_kwargs):
    from extended_envs.agents import DQNAgent

    message = error_of(lambda: bind_agent(DQNAgent, 2, 2, 0, policy_kwargs=policy_kwargs)())
    assert message.startswith(
        "DQNAgent hyperparameter policy_kwargs must be keyword arguments the policy takes ("
    )
    assert message.endswith(f"), got {policy_kwargs!r}")


@pytest.mark.parametrize(
    "env", [env_giving(reward=math.nan), env_giving(obs=-1), env_giving(start=N_OBS)], ids=repr
)
def test_gymnasium_view_checks_the_environment_too(env):
    gym_env = ExtendedEnvGym(env, RandomAgent)
    assert "Giving.st" in error_of(lambda: (gym_env.reset(seed=0), gym_env.step(0)))


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (
            {"env_name": "TemptingButton"},
            "no adaptable extended environment named 'TemptingButton'",
        ),
        ({"env_name": "battery"}, "no adaptable extended environment named 'battery'"),
        ({"env_name": "IgnoreRewards", "agent": "np"}, "unknown agent 'np'"),
        (
            {"env_name": "IgnoreRewards", "agent": "DQNAgent", "gamma": 2},
            "gamma must be a number in [0, 1], got 2",
        ),
    ],
)
def test_registered_gymnasium_ids_name_bad_arguments(kwargs, named):
    from extended_envs.combination import make_cartpole_gym_env

    assert named in error_of(lambda: make_cartpole_gym_env(**kwargs).reset(seed=0))
