"""Every registered ``extended_envs/*`` id works the way the Gymnasium ecosystem expects.

Driven by the registry, so an id registered later is covered too: ``check_env``, every render
mode, pickling and deepcopy after a reset (the copy continues exactly), the spec's JSON and
``gym.make(env.spec)``, SB3's ``make_vec_env``.
"""

from __future__ import annotations

import copy
import importlib.util
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import extended_envs  # registers the ids
import extended_envs.agents

IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("extended_envs/"))
HAS_PYGAME = importlib.util.find_spec("pygame") is not None
# Small, fast simulated agents; the ids' default (DQNAgent) is used by make_vec_env below.
FAST = {"agent": "RandomAgent"}


def test_the_ids_are_registered():
    assert IDS == [
        "extended_envs/CartPole-IgnoreRewards-v0",
        "extended_envs/CartPole-IncentivizeLearningRate-v0",
    ]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id):
    with gym.make(env_id) as env:
        check_env(env.unwrapped, skip_render_check=not HAS_PYGAME)


@pytest.mark.parametrize("env_id", IDS)
def test_every_render_mode_reaches_the_gymnasium_env(env_id):
    modes = gym.spec(env_id).make(**FAST).metadata["render_modes"]
    assert modes  # CartPole's own show through
    for mode in modes:
        env = gym.make(env_id, render_mode=mode, **FAST)
        assert env.render_mode == mode
        assert env.unwrapped.env_class.render_mode == mode  # CartPole's instance renders
    with pytest.raises(ValueError, match="render_mode='ansi' is not one of CartPole's"):
        gym.make(env_id, render_mode="ansi")


@pytest.mark.skipif(not HAS_PYGAME, reason="drawing CartPole needs pygame")
@pytest.mark.parametrize("env_id", IDS)
def test_rgb_array_frames(env_id):
    with gym.make(env_id, render_mode="rgb_array", **FAST) as env:
        env.reset(seed=0)
        frame = env.render()
        assert frame.ndim == 3 and frame.shape[2] == 3


def same_step(a, b):
    return np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize(
    "kwargs", [FAST, {"agent": "DQNAgent", "learning_starts": 10, "total_timesteps": 100}]
)
def test_pickle_and_deepcopy_after_reset_continue_exactly(env_id, kwargs):
    env = gym.make(env_id, **kwargs)
    fresh = pickle.loads(pickle.dumps(env))  # before any reset too
    fresh.reset(seed=0)
    env.reset(seed=3)
    actions = np.random.default_rng(0).integers(env.action_space.n, size=60)
    for action in actions[:30]:
        env.step(action)
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    for action in actions[30:]:
        step = env.step(action)
        assert all(same_step(step, other.step(action)) for other in copies)
    assert all(np.array_equal(env.reset()[0], other.reset()[0]) for other in copies)


@pytest.mark.parametrize("env_id", IDS)
def test_spec_serialises_and_makes_the_same_env(env_id):
    env = gym.make(env_id, **FAST)
    spec = gym.envs.registration.EnvSpec.from_json(env.spec.to_json())
    again = gym.make(spec)
    assert again.spec.to_json() == env.spec.to_json()
    first, _ = env.reset(seed=1)
    assert np.array_equal(first, again.reset(seed=1)[0])
    assert same_step(env.step(3), again.step(3))
    assert np.array_equal(gym.make(env.spec).reset(seed=1)[0], first)


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_make_vec_env(env_id):
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env(env_id, n_envs=2, seed=0)  # the id's default agent, DQNAgent
    vec.reset()
    obs, rewards, _, _ = vec.step(np.array([0, 3]))
    assert obs.shape == (2, *vec.observation_space.shape) and len(rewards) == 2
    model = DQN("MlpPolicy", make_vec_env(env_id, env_kwargs=FAST), learning_starts=20,
                policy_kwargs={"net_arch": [8]}, seed=0)  # fmt: skip
    model.learn(40)
    assert model.num_timesteps == 40


def test_adapter_of_a_library_environment_pickles_and_continues():
    from extended_envs import ExtendedEnvGym
    from extended_envs.agents import QLearner
    from extended_envs.envs import TemptingButton

    env = ExtendedEnvGym(TemptingButton, QLearner, use_reality_check=True, epsilon=0.2)
    env.reset(seed=5)
    for action in [0, 1, 1, 0, 1]:
        env.step(action)
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    for action in [1, 0, 0, 1, 1, 0] * 5:
        step = env.step(action)
        assert all(same_step(step, other.step(action)) for other in copies)


def test_the_previous_releases_namespace_is_gone():
    assert not [env_id for env_id in gym.registry if env_id.startswith("ExtendedEnvs/")]


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("agent", extended_envs.agents.__all__)
def test_every_agent_name_steps_or_is_refused_at_make_naming_those_that_work(env_id, agent):
    from extended_envs.combination import box_observation_agents
    from safety_rl_common.errors import UserError

    working = box_observation_agents()
    assert "QLearner" not in working and {"DQNAgent", "RandomAgent"} <= set(working)
    if agent not in working:
        # refused by gym.make, before anything runs, naming exactly the agents that work
        with pytest.raises(
            UserError, match=f"agent='{agent}' is tabular.*choose one of {', '.join(working)}$"
        ):
            gym.make(env_id, agent=agent)
        return
    with gym.make(env_id, agent=agent) as env:
        env.reset(seed=0)
        obs, reward, *_ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and np.isfinite(reward)
