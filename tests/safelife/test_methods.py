"""The method plug-ins: every ``conf/method`` config names a registered method and every
method has its config; the run and the settings check name none; the worked example
(``cost_penalty``) on hand cases and through the training app on both paths."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from stable_baselines3.common.vec_env import DummyVecEnv

import safelife_rl  # noqa: F401  (registers the ids)
from safelife_rl.envs.registration import suite_file
from safelife_rl.training.device import tensor_vec_env
from safelife_rl.training.methods import registry
from safelife_rl.training.methods.cost_penalty import CostPenalty, DeviceCostPenalty
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "safelife_rl" / "conf" / "method").glob("*.yaml"))


def config_method(path: Path) -> str:
    """The method name a config file sets (its own, or the one it extends)."""
    data = yaml.safe_load(path.read_text())
    return data["method"]["name"]


def test_every_method_has_a_config_and_every_config_a_method():
    assert sorted(config_method(p) for p in CONFIGS) == sorted(p.stem for p in CONFIGS)
    assert sorted(registry()) == sorted(p.stem for p in CONFIGS)


def code_words(path: Path) -> set[str]:
    """The names and the words of the string constants of a module's code (docstrings and
    comments left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.alias):
            words.update(node.name.split("."))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            words.update(re.findall(r"\w+", node.value))
    return {w.lower() for w in words}


@pytest.mark.parametrize(
    "module",
    [
        "training/run.py",
        "training/config.py",
        "training/models.py",
        "training/device/algorithms.py",
    ],
)
def test_the_run_names_no_method(module):
    words = code_words(ROOT / "safelife_rl" / module)
    named = {
        w
        for w in words
        if w in registry() and w != "ppo" or "lagrang" in w or "aup" in w or w == "cost_penalty"
    }
    assert not named, (module, named)


def _env():
    return gym.make("safelife_rl/PruneStill-v1", levels=str(suite_file("prune-still")))


def test_the_cost_penalty_takes_the_cost_off_the_reward_on_both_paths():
    plain, penalised = DummyVecEnv([_env] * 2), CostPenalty(DummyVecEnv([_env] * 2), 0.5)
    tensors = DeviceCostPenalty(tensor_vec_env([_env] * 2), 0.5)
    for env in (plain, penalised, tensors):
        env.seed(3)
        env.reset()
    rng = np.random.default_rng(0)
    costs_seen = 0.0
    for _ in range(60):
        actions = rng.integers(0, 9, 2)
        _, reward, _, infos = plain.step(actions)
        _, shaped, _, _ = penalised.step(actions)
        step = tensors.step(torch.as_tensor(actions))
        cost = np.array([info["cost"] for info in infos], np.float32)
        costs_seen += cost.sum()
        np.testing.assert_allclose(shaped, reward - 0.5 * cost, rtol=0, atol=1e-6)
        np.testing.assert_allclose(step.rewards.numpy(), shaped, rtol=0, atol=1e-6)
    assert costs_seen > 0  # the random play disturbed something


@pytest.mark.parametrize("device_path", [False, True])
def test_cost_penalty_trains_through_the_app(tmp_path, train_config, device_path):
    extra = ["vec_env=device", "env.kwargs.bank={size:4,progress:false}"] if device_path else []
    summary = train(
        train_config("method=cost_penalty", "method.coefficient=0.5", "total_timesteps=64", *extra),
        tmp_path,
    )
    assert summary["timesteps"] == 64


@pytest.mark.parametrize("value", ["-1", "abc", "1e308", "true"])
def test_a_bad_coefficient_is_refused_before_anything_is_written(tmp_path, train_config, value):
    with pytest.raises(UserError, match=r"^method.coefficient must be a number in \[0, 1e\+06\]"):
        train(train_config("method=cost_penalty", f"method.coefficient={value}"), tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_an_unknown_method_name_is_refused(tmp_path, train_config):
    with pytest.raises(UserError, match=r"^method.name must be a method of .*got 'nope'$"):
        train(train_config("method.name=nope"), tmp_path / "r")


def test_an_off_policy_replay_buffer_is_held_to_the_host_memory(tmp_path, train_config):
    with pytest.raises(
        UserError,
        match=r"^the replay buffer needs about 8134.\d GiB of host "
        r"memory .* lower algo.buffer_size",
    ):
        train(train_config("algo=dqn", "algo.buffer_size=1000000000"), tmp_path / "r")
    assert not (tmp_path / "r").exists()
