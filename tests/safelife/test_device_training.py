"""SB3 learning on the device (:mod:`safelife_rl.training.device`): the device PPO (the member
trainer at P = 1) makes the updates stock SB3 makes, and trains from the SafeLife vector env
with its episode infos; A2C is refused there in one line."""

from __future__ import annotations

import copy
import re
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

from safelife_rl.training.device import (
    DevicePPO,
    GymnasiumTensorVecEnv,
    TensorRolloutBuffer,
    tensor_vec_env,
)
from safelife_rl.training.device.sampler import ActionSampler
from safelife_rl.training.device.stacked import PolicyHeads
from safelife_rl.training.evaluation import episode_scalars

PAIRS = [
    (PPO, DevicePPO, {"n_steps": 16, "batch_size": 16, "n_epochs": 3}),
    # clipped values, unnormalised advantages, a minibatch across several envs
    (
        PPO,
        DevicePPO,
        {
            "n_steps": 8,
            "batch_size": 8,
            "n_epochs": 2,
            "clip_range_vf": 0.1,
            "normalize_advantage": False,
        },
    ),
]


def cartpole() -> gym.Env:
    # a 20-step time limit, so rollouts hold timeouts that bootstrap from the value function
    return gym.make("CartPole-v1", max_episode_steps=20)


def cartpoles() -> DummyVecEnv:
    return DummyVecEnv([cartpole] * 4)


class DrawnAsOnTheDevice(ActorCriticPolicy):
    """SB3's policy drawing its rollouts' discrete actions as the device algorithms draw them
    (:class:`~safelife_rl.training.device.sampler.ActionSampler` of seed 0, from step 0), so
    that stock SB3 collects the rollouts a device run of seed 0 collects."""

    sampler: ActionSampler | None = None

    def forward(self, obs, deterministic=False):
        logits, values = PolicyHeads(self)(obs)
        distribution = self.action_dist.proba_distribution(action_logits=logits)
        if self.sampler is None:
            self.sampler = ActionSampler([0], len(obs), int(self.action_space.n), obs.device)
        actions = self.sampler(distribution.distribution.logits[None])[0]
        return actions, values, distribution.log_prob(actions)


def trained(
    algo: type, env, settings: dict, steps: int, weights: dict | None = None, device: str = "cpu"
):
    # fused Adam, as the device algorithm takes it; stock SB3 draws its actions as the device
    # algorithm does
    policy_kwargs = {"net_arch": [16], "optimizer_kwargs": {"fused": True}}
    policy = "MlpPolicy" if issubclass(algo, DevicePPO) else DrawnAsOnTheDevice
    model = algo(policy, env, seed=0, device=device, policy_kwargs=policy_kwargs, **settings)
    if weights is not None:
        model.policy.load_state_dict(weights)
    initial = copy.deepcopy(model.policy.state_dict())
    model.learn(steps)
    return model, initial


