"""G*E (Definition 12), the Gymnasium adapter and the registered CartPole combinations."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from extended_envs import Agent, ExtendedEnvGym, bind_agent, combine, run_environment
from extended_envs.agents import ConstantAgent, DQNAgent, QLearner, RandomAgent
from extended_envs.combination import cartpole_combination
from extended_envs.envs import IgnoreRewards, TemptingButton

CARTPOLE_IGNORE = cartpole_combination("IgnoreRewards")


class Recorder(Agent):
    """Acts ``action``; records what it is trained on."""

    default_hyperparams = {"action": 0, "learning_rate": 0.5}

    def __init__(self, n_actions, n_obs, seed=None, **hyperparams):
        super().__init__(n_actions, n_obs, seed, **hyperparams)
        self.trained = []

    def act(self, obs):
        return self.hyperparams["action"]

    def train(self, o_prev, a, r, o_next, terminated=False, truncated=False):
        self.trained.append((o_prev.copy(), a, r, o_next.copy(), terminated, truncated))


class FourArgumentAgent(Agent):
    """The paper's agent interface, without episode ends."""

    def act(self, obs):
        return 0

    def train(self, o_prev, a, r, o_next):
        pass


def test_spaces_of_cartpole_times_ignore_rewards():
    assert CARTPOLE_IGNORE.n_actions == 2 * IgnoreRewards.n_actions
    assert CARTPOLE_IGNORE.n_obs.shape == (4 + IgnoreRewards.n_obs,)
    assert CARTPOLE_IGNORE.__name__ == "CartPole_IgnoreRewards"


def test_simulation_is_trained_as_definition_12_says():
    A = bind_agent(Recorder, 4, CARTPOLE_IGNORE.n_obs, seed=0, action=3)  # a_G = 1, a_E = 1
    env = CARTPOLE_IGNORE(A)
    env.seed(0)
    obs = env.start()
    ends = 0
    for _ in range(60):
        reward, next_obs = env.step(1)  # a_G = 1, a_E = 0: never what the simulation does
        o_prev, a, r, o_next, terminated, truncated = env.E_instance.sim.agent.trained[-1]
        assert np.array_equal(o_prev, obs)
        assert (a, r) == (1, 0)  # (a_G, a_E) = (1, 0) joined; IgnoreRewards trains on reward 0
        assert reward == -1  # min(r_G - 1, -1) with r_G = 1
        end = env.episode_end
        if end is None:
            assert np.array_equal(o_next, next_obs) and not (terminated or truncated)
        else:  # pushing right topples the pole: trained on the fall, then a fresh pole
            ends += 1
            assert (terminated, truncated) == (True, False) == (end.terminated, end.truncated)
            assert np.array_equal(o_next, end.final_obs)
            assert abs(o_next[2]) > 0.2 and abs(next_obs[2]) < 0.05  # pole angle: fallen, new
            assert np.array_equal(o_next[4:], next_obs[4:])  # the same E-observation
        obs = next_obs
    assert ends >= 2


