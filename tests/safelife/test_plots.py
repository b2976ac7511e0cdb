"""``safelife_rl plots``: panels with y-axis labels, runs named by task, method and seed, and
short series drawn as visible points."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from safelife_rl.apps.plots import main as plots_main
from safelife_rl.training.plots import FEW_POINTS, PANELS, learning_curves

CONFIG = """\
env:
  id: {env_id}
algo:
  _target_: {algo}
method:
  name: {method}
seed: {seed}
"""


def write_run(
    folder: Path,
    episodes: list[tuple[int, float]],
    evaluations: list[tuple[int, float]] = (),
    config: dict | None = None,
) -> Path:
    """A run folder as training leaves it (``config.yaml``, ``tensorboard/``), its scalars
    the same ``(step, value)`` pairs in every panel."""
    folder.mkdir(parents=True)
    if config is not None:
        (folder / "config.yaml").write_text(CONFIG.format(**config))
    writer = SummaryWriter(str(folder / "tensorboard"))
    for metric in PANELS:
        for step, value in episodes:
            writer.add_scalar(f"episode/{metric}", value, step)
        for step, value in evaluations:
            writer.add_scalar(f"eval/{metric}", value, step)
    writer.close()
    return folder


PPO = {"env_id": "safelife_rl/PruneStill-v1", "algo": "stable_baselines3.PPO", "method": "ppo"}
LONG = [(64 * (i // 4 + 1), float(i % 7)) for i in range(400)]  # 4 episodes end per step
SHORT = [(60, 0.0), (60, 1.0), (60, 0.5)]  # every episode ended at one step


def legend_texts(fig) -> list[str]:
    return [text.get_text() for legend in fig.legends for text in legend.get_texts()]


def test_every_panel_has_a_y_axis_label(tmp_path):
    fig = learning_curves([write_run(tmp_path / "run", LONG, config={**PPO, "seed": 0})])
    assert [ax.get_ylabel() for ax in fig.axes] == list(PANELS.values())
    assert all(ax.get_ylabel() for ax in fig.axes)
    plt.close(fig)


def test_runs_are_named_by_task_method_and_seed_not_their_folder(tmp_path):
    runs = [
        write_run(tmp_path / "2026-11-27_10-00-00", LONG, [(640, 1.0)], {**PPO, "seed": 3}),
        write_run(
            tmp_path / "2026-11-27_11-00-00",
            LONG,
            config={**PPO, "method": "aup", "seed": 1},
        ),
        write_run(
            tmp_path / "2026-11-27_12-00-00",
            LONG,
            config={
                "env_id": "extended_envs:extended_envs/CartPole-IgnoreRewards-v0",
                "algo": "stable_baselines3.DQN",
                "method": "ppo",
                "seed": 0,
            },
        ),
    ]
    fig = learning_curves(runs)
    assert legend_texts(fig) == [
        "PruneStill-v1, ppo, seed 3, training",
        "PruneStill-v1, ppo, seed 3, evaluation",
        "PruneStill-v1, aup, seed 1, training",
        "CartPole-IgnoreRewards-v0, dqn, seed 0, training",
    ]
    plt.close(fig)


def test_runs_of_the_same_name_add_their_folder_and_a_run_without_config_is_its_folder(
    tmp_path,
):
    runs = [
        write_run(tmp_path / "a", SHORT, config={**PPO, "seed": 0}),
        write_run(tmp_path / "b", SHORT, config={**PPO, "seed": 0}),
        write_run(tmp_path / "old", SHORT),
    ]
    fig = learning_curves(runs)
    assert legend_texts(fig) == [
        "PruneStill-v1, ppo, seed 0 (a), training",
        "PruneStill-v1, ppo, seed 0 (b), training",
        "old, training",
    ]
    plt.close(fig)


def test_a_short_series_is_drawn_as_points_and_a_long_one_as_a_line(tmp_path):
    """A run whose episodes all end at one step is one point (their trailing mean), marked;
    a long run is one point per step at which episodes ended, a plain line."""
    short = write_run(tmp_path / "short", SHORT, config={**PPO, "seed": 0})
    long = write_run(tmp_path / "long", LONG, config={**PPO, "seed": 1})
    fig = learning_curves([short, long])
    short_line, long_line = fig.axes[0].lines
    assert short_line.get_xdata().tolist() == [60]
    assert short_line.get_ydata().tolist() == pytest.approx([0.5])
    assert short_line.get_marker() not in ("None", "", None)
    assert len(long_line.get_xdata()) == 100 >= FEW_POINTS
    assert np.all(np.diff(long_line.get_xdata()) > 0)  # no vertical segments
    assert long_line.get_marker() in ("None", "", None)
    plt.close(fig)


def test_the_command_writes_the_png(tmp_path, capsys):
    run = write_run(tmp_path / "run", SHORT, [(60, 0.5)], {**PPO, "seed": 0})
    assert plots_main([str(run), "--out", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
