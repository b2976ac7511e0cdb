"""The Gymnasium environment, driven by the registry."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import safelife_rl
from safelife_rl import TASKS, SafeLifeEnv
from safelife_rl.engine.replay import load_trace
from safelife_rl.envs.registration import ORIGINAL_SUITES, benchmark_file, suite_file
from safety_rl_common.errors import UserError

IDS = sorted(TASKS.values())
TASK_OF = {env_id: task for task, env_id in TASKS.items()}
RENDER_MODES = SafeLifeEnv.metadata["render_modes"]


def fixed_levels(env_id):
    """The original suite of the id's task, else ours: generating dynamic and navigation levels
    takes seconds each; the procedural default is checked in test_procgen_levels.py."""
    task = TASK_OF[env_id]
    return benchmark_file(task) if task in ORIGINAL_SUITES else suite_file(task)


@pytest.mark.parametrize("env_id", IDS)
def test_registered_envs_pass_gymnasium_checks(env_id):
    env = gym.make(env_id, levels=fixed_levels(env_id), time_limit=300)
    # with the env's spec, check_env also makes the env again in every render mode
    check_env(env.unwrapped)
    assert env.observation_space.shape == (15, 15, 19)
    assert env.action_space == gym.spaces.Discrete(9)
    assert env.spec.max_episode_steps == 300 == env.unwrapped.spec.max_episode_steps
    assert gym.make(env_id).spec.max_episode_steps == 1000  # the default time_limit


@pytest.mark.parametrize("env_id", IDS)
def test_spec_round_trip_and_pickling(env_id):
    env = gym.make(env_id, levels=fixed_levels(env_id), shuffle=True, time_limit=20)
    again = gym.make(env.spec)
    assert again.spec.max_episode_steps == 20
    assert again.spec.kwargs == env.spec.kwargs and again.unwrapped.time_limit == 20
    env.reset(seed=3)
    clone = pickle.loads(pickle.dumps(env))
    assert np.array_equal(rollout(env, 4, steps=25), rollout(again, 4, steps=25))
    assert np.array_equal(rollout(env, 5, steps=10), rollout(clone, 5, steps=10))
    env.reset(seed=0)
    truncated = [env.step(0)[3] for _ in range(20)]
    assert truncated == [False] * 19 + [True]  # at spec.max_episode_steps


@pytest.mark.parametrize("mode", RENDER_MODES)
@pytest.mark.parametrize("env_id", IDS)
def test_every_render_mode(env_id, mode, capsys):
    env = gym.make(env_id, levels=fixed_levels(env_id), render_mode=mode)
    env.reset(seed=0)
    env.step(0)
    frame = env.render()
    size = env.unwrapped.game.boards[0].shape
    if mode == "human":  # printed at the reset and the step; render() adds nothing
        assert frame is None and capsys.readouterr().out.count("\x1b[0m\n") == 2 * size[0]
        return
    frames = frame if mode.endswith("_list") else [frame]
    assert len(frames) == (2 if mode.endswith("_list") else 1)
    for frame in frames:
        if mode.startswith("ansi"):
            assert isinstance(frame, str) and frame.count("\n") == size[0] and "\x1b[" in frame
        else:
            assert frame.dtype == np.uint8 and frame.shape == (size[0] * 12, size[1] * 12, 3)
    if mode.endswith("_list"):
        assert env.render() == []  # render() hands the frames over once
    assert capsys.readouterr().out == ""


def test_unknown_render_mode_is_refused():
    with pytest.raises(UserError, match="render_mode must be one of"):
        gym.make(
            "safelife_rl/PruneStill-v1",
            levels=fixed_levels("safelife_rl/PruneStill-v1"),
            render_mode="rgb",
        )


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


def test_level_workers_inside_subprocess_vector_envs():
    """Vector envs run each env in a daemonic process, which may not start level workers:
    there ``workers=`` makes the same levels in the process itself."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    def make():
        return gym.make("safelife_rl/PruneStill-v1", workers=1)

    expected = np.stack([make().reset(seed=s)[0] for s in (7, 8)])
    sb3 = SubprocVecEnv([make, make], start_method="fork")
    sb3.seed(7)
    assert np.array_equal(sb3.reset(), expected)
    sb3.step(np.array([1, 2]))
    sb3.close()
    vec = gym.make_vec("safelife_rl/PruneStill-v1", 2, vectorization_mode="async", workers=1)
    assert np.array_equal(vec.reset(seed=7)[0], expected)
    vec.step(np.array([1, 2]))
    vec.close()


def test_level_workers_in_a_daemonic_process_warn_once(monkeypatch):
    import multiprocessing

    from safelife_rl.procgen import ProceduralLevels, source

    process = multiprocessing.current_process()
    monkeypatch.setattr(process, "_config", {**process._config, "daemon": True})
    monkeypatch.setattr(source, "_warned_daemonic", False)
    levels = ProceduralLevels("prune-still", workers=2)
    with pytest.warns(RuntimeWarning, match="daemonic"):
        level = levels.sample(np.random.default_rng(0))
    assert levels._pool is None
    again = ProceduralLevels("prune-still").sample(np.random.default_rng(0))
    assert np.array_equal(level.board, again.board)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        levels.sample(np.random.default_rng(1))  # no second warning


def test_exit_trace_through_the_env(tmp_path):
    """An exit trace played through the env: exiting pays +1 and ends the episode."""
    from pathlib import Path

    trace = Path(__file__).resolve().parents[1] / "data/safelife/traces/exit-append-still-020.npz"
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
        safelife_rl.envs.registration.benchmark_file("append-still")
    with pytest.raises(ValueError, match="unknown SafeLife task"):
        safelife_rl.envs.registration.benchmark_file("nope")
