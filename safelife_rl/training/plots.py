"""Learning curves from runs' TensorBoard logs, as PNGs.

python -m safelife_rl plots RUN_DIR [RUN_DIR ...] --out curves.png
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from safelife_rl.training.methods.plugin import DEFAULT as PLAIN_METHOD
from safelife_rl.training.resume import CONFIG_FILE, load_run_config
from safety_rl_common.errors import UserError
from safety_rl_common.figures import save_figure

#: Each panel's metric (``episode/<metric>``, ``eval/<metric>``) and its y-axis label.
PANELS = {
    "performance": "share of available points",
    "success": "success rate",
    "reward": "reward per episode",
    "length": "steps per episode",
}
#: A series with fewer points than this shows each as a marker (a short run's curve is a
#: few points, some at one step, which a bare line hides).
FEW_POINTS = 30


def read_scalars(run_dir: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every scalar of a run's ``tensorboard/`` folder as (steps, values), sorted by step (in
    the order logged within a step)."""
    logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its per-file INFO lines
    events = EventAccumulator(str(Path(run_dir) / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    out = {}
    for tag in events.Tags()["scalars"]:
        points = sorted(((e.step, e.value) for e in events.Scalars(tag)), key=lambda p: p[0])
        out[tag] = (np.array([p[0] for p in points]), np.array([p[1] for p in points]))
    return out


def smooth(values: np.ndarray, window: int = 50) -> np.ndarray:
    """Trailing mean over up to ``window`` episodes."""
    sums = np.cumsum(np.insert(values.astype(np.float64), 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def last_per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The last value logged at each step: the episodes that end in one step of the vector env
    (all envs at their time limit together) are logged at that step, and drawn one above the
    other they would be a vertical line."""
    last = np.append(steps[1:] != steps[:-1], True)
    return steps[last], values[last]


def run_label(run_dir: str | os.PathLike) -> str:
    """A run as its ``config.yaml`` names it: task, method and seed (``PruneStill-v1, ppo,
    seed 0``); the method is the algorithm's name for plain training (``dqn``), else the
    method's (``aup``). The folder's name where the run has no readable config."""
    if not (Path(run_dir) / CONFIG_FILE).is_file():
        return Path(run_dir).name
    try:
        cfg = load_run_config(run_dir)
    except UserError:
        return Path(run_dir).name
    task = str(OmegaConf.select(cfg, "env.id", default="?")).split(":")[-1].split("/")[-1]
    method = OmegaConf.select(cfg, "method.name", default=None) or PLAIN_METHOD
    if method == PLAIN_METHOD:
        target = OmegaConf.select(cfg, "algo._target_", default=None)
        method = str(target).rsplit(".", 1)[-1].lower() if target else method
    return f"{task}, {method}, seed {OmegaConf.select(cfg, 'seed', default='?')}"


def run_labels(run_dirs: Sequence[str | os.PathLike]) -> list[str]:
    """:func:`run_label` of each run, with the folder's name added where two runs share one."""
    labels = [run_label(run_dir) for run_dir in run_dirs]
    shared = {label for label, count in Counter(labels).items() if count > 1}
    return [
        f"{label} ({Path(run_dir).name})" if label in shared else label
        for label, run_dir in zip(labels, run_dirs)
    ]


def learning_curves(
    run_dirs: Sequence[str | os.PathLike], labels: Sequence[str] | None = None
) -> Figure:
    """Training episodes (a trailing mean) and evaluations (dashed, markers) of each run, one
    panel per metric of :data:`PANELS`; each run named by ``labels`` or :func:`run_labels`."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.8), layout="constrained")
    names = labels or run_labels(run_dirs)
    for k, (run_dir, label) in enumerate(zip(run_dirs, names)):
        scalars = read_scalars(run_dir)
        color = f"C{k % 10}"  # the run's in every panel
        for ax, metric in zip(axes, PANELS):
            if f"episode/{metric}" in scalars:
                steps, values = scalars[f"episode/{metric}"]
                steps, values = last_per_step(steps, smooth(values))
                marker = "o" if len(steps) < FEW_POINTS else None
                ax.plot(
                    steps, values, marker=marker, ms=3.5, color=color, label=f"{label}, training"
                )
            if f"eval/{metric}" in scalars:
                steps, values = scalars[f"eval/{metric}"]
                ax.plot(steps, values, "o--", color=color, label=f"{label}, evaluation")
    for ax, (metric, unit) in zip(axes, PANELS.items()):
        ax.set_title(f"episode {metric}")
        ax.set_xlabel("env steps")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    handles = {}  # one legend entry per label, from whichever panel has it
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, handle)
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=2, fontsize=8)
    return fig


def plot_runs(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    labels: Sequence[str] | None = None,
) -> Path:
    """:func:`learning_curves` written to ``out`` through a temporary file."""
    return save_figure(learning_curves(run_dirs, labels), out, dpi=100)
