"""``precision=fp32|tf32|bf16`` (safelife_rl.training.precision): what each sets, what a device
refuses, and bf16's losses and gradients beside FP32's on one minibatch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from omegaconf import OmegaConf
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from safelife_rl.training.features import SafeLifeCNN
from safelife_rl.training.hparams import run_hparams
from safelife_rl.training.precision import apply_precision, check_precision, paper_deviation
from safety_rl_common.errors import UserError

from .test_population import N_ENVS, N_STEPS, population

ROOT = Path(__file__).resolve().parents[2]
#: bf16 against FP32 on the same minibatch, relative: bfloat16 keeps 8 bits of mantissa
#: (3e-3 a rounding), and a loss or a norm sums many roundings of both signs.
LOSS_TOLERANCE, GRADIENT_TOLERANCE = 2e-2, 5e-2


@pytest.fixture(autouse=True)
def kept_flags():
    """The TensorFloat-32 flags as they were (they are process-wide)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def cnn(view: int = 17, channels: int = 10) -> SafeLifeCNN:
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 1, (view, view, channels), np.uint8)
    return SafeLifeCNN(space, features_dim=64, conv_channels=(16, 32, 32))


def board_batch(n: int = 64, view: int = 17, channels: int = 10) -> torch.Tensor:
    """Binary cells, about a fifth of them set, as a SafeLife observation has."""
    generator = torch.Generator().manual_seed(1)
    return (torch.rand(n, view, view, channels, generator=generator) < 0.2).to(torch.uint8)


@pytest.mark.parametrize(
    ("precision", "device", "said"),
    [
        ("tf32", "cpu", "precision=tf32 is TensorFloat-32 of CUDA GPUs"),
        ("fp16", "cpu", "give one of fp32, tf32, bf16"),
    ],
)
def test_a_precision_the_device_cannot_do_is_refused(precision, device, said):
    with pytest.raises(UserError, match=said):
        check_precision(precision, device)
    check_precision("fp32", device)
    check_precision("bf16", device)


@pytest.mark.parametrize(("precision", "tf32"), [("fp32", False), ("tf32", True), ("bf16", False)])
def test_each_precision_sets_the_tensorfloat_flags(precision, tf32):
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not tf32
    body = cnn()
    apply_precision(precision, body)
    assert torch.backends.cuda.matmul.allow_tf32 is tf32  # fp32: cuDNN's convolutions too
    assert torch.backends.cudnn.allow_tf32 is tf32
    assert body.compute_dtype == (torch.bfloat16 if precision == "bf16" else None)


def test_bf16_needs_the_safelife_cnn():
    with pytest.raises(UserError, match="runs the SafeLife CNN's body in bfloat16"):
        apply_precision("bf16", torch.nn.Sequential(torch.nn.Linear(4, 2)))


def test_the_bf16_body_computes_in_bfloat16_and_hands_on_fp32():
    body, obs = cnn(), board_batch()
    exact = body(obs)
    apply_precision("bf16", body)
    rounded = body(obs)
    assert rounded.dtype == torch.float32 and body.dense[0].weight.dtype == torch.float32
    assert not torch.equal(rounded, exact)  # it did round
    scale = exact.abs().max()
    assert (rounded - exact).abs().max() <= 2e-2 * scale


def _loss_and_gradient_norm(model: PPO, obs, actions, old_log_prob, advantages, returns):
    """PPO's loss (clip 0.2, value coefficient 0.5, entropy 0.01) on one minibatch and its
    gradient's norm, as SB3's ``train`` computes them."""
    model.policy.zero_grad()
    values, log_prob, entropy = model.policy.evaluate_actions(obs, actions)
    ratio = torch.exp(log_prob - old_log_prob)
    policy_loss = -torch.min(advantages * ratio, advantages * ratio.clamp(0.8, 1.2)).mean()
    loss = policy_loss + 0.5 * torch.nn.functional.mse_loss(returns, values.flatten())
    loss = loss - 0.01 * entropy.mean()
    loss.backward()
    norm = torch.linalg.vector_norm(
        torch.stack([p.grad.norm() for p in model.policy.parameters() if p.grad is not None])
    )
    return loss.item(), norm.item(), log_prob.dtype, values.dtype


