"""Gymnasium's vector wrappers over every registered id's default ``gymnasium.make_vec``.

Driven by the registry: every id the three packages register. Without a device, ``make_vec``
follows Gymnasium's convention (NumPy in and out, ``NEXT_STEP`` autoreset), so each wrapper of
``gymnasium.wrappers.vector`` that fits the spaces must run; SafeLife ids give the batched
NumPy env, which plays exactly what a ``SyncVectorEnv`` of the same envs plays.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import vector as vw

import drest  # noqa: F401  (registers its ids)
import extended_envs  # noqa: F401
import safelife_rl  # noqa: F401
from safelife_rl.envs.batched_vector_env import BatchedVectorEnv
from safelife_rl.envs.registration import TASKS, make_task_env, suite_file

IDS = sorted(
    i for i in gym.registry if i.split("/")[0] in ("safelife_rl", "drest", "extended_envs")
)
N_ENVS, STEPS = 2, 12
# The shipped suites (fixed levels, quick to load) in short episodes, so that the autoreset is
# crossed within the steps; RandomAgent for the extended environments (no network to build).
KWARGS = {
    env_id: {"levels": str(suite_file(task)), "time_limit": 5} for task, env_id in TASKS.items()
}
KWARGS.update({env_id: {"agent": "RandomAgent"} for env_id in IDS if env_id.startswith("extended")})


def wrapped(envs: gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    """``envs`` inside every vector wrapper of Gymnasium that fits its spaces, stacked."""
    if isinstance(envs.single_observation_space, spaces.Box):
        envs = vw.FlattenObservation(envs)
        envs = vw.DtypeObservation(envs, np.float32)
        envs = vw.NormalizeObservation(envs)
        envs = vw.TransformObservation(envs, lambda o: np.clip(o, -5, 5))
    envs = vw.TransformReward(envs, lambda r: 2 * r)
    envs = vw.ClipReward(envs, -0.5, 0.5)
    envs = vw.NormalizeReward(envs)
    return vw.RecordEpisodeStatistics(envs)


def test_the_registry_has_all_three_packages():
    assert {i.split("/")[0] for i in IDS} == {"safelife_rl", "drest", "extended_envs"}


@pytest.mark.parametrize("env_id", IDS)
def test_vector_wrappers_run_over_the_default_make_vec(env_id):
    envs = wrapped(gym.make_vec(env_id, N_ENVS, **KWARGS.get(env_id, {})))
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, np.ndarray) and len(obs) == N_ENVS
    episodes = 0
    for _ in range(STEPS):
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert isinstance(obs, np.ndarray) and obs.shape[0] == N_ENVS
        assert isinstance(reward, np.ndarray) and np.isfinite(reward).all()
        assert reward.shape == terminated.shape == truncated.shape == (N_ENVS,)
        episodes += int(info["_episode"].sum()) if "episode" in info else 0
    if env_id in TASKS.values():
        assert episodes >= N_ENVS  # 12 steps of episodes of at most 5: two episodes each
    listed = vw.DictInfoToList(envs)
    assert len(listed.step(envs.action_space.sample())[4]) == N_ENVS
    envs.close()


@pytest.mark.parametrize("task", ["prune-spawn", "append-dynamic"])
def test_the_batched_default_plays_what_sync_plays(task):
    env_id = TASKS[task]
    levels = str(suite_file(task))
    batched = gym.make_vec(env_id, 3, levels=levels, time_limit=6)
    assert isinstance(batched, BatchedVectorEnv)
    sync = gym.vector.SyncVectorEnv([lambda: make_task_env(task, levels=levels, time_limit=6)] * 3)
    first, _ = batched.reset(seed=7)
    assert np.array_equal(first, sync.reset(seed=7)[0])
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(9, size=3)
        got, expected = batched.step(actions), sync.step(actions)
        for a, b in zip(got[:4], expected[:4], strict=True):
            assert np.array_equal(a, b)
        assert got[4].keys() == expected[4].keys()
        for key in ("performance", "points", "length"):
            assert np.array_equal(got[4][key], expected[4][key])
    for actions in ([0, 9, 1], [0, -1, 1]):
        with pytest.raises(ValueError, match="actions must be 3 ints"):
            batched.step(np.array(actions))
    with pytest.raises(ValueError, match=r"one action per env, shape \(3,\)"):
        batched.step(np.array([0, 1]))


def test_make_vec_numpy_and_device_options():
    clip = {"_target_": "gymnasium.wrappers.ClipReward", "min_reward": 0.25, "max_reward": 0.25}
    envs = gym.make_vec(
        "safelife_rl/PruneStill-v1",
        2,
        levels=str(suite_file("prune-still")),
        time_limit=4,
        max_episode_steps=2,
        training_wrappers={"clip": clip},
    )
    envs.reset(seed=0)
    rewards, truncated = [], []
    for action in [4, 4, 0, 1, 1, 1]:  # toggling cells in front earns or costs points
        _, reward, _, cut, _ = envs.step([action, action])
        rewards.append(reward)
        truncated.append(cut)
    # the clip wrapper on every env; the steps that reset (NEXT_STEP) give 0
    assert np.array_equal(rewards, np.repeat([[0.25], [0.25], [0], [0.25], [0.25], [0]], 2, 1))
    assert [cut.all() for cut in truncated] == [False, True, False, False, True, False]
    with pytest.raises(ValueError, match="compile: options of the device vector env"):
        gym.make_vec("safelife_rl/PruneStill-v1", 2, compile=True)
