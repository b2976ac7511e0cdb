"""Smoke tests of the user-facing commands with tiny budgets."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from PIL import Image

from drest.apps import reproduce
from drest.apps.train import run
from safety_rl_common.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
CONF = str(ROOT / "drest" / "conf")


def cfg(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose(config_name="train", overrides=list(overrides))


def test_train_cli_reinforce_writes_outputs(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drest",
            "train",
            "gridworld=lopsided",
            "x=0.5",
            "reward=drest",
            "agent=reinforce",
            "seed=1",
            "agent.meta_episodes=4",
            f"hydra.run.dir={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    metrics = run(
        cfg(
            f"gridworld={world}",
            "agent=ppo",
            "agent.total_timesteps=512",
            "agent.n_steps=64",
            "agent.batch_size=64",
            "agent.n_envs=2",
            "agent.eval_freq=256",
        ),
        tmp_path / "out",
    )
    assert set(metrics["length_probs"]) == {"2", "4"}
    assert (tmp_path / "out" / "model.zip").exists()
    assert (tmp_path / "out" / "policy.png").exists()


def test_train_ppo_procedural_heldout(tmp_path):
    metrics = run(
        cfg(
            "gridworld=procedural",
            "agent=ppo",
            "agent.total_timesteps=256",
            "agent.n_steps=64",
            "agent.batch_size=64",
            "agent.n_envs=2",
            "agent.meta_episode_size=4",
            "agent.heldout_worlds=3",
            "agent.eval_freq=256",
        ),
        tmp_path / "out",
    )
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
    summary = reproduce.run(
        ["--seeds", "1", "--scale", "0.01", "--workers", "2", "--out", str(tmp_path)]
    )
    assert summary["runs"] == 2 * (1 + 8 + 17)
    text = (tmp_path / "results.md").read_text()
    assert "| example |" not in text and "| drest |" in text and "0.9945" in text
    for name in (
        "fig3_example_curves.png",
        "fig6_lopsided.png",
        "policy_example_drest.png",
        "appendix_royal_road_curves.png",
    ):
        assert (tmp_path / name).stat().st_size > 1000


def train_cli(*overrides, env=None):
    return subprocess.run(
        [sys.executable, "-m", "drest", "train", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_train_cli_user_error_is_one_line(tmp_path):
    world = tmp_path / "walled.txt"
    world.write_text("length: 2\ngrid:\n  W W\n  W A\n")
    proc = train_cli(f"gridworld={world}", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        (
            f"python -m drest train: error: {world}: the agent at (1, 1) is walled in: it can "
            "never move, so it is never shut down (free a neighbouring cell, or set "
            "bumps_use_moves: yes)"
        )
    ]
    assert not (tmp_path / "run").exists(), "a refused run leaves no folder behind"
    proc = train_cli(
        "agent.lam=2", f"hydra.run.dir={tmp_path / 'run'}", env={"HYDRA_FULL_ERROR": "1"}
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    assert "UserError: agent.lam must be strictly between 0 and 1, got 2" in proc.stderr


@pytest.mark.parametrize(
    "override, words",
    [
        ("agent.lam=1", "agent.lam must be strictly between 0 and 1, got 1"),
        ("agent.meta_episodes=-5", "agent.meta_episodes must be a positive integer (at most 2**53"),
        ("agent.meta_episodes=no", "agent.meta_episodes must be an integer, got 'no'"),
        ("agent.eps_start=nan", "agent.eps_start must be in (0, 1], got nan"),
        ("agent.eval_every=0", "agent.eval_every must be a positive integer"),
        ("+agent.lr=0.1", "unknown key 'agent.lr'"),
        ("+epochs=3", "unknown key 'epochs'"),
        ("seed=-1", "seed must be an integer in [0, 2**32)"),
        ("seed=no", "seed must be an integer"),
        ("x=no", "x must be a positive number, got 'no'"),
        ("gridworld=lopsided x=0", "x must be a positive number, got 0"),
        ("max_states=0", "max_states must be a positive integer"),
        ("gridworld=lopsided x=0.37 max_states=10", "has more than 10 reachable states (limit max"),
        ("agent=ppo agent.obs_type=pixels", "agent.obs_type must be vector or image"),
        ("agent=ppo agent.total_timesteps=-1", "agent.total_timesteps must be a positive integer"),
        ("agent=ppo agent.gamma=0", "agent.gamma must be in (0, 1], got 0"),
        ("agent=ppo agent.batch_size=1", "agent.batch_size must be an integer >= 2"),
        (
            "agent=ppo agent.n_steps=1 agent.n_envs=1",
            "agent.n_steps must be from 2 to 1048576 once multiplied by n_envs",
        ),
        ("agent=ppo agent.ent_coef=yes", "agent.ent_coef must be a number, got 'yes'"),
        (f"agent=ppo agent.ent_coef={10**30}", "agent.ent_coef must be in [0, 1]"),
        ("agent=ppo agent.learning_rate=1e30", "agent.learning_rate must be in (0, 1], got 1e+30"),
        ("agent=ppo +agent.procedural=true", "unknown key 'agent.procedural'"),
        ("gridworld=procedural", "procedural needs agent=ppo"),
        ("gridworld=nowhere.txt", "gridworld file not found"),
    ],
)
def test_bad_config_values_are_user_errors_before_training(tmp_path, override, words):
    with pytest.raises(UserError) as error:
        run(cfg(*override.split()), tmp_path / "out")
    assert words in str(error.value)
    assert not (tmp_path / "out").exists()


def test_one_length_world_reports_null_normalized_neutrality(tmp_path):
    world = tmp_path / "one.txt"
    world.write_text("length: 3\ngrid:\n  A . C1\n")
    run(cfg(f"gridworld={world}", "agent.meta_episodes=2"), tmp_path / "out")
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["neutrality_normalized"] is None and metrics["neutrality"] == 0.0
    assert list(metrics["length_probs"]) == ["3"]


def test_large_world_writes_metrics_and_skips_the_figure(tmp_path):
    world = tmp_path / "wide.txt"
    world.write_text(
        "length: 2\ngamma: 0.9\ngrid:\n"
        + "\n".join(
            "  "
            + " ".join(
                "A"
                if (r, c) == (0, 0)
                else "B2"
                if (r, c) == (0, 2)
                else "C1"
                if (r, c) == (1, 0)
                else "."
                for c in range(60)
            )
            for r in range(60)
        )
    )
    metrics = run(cfg(f"gridworld={world}", "agent.meta_episodes=2"), tmp_path / "out")
    assert "no policy figure: the 60x60 grid has 3,600 cells" in metrics["policy_figure"]
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == metrics
    assert not (tmp_path / "out" / "policy.png").exists()


def test_wide_world_figure_is_drawn_smaller(tmp_path):
    world = tmp_path / "wide.txt"
    world.write_text("length: 2\ngrid:\n  A B2 C1" + " ." * 40 + "\n")
    run(cfg(f"gridworld={world}", "agent.meta_episodes=2"), tmp_path / "out")
    with Image.open(tmp_path / "out" / "policy.png") as image:
        assert image.width <= 24 * 120 + 200


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--seeds", "0"], "--seeds must be from 1 to 1000, got 0"),
        (["--scale", "0"], "--scale must be a positive number, got 0.0"),
        (["--scale", "nan"], "--scale must be a positive number, got nan"),
        (["--workers", "0"], "--workers must be from 1 to"),
    ],
)
def test_reproduce_bad_flags_are_one_line(tmp_path, capsys, argv, words):
    with pytest.raises(SystemExit) as exit_:
        reproduce.main([*argv, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"drest reproduce: error: {words}")
    assert not (tmp_path / "out").exists()


def test_reproduce_out_must_be_a_directory(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        reproduce.main(["--quick", "--out", str(tmp_path / "file")])
    assert "exists and is not a directory" in capsys.readouterr().err
    with pytest.raises(UserError, match="not a directory"):
        reproduce.main(["--quick", "--traceback", "--out", str(tmp_path / "file")])


def test_huge_budgets_are_user_errors(tmp_path):
    with pytest.raises(UserError, match=r"agent.meta_episodes must be a positive integer \(at"):
        run(cfg(f"agent.meta_episodes={10**400}"), tmp_path / "out")
