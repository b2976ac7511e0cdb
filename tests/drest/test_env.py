import pickle
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import SyncVectorEnv

import drest  # noqa: F401  (registers the ids)
from drest.dynamics import DOWN, LEFT, RIGHT, UP
from drest.env import ProceduralGridworldEnv, ShutdownGridworldEnv
from drest.generator import GeneratorConfig, generate
from drest.registration import ENV_IDS, PROCEDURAL_ID
from drest.tabular import max_coins_by_length
from drest.worlds import builtin

ALL_IDS = list(ENV_IDS.values()) + [PROCEDURAL_ID]


def play(env, actions):
    env.reset(seed=0)
    total, info = 0.0, {}
    for i, a in enumerate(actions):
        _, r, terminated, truncated, info = env.step(a)
        total += r
        assert terminated == (i == len(actions) - 1)
        assert not truncated
    return total, info


# the env's own render modes, and those gym.make adds (Gymnasium's RenderCollection)
RENDER_MODES = ShutdownGridworldEnv.metadata["render_modes"] + ["ansi_list", "rgb_array_list"]


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_registered_envs_pass_check_env(env_id, capsys):
    for obs_type in (
        ("image", "pixels") if env_id == PROCEDURAL_ID else ("vector", "image", "pixels")
    ):
        env = gym.make(env_id, obs_type=obs_type)
        check_env(env.unwrapped)  # with the spec: every render mode, made again from it


@pytest.mark.parametrize("mode", RENDER_MODES)
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_every_render_mode(env_id, mode, capsys):
    env = gym.make(env_id, render_mode=mode)
    env.reset(seed=0)
    env.step(UP)
    frame = env.render()
    if mode == "human":  # printed at the reset and the step; render() adds nothing
        assert frame is None and capsys.readouterr().out.count("moves left") == 2
        return
    frames = frame if mode.endswith("_list") else [frame]
    assert len(frames) == (2 if mode.endswith("_list") else 1)
    for frame in frames:
        if mode.startswith("ansi"):
            assert isinstance(frame, str) and "A" in frame
        else:
            assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_spec_round_trip_and_pickling(env_id):
    def rollout(env, seed):
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        seq = [obs]
        for _ in range(6):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            seq += [obs, reward]
            if terminated or truncated:
                break
        return seq

    env = gym.make(env_id, obs_type="image")
    again = gym.make(env.spec)
    assert again.spec.kwargs == env.spec.kwargs
    assert all(np.array_equal(a, b) for a, b in zip(rollout(env, 2), rollout(again, 2)))
    clone = pickle.loads(pickle.dumps(env))
    assert all(np.array_equal(a, b) for a, b in zip(rollout(env, 3), rollout(clone, 3)))


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_same_seed_same_rollout_and_renders(env_id):
    def rollout():
        env = gym.make(env_id, render_mode="rgb_array")
        env.action_space.seed(3)
        obs, _ = env.reset(seed=5)
        seq = [obs]
        done = False
        while not done:
            obs, r, term, trunc, _ = env.step(env.action_space.sample())
            seq += [obs, r]
            done = term or trunc
        frame = env.render()
        assert frame.dtype == np.uint8 and frame.ndim == 3
        return seq

    a, b = rollout(), rollout()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_example_scripted_trajectories():
    env = ShutdownGridworldEnv("example")
    # short: left, left, up, up collects C2 on move 4, then shutdown
    total, info = play(env, [LEFT, LEFT, UP, UP])
    assert total == 2.0 and info["trajectory_length"] == 4
    assert info["discounted_coins"] == pytest.approx(2 * 0.95**3)
    # long: up, right, right, down presses B4 on the last default move; then up x4 gets C3
    total, info = play(env, [UP, RIGHT, RIGHT, DOWN, UP, UP, UP, UP])
    assert total == 3.0 and info["trajectory_length"] == 8
    assert info["discounted_coins"] == pytest.approx(3 * 0.95**7)
    # walls and edges block, and a bump uses up no move: right into the wall, down off the
    # edge, then the four moves to C2 still fit; the bumps still count as time steps
    total, info = play(env, [RIGHT, DOWN, LEFT, LEFT, UP, UP])
    assert total == 2.0 and info["trajectory_length"] == 4
    assert info["discounted_coins"] == pytest.approx(2 * 0.95**5)


def test_bumps_use_moves_when_the_spec_says_so():
    spec = replace(builtin("example"), bumps_use_moves=True)
    env = ShutdownGridworldEnv(spec)
    env.reset()
    obs, *_ = env.step(RIGHT)
    obs, *_ = env.step(DOWN)
    assert obs.tolist() == [2, 4, 1, 1, 1, 1]
    total, info = play(env, [RIGHT, DOWN, LEFT, LEFT])
    assert total == 0.0 and info["trajectory_length"] == 4


def test_endless_bumping_is_truncated_without_a_length():
    env = ShutdownGridworldEnv("example", max_steps=5)
    env.reset()
    for i in range(5):
        _, _, terminated, truncated, info = env.step(DOWN)  # off the edge, for ever
    assert not terminated and truncated and "trajectory_length" not in info
    with pytest.raises(RuntimeError):
        env.step(UP)
    with pytest.raises(ValueError, match="max_steps"):
        ShutdownGridworldEnv("example", max_steps=0)


def test_vector_observation_tracks_coins_and_button():
    env = ShutdownGridworldEnv("example")
    obs, _ = env.reset()
    assert obs.tolist() == [2, 4, 1, 1, 1, 1]  # x, y, C3, C2, C1 flags, button flag
    for a in (UP, RIGHT, RIGHT, DOWN):
        obs, *_ = env.step(a)
    assert obs.tolist() == [4, 4, 1, 1, 1, 0]


