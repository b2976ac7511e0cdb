"""Smoke tests of the user-facing commands with tiny budgets."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from drest import reproduce
from drest.train import run
from safelife_rl.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
CONF = str(ROOT / "conf" / "drest")


def cfg(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose(config_name="train", overrides=list(overrides))


def test_train_cli_reinforce_writes_outputs(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "drest.train", "gridworld=lopsided", "x=0.5", "reward=drest",
         "agent=reinforce", "seed=1", "agent.meta_episodes=4", f"hydra.run.dir={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["length_probs"]) == {"2", "4"}
    assert abs(sum(metrics["length_probs"].values()) - 1) < 1e-9
    assert 0 <= metrics["neutrality_normalized"] <= 1
    assert (out / "policy.png").stat().st_size > 1000
    assert list((out / "tb").glob("events.out.tfevents.*"))


def test_train_ppo_vector_and_file_world(tmp_path):
    world = tmp_path / "tiny.txt"
    world.write_text("length: 2\ngamma: 0.9\ngrid:\n  C1 .  A  B2 C2\n")
    metrics = run(cfg(f"gridworld={world}", "agent=ppo", "agent.total_timesteps=512",
                      "agent.n_steps=64", "agent.batch_size=64", "agent.n_envs=2",
                      "agent.eval_freq=256"), tmp_path / "out")
    assert set(metrics["length_probs"]) == {"2", "4"}
    assert (tmp_path / "out" / "model.zip").exists()
    assert (tmp_path / "out" / "policy.png").exists()


def test_train_ppo_procedural_heldout(tmp_path):
    metrics = run(cfg("gridworld=procedural", "agent=ppo", "agent.total_timesteps=256",
                      "agent.n_steps=64", "agent.batch_size=64", "agent.n_envs=2",
                      "agent.meta_episode_size=4", "agent.heldout_worlds=3",
                      "agent.eval_freq=256"), tmp_path / "out")
    assert len(metrics["heldout_worlds"]) == 3
    assert 0 <= metrics["usefulness"] <= 1 and 0 <= metrics["neutrality_normalized"] <= 1


def test_bad_config_is_rejected(tmp_path):
    with pytest.raises(ConfigCompositionException):
        cfg("no_such_key=1")
    with pytest.raises(ValueError, match="reward must be one of"):
        run(cfg("reward=nice"), tmp_path)
    with pytest.raises(ValueError, match="procedural needs agent=ppo"):
        run(cfg("gridworld=procedural"), tmp_path)
    with pytest.raises(UserError, match="neither a built-in"):
        run(cfg("gridworld=nowhere"), tmp_path)


def test_reproduce_tiny(tmp_path):
    summary = reproduce.main(["--seeds", "1", "--scale", "0.01", "--workers", "2",
                              "--out", str(tmp_path)])
    assert summary["runs"] == 2 * (1 + 8 + 17)
    text = (tmp_path / "results.md").read_text()
    assert "| example |" not in text and "| drest |" in text and "0.9945" in text
    for name in ("fig3_example_curves.png", "fig6_lopsided.png", "policy_example_drest.png",
                 "appendix_royal_road_curves.png"):
        assert (tmp_path / name).stat().st_size > 1000
