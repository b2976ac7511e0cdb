"""The self-reflection benchmark: the measure, its files and the Hydra app."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extended_envs import reality_check
from extended_envs.agents import ConstantAgent, QLearner, RandomAgent
from extended_envs.apps.benchmark import (
    agent_class,
    environments_for,
    markdown_table,
    run_battery,
    self_reflection_measure,
    write_results,
)
from extended_envs.envs import TemptingButton, battery, minus_rewards

ROOT = Path(__file__).resolve().parents[2]


@settings(max_examples=2, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), action=st.integers(0, 1))
def test_agents_that_ignore_rewards_score_exactly_zero(seed, action):
    """Each environment is paired with its negation, and these agents cannot tell them apart."""
    for agent, hyperparams in ((RandomAgent, {}), (ConstantAgent, {"action": action})):
        rows = run_battery(agent, 10, [seed], **hyperparams)
        assert len(rows) == len(battery())
        assert self_reflection_measure(rows) == (0.0, 0.0)


def test_q_learner_beats_indifference_and_its_reality_check_does_better():
    """Measured at 200 steps, seeds 0-4: Q +0.48 to +0.50, its reality check +0.56 to +0.63."""
    plain, _ = self_reflection_measure(run_battery(QLearner, 200, [1]))
    checked, _ = self_reflection_measure(run_battery(reality_check(QLearner), 200, [1]))
    assert 0.4 < plain < checked - 0.05


def test_measure_is_the_mean_reward_per_step_over_seeds():
    rows = [
        {"agent": "X", "env": "E", "seed": 0, "nsteps": 10, "reward": 10.0},
        {"agent": "X", "env": "minus_rewards(E)", "seed": 0, "nsteps": 10, "reward": 0.0},
        {"agent": "X", "env": "E", "seed": 1, "nsteps": 10, "reward": -10.0},
        {"agent": "X", "env": "minus_rewards(E)", "seed": 1, "nsteps": 10, "reward": 0.0},
    ]
    measure, stderr = self_reflection_measure(rows)
    assert measure == 0.0 and stderr == pytest.approx(0.5)
    table = markdown_table(rows)
    assert "| E | +0.000 | +0.000 |" in table
    assert "Self-reflection measure: +0.0000" in table


def test_results_files(tmp_path):
    rows = run_battery(ConstantAgent, 20, [0, 1], environments_for(False, ["TemptingButton"]))
    write_results(rows, tmp_path)
    with open(tmp_path / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert [(r["env"], r["seed"]) for r in table] == [
        ("TemptingButton", "0"),
        ("minus_rewards(TemptingButton)", "0"),
        ("TemptingButton", "1"),
        ("minus_rewards(TemptingButton)", "1"),
    ]
    assert all(r["agent"] == "ConstantAgent" and r["nsteps"] == "20" for r in table)
    assert float(table[0]["reward"]) == -float(table[1]["reward"])
    assert "| TemptingButton |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "results.png").read_bytes()[:4] == b"\x89PNG"
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["results.csv", "results.md", "results.png"]  # no temporary files left


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown agent 'Qlerner'"):
        agent_class("Qlerner")
    assert agent_class("q") is QLearner and agent_class("RandomAgent") is RandomAgent
    with pytest.raises(ValueError, match="unknown environment"):
        environments_for(False, ["TemptingBotton"])
    with pytest.raises(ValueError, match="steps"):
        run_battery(RandomAgent, 0, [0])
    only = environments_for(False, ["TemptingButton"])
    assert only == [TemptingButton, minus_rewards(TemptingButton)]


def run_app(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "extended_envs", "benchmark", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hydra_app_end_to_end(tmp_path):
    done = run_app(
        "agent=q",
        "steps=30",
        "seeds=[0,1]",
        "reality_check=true",
        "only=[TemptingButton,IgnoreRewards]",
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 0, done.stderr
    assert "Self-reflection measure" in done.stdout
    with open(tmp_path / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 8
    assert {r["agent"] for r in table} == {"RealityCheck[QLearner]"}
    failed = run_app("agent=q", "stepz=3", f"hydra.run.dir={tmp_path / 'bad'}")
    assert failed.returncode != 0 and "stepz" in failed.stderr