def test_bf16_losses_and_gradients_are_fp32s_within_tolerance():
    """One minibatch of 64 SafeLife-like boards with recorded actions, log-probabilities,
    advantages and returns: the loss and its gradient's norm at bf16 are FP32's within
    :data:`LOSS_TOLERANCE` and :data:`GRADIENT_TOLERANCE`; log-probabilities and values stay
    FP32."""
    env = make_vec_env(lambda: gym.wrappers.TimeLimit(_BoardEnv(), 5), n_envs=1)
    kwargs = {"features_extractor_class": SafeLifeCNN, "net_arch": []}
    kwargs["features_extractor_kwargs"] = {"features_dim": 64, "conv_channels": [16, 32, 32]}
    model = PPO("CnnPolicy", env, policy_kwargs=kwargs, seed=0, device="cpu")
    obs = board_batch()
    generator = torch.Generator().manual_seed(2)
    actions = torch.randint(0, 9, (64,), generator=generator)
    with torch.no_grad():
        _, old_log_prob, _ = model.policy.evaluate_actions(obs, actions)
    advantages = torch.randn(64, generator=generator)
    returns = torch.randn(64, generator=generator)
    batch = (obs, actions, old_log_prob + 0.05 * torch.randn(64, generator=generator))
    fp32 = _loss_and_gradient_norm(model, *batch, advantages, returns)
    apply_precision("bf16", model.policy)
    bf16 = _loss_and_gradient_norm(model, *batch, advantages, returns)
    assert bf16[2:] == (torch.float32, torch.float32)
    assert bf16[0] != fp32[0]
    assert abs(bf16[0] - fp32[0]) <= LOSS_TOLERANCE * abs(fp32[0])
    assert abs(bf16[1] - fp32[1]) <= GRADIENT_TOLERANCE * fp32[1]


class _BoardEnv(gym.Env):
    """Random 17x17x10 boards and SafeLife's nine actions: a minibatch's shapes for SB3."""

    observation_space = gym.spaces.Box(0, 1, (17, 17, 10), np.uint8)
    action_space = gym.spaces.Discrete(9)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize("batching", ["loop", "grouped", "vmap", "unfold"])
def test_a_bf16_population_trains_in_every_batching(batching):
    """The stacked pass computes in bfloat16 (its outputs FP32's to bf16's rounding, not
    equal), and the population trains to finite weights."""
    pop = population([0, 1], [0.0, 0.2], batching=batching, precision="bf16")
    fp32 = population([0, 1], [0.0, 0.2], batching=batching)
    obs = torch.randint(0, 2, (2, N_ENVS, *pop.env.single_observation_space.shape))
    with torch.no_grad():
        (logits, values), (logits_32, values_32) = pop.stacked(obs), fp32.stacked(obs)
    assert logits.dtype == values.dtype == torch.float32
    assert not torch.equal(logits, logits_32)
    torch.testing.assert_close(logits, logits_32, rtol=0.05, atol=0.02)
    torch.testing.assert_close(values, values_32, rtol=0.05, atol=0.02)
    pop = pop.learn(N_ENVS * N_STEPS * 2)
    for member in pop.members:
        assert all(torch.isfinite(p).all() for p in member.policy.parameters())


def test_the_paper_deviation_is_said_where_not_fp32():
    assert paper_deviation("fp32") is None
    assert "TensorFloat-32" in paper_deviation("tf32") and "FP32" in paper_deviation("tf32")
    assert "bfloat16" in paper_deviation("bf16")


def _train(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "safelife_rl", "train", "experiment=smoke", *overrides,
         f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    "settings", [["vec_env=batched"], ["vec_env=device", "env.kwargs.bank={size:16}"]]
)
def test_a_bf16_run_trains_and_records_its_precision(tmp_path, settings):
    done = _train(tmp_path, "precision=bf16", *settings)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert config["precision"] == "bf16"
    assert run_hparams(OmegaConf.create(config))["precision"] == "bf16"
    assert (tmp_path / "run" / "final_model.zip").is_file()


def test_tf32_on_the_cpu_ends_in_one_line_and_writes_nothing(tmp_path):
    done = _train(tmp_path, "precision=tf32")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "precision=tf32" in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()
