"""SB3 learning on the device (:mod:`safelife_rl.training.device`): the device PPO and A2C make
the updates stock SB3 makes, and train from the SafeLife vector env with its episode infos."""

from __future__ import annotations

import copy
import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from safelife_rl.training.device import (
    DeviceA2C,
    DevicePPO,
    GymnasiumTensorVecEnv,
    NumpyVecEnvAdapter,
    TensorRolloutBuffer,
)
from safelife_rl.training.evaluation import episode_scalars

PAIRS = [
    (PPO, DevicePPO, {"n_steps": 16, "batch_size": 16, "n_epochs": 3}),
    (A2C, DeviceA2C, {"n_steps": 8}),
]


def cartpoles() -> DummyVecEnv:
    # a 20-step time limit, so rollouts hold timeouts that bootstrap from the value function
    return DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=20)] * 4)


def trained(
    algo: type, env, settings: dict, steps: int, weights: dict | None = None, device: str = "cpu"
):
    # fused Adam, as the device algorithms take it (A2C's RMSprop is unchanged)
    policy_kwargs = {"net_arch": [16], "optimizer_kwargs": {"fused": True}}
    model = algo("MlpPolicy", env, seed=0, device=device, policy_kwargs=policy_kwargs, **settings)
    if weights is not None:
        model.policy.load_state_dict(weights)
    initial = copy.deepcopy(model.policy.state_dict())
    model.learn(steps)
    return model, initial


@pytest.mark.parametrize("stock,device,settings", PAIRS, ids=["ppo", "a2c"])
def test_device_algorithms_make_the_updates_of_stock_sb3(stock, device, settings, torch_device):
    """Same seed, envs, batches and initial weights: the same parameters after several updates
    (rollouts with episode ends and timeouts), and the same episode statistics."""
    steps = 4 * settings["n_steps"] * 6
    reference, initial = trained(stock, cartpoles(), settings, steps, device=torch_device)
    model, _ = trained(
        device,
        NumpyVecEnvAdapter(cartpoles(), torch_device),
        settings,
        steps,
        initial,
        torch_device,
    )
    assert isinstance(model.rollout_buffer, TensorRolloutBuffer)
    moved = max(
        (p - initial[k]).abs().max().item() for k, p in reference.policy.state_dict().items()
    )
    assert moved > 1e-3  # the updates did something
    for (name, p), q in zip(reference.policy.named_parameters(), model.policy.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=name)
    assert [e["r"] for e in model.ep_info_buffer] == [e["r"] for e in reference.ep_info_buffer]


def test_the_buffer_yields_device_tensors_in_sb3_order():
    """Minibatches are SB3's: the same permutation draw, env-major flattening, float actions."""
    space = gym.spaces.Box(0, 1, (2,), dtype=np.uint8)
    buffer = TensorRolloutBuffer(3, space, gym.spaces.Discrete(9), "cpu", n_envs=2)
    for step in range(3):
        obs = torch.tensor([[step, 0], [step, 1]], dtype=torch.uint8)
        buffer.add(
            obs,
            torch.tensor([step, 5]),
            torch.ones(2),
            torch.zeros(2),
            torch.zeros(2, 1),
            torch.zeros(2),
        )
    buffer.compute_returns_and_advantage(torch.zeros(2), torch.zeros(2, dtype=torch.bool))
    np.random.seed(3)
    order = np.random.permutation(6)
    np.random.seed(3)
    (batch,) = buffer.get()
    assert batch.observations.dtype == torch.uint8 and batch.actions.dtype == torch.float32
    envs, steps = order // 3, order % 3
    assert batch.observations.tolist() == [[s, e] for s, e in zip(steps, envs)]
    assert batch.actions[:, 0].tolist() == [float(s if e == 0 else 5) for s, e in zip(steps, envs)]
    assert buffer.returns.shape == (6,) and isinstance(buffer.values, np.ndarray)


