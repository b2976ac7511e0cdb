"""The reproduction commands end to end on tiny budgets: files, per-seed results, resuming."""

import csv
import json

import pytest

from extended_envs import reproduce


def test_table1_writes_results_and_resumes_from_saved_runs(tmp_path):
    args = ["table1", "--steps", "40", "--seeds", "2", "--jobs", "1", "--out", str(tmp_path)]
    reproduce.main(args)
    for name in ("table1.csv", "table1.md", "table1.png"):
        assert (tmp_path / name).stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "table1.csv").open()))
    assert sorted((r["agent"], r["seed"]) for r in rows) == sorted(
        (agent, str(seed)) for agent in reproduce.TABLE1_AGENTS for seed in (0, 1)
    )
    assert all(-1 <= float(r["reward_per_step"]) <= 1 for r in rows)
    # A saved run is used as it is, not run again.
    saved = tmp_path / "runs" / "QLearner_1_40.json"
    result = json.loads(saved.read_text())
    saved.write_text(json.dumps([*result[:2], 0.123, result[3]]))
    reproduce.main(args)
    assert "+0.12300" in (tmp_path / "table1.md").read_text()
    saved.write_text("{not json")
    with pytest.raises(ValueError, match="QLearner_1_40.json is not a saved run result"):
        reproduce.main(args)


def test_figures_write_every_curve(tmp_path):
    reproduce.main(
        ["figures", "--steps", "60", "--seeds", "1", "--jobs", "1", "--out", str(tmp_path)]
    )
    for name in ("figure1.png", "figure2.png", "figures.csv", "figures.md"):
        assert (tmp_path / name).stat().st_size > 0
    table = (tmp_path / "figures.md").read_text()
    for env_name in reproduce.FIGURE_ENVS.values():
        for label in ("DQN", "RC(DQN)", "PPO", "RC(PPO)"):
            assert f"| {env_name} | {label} |" in table
