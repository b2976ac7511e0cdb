"""AUP (safelife_rl.training.methods.aup): the penalty on hand cases with a known Q-network, the
auxiliary rewards, both phases through the training app, resuming, and refused settings."""

import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from stable_baselines3.common.vec_env import DummyVecEnv
from torch import nn

from safelife_rl.apps.train import resume_config
from safelife_rl.training.device import GymnasiumTensorVecEnv, NumpyView, tensor_vec_env
from safelife_rl.training.methods.aup import (
    AUXILIARY_FILE,
    AUPPenalty,
    AuxiliaryPhase,
    DeviceAUPPenalty,
)
from safelife_rl.training.methods.aup.auxiliary_rewards import (
    RandomProjection,
    fit_auxiliary_reward,
)
from safelife_rl.training.methods.aup.cb_vae import log_normaliser
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError
from safety_rl_common.torch_counts import counting

from .test_device_step import vector_env

ROOT = Path(__file__).resolve().parents[2]
# Phase 1: 64 random steps and 256 DQN steps; phase 2: 320 PPO steps (2 envs x 16 per rollout).
AUP_TINY = [
    "total_timesteps=640",
    "method.buffer_steps=64",
    "method.aux_steps=256",
    "method.vae.hidden=[32,16]",
    "method.vae.epochs=3",
    "method.vae.batch_size=16",
    "method.aux_agent.buffer_size=500",
    "method.aux_agent.learning_starts=64",
    "env.kwargs.bank={size:4,progress:false}",
]
PHASE_STEPS, ROLLOUT = 320, 32
APP_TINY = [  # conftest's TINY on the command line
    "experiment=paper",
    "env=append-still",
    "env.kwargs.view_shape=[17,17]",
    "env.kwargs.time_limit=30",
    "policy.kwargs.features_extractor_kwargs.features_dim=16",
    "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
    "n_envs=2",
    "progress_bar=false",
    "algo.n_steps=16",
    "callbacks.evaluation.n_episodes=2",
    "callbacks.evaluation.eval_every=64",
    "callbacks.checkpoint.save_every=64",
]


def resumed(train_config, run_dir):
    given = [f"resume={run_dir}"]
    return resume_config(train_config(*given), given)


def weights(model_file):
    """The network and optimizer entries of an SB3 model file (the zip's dates aside)."""
    with zipfile.ZipFile(model_file) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name.endswith(".pth")}


def no_phase_one(self):
    raise AssertionError("phase 1 ran again")


class Walk(gym.Env):
    """Observation: the position; action ``a`` moves ``1 + a`` ahead; reward 1 per step; the
    episode ends at position 6 or beyond."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.position += 1 + int(action)
        return np.array([self.position], np.float32), 1.0, self.position >= 6, False, {}


class WalkWithNoop(Walk):
    noop_action = 0


class CostlyWalk(WalkWithNoop):
    """Each step costs 1 when it takes the longest stride (action 2), else 0."""

    def step(self, action):
        *step, info = super().step(action)
        return *step, {**info, "cost": float(action == 2)}


class TableQ(nn.Module):
    """Q(s) = [s, 3s, 1 - 2s]: |Q(s,1) - Q(s,0)| = 2s, |Q(s,2) - Q(s,0)| = |1 - 3s|."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(()))  # gives the module a device

    def forward(self, obs):
        s = obs[:, 0]
        return torch.stack([s, 3 * s, 1 - 2 * s], dim=1)


# env 0 at 0, 2, 5 takes 1, 2, 0; env 1 at 0, 3, 4 takes 2, 0, 1; both end at 6 and are
# reset to 0, where they take 2 and 1: the actions and the rewards less 0.25 x Q difference
WALK_STEPS = [
    ([1, 2], [1.0, 0.75]),
    ([2, 0], [-0.25, 1.0]),
    ([0, 1], [1.0, -1.0]),
    ([2, 1], [0.75, 1.0]),
]
# their Q differences (4 x the penalties): action 2's steps (costly in CostlyWalk) 1, 5, 1;
# the others 0, 0, 0, 8, 0
WALK_STATISTICS = {"q_difference": 15 / 8, "penalty": 15 / 32}
COSTLY_WALK_STATISTICS = {
    **WALK_STATISTICS,
    "q_difference_costly": 7 / 3,
    "q_difference_cost_free": 8 / 5,
}