class Episodes(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.scalars: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        assert self.locals["infos"] == []  # the device algorithms hand them over at the end
        return True

    def _on_rollout_end(self) -> None:
        self.scalars += [episode_scalars(info) for _, info in self.locals["episodes"]]


def on_the_device(tmp_path) -> list[str]:
    """Overrides of a tiny run on the device path: procedural levels come from a bank."""
    return [
        "vec_env=device",
        f"env.kwargs.bank={{size:2,progress:false,cache_dir:{tmp_path / 'banks'}}}",
    ]


def test_a_device_run_without_a_level_bank_is_refused_before_it_writes(tmp_path, train_config):
    from safelife_rl.training.run import train
    from safety_rl_common.errors import UserError

    with pytest.raises(UserError, match=r"in a training run: 'env.kwargs.bank=\{size:1000\}'"):
        train(train_config("total_timesteps=64", "vec_env=device"), tmp_path)
    assert list(tmp_path.iterdir()) == []  # no config: nothing to resume, nothing to clean


def test_device_ppo_trains_from_the_safelife_vector_env(torch_device):
    """The SafeLife vector env plugs in; callbacks see each finished episode's statistics."""
    from safelife_rl import load_levels
    from safelife_rl.envs.registration import suite_file

    vector = gym.make_vec(
        "safelife_rl/PruneStill-v1",
        num_envs=4,
        vectorization_mode="vector_entry_point",
        device=torch_device,
        levels=load_levels(suite_file("prune-still"))[:4],
        time_limit=6,
        view_shape=(9, 9),
        side_effects=True,
    )
    env = GymnasiumTensorVecEnv(vector)
    model = DevicePPO(
        "MlpPolicy",
        env,
        n_steps=8,
        batch_size=16,
        n_epochs=1,
        seed=0,
        device=torch_device,
        policy_kwargs={"net_arch": [16]},
    )
    episodes = Episodes()
    model.learn(64, callback=episodes)
    assert model.num_timesteps == 64
    assert len(episodes.scalars) >= 8  # 6-step episodes in 16 steps of 4 envs
    first = episodes.scalars[0]
    assert first["length"] == 6 and "performance" in first
    assert any(key.startswith("side_effects/") for key in first)
    assert len(model.ep_info_buffer) == len(episodes.scalars)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_the_training_app_trains_on_the_device_with_the_same_logs(
    tmp_path, algo, train_config, tb_scalars
):
    """``vec_env=device``: the device algorithm, SB3's and the project's TensorBoard tags,
    checkpoints and the evaluation on the fixed suite."""
    import json

    from safelife_rl.training.run import train

    summary = train(
        train_config("total_timesteps=128", *on_the_device(tmp_path), f"algo={algo}"), tmp_path
    )
    assert summary["timesteps"] == 128 and summary["algo"] == algo.upper()
    assert (tmp_path / "final_model.zip").exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "model_128_steps.zip",
        "model_64_steps.zip",
    ]
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert evaluation["trained"]["episodes"] == 2 and evaluation["trained"]["mean_length"] == 30
    logged = tb_scalars(tmp_path / "tensorboard")
    assert [e.value for e in logged["episode/length"]] == [30.0] * 4
    assert all(0 <= e.value <= 1 for e in logged["episode/performance"])
    assert [e.step for e in logged["eval/performance"]] == [64, 128]
    fractions = [e.value for e in logged["schedule/exit_fraction"]]
    assert fractions and all(f == pytest.approx(0.001) for f in fractions)
    assert "rollout/ep_rew_mean" in logged and "train/value_loss" in logged


@pytest.mark.parametrize("resumed_with", ["batched", "device"])
def test_a_device_run_resumes_on_either_path(tmp_path, train_config, resumed_with):
    from safelife_rl.apps.train import resume_config
    from safelife_rl.training.run import train

    train(
        train_config("total_timesteps=64", "callbacks.evaluation=null", *on_the_device(tmp_path)),
        tmp_path,
    )
    (tmp_path / "final_model.zip").unlink()  # as if killed after the checkpoint
    overrides = [f"resume={tmp_path}", "total_timesteps=128", f"vec_env={resumed_with}"]
    summary = train(resume_config(train_config(*overrides), overrides), tmp_path, resume=True)
    assert summary["timesteps"] == 128


def test_ended_infos_are_each_ended_envs_final_info():
    from safelife_rl.training.device.adapters import ended_infos

    ended = torch.tensor([False, True, False, True])
    final_info = {
        "length": torch.tensor([1, 2, 3, 4]),
        "_length": ended,
        "success": torch.tensor([True, False, True, True]),
        "performance": torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float32),
        "level": np.array(["a", "b", "c", "d"], dtype=object),
        "side_effects": np.array([None, None, None, {"life": [1.0, 2.0]}], dtype=object),
        "episode": {
            "r": torch.tensor([1.5, 2.5, 3.5, 4.5], dtype=torch.float64),
            "l": torch.tensor([1, 2, 3, 4]),
            "_r": ended,
        },
    }
    infos = ended_infos(final_info, ended)
    assert infos == {
        1: {
            "length": 2,
            "success": False,
            "performance": final_info["performance"][1].item(),
            "level": "b",
            "episode": {"r": 2.5, "l": 2},
        },
        3: {
            "length": 4,
            "success": True,
            "performance": final_info["performance"][3].item(),
            "level": "d",
            "side_effects": {"life": [1.0, 2.0]},
            "episode": {"r": 4.5, "l": 4},
        },
    }
    assert type(infos[1]["length"]) is int and type(infos[1]["success"]) is bool


def test_the_device_path_refuses_algorithms_without_a_device_twin(tmp_path, train_config):
    from safelife_rl.training.run import train
    from safety_rl_common.errors import UserError

    with pytest.raises(
        UserError,
        match=re.escape(
            "vec_env=device trains the algorithms with a device twin (A2C, PPO, PPOLagrangian), "
            "not stable_baselines3.DQN"
        ),
    ):
        train(train_config("total_timesteps=64", *on_the_device(tmp_path), "algo=dqn"), tmp_path)
