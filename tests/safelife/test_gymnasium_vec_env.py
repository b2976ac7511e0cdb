"""SB3's VecEnv over a Gymnasium vector env steps exactly as SB3's DummyVecEnv of the same envs."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

from safelife_rl.envs.batched_vector_env import batch_infos
from safelife_rl.training.gymnasium_vec_env import GymnasiumVecEnv, unbatch_infos


def cartpole() -> gym.Env:
    return Monitor(gym.make("CartPole-v1", max_episode_steps=15))


def play(venv, steps: int) -> list:
    venv.seed(3)
    history = [(venv.reset(), [dict(i) for i in venv.reset_infos])]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, rewards, dones, infos = venv.step(rng.integers(2, size=venv.num_envs))
        for info in infos:
            info.get("episode", {}).pop("t", None)  # Monitor's wall-clock time
        history.append((obs, rewards, dones, infos, [dict(i) for i in venv.reset_infos]))
    return history


def test_steps_as_dummy_vec_env():
    vector = SyncVectorEnv([cartpole] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
    venv = GymnasiumVecEnv(vector)
    got, want = play(venv, 60), play(DummyVecEnv([cartpole] * 3), 60)
    assert sum(step[2].sum() for step in got[1:]) >= 6  # episodes ended, by failing and by time
    for step, expected in zip(got, want):
        assert repr(step) == repr(expected)  # arrays, dtypes, info keys, values and their types
    assert venv.env_is_wrapped(Monitor) == [True] * 3
    assert venv.env_is_wrapped(gym.wrappers.RecordVideo, indices=[1]) == [False]
    assert venv.get_attr("spec", [2])[0].id == "CartPole-v1"
    venv.set_attr("marker", 7, indices=[0])
    assert venv.env_method("get_wrapper_attr", "marker", indices=0) == [7]
    venv.close()


def test_needs_same_step_autoreset():
    with pytest.raises(ValueError, match="SAME_STEP"):
        GymnasiumVecEnv(SyncVectorEnv([cartpole] * 2))


SOME_KEYS = [  # an episode ended in some envs: keys missing, values of other types
    {"n": 1, "x": 0.5, "ok": True, "name": "a", "flag": np.bool_(True), "episode": {"r": 1.0}},
    {"x": 2, "grid": np.ones((2, 3), np.uint8), "f32": np.float32(1.5), "final_obs": [1]},
    {"n": 2.7, "episode": {"r": 2.0, "l": 3}, "name": None, "final_info": {"n": 4}},
]
EVERY_KEY = [  # most steps: every env has the same keys
    {"n": i, "x": i / 2, "ok": i > 0, "name": f"l{i}", "grid": np.full(2, i), "d": {"r": -i}}
    for i in range(3)
]


@pytest.mark.parametrize("infos", [SOME_KEYS, EVERY_KEY])
def test_batch_infos_batches_as_gymnasium_add_info(infos):
    vector = SyncVectorEnv([cartpole] * 3)
    want: dict = {}
    for i, info in enumerate(infos):
        want = vector._add_info(want, info, i)
    got = batch_infos(infos)
    assert repr(got) == repr(want)
    masks = [value for key, value in got.items() if key.startswith("_")]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(masks) for b in masks[:i])


def test_unbatch_infos_gives_each_env_its_info():
    some = unbatch_infos(batch_infos(SOME_KEYS), 3)
    assert some[1]["x"] == 2 and some[2]["episode"] == {"r": 2.0, "l": 3}
    assert repr(unbatch_infos(batch_infos(EVERY_KEY), 3)) == repr(EVERY_KEY)