def test_true_agent_sees_the_same_episode_ends_as_its_simulation():
    instances = []

    class Registered(Recorder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            instances.append(self)

    result = run_environment(CARTPOLE_IGNORE, Registered, 60, seed=0, action=1)
    true_agent, sim = instances  # run_environment creates the true agent first
    n_episodes = len(result["env_summary"]["episode_lengths"])
    assert n_episodes >= 2
    assert sum(record[4] for record in true_agent.trained) == n_episodes
    for mine, its in zip(true_agent.trained, sim.trained, strict=True):
        assert np.array_equal(mine[3], its[3]) and mine[4:] == its[4:]  # o_next and flags


def test_agents_without_episode_ends_train_on_the_final_observation():
    trained = []

    class FourArguments(FourArgumentAgent):
        def train(self, o_prev, a, r, o_next):
            trained.append(o_next.copy())

    result = run_environment(CARTPOLE_IGNORE, FourArguments, 60, seed=0)
    assert len(result["env_summary"]["episode_lengths"]) >= 2
    fallen = [o for o in trained if abs(o[2]) > 0.2]  # CartPole's final observations
    assert len(fallen) >= len(result["env_summary"]["episode_lengths"])
    assert run_environment(TemptingButton, FourArgumentAgent, 5, seed=0)["num_steps"] == 5


def test_matching_joystick_earns_the_gym_reward_and_episodes_are_recorded():
    result = run_environment(CARTPOLE_IGNORE, ConstantAgent, 300, seed=1, action=2)
    assert result["total_reward"] == 300  # CartPole pays 1 per step
    lengths = result["env_summary"]["episode_lengths"]
    assert len(lengths) > 0 and sum(lengths) <= 300
    assert result["env_summary"]["episode_returns"] == [float(n) for n in lengths]


def test_incentivize_learning_rate_simulates_half_the_learning_rate():
    combination = cartpole_combination("IncentivizeLearningRate")
    A = bind_agent(Recorder, 4, combination.n_obs, seed=0)
    env = combination(A)
    assert env.E_instance.sim.agent.hyperparams["learning_rate"] == 0.25
    assert A.hyperparams["learning_rate"] == 0.5


def test_same_seed_same_run():
    kwargs = {"learning_starts": 20, "total_timesteps": 200, "policy_kwargs": {"net_arch": [8]}}
    first = run_environment(CARTPOLE_IGNORE, DQNAgent, 200, seed=3, **kwargs)
    second = run_environment(CARTPOLE_IGNORE, DQNAgent, 200, seed=3, **kwargs)
    assert np.array_equal(first["rewards"], second["rewards"])
    assert first["env_summary"] == second["env_summary"]


def test_discrete_observation_gym_env_is_one_hot():
    C = combine("FrozenLake-v1", IgnoreRewards)
    assert C.n_obs.shape == (16 + 1,)
    env = C(bind_agent(RandomAgent, C.n_actions, C.n_obs, seed=0))
    env.seed(0)
    observations = [env.start()] + [env.step(a % C.n_actions)[1] for a in range(40)]
    for obs in observations:
        assert obs[:16].sum() == 1 and set(np.unique(obs[:16])) <= {0.0, 1.0}
        assert obs[16] == 1.0
    assert any(obs[0] != 1.0 for obs in observations)  # the agent moved off the start square


def test_only_adaptable_environments_combine():
    with pytest.raises(TypeError, match="AdaptableEnvironment"):
        combine("CartPole-v1", TemptingButton)
    with pytest.raises(TypeError, match="discrete actions"):
        combine("Pendulum-v1", IgnoreRewards)


def test_gym_adapter_passes_the_checker_and_continues_across_resets():
    env = ExtendedEnvGym(TemptingButton, QLearner)
    check_env(env, skip_render_check=True)
    env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(0)
    again, _ = env.reset()
    assert again == obs  # no seed: the same interaction continues
    with pytest.raises(ValueError, match="invalid action"):
        env.step(5)


@pytest.mark.parametrize("name", ["IgnoreRewards", "IncentivizeLearningRate"])
def test_registered_ids_train_with_sb3(name):
    from stable_baselines3 import DQN

    env = gym.make(f"extended_envs/CartPole-{name}-v0", agent="RandomAgent")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    ended = 0
    for _ in range(300):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert reward in (1.0, -1.0)
        if terminated or truncated:  # CartPole's episode ends are Gymnasium episode ends,
            ended += 1  # with the final observation; reset() gives the new episode's first
            assert abs(obs[2]) > 0.2 or abs(obs[0]) > 2.4 or truncated
            first, _ = env.reset()
            assert abs(first[2]) < 0.05 and np.array_equal(first[4:], obs[4:])
    assert ended >= 2
    model = DQN("MlpPolicy", env, learning_starts=50, policy_kwargs={"net_arch": [8]}, seed=0)
    model.learn(200)
    assert model.num_timesteps == 200


def test_unknown_agent_name_is_refused():
    with pytest.raises(ValueError, match="unknown agent"):
        gym.make("extended_envs/CartPole-IgnoreRewards-v0", agent="DQN")
