"""The README's main job until training lands: a random agent logged to TensorBoard."""

import json
import os
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from safelife_rl.apps.cli import main
from safelife_rl.apps.random_run import random_run
from safety_rl_common.errors import UserError


def test_random_run_logs_episodes(tmp_path, capsys):
    assert (
        main(["random-run", "--episodes", "3", "--time-limit", "50", "--logdir", str(tmp_path)])
        == 0
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["mean_length"] == 50
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert {"episode/reward", "episode/length", "episode/performance", "episode/success"} <= set(
        events.Tags()["scalars"]
    )
    lengths = events.Scalars("episode/length")
    assert [e.value for e in lengths] == [50, 50, 50]
    assert [e.step for e in lengths] == [50, 100, 150]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--episodes", "0"], "episodes must be at least 1, got 0"),
        (["--time-limit", "-5"], "time_limit must be a positive integer, got -5"),
        (["--seed", "-1"], "seed must be a non-negative integer, got -1"),
        (["--levels", ""], "levels path is empty"),
        (["--levels", "missing.npz"], "missing.npz: No such file or directory"),
        (["--episodes", "x"], "argument --episodes: invalid int value: 'x'"),
        (["--task", "nope"], "argument --task: invalid choice: 'nope'"),
    ],
)
def test_user_errors_end_with_one_line(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    logdir = tmp_path / "logs"
    with pytest.raises(SystemExit) as exit_info:
        main(["random-run", "--episodes", "1", "--logdir", str(logdir), *flags])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("safelife-rl random-run: error: ")
    assert message in err
    assert not logdir.exists()  # nothing written before the error


def test_traceback_flag_shows_the_error(tmp_path):
    with pytest.raises(UserError, match="episodes must be at least 1"):
        main(["random-run", "--episodes", "0", "--logdir", str(tmp_path), "--traceback"])


def test_summary_is_flushed_before_it_appears(tmp_path, monkeypatch):
    """summary.json is written whole to a temporary file, synced, then renamed."""
    synced = []

    def fsync(fd: int) -> None:
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), (tmp_path / "summary.json").exists()))

    monkeypatch.setattr(os, "fsync", fsync)
    random_run(episodes=1, time_limit=5, logdir=tmp_path)
    summaries = [(Path(name).name, done) for name, done in synced if "summary.json" in name]
    assert len(summaries) == 1
    name, existed = summaries[0]
    assert name.startswith(".summary.json.") and not existed
    assert [p.name for p in tmp_path.iterdir() if "summary" in p.name] == ["summary.json"]