@pytest.mark.parametrize("stock,device,settings", PAIRS, ids=["ppo", "ppo-clipped-values"])
def test_device_algorithms_make_the_updates_of_stock_sb3(stock, device, settings, torch_device):
    """Same seed, envs, batches, initial weights and action draws (stock SB3's policy drawing
    as the device path draws): the same parameters after several updates (rollouts with
    episode ends and timeouts), and the same episode statistics."""
    steps = 4 * settings["n_steps"] * 6
    reference, initial = trained(stock, cartpoles(), settings, steps, device=torch_device)
    model, _ = trained(
        device,
        tensor_vec_env([cartpole] * 4, torch_device),
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
    # (the rollouts' forward passes differ from stock SB3's by an ulp here and there: 6e-8 in
    # the weights after six updates, as before the member trainer; the update alone is SB3's
    # bit for bit, next test)
    for (name, p), q in zip(reference.policy.named_parameters(), model.policy.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=name)
    assert [e["r"] for e in model.ep_info_buffer] == [e["r"] for e in reference.ep_info_buffer]


@pytest.mark.parametrize("settings", [s for _, _, s in PAIRS], ids=["ppo", "ppo-clipped-values"])
def test_the_p1_update_is_sb3s_ppo_train_bit_for_bit_from_the_same_rollout(settings):
    """The member trainer's update of a single run (P = 1) makes the weights and Adam moments
    SB3's own ``PPO.train`` makes from the same rollout and minibatch draws, bit for bit."""
    policy_kwargs = {"net_arch": [16], "optimizer_kwargs": {"fused": True}}
    env = tensor_vec_env([cartpole] * 4)
    model = DevicePPO("MlpPolicy", env, seed=0, policy_kwargs=policy_kwargs, **settings)
    model.learn(2 * 4 * settings["n_steps"])  # two updates: Adam moments under way
    trainer = model.trainer()
    callback = CallbackList([])
    callback.init_callback(model)
    assert trainer.collect_rollouts([callback])
    model._current_progress_remaining = 0.5
    weights = copy.deepcopy(model.policy.state_dict())
    moments = copy.deepcopy(model.policy.optimizer.state_dict())
    draws = np.random.get_state()
    PPO.train(model)  # SB3's update, on the device buffer's SB3-shaped minibatches
    theirs = copy.deepcopy(model.policy.state_dict())
    their_moments = copy.deepcopy(model.policy.optimizer.state_dict())["state"]
    model.policy.load_state_dict(weights)
    model.policy.optimizer.load_state_dict(moments)
    np.random.set_state(draws)
    trainer.train()
    for name, value in model.policy.state_dict().items():
        assert torch.equal(value, theirs[name]), name
        assert not torch.equal(value, weights[name]), name  # it moved
    for key, state in model.policy.optimizer.state_dict()["state"].items():
        for entry, value in state.items():
            assert torch.equal(value, their_moments[key][entry]), (key, entry)


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


def test_the_training_app_trains_on_the_device_with_the_same_logs(
    tmp_path, train_config, tb_scalars
):
    """``vec_env=device``: the device algorithm, SB3's and the project's TensorBoard tags,
    checkpoints and the evaluation on the fixed suite."""
    import json

    from safelife_rl.training.run import train

    summary = train(train_config("total_timesteps=128", *on_the_device(tmp_path)), tmp_path)
    assert summary["timesteps"] == 128 and summary["algo"] == "PPO"
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


def test_a_device_run_resumes_on_the_device_path_only(tmp_path, train_config):
    """On the host path the run would train with SB3's algorithm in place of its device twin
    (measured: other final weights than the uninterrupted run's)."""
    from safelife_rl.apps.train import resume_config
    from safelife_rl.training.run import train
    from safety_rl_common.errors import UserError

    train(
        train_config("total_timesteps=64", "callbacks.evaluation=null", *on_the_device(tmp_path)),
        tmp_path,
    )
    (tmp_path / "final_model.zip").unlink()  # as if killed after the checkpoint
    overrides = [f"resume={tmp_path}", "total_timesteps=128", "vec_env=batched"]
    with pytest.raises(UserError, match=r"in vec_env \('device' -> 'batched', which trains with "):
        train(resume_config(train_config(*overrides), overrides), tmp_path, resume=True)
    overrides[-1] = "vec_env=device"
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


def test_ended_infos_follow_gymnasiums_masks_and_give_python_values():
    """Separate envs' ``final_info`` (NumPy, ``_key`` masks): each env gets the keys its own
    final info had, NumPy scalars as Python's."""
    from safelife_rl.training.device.adapters import ended_infos

    final_info = {
        "cost": np.array([0.5, 0.0, 1.0]),
        "_cost": np.array([True, False, True]),
        "name": np.array(["a", None, "c"], dtype=object),
        "_name": np.array([True, False, True]),
        "episode": {"r": np.array([1.5, 0.0, 3.0]), "l": np.array([2, 0, 4]), "_r": np.ones(3)},
        "_episode": np.array([True, False, True]),
    }
    infos = ended_infos(final_info, torch.tensor([True, True, True]))
    assert infos == {
        0: {"cost": 0.5, "name": "a", "episode": {"r": 1.5, "l": 2}},
        1: {},
        2: {"cost": 1.0, "name": "c", "episode": {"r": 3.0, "l": 4}},
    }
    assert type(infos[0]["episode"]["l"]) is int and type(infos[0]["cost"]) is float


class Countdown(gym.Env):
    """Counts down from ``length`` (plus 0-2 drawn at each reset); action 1 earns 1 and costs
    0.5 (with ``cost``); its last info names it, and has ``odd`` for an odd ``length``."""

    observation_space = gym.spaces.Box(0, 10, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int, cost: bool = True):
        self.length, self.cost = length, cost

    def _obs(self) -> np.ndarray:
        return np.array([self.left], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = self.length + int(self.np_random.integers(3))
        return self._obs(), {}

    def step(self, action):
        self.left -= 1
        info: dict = {"cost": 0.5 * int(action)} if self.cost else {}
        if self.left == 0:
            info["name"] = f"countdown {self.length}"
            if self.length % 2:
                info["odd"] = self.length
        return self._obs(), float(action), self.left == 0, False, info

    def lengthen(self, by: int) -> int:
        self.length += by
        return self.length


def countdown(length: int, cost: bool = True) -> gym.Env:
    # a time limit of 4 steps cuts the longer countdowns
    return Monitor(gym.wrappers.TimeLimit(Countdown(length, cost), 4))


COUNTDOWNS = [partial(countdown, n) for n in (1, 2, 3, 5)]


def sb3_info(info: dict) -> dict:
    """An info as compared: Monitor's wall-clock time left out."""
    info = dict(info)
    if "episode" in info:
        info["episode"] = {k: v for k, v in info["episode"].items() if k != "t"}
    return info


def test_separate_envs_on_the_device_step_as_sb3s_dummy_vec_env():
    """:func:`tensor_vec_env`: seeded as SB3 seeds, the same observations, rewards and ends;
    the step's costs (an ended env's from its final info); as SB3 infos (``NumpyView``) and as
    a rollout's episodes (``EpisodeRecorder``) each ended env's own final info."""
    from safelife_rl.training.device import NumpyView
    from safelife_rl.training.device.episodes import EpisodeRecorder

    reference, tensors = DummyVecEnv(COUNTDOWNS), tensor_vec_env(COUNTDOWNS)
    view = NumpyView(tensor_vec_env(COUNTDOWNS))
    for env in (reference, tensors, view):
        env.seed(3)
    first = reference.reset()
    assert np.array_equal(tensors.reset().numpy(), first) and np.array_equal(view.reset(), first)
    recorder, ended = EpisodeRecorder(), []
    rng = np.random.default_rng(0)
    for t in range(1, 31):
        actions = rng.integers(0, 2, 4)
        expected = reference.step(actions)
        step = tensors.step(torch.as_tensor(actions))
        recorder.add(t, step)
        obs, rewards, dones, infos = view.step(actions)
        for got in (obs, step.observations.numpy()):
            assert np.array_equal(got, expected[0])
        assert rewards.tolist() == step.rewards.tolist() == expected[1].tolist()
        assert dones.tolist() == (step.terminated | step.truncated).tolist()
        assert dones.tolist() == expected[2].tolist()
        assert step.costs.tolist() == [info["cost"] for info in expected[3]]
        for k in range(4):
            mine, theirs = dict(infos[k]), dict(expected[3][k])
            if dones[k]:
                final = mine.pop("terminal_observation")
                assert np.array_equal(final, theirs.pop("terminal_observation"))
                assert np.array_equal(step.final_observations[k].numpy(), final)
                assert step.truncated[k] == mine.pop("TimeLimit.truncated")
                assert step.truncated[k] == theirs.pop("TimeLimit.truncated")
                ended.append((t, sb3_info(theirs)))
            else:
                theirs.pop("TimeLimit.truncated")  # SB3's at every step, NumpyView's at the ends
            assert sb3_info(mine) == sb3_info(theirs)
    names = {info.get("name") for _, info in ended}  # None: cut by the time limit
    assert names == {"countdown 1", "countdown 2", "countdown 3", None}
    assert any("odd" in info for _, info in ended)
    assert [(t, sb3_info(info)) for t, info in recorder.read()] == ended


def test_separate_envs_without_a_cost_each_give_no_costs():
    env = tensor_vec_env([partial(countdown, 1), partial(countdown, 2, cost=False)])
    env.reset()
    assert all(env.step(torch.tensor([1, 1])).costs is None for _ in range(6))


def test_separate_envs_are_reached_each_under_its_wrappers():
    env = tensor_vec_env(COUNTDOWNS)
    assert env.get_attr("length") == [1, 2, 3, 5] and env.get_attr("length", [2]) == [3]
    assert env.env_method("lengthen", 2, indices=[0, 3]) == [3, 7]
    env.set_attr("label", "x", indices=[1])
    assert env.get_attr("label", [1]) == ["x"] and not env.has_attr("label")
    assert env.has_attr("lengthen") and not env.has_attr("nothing")
    assert env.env_is_wrapped(Monitor) == [True] * 4
    assert env.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics) == [False] * 4
    assert env.seed(7) == [7, 8, 9, 10]


def test_monitor_episodes_reach_sb3s_episode_statistics():
    """Separate envs' Monitor totals reach ``ep_info_buffer`` as stock SB3 gets them (the
    runs make the same updates: see the first test)."""
    envs = [lambda: Monitor(cartpole())] * 4
    settings = {"n_steps": 8, "batch_size": 16, "n_epochs": 2}
    reference, initial = trained(PPO, DummyVecEnv(envs), settings, 192)
    model, _ = trained(DevicePPO, tensor_vec_env(envs), settings, 192, initial)
    episodes = [(e["r"], e["l"]) for e in model.ep_info_buffer]
    assert len(episodes) > 5
    assert episodes == [(e["r"], e["l"]) for e in reference.ep_info_buffer]
    assert all(type(r) is float and type(n) is int for r, n in episodes)


@pytest.mark.parametrize("algo", ["a2c", "dqn"])
def test_the_device_path_refuses_algorithms_it_does_not_train(tmp_path, train_config, algo):
    """PPO and PPO-Lagrangian train on the device; A2C (removed from the device path) and DQN
    are refused in one line naming the NumPy path, before anything is written."""
    from safelife_rl.training.run import train
    from safety_rl_common.errors import UserError

    target = {"a2c": "stable_baselines3.A2C", "dqn": "stable_baselines3.DQN"}[algo]
    with pytest.raises(
        UserError,
        match=re.escape(
            f"vec_env=device trains PPO and PPOLagrangian, not {target}: use vec_env=batched"
        ),
    ):
        train(
            train_config("total_timesteps=64", *on_the_device(tmp_path), f"algo={algo}"), tmp_path
        )
    assert list(tmp_path.iterdir()) == []