def test_image_observation_channels():
    env = ShutdownGridworldEnv("example", obs_type="image")
    obs, _ = env.reset()
    assert obs.shape == (5, 5, 5)
    assert obs[1, 0, 4] == 3 and obs[2, 4, 4] == 4 and obs[3, 4, 2] == 1
    assert np.all(obs[4] == 4)


def test_invalid_action_and_step_after_end():
    env = ShutdownGridworldEnv("lopsided")
    env.reset()
    for bad in (4, -1, 1.5, "up"):
        with pytest.raises(ValueError, match="invalid action"):
            env.step(bad)
    env.step(DOWN)
    env.step(RIGHT)  # C1 on the second and last move
    with pytest.raises(RuntimeError):
        env.step(UP)


def test_pickle_and_sync_vector_env():
    env = gym.make("drest/Example-v0")
    env.reset(seed=0)
    clone = pickle.loads(pickle.dumps(env))
    assert np.array_equal(clone.step(UP)[0], env.step(UP)[0])
    venv = SyncVectorEnv([lambda: gym.make("drest/Lopsided-v0", x=0.5) for _ in range(2)])
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (2, 5)  # x, y, Cx, C1, B2
    venv.close()


def test_generator_guarantees():
    rng = np.random.default_rng(0)
    for _ in range(30):
        spec = generate(rng)
        m = max_coins_by_length(spec)
        assert len(m) >= 2 and min(m.values()) > 0


def test_procedural_env_new_world_only_at_meta_episode_start():
    env = ProceduralGridworldEnv(GeneratorConfig())
    env.reset(seed=1)
    first = env.spec_grid
    env.reset(options={"meta_episode_start": False})
    assert env.spec_grid == first
    worlds = set()
    for _ in range(5):
        env.reset(options={"meta_episode_start": True})
        worlds.add(env.spec_grid)
    assert len(worlds) > 1


def test_button_on_last_default_move_extends_episode():
    env = ShutdownGridworldEnv(builtin("lopsided"))
    # B2 is at (1, 1); agent at (2, 2): left then up presses it on move 2 = default length
    total, info = play(env, [LEFT, UP, LEFT, UP])
    assert info["trajectory_length"] == 4 and total == 1.0  # Cx (x=1) at (0, 0) on move 4


class CoinEnv(gym.Env):
    """Not a drest env: one step, ``coin`` paid, trajectory length 1 or 2 (the action)."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, coin=1.0):
        self.coin = coin

    def reset(self, *, seed=None, options=None):
        return 0, {}

    def step(self, action):
        return 0, self.coin, True, False, {"trajectory_length": int(action) + 1}


def test_the_wrapper_on_an_env_that_is_not_ours():
    from drest.wrapper import DrestRewardWrapper
    from safety_rl_common.errors import UserError

    with pytest.raises(UserError, match="pass num_lengths=k"):
        DrestRewardWrapper(CoinEnv(), meta_episode_size=4)
    env = DrestRewardWrapper(CoinEnv(), meta_episode_size=4, num_lengths=2, m="estimate")
    env.reset()
    assert env.step(0)[1] == pytest.approx(1.0)  # m(1) estimated from this return: 1
    negative = DrestRewardWrapper(CoinEnv(-1.0), meta_episode_size=4, num_lengths=2)
    negative.reset()
    with pytest.raises(UserError, match="rewards >= 0"):
        negative.step(0)
    lopsided = DrestRewardWrapper(CoinEnv(-1.0), 4, reward="drest_lopsided", num_lengths=2)
    lopsided.reset()
    assert lopsided.step(0)[1] == pytest.approx(-1.0)
    with pytest.raises(UserError, match="m\\(l\\) must be positive"):
        DrestRewardWrapper(CoinEnv(), 4, num_lengths=2, m={1: 1.0, 2: 0.0})


def test_pixel_observations_are_the_image_planes_as_a_picture():
    image = gym.make("drest/Example-v0", obs_type="image")
    pixels = gym.make("drest/Example-v0", obs_type="pixels")
    planes, _ = image.reset(seed=0)
    picture, _ = pixels.reset(seed=0)
    height, width = planes.shape[1:]
    scale = -(-36 // min(height, width))
    assert picture.dtype == np.uint8 and picture.shape == (height * scale, width * scale, 5)
    assert min(picture.shape[:2]) >= 36 > min(picture.shape[:2]) - min(height, width)
    assert pixels.observation_space.contains(picture)
    top = image.observation_space.high.max()
    for r, c in [(0, 0), (height - 1, width - 1), (1, 2)]:
        cell = picture[r * scale : (r + 1) * scale, c * scale : (c + 1) * scale]
        assert (cell == np.rint(planes[:, r, c] * 255 / top).astype(np.uint8)).all()


def test_plain_cnn_policy_trains_on_procedural_pixels():
    from stable_baselines3 import PPO
    from stable_baselines3.common.preprocessing import is_image_space

    env = gym.make(PROCEDURAL_ID, obs_type="pixels")
    assert is_image_space(env.observation_space)  # SB3's check of CnnPolicy input
    assert not is_image_space(gym.make(PROCEDURAL_ID).observation_space)  # the planes are not
    model = PPO("CnnPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0)
    model.learn(64)
    assert model.num_timesteps == 64
    action, _ = model.predict(env.reset(seed=1)[0], deterministic=True)
    assert env.action_space.contains(int(action))


def test_procedural_env_refuses_vector_observations_in_one_line():
    from safety_rl_common.errors import UserError

    with pytest.raises(
        UserError, match="obs_type must be image or pixels on drest/Procedural-v0.*got 'vector'"
    ):
        gym.make(PROCEDURAL_ID, obs_type="vector")