def test_the_penalty_is_lambda_times_the_q_difference_to_the_noop_of_the_state_acted_in():
    env = AUPPenalty(DummyVecEnv([WalkWithNoop, WalkWithNoop]))
    env.q_network, env.coefficient = TableQ(), 0.25
    env.reset()
    for actions, expected in WALK_STEPS:
        obs, rewards, dones, infos = env.step(np.array(actions))
        assert rewards.tolist() == expected
        assert [i["aup_penalty"] for i in infos] == [1.0 - r for r in expected]
        assert [i["aup_q_difference"] for i in infos] == [4 * (1.0 - r) for r in expected]
    assert dones.tolist() == [False, False] and obs[:, 0].tolist() == [3.0, 2.0]
    assert env.take_statistics() == pytest.approx(WALK_STATISTICS)
    assert env.take_statistics() is None


@pytest.mark.parametrize("device_path", [False, True])
def test_the_statistics_split_the_q_differences_of_costly_and_cost_free_steps(device_path):
    """On an env that reports ``info["cost"]`` the rollout's statistics add the mean Q
    difference of its costly and of its cost-free steps (on both paths); the penalty is the
    same."""
    walks = [CostlyWalk, CostlyWalk]
    env = DeviceAUPPenalty(tensor_vec_env(walks)) if device_path else AUPPenalty(DummyVecEnv(walks))
    env.q_network, env.coefficient = TableQ(), 0.25
    env.reset()
    for actions, expected in WALK_STEPS:
        rewards = (
            env.step(torch.tensor(actions)).rewards.tolist()
            if device_path
            else env.step(np.array(actions))[1].tolist()
        )
        assert rewards == expected
    assert env.take_statistics() == pytest.approx(COSTLY_WALK_STATISTICS)


def test_on_the_device_path_the_penalty_is_taken_off_the_reward_tensor():
    """DeviceAUPPenalty on the same walks (as separate envs on the device): the same rewards, and
    the means of the rollout's Q differences and penalties read once."""
    env = DeviceAUPPenalty(tensor_vec_env([WalkWithNoop, WalkWithNoop]))
    env.q_network, env.coefficient = TableQ(), 0.25
    env.reset()
    for actions, expected in WALK_STEPS:
        step = env.step(torch.tensor(actions))
        assert isinstance(step.rewards, torch.Tensor) and step.rewards.tolist() == expected
    assert env.take_statistics() == pytest.approx(WALK_STATISTICS)
    assert env.take_statistics() is None


