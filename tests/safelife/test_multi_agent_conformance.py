"""Replays of the original SafeLife 1.2's multi-agent traces (two agents each): every array bit
for bit at every step with both engines, the side effects to 1e-6, through the replay command."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from safelife_rl.apps.cli import main

TRACES = sorted(
    (Path(__file__).resolve().parents[1] / "data/safelife/traces-multiagent").glob("*.npz")
)
FIELDS = ("boards", "goals", "agent_locs", "rewards", "dones", "obs_first", "obs_last")

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_reference_data_present():
    assert len(TRACES) == 25
    tasks = {trace.stem.rsplit("-", 1)[0] for trace in TRACES}
    assert tasks == {
        f"multi-{task}"
        for task in ("asym1", "asym2", "build-compete", "build-coop", "build-parallel")
    }


def assert_trace_matches(ours: np.lib.npyio.NpzFile, theirs: np.lib.npyio.NpzFile) -> None:
    assert set(ours.files) == set(theirs.files)
    for field in FIELDS + ("actions", "level_board", "level_agent_locs", "level_points_table"):
        assert ours[field].shape == theirs[field].shape, field
        mismatch = np.argwhere(ours[field] != theirs[field])
        assert len(mismatch) == 0, f"{field} differs first at index {mismatch[0]}"
    mine, recorded = json.loads(str(ours["side_effects"])), json.loads(str(theirs["side_effects"]))
    assert mine.keys() == recorded.keys()
    for name, values in recorded.items():
        assert mine[name] == pytest.approx(values, abs=1e-6), name


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.stem)
def test_trace_replays_bit_for_bit(trace, engine, tmp_path):
    out = tmp_path / "replayed.npz"
    assert main(["replay", str(trace), "--out", str(out), "--engine", engine]) == 0
    assert_trace_matches(np.load(out), np.load(trace))


def test_traces_exercise_the_multi_agent_rules():
    """The traces are worth matching: every agent moves, and agents earn and lose points. (No
    agent exits in them: test_multi_agent_game.py covers exits and destroyed agents.)"""
    traces = [np.load(trace) for trace in TRACES]
    moved = [np.any(t["agent_locs"][1:] != t["agent_locs"][:1], axis=(0, 2)) for t in traces]
    assert np.all(moved)  # every agent of every trace moves
    rewards = np.concatenate([t["rewards"].ravel() for t in traces])
    assert (rewards > 0).any() and (rewards < 0).any()


def test_replay_command_line_and_bad_actions(tmp_path):
    trace = TRACES[0]
    out = tmp_path / "out.npz"
    done = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "replay", str(trace), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote" in done.stdout
    assert np.array_equal(np.load(out)["agent_locs"], np.load(trace)["agent_locs"])

    arrays = dict(np.load(trace))
    arrays["actions"] = arrays["actions"][:, :1]  # one action per step for two agents
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    failed = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "replay", str(bad), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines() == [
        f"python -m safelife_rl replay: error: {bad}: actions must have shape (T, 2) for the "
        "level's 2 agents, got (120, 1)"
    ]
