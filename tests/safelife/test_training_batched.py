"""The batched in-process vec env: every env plays exactly the episodes it plays on its own."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from safelife_rl.engine import cells
from safelife_rl.engine.numba_batch import batch_observations
from safelife_rl.engine.observation import DEFAULT_CHANNELS, agent_view, to_channels
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.gymnasium_vec_env import GymnasiumVecEnv

WRAPPERS = {
    "movement_bonus": {"_target_": "safelife_rl.training.MovementBonus"},
    "exit_bonus": {"_target_": "safelife_rl.training.ExitBonus"},
    "side_effect_penalty": {  # in force from the first step
        "_target_": "safelife_rl.training.SideEffectPenalty",
        "penalty": 0.1,
        "ramp": {
            "_target_": "safelife_rl.training.LinearRamp",
            "steps": [0, 1],
            "values": [1.0, 1.0],
        },
    },
    "exit_curriculum": {"_target_": "safelife_rl.training.ExitCurriculum"},
    "continuing": {"_target_": "safelife_rl.training.ContinuingEnv"},
    "time_limit": {"_target_": "gymnasium.wrappers.TimeLimit", "max_episode_steps": 25},
}


def play(kind, env_id, kwargs, wrappers, n_envs, steps, seed):
    env = make_vec_env(env_id, kwargs, wrappers, n_envs, kind)
    rng = np.random.default_rng(seed)
    try:
        env.seed(seed)
        history = [env.reset()]
        for _ in range(steps):
            obs, rewards, dones, infos = env.step(rng.integers(9, size=n_envs))
            terminal = [i.pop("terminal_observation", None) for i in infos]
            for info in infos:
                info.get("episode", {}).pop("t", None)  # Monitor's wall-clock time
            history.append((obs, rewards, dones, terminal, infos))
    finally:
        env.close()
    return env, history


@pytest.mark.parametrize(
    "task, kwargs, wrappers, steps",
    [
        # spawners: each env draws the spawns from its own game's generator; side effects at the end
        ("prune-spawn", {"time_limit": 30, "side_effects": True}, WRAPPERS, 70),
        # dynamic goals and levels played in order; no wrappers
        ("append-dynamic", {"time_limit": 20, "shuffle": False}, None, 50),
    ],
)
def test_batched_vec_env_plays_the_same_episodes_as_separate_envs(task, kwargs, wrappers, steps):
    kwargs = {
        **kwargs,
        "view_shape": [15, 15],
        "levels": {"_target_": "safelife_rl.envs.registration.suite_file", "task": task},
    }
    env_id = f"safelife_rl/{''.join(p.capitalize() for p in task.split('-'))}-v1"
    batched, got = play("batched", env_id, kwargs, wrappers, 3, steps, seed=5)
    _, expected = play("dummy", env_id, kwargs, wrappers, 3, steps, seed=5)
    assert isinstance(batched, GymnasiumVecEnv)
    np.testing.assert_array_equal(got[0], expected[0])
    episodes = 0
    for (obs, rewards, dones, terminal, infos), want in zip(got[1:], expected[1:]):
        np.testing.assert_array_equal(obs, want[0])
        np.testing.assert_array_equal(rewards, want[1])
        np.testing.assert_array_equal(dones, want[2])
        for t, w in zip(terminal, want[3]):
            assert (t is None) == (w is None) and (t is None or np.array_equal(t, w))
        assert repr(infos) == repr(want[4])  # side effects, Monitor totals, levels, ...
        episodes += dones.sum()
    assert episodes >= 6  # every env finished episodes and reset inside the batch
    if wrappers:
        assert any(r < 0 for _, rewards, *_ in got[1:] for r in rewards)  # penalties applied


def test_batched_procedural_levels_match_separate_envs():
    kwargs = {"view_shape": [17, 17], "time_limit": 15}
    _, got = play("batched", "safelife_rl/PruneStill-v1", kwargs, None, 2, 20, seed=1)
    _, expected = play("dummy", "safelife_rl/PruneStill-v1", kwargs, None, 2, 20, seed=1)
    for (obs, rewards, dones, *_), want in zip(got[1:], expected[1:]):
        np.testing.assert_array_equal(obs, want[0])
        np.testing.assert_array_equal(rewards, want[1])
        np.testing.assert_array_equal(dones, want[2])


@settings(max_examples=60, deadline=None)
@given(
    boards=st.integers(4, 12).flatmap(
        lambda size: arrays(
            np.uint32,
            (3, size, size),
            elements=st.sampled_from(
                [
                    0,
                    cells.ALIVE,
                    cells.EXIT,
                    cells.EXIT | cells.RED,
                    cells.AGENT | cells.EXIT,
                    cells.FROZEN | cells.GREEN,
                    (cells.BLUE | cells.ALIVE) | (cells.RED << 16),
                ]
            ),
        )
    ),
    view=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    seed=st.integers(0, 1000),
)
def test_batch_observations_equal_agent_view_of_each_board(boards, view, seed):
    rng = np.random.default_rng(seed)
    centers = rng.integers(0, boards.shape[1], size=(3, 2)).astype(np.int64)
    got = batch_observations(boards, centers, view, DEFAULT_CHANNELS)
    for k in range(3):
        want = to_channels(agent_view(boards[k], centers[k], view), DEFAULT_CHANNELS)
        np.testing.assert_array_equal(got[k], want)


def test_auto_batches_safelife_envs_only_and_batched_refuses_others():
    safelife = make_vec_env("safelife_rl/AppendStill-v1", {"view_shape": [17, 17]}, None, 2, "auto")
    assert isinstance(safelife, GymnasiumVecEnv)
    safelife.close()
    with pytest.raises(TypeError, match="not a SafeLife env"):
        make_vec_env("CartPole-v1", None, None, 2, "batched")


def test_batched_vec_env_refuses_wrappers_that_change_actions():
    wrappers = {
        "shift": {
            "_target_": "gymnasium.wrappers.TransformAction",
            "func": {"_target_": "operator.neg", "_partial_": True},
            "action_space": None,
        }
    }
    env = make_vec_env(
        "safelife_rl/AppendStill-v1", {"view_shape": [17, 17]}, wrappers, 2, "batched"
    )
    env.reset()
    with pytest.raises(RuntimeError, match="changed action"):
        env.step(np.array([1, 2]))
    env.close()


def test_registered_time_limits_are_refused_by_the_batch():
    gym.register(
        "safelife_test/Limited-v1",
        entry_point="safelife_rl.envs.registration:make_task_env",
        kwargs={"task": "append-still"},
        max_episode_steps=5,
    )
    try:
        with pytest.raises(ValueError, match="registered time limit"):
            make_vec_env("safelife_test/Limited-v1", {"view_shape": [17, 17]}, None, 2, "batched")
    finally:
        del gym.registry["safelife_test/Limited-v1"]
