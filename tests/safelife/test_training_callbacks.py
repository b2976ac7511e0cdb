"""Callbacks and episode metrics: TensorBoard scalars read back with EventAccumulator."""

import math

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.training import AtomicCheckpoint, EpisodeLogger, SafeLifeCNN
from safelife_rl.training.callbacks import checkpoints
from safelife_rl.training.evaluation import episode_scalars, side_effect_scalars
from safety_rl_common.errors import UserError

EFFECTS = {"life-green": [3.0, 12.0], "spawner-yellow": [1.0, 0.5], "crate-gray": [2.0, 0.0]}


class InjectSideEffects(gym.Wrapper):
    """Stands in for ``SafeLifeEnv(side_effects=True)``: side effects in the final info."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["side_effects"] = EFFECTS
        return obs, reward, terminated, truncated, info


def test_side_effect_scalars_normalize_like_the_original():
    scalars = side_effect_scalars(EFFECTS)
    assert scalars["life-green"] == 3.0 and scalars["crate-gray"] == 2.0
    assert scalars["normalized/green"] == 0.25
    assert scalars["normalized/yellow"] == 1.0  # the inaction total counts as at least 1
    # weighted green 1, yellow 2: (3 + 2) / max(12 + 1, 1)
    assert scalars["normalized/total"] == pytest.approx(5 / 13)


def test_episode_scalars_prefer_the_env_reward_and_add_the_score():
    info = {
        "reward": 4.0,
        "length": 500,
        "success": True,
        "performance": 0.6,
        "side_effects": EFFECTS,
        "episode": {"r": 2.5, "l": 500, "t": 1.0},
    }
    scalars = episode_scalars(info)
    assert scalars["reward"] == 4.0 and scalars["shaped_reward"] == 2.5
    assert scalars["length"] == 500 and scalars["success"] == 1.0
    assert scalars["score"] == pytest.approx(75 * 0.6 + 25 * 0.5 - 200 * 5 / 13)
    plain = {k: v for k, v in info.items() if k != "side_effects"}
    assert not {k for k in episode_scalars(plain) if "side_effects" in k or k == "score"}


def test_episode_logger_writes_every_episode_with_side_effects(tmp_path, benchmarks):
    levels = load_levels(benchmarks / "append-still.npz")[:4]

    def make():
        env = SafeLifeEnv(levels, view_shape=(17, 17), time_limit=25, shuffle=True)
        return Monitor(InjectSideEffects(env))

    model = PPO(
        "CnnPolicy",
        DummyVecEnv([make, make]),
        n_steps=25,
        batch_size=25,
        n_epochs=1,
        seed=0,
        policy_kwargs={
            "features_extractor_class": SafeLifeCNN,
            "net_arch": [],
            "features_extractor_kwargs": {"features_dim": 16, "conv_channels": (4, 8, 8)},
        },
    )
    model.set_logger(configure(str(tmp_path), ["tensorboard"]))
    model.learn(100, callback=EpisodeLogger())
    model.logger.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {
        "episode/reward",
        "episode/length",
        "episode/shaped_reward",
        "episode/success",
        "episode/performance",
        "episode/score",
        "side_effects/life-green",
        "side_effects/crate-gray",
        "side_effects/normalized/green",
        "side_effects/normalized/total",
    } <= tags
    lengths = events.Scalars("episode/length")
    # 100 steps over 2 envs: two 25-step episodes each, logged at the step count they end on
    assert [e.value for e in lengths] == [25.0] * 4
    assert [e.step for e in lengths] == [50, 50, 100, 100]
    assert all(e.value == 2.0 for e in events.Scalars("side_effects/crate-gray"))
    assert all(0 <= e.value <= 1 for e in events.Scalars("episode/performance"))
    assert all(math.isfinite(e.value) for e in events.Scalars("episode/shaped_reward"))
    # Without training wrappers the shaped reward is the env's own.
    rewards = [e.value for e in events.Scalars("episode/reward")]
    assert rewards == [e.value for e in events.Scalars("episode/shaped_reward")]


def test_checkpoints_are_whole_and_pruned(tmp_path):
    env = DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1"))])
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )
    model.learn(160, callback=AtomicCheckpoint(tmp_path, save_every=32, keep=2))
    saved = checkpoints(tmp_path / "checkpoints")
    assert [p.name for p in saved] == ["model_128_steps.zip", "model_160_steps.zip"]
    assert not list((tmp_path / "checkpoints").glob(".*"))  # no temporary files left
    assert PPO.load(saved[-1]).num_timesteps == 160
    (tmp_path / "checkpoints" / "model_99_steps.zip.bak").write_text("not a checkpoint")
    assert checkpoints(tmp_path / "checkpoints") == saved
    with pytest.raises(UserError, match="save_every"):
        AtomicCheckpoint(tmp_path, save_every=0)


def test_cnn_matches_the_original_layout():
    space = gym.spaces.Box(0, 1, (25, 25, 15), np.uint8)
    net = SafeLifeCNN(space)
    convs = [m for m in net.cnn if hasattr(m, "kernel_size")]
    assert [(c.kernel_size[0], c.stride[0], c.out_channels) for c in convs] == [
        (5, 2, 32),
        (3, 2, 64),
        (3, 1, 64),
    ]
    assert net.dense[0].in_features == 64 * 3 * 3 and net.features_dim == 512
    import torch

    out = net(torch.ones(7, 25, 25, 15))
    assert out.shape == (7, 512) and (out >= 0).all()
    small = SafeLifeCNN(gym.spaces.Box(0, 1, (15, 15, 19), np.uint8))  # padded to 17x17
    assert small.padding == (1, 1, 1, 1) and small(torch.ones(2, 15, 15, 19)).shape == (2, 512)
    with pytest.raises(ValueError, match="height, width, channels"):
        SafeLifeCNN(gym.spaces.Box(0, 1, (25, 25), np.uint8))


def test_pruning_never_deletes_through_a_symlinked_checkpoints_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    precious = [elsewhere / f"model_{n}_steps.zip" for n in (1, 2, 3)]
    for path in precious:
        path.write_text("someone else's file")
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(elsewhere)
    env = DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1"))])
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )
    with pytest.raises(UserError, match="checkpoints is a symbolic link"):
        model.learn(96, callback=AtomicCheckpoint(run, save_every=32, keep=1))
    assert all(p.read_text() == "someone else's file" for p in precious)
    # without pruning the linked folder is used, and nothing in it deleted
    model.learn(96, callback=AtomicCheckpoint(run, save_every=32, keep=0))
    assert all(p.exists() for p in precious) and len(checkpoints(elsewhere)) == 6


def test_remove_in_folder_refuses_a_linked_folder_and_removes_links_not_targets(tmp_path):
    from safety_rl_common.files import remove_in_folder

    target = tmp_path / "target"
    target.mkdir()
    (target / "a").write_text("kept")
    (tmp_path / "link").symlink_to(target)
    assert not remove_in_folder(tmp_path / "link", "a") and (target / "a").exists()
    (tmp_path / "file_link").symlink_to(target / "a")
    assert remove_in_folder(tmp_path, "file_link") and (target / "a").exists()
    assert not (tmp_path / "file_link").is_symlink()
    assert remove_in_folder(target, "a") and not (target / "a").exists()
    with pytest.raises(ValueError, match="not a file name"):
        remove_in_folder(tmp_path, "../x")


def test_a_signal_stops_training_at_the_next_rollout_boundary():
    import os
    import signal

    from stable_baselines3.common.callbacks import BaseCallback

    from safelife_rl.training.callbacks import RunStopped, StopOnSignal

    class TerminateAt(BaseCallback):
        def _on_step(self):
            if self.num_timesteps == 40:
                os.kill(os.getpid(), signal.SIGTERM)
            return True

    model = PPO(
        "MlpPolicy",
        DummyVecEnv([lambda: gym.make("CartPole-v1")]),
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )
    with StopOnSignal() as stop:
        model.learn(10_000, callback=[stop, TerminateAt()])
        # the rollout of steps 33-64 is collected and trained on; training stops one step
        # into the next (SB3 stops only from a step)
        assert stop.stopped and model.num_timesteps == 65 and model._n_updates == 2
        # outside learning (the final save, evaluation, plots) a signal ends the run at once
        stop.phase = "evaluating"
        with pytest.raises(RunStopped, match="stopped by SIGTERM while evaluating"):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