class ActionQ(nn.Module):
    """Q(s, a) = a in every state: the penalty of action ``a`` is ``lambda * a``."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(()))

    def forward(self, obs):
        return torch.arange(9.0).expand(len(obs), 9)


def test_on_the_safelife_device_env_the_penalty_uses_its_noop_and_makes_no_sync():
    plain, wrapped = (GymnasiumTensorVecEnv(vector_env(4)) for _ in range(2))
    wrapped = DeviceAUPPenalty(wrapped)
    assert wrapped.noop_action == 0  # SafeLife's do-nothing, from the env all envs play
    wrapped.q_network, wrapped.coefficient = ActionQ(), 0.5
    for env in (plain, wrapped):
        env.seed(3)
        env.reset()
    actions = torch.tensor([0, 3, 8, 1])
    for _ in range(4):  # the third step restarts every env
        expected = plain.step(actions).rewards - 0.5 * actions
        with counting() as counts:
            step = wrapped.step(actions)
        assert (counts.syncs, counts.copies) == (0, 0), counts.named
        assert torch.equal(step.rewards, expected)


def test_the_noop_action_is_the_envs_or_named_and_safelifes_does_nothing():
    with pytest.raises(UserError, match="the env has no no-op action"):
        AUPPenalty(DummyVecEnv([Walk]))
    assert AUPPenalty(DummyVecEnv([Walk]), noop_action=2).noop_action == 2
    with pytest.raises(UserError, match="method.noop_action must be an action 0-2, got 3"):
        AUPPenalty(DummyVecEnv([Walk]), noop_action=3)
    env = gym.make("safelife_rl/AppendStill-v1", time_limit=5).unwrapped
    env.reset(seed=1)
    start = env.game.agent_locs.copy()
    env.step(env.noop_action)
    assert env.noop_action == 0 and np.array_equal(env.game.agent_locs, start)


def test_the_continuous_bernoulli_normaliser_matches_its_closed_form():
    logits = torch.tensor(
        [-8.0, -1.0, -0.01, -1e-4, 0.0, 1e-4, 0.002, 0.5, 3.0], dtype=torch.float64
    )
    p = torch.sigmoid(logits)
    near_half = (p - 0.5).abs() < 1e-9
    closed = torch.where(
        near_half, torch.full_like(p, 2.0), 2 * torch.atanh(1 - 2 * p) / (1 - 2 * p)
    )
    assert torch.allclose(log_normaliser(logits), torch.log(closed), rtol=1e-7, atol=1e-9)
    assert log_normaliser(torch.tensor([0.0])).item() == pytest.approx(np.log(2))


def test_the_projection_reward_is_a_standardised_linear_function():
    rng = np.random.default_rng(0)
    data = rng.integers(0, 2, (500, 12), dtype=np.uint8)
    space = gym.spaces.Box(0, 1, (3, 4), np.uint8)
    reward, _ = fit_auxiliary_reward("projection", data.reshape(500, 3, 4), space, seed=3)
    assert isinstance(reward, RandomProjection)
    values = reward(torch.as_tensor(data)).double()
    assert abs(values.mean().item()) < 1e-6 and values.std(correction=0).item() == pytest.approx(1)
    w = reward.weight.double()
    assert torch.all((w >= 0) & (w <= 1))
    x0, x1 = torch.as_tensor(data[:2], dtype=torch.float64)
    assert (values[1] - values[0]).item() == pytest.approx(((x1 - x0) @ w / reward.std).item())


def test_the_vae_reward_tells_two_patterns_apart():
    """Half the observations light the first half of the cells, half the second: the 1-D latent
    mean learns which, so the standardised reward is about -1 on one and +1 on the other."""
    pattern = np.repeat(np.eye(2, dtype=np.uint8), 8, axis=1)  # 2 patterns of 16 cells
    data = np.tile(pattern, (128, 1))
    space = gym.spaces.Box(0, 1, (16,), np.uint8)
    reward, stats = fit_auxiliary_reward(
        "cb_vae",
        data,
        space,
        seed=0,
        vae={"hidden": [16], "epochs": 40, "batch_size": 32, "learning_rate": 1e-2},
    )
    first, second = reward(torch.as_tensor(pattern)).tolist()
    assert abs(first - second) > 1.9 and np.isfinite(stats["vae_loss"])


def test_aup_trains_both_phases_through_the_app(tmp_path, tb_scalars):
    run = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "safelife_rl",
            "train",
            *APP_TINY,
            "method=aup",
            *AUP_TINY,
            f"hydra.run.dir={run}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"timesteps": 640' in result.stdout
    saved = torch.load(run / AUXILIARY_FILE, weights_only=True)
    assert saved["settings"] == {"reward": "cb_vae", "buffer_steps": 64, "aux_steps": 256}
    logged = tb_scalars(run / "tensorboard")
    lambdas = [(e.step, e.value) for e in logged["aup/lambda"]]
    steps = list(range(PHASE_STEPS + ROLLOUT, 641, ROLLOUT))
    assert [s for s, _ in lambdas] == steps
    # the rollout starting at step t has lambda 0.001 + 0.099 (t - 320) / 320
    expected = [0.001 + 0.099 * (s - ROLLOUT - PHASE_STEPS) / PHASE_STEPS for s in steps]
    assert [v for _, v in lambdas] == pytest.approx(expected)
    assert all(e.value > 0 for e in logged["aup/q_difference"])
    # SafeLife reports costs: every rollout has cost-free steps (the no-op's among them)
    assert [e.step for e in logged["aup/q_difference_cost_free"]] == steps


def test_aup_trains_both_phases_on_the_device_path(tmp_path, train_config, tb_scalars):
    """vec_env=device: phase 1 through a NumPy view of the device env, phase 2 DevicePPO on
    the penalised reward tensor; the same schedule and logs as the NumPy path."""
    summary = train(train_config("method=aup", *AUP_TINY, "vec_env=device"), tmp_path)
    assert summary["timesteps"] == 640
    saved = torch.load(tmp_path / AUXILIARY_FILE, weights_only=True)
    assert saved["settings"] == {"reward": "cb_vae", "buffer_steps": 64, "aux_steps": 256}
    logged = tb_scalars(tmp_path / "tensorboard")
    steps = list(range(PHASE_STEPS + ROLLOUT, 641, ROLLOUT))
    assert [e.step for e in logged["aup/lambda"]] == steps
    expected = [0.001 + 0.099 * (s - ROLLOUT - PHASE_STEPS) / PHASE_STEPS for s in steps]
    assert [e.value for e in logged["aup/lambda"]] == pytest.approx(expected)
    assert [e.step for e in logged["aup/q_difference"]] == steps
    assert all(e.value > 0 for e in logged["aup/q_difference"])
    assert [e.step for e in logged["aup/q_difference_cost_free"]] == steps
    for lam, difference, penalty in zip(
        logged["aup/lambda"], logged["aup/q_difference"], logged["aup/penalty"]
    ):  # each rollout's, in one dump
        assert penalty.value == pytest.approx(lam.value * difference.value, rel=1e-5)


def test_the_numpy_view_gives_a_device_env_to_sb3_with_its_infos():
    tensors = GymnasiumTensorVecEnv(vector_env(2))
    view = NumpyView(GymnasiumTensorVecEnv(vector_env(2)))
    for env in (tensors, view):
        env.seed(5)
    assert np.array_equal(view.reset(), tensors.reset().numpy())
    for t in range(3):  # 3-step episodes: the third step restarts both envs
        step = tensors.step(torch.tensor([t, 4]))
        obs, rewards, dones, infos = view.step(np.array([t, 4]))
        assert np.array_equal(obs, step.observations.numpy())
        assert rewards.tolist() == step.rewards.tolist()
        assert [info["cost"] for info in infos] == step.costs.tolist()
    assert dones.tolist() == [True, True]
    for k, info in enumerate(infos):
        assert np.array_equal(info["terminal_observation"], step.final_observations[k].numpy())
        assert info["TimeLimit.truncated"] and info["episode"]["l"] == 3


def test_a_resumed_aup_run_reuses_its_auxiliary_model_bit_for_bit(
    tmp_path, train_config, monkeypatch
):
    overrides = [
        "method=aup_proj",
        *AUP_TINY,
        "total_timesteps=448",
        "callbacks.checkpoint.save_every=1000",
    ]
    first = train(train_config(*overrides), tmp_path)
    model = weights(tmp_path / "final_model.zip")
    auxiliary = (tmp_path / AUXILIARY_FILE).read_bytes()
    for name in ("final_model.zip", "evaluation.json", "evaluations.json"):
        (tmp_path / name).unlink()  # as if killed after phase 1, before the first checkpoint

    monkeypatch.setattr(AuxiliaryPhase, "_run_phase", no_phase_one)
    again = train(resumed(train_config, tmp_path), tmp_path, resume=True)
    assert weights(tmp_path / "final_model.zip") == model
    assert (tmp_path / AUXILIARY_FILE).read_bytes() == auxiliary
    assert again["trained"] == first["trained"]


def test_a_run_resumed_from_a_checkpoint_loads_its_auxiliary_model(
    tmp_path, train_config, monkeypatch
):
    train(train_config("method=aup_proj", *AUP_TINY, "total_timesteps=448"), tmp_path)
    (tmp_path / "final_model.zip").unlink()  # as if killed after the 384-step checkpoint
    (tmp_path / "checkpoints" / "model_448_steps.zip").unlink()
    monkeypatch.setattr(AuxiliaryPhase, "_run_phase", no_phase_one)
    summary = train(resumed(train_config, tmp_path), tmp_path, resume=True)
    assert summary["timesteps"] == 448
    (tmp_path / "final_model.zip").unlink()
    (tmp_path / "checkpoints" / "model_448_steps.zip").unlink()
    (tmp_path / AUXILIARY_FILE).unlink()
    with pytest.raises(UserError, match=f"{AUXILIARY_FILE} is missing"):
        train(resumed(train_config, tmp_path), tmp_path, resume=True)
    damaged = {
        b"": "empty",
        pickle.dumps({"settings": print}): "not a torch file of tensors",
        b"PK\x03\x04 truncated": "not a torch file of tensors",
    }
    for content, what in damaged.items():  # one line naming the file, nothing of torch's
        (tmp_path / AUXILIARY_FILE).write_bytes(content)
        with pytest.raises(UserError) as refused:
            train(resumed(train_config, tmp_path), tmp_path, resume=True)
        assert str(refused.value) == (
            f"{tmp_path / AUXILIARY_FILE}: not this run's auxiliary "
            f"model ({what}); delete it to train the auxiliary phase "
            "again"
        )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["method.aux_steps=600"],
            r"AUP's auxiliary phase \(method.buffer_steps 64 \+ "
            r"method.aux_steps 600\) must be shorter than the run "
            r"\(total_timesteps 640\)",
        ),
        (["method.reward=pixels"], "method.reward must be one of cb_vae, projection, got 'pixels'"),
        (["method.buffer_steps=8"], r"method.buffer_steps \(8\) must fill at least one VAE batch"),
        (["method.aux_agent.learning_starts=256"], "the auxiliary agent would never learn"),
        (["method.noop_action=9"], "method.noop_action must be an action 0-8, got 9"),
        (["method.noop_action=9", "vec_env=device"], "method.noop_action must be an action 0-8"),
        (["method.aux_steps=600", "vec_env=device"], "must be shorter than the run"),
        (
            ["method.lambda_values=[1e308,1e308]"],
            r"^method.lambda_values must be two numbers in \[0, 1000\]",
        ),
        (
            ["method.lambda_values=[a,b]"],
            r"^method.lambda_values must be two numbers .*\['a', 'b'\]$",
        ),
        (["method.lambda_values=[0.1]"], r"^method.lambda_values must be two numbers"),
        (["method.lambda_ramp_end=abc"], r"^method.lambda_ramp_end must be a positive integer"),
        (["method.vae.batch_size=0"], r"^method.vae.batch_size must be a positive integer"),
        (["method.vae.hidden=[0]"], r"^method.vae.hidden must be a list of layer widths"),
        (["method.vae.learning_rate=abc"], r"^method.vae.learning_rate must be a positive"),
        (["+method.vae.dropout=0.1"], r"^unknown key 'method.vae.dropout'"),
        (["method.aux_agent.gamma=2"], r"^method.aux_agent.gamma must be a number in \[0, 1\]"),
        (["method.aux_agent.batch_size=x"], r"^method.aux_agent.batch_size must be a positive"),
        (["method.buffer_steps=abc"], r"^method.buffer_steps must be a positive integer"),
        (["method.noop_action=x"], r"^method.noop_action must be null \(the env's own\) or an"),
        (
            ["method.vae.epochs=1000000000000"],
            r"^method.vae.epochs is 1000000000000 epochs, over the limit of 1000; raise it with "
            r"SAFELIFE_MAX_EPOCHS",
        ),
        (
            ["method.aux_agent.batch_size=1000000000000"],
            r"^method.aux_agent.batch_size \(1000000000000\) must be at most "
            r"method.aux_agent.buffer_size \(500\)",
        ),
        (
            ["method.vae.learning_rate=1000000000000"],
            r"^method.vae.learning_rate must be a positive number up to 1 \(a learning rate\)",
        ),
        (
            ["method.aux_agent.learning_rate=2"],
            r"^method.aux_agent.learning_rate must be a positive",
        ),
        (
            ["method.buffer_steps=300000000", "total_timesteps=1000000000"],
            r"^AUP's random-play buffer of 300,000,000 observations needs about \d+\.\d GiB of "
            r"host memory \(.* GiB with the run's other buffers\), over the .* GiB free on this "
            r"machine; lower method.buffer_steps, or set \$SAFELIFE_MAX_HOST_MB to allow more$",
        ),
    ],
)
def test_bad_aup_settings_are_refused_before_anything_is_written(
    tmp_path, train_config, overrides, message
):
    with pytest.raises(UserError, match=message):
        train(train_config("method=aup", *AUP_TINY, *overrides), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_aup_buffers_are_held_to_the_host_memory_limit(tmp_path, train_config, monkeypatch):
    monkeypatch.setenv("SAFELIFE_MAX_HOST_MB", "1")  # the replay buffer of 500 steps: ~1.1 MiB
    with pytest.raises(
        UserError,
        match=r"^AUP's auxiliary DQN replay buffer needs about .* "
        r"over the 0.0 GiB of \$SAFELIFE_MAX_HOST_MB; lower "
        r"method.aux_agent.buffer_size",
    ):
        train(train_config("method=aup", *AUP_TINY), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_aup_on_an_env_without_a_noop_action_is_refused(tmp_path):
    with initialize_config_dir(str(ROOT / "safelife_rl" / "conf"), version_base=None):
        cfg = compose("train", overrides=["experiment=cartpole-ignore-rewards", "method=aup"])
    with pytest.raises(UserError, match="the env has no no-op action"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()
