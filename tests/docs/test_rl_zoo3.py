"""The rl-zoo3 command of docs/using/rl_zoo3.md trains PPO with the shipped hyperparameters."""

from __future__ import annotations

import importlib.util
import os
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "docs" / "rl_zoo3" / "ppo_safelife.py"


def test_the_shipped_file_covers_every_safelife_id_with_the_safelife_cnn():
    import gymnasium as gym

    import safelife_rl  # noqa: F401
    from safelife_rl.training import SafeLifeCNN

    hyperparams = runpy.run_path(str(CONF))["hyperparams"]
    safelife_ids = {k for k, spec in gym.registry.items() if spec.namespace == "safelife_rl"}
    assert set(hyperparams) == safelife_ids
    for settings in hyperparams.values():
        assert settings["policy_kwargs"]["features_extractor_class"] is SafeLifeCNN
        assert settings["batch_size"] * 4 == settings["n_envs"] * settings["n_steps"]


def test_rl_zoo3_trains_a_safelife_id_with_the_shipped_file(tmp_path):
    # looked up, not imported: importing rl_zoo3 replaces Gymnasium's TimeLimit for the whole
    # process (its gym_patches), which would change every later test in this worker
    assert importlib.util.find_spec("rl_zoo3") is not None, "the dev extra installs rl_zoo3"
    command = [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        "ppo",
        "--env",
        "safelife_rl/PruneStill-v1",
        "--gym-packages",
        "safelife_rl",
        "--conf-file",
        str(CONF),
        # short: 2 envs, 2 rollouts of 20 steps, no evaluation
        "-n",
        "80",
        "--hyperparams",
        "n_envs:2",
        "--eval-freq",
        "-1",
        "--seed",
        "0",
        "-f",
        str(tmp_path / "logs"),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "logs" / "ppo" / "safelife_rl-PruneStill-v1_1"
    assert (run / "safelife_rl-PruneStill-v1.zip").is_file()
    config = (run / "safelife_rl-PruneStill-v1" / "config.yml").read_text()
    assert "SafeLifeCNN" in config and "safelife_rl.training.ExitCurriculum" in config
    # TrainingClock ran: the curriculum's schedule is logged at each rollout
    assert "exit_fraction" in result.stdout
    assert "total_timesteps      | 80" in result.stdout
