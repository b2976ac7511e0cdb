"""The Gymnasium environment, driven by the registry."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import safelife_rl
from safelife_rl import TASKS, SafeLifeEnv
from safelife_rl.registration import ORIGINAL_SUITES, benchmark_file, suite_file
from safelife_rl.replay import load_trace

IDS = sorted(TASKS.values())
TASK_OF = {env_id: task for task, env_id in TASKS.items()}


@pytest.mark.parametrize("env_id", IDS)
def test_registered_envs_pass_gymnasium_checks(env_id):
    # Fixed levels (the original suite, else ours): generating dynamic and navigation levels
    # takes seconds each; the procedural default is checked in test_procgen_levels.py.
    task = TASK_OF[env_id]
    path = benchmark_file(task) if task in ORIGINAL_SUITES else suite_file(task)
    env = gym.make(env_id, levels=path)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.shape == (15, 15, 19)
    assert env.action_space == gym.spaces.Discrete(9)


def test_sb3_check_env(benchmarks):
    with pytest.warns(UserWarning):  # SB3 notes the binary image is smaller than 36x36
        sb3_check_env(SafeLifeEnv(benchmarks / "prune-still.npz"))


def rollout(env, seed, steps=60):
    obs, _ = env.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, 9, steps)
    trace, rewards = [obs], []
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(int(a))
        trace.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    return np.concatenate([np.stack(trace).ravel(), np.array(rewards)])


@pytest.mark.parametrize("env_id", ["safelife_rl/AppendSpawn-v1", "safelife_rl/PruneStill-v1"])
def test_same_seed_same_rollout(env_id):
    env_a, env_b = gym.make(env_id, shuffle=True), gym.make(env_id, shuffle=True)
    rollout(env_a, 5)  # history must not matter after a seeded reset
    assert np.array_equal(rollout(env_a, 7), rollout(env_b, 7))
    levels = {gym.make(env_id, shuffle=True).reset(seed=s)[1]["level"] for s in range(6)}
    assert len(levels) > 1


def test_spawner_randomness_follows_the_seed(benchmarks):
    env = SafeLifeEnv(benchmarks / "append-spawn.npz")
    runs = [rollout(env, seed, steps=40) for seed in (1, 1, 2)]
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes(mode):
    env = gym.make("safelife_rl/Navigation-v1", render_mode=mode,
                   levels=benchmark_file("navigation"))
    env.reset(seed=0)
    frame = env.render()
    if mode == "ansi":
        assert isinstance(frame, str) and frame.count("\n") == 26 and "\x1b[" in frame
    else:
        assert frame.dtype == np.uint8 and frame.shape == (26 * 12, 26 * 12, 3)
        assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 3


def test_pickling_and_vector_envs():
    env = gym.make("safelife_rl/AppendStill-v1")
    env.reset(seed=0)
    clone = pickle.loads(pickle.dumps(env))
    a = env.step(3)[0]
    b = clone.step(3)[0]
    assert np.array_equal(a, b)
    vec = gym.make_vec("safelife_rl/AppendStill-v1", num_envs=3)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (3, 15, 15, 19)
    obs, rewards, *_ = vec.step(np.array([1, 2, 3]))
    assert rewards.shape == (3,)


def test_exit_trace_through_the_env(tmp_path):
    """An exit trace played through the env: exiting pays +1 and ends the episode."""
    from pathlib import Path

    trace = Path(__file__).resolve().parents[3] / "shared/safelife/traces/exit-append-still-020.npz"
    level, actions, arrays = load_trace(trace)
    env = SafeLifeEnv([level])
    env.reset(seed=0)
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(int(a))
    assert terminated and not truncated and info["success"] and reward == 1.0
    assert np.array_equal(obs, arrays["obs_last"])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_time_limit_truncates(benchmarks):
    env = SafeLifeEnv(benchmarks / "prune-still.npz", time_limit=5)
    env.reset(seed=0)
    results = [env.step(0) for _ in range(5)]
    assert [r[3] for r in results] == [False] * 4 + [True]
    assert results[-1][4]["length"] == 5


@pytest.mark.parametrize("bad", [9, -1, 2.5, "up"])
def test_invalid_actions_raise(benchmarks, bad):
    env = SafeLifeEnv(benchmarks / "prune-still.npz")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action"):
        env.step(bad)


def test_custom_view_and_channels(benchmarks):
    env = SafeLifeEnv(benchmarks / "prune-still.npz", view_shape=(25, 25), channels=(0, 1, 4))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (25, 25, 3) and obs[12, 12, 1] == 1  # the agent is at the centre


def test_unknown_task_and_missing_levels(monkeypatch, tmp_path):
    monkeypatch.setenv("SAFELIFE_LEVELS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="SAFELIFE_LEVELS"):
        safelife_rl.registration.benchmark_file("append-still")
    with pytest.raises(ValueError, match="unknown SafeLife task"):
        safelife_rl.registration.benchmark_file("nope")
