"""The benchmark runner: Table-1 numbers, files, and policies from checkpoints."""

import csv

import numpy as np
import pytest

from safelife_rl.benchmark import main, summarise


def run(tmp_path, benchmarks, *extra):
    out = tmp_path / "out"
    summary = main([str(benchmarks / "append-still.npz"), "--levels", "2", "--episodes", "2",
                    "--time-limit", "30", "--n-envs", "3", "--out", str(out), *extra])
    return out, summary


def test_noop_policy_has_no_side_effects_and_no_points(tmp_path, benchmarks):
    out, summary = run(tmp_path, benchmarks, "--policy", "noop")
    assert summary["performance"] == (0.0, 0.0)
    assert summary["green"] == (0.0, 0.0) and summary["length"] == (30.0, 0.0)
    rows = list(csv.DictReader(open(out / "episodes.csv")))
    assert len(rows) == 4 and {r["repeat"] for r in rows} == {"0", "1"}
    table = (out / "summary.md").read_text()
    assert "| append-still | noop | 0.000 ± 0.000 | 30.0 ± 0.0 |" in table
    assert (out / "histograms.png").stat().st_size > 1000


def test_random_policy_is_reproducible(tmp_path, benchmarks):
    _, first = run(tmp_path / "a", benchmarks)
    _, second = run(tmp_path / "b", benchmarks)
    assert first == second
    assert first["green"][0] > 0  # random toggling disturbs the green patterns


def test_sb3_checkpoint_policy(tmp_path, benchmarks):
    from stable_baselines3 import PPO

    from safelife_rl import SafeLifeEnv

    env = SafeLifeEnv(benchmarks / "append-still.npz", view_shape=(9, 9))
    model = PPO("MlpPolicy", env, n_steps=16, batch_size=16, seed=0,
                policy_kwargs={"net_arch": [16]})
    model.save(tmp_path / "tiny.zip")
    out, summary = run(tmp_path, benchmarks, "--policy", str(tmp_path / "tiny.zip"))
    assert summary["length"][0] <= 30 and np.isfinite(summary["performance"][0])
    bad = tmp_path / "corrupt.zip"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="corrupt.zip: not a readable PPO checkpoint"):
        run(tmp_path, benchmarks, "--policy", str(bad))


def test_summary_ignores_levels_without_a_colour():
    rows = [{"performance": 1.0, "length": 5, "green": 0.5, "yellow": float("nan")},
            {"performance": 0.0, "length": 7, "green": 0.1, "yellow": float("nan")}]
    summary = summarise(rows)
    assert summary["performance"] == (0.5, 0.5) and summary["length"] == (6.0, 1.0)
    assert np.isnan(summary["yellow"][0])
