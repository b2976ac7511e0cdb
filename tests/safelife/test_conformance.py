"""Replays of the original SafeLife's recorded traces.

Deterministic traces must match bit for bit at every step. Traces of levels with spawners depend
on random numbers, so their live-cell counts are compared in distribution: each recorded
statistic's mid-rank among 100 of our replays (its probability integral transform, uniform on
[0, 1] if the engines agree) is pooled over all stochastic traces and tested against the uniform
distribution with a Kolmogorov-Smirnov test at level 0.001. The same test must reject an engine
whose spawners fire at half the rate, so it has the power to catch a wrong rule.
"""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from safelife_rl.engine.replay import live_cell_counts, load_trace

TRACES = sorted((Path(__file__).resolve().parents[1] / "data/safelife/traces").glob("*.npz"))

FIELDS = (
    "boards",
    "goals",
    "rewards",
    "dones",
    "obs_first",
    "obs_last",
    "points",
    "required_points",
)
DETERMINISTIC = [t for t in TRACES if not np.load(t)["stochastic"]]
STOCHASTIC = [t for t in TRACES if np.load(t)["stochastic"]]


def test_reference_data_present():
    assert len(DETERMINISTIC) >= 70 and len(STOCHASTIC) >= 30


@pytest.mark.parametrize("trace", DETERMINISTIC, ids=lambda p: p.stem)
def test_deterministic_trace_matches_bit_for_bit(trace, tmp_path):
    out = tmp_path / "replayed.npz"
    from safelife_rl.apps.cli import main

    assert main(["replay", str(trace), "--out", str(out)]) == 0
    ours, theirs = np.load(out), np.load(trace)
    for field in FIELDS:
        assert ours[field].shape == theirs[field].shape, field
        mismatch = np.argwhere(ours[field] != theirs[field])
        assert len(mismatch) == 0, f"{field} differs first at index {mismatch[0]}"


def test_replay_command_line(tmp_path):
    out = tmp_path / "out.npz"
    trace = DETERMINISTIC[0]
    done = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "replay", str(trace), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote" in done.stdout
    assert np.array_equal(np.load(out)["boards"], np.load(trace)["boards"])


def _pit_values(spawn_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """PIT of the recorded mean and final live-cell counts among our replays."""
    mean_pit, final_pit = [], []
    for i, trace in enumerate(STOCHASTIC):
        level, actions, arrays = load_trace(trace)
        level = replace(level, spawn_prob=level.spawn_prob * spawn_scale)
        ours = live_cell_counts(level, actions, runs=100, seed=i).astype(float)
        recorded = np.count_nonzero(arrays["boards"] & 1, axis=(1, 2)).astype(float)
        for pits, sims, value in (
            (mean_pit, ours.mean(axis=1), recorded.mean()),
            (final_pit, ours[:, -1], recorded[-1]),
        ):
            pits.append(
                (np.sum(sims < value) + 0.5 * np.sum(sims == value) + 0.5) / (len(sims) + 1)
            )
    return np.array(mean_pit), np.array(final_pit)


def test_stochastic_traces_match_in_distribution():
    for pits in _pit_values(1.0):
        assert stats.kstest(pits, "uniform").pvalue > 1e-3, pits


def test_distribution_test_rejects_wrong_spawn_rate():
    mean_pit, _ = _pit_values(0.5)
    assert stats.kstest(mean_pit, "uniform").pvalue < 1e-3
