"""The README's main job until training lands: a random agent logged to TensorBoard."""

import json

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from safelife_rl.__main__ import main


def test_random_run_logs_episodes(tmp_path, capsys):
    assert main(["random-run", "--episodes", "3", "--time-limit", "50", "--logdir",
                 str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["mean_length"] == 50
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert {"episode/reward", "episode/length", "episode/performance",
            "episode/success"} <= set(events.Tags()["scalars"])
    lengths = events.Scalars("episode/length")
    assert [e.value for e in lengths] == [50, 50, 50]
    assert [e.step for e in lengths] == [50, 100, 150]
