"""Learning curves from runs' TensorBoard logs, as PNGs.

python -m safelife_rl plots RUN_DIR [RUN_DIR ...] --out curves.png
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from safety_rl_common.figures import save_figure

PANELS = ("performance", "success", "reward", "length")


def read_scalars(run_dir: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every scalar of a run's ``tensorboard/`` folder as (steps, values), sorted by step."""
    logging.getLogger("tensorboard").setLevel(logging.WARNING)  # its per-file INFO lines
    events = EventAccumulator(str(Path(run_dir) / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    out = {}
    for tag in events.Tags()["scalars"]:
        points = sorted((e.step, e.value) for e in events.Scalars(tag))
        out[tag] = (np.array([p[0] for p in points]), np.array([p[1] for p in points]))
    return out


def smooth(values: np.ndarray, window: int = 50) -> np.ndarray:
    """Trailing mean over up to ``window`` episodes."""
    sums = np.cumsum(np.insert(values.astype(np.float64), 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def plot_runs(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    labels: Sequence[str] | None = None,
) -> Path:
    """Training episodes (smoothed) and evaluations (markers) of each run, one panel per
    metric; written to ``out`` through a temporary file."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    for k, run_dir in enumerate(run_dirs):
        scalars = read_scalars(run_dir)
        label = labels[k] if labels else Path(run_dir).name
        for ax, metric in zip(axes, PANELS):
            line = None
            if f"episode/{metric}" in scalars:
                steps, values = scalars[f"episode/{metric}"]
                (line,) = ax.plot(steps, smooth(values), label=f"{label} (training)")
            if f"eval/{metric}" in scalars:
                steps, values = scalars[f"eval/{metric}"]
                color = line.get_color() if line is not None else None
                ax.plot(steps, values, "o--", color=color, label=f"{label} (evaluation)")
    for ax, metric in zip(axes, PANELS):
        ax.set_title(f"episode {metric}")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    for ax in axes:  # one legend, on the first panel with curves
        if ax.lines:
            ax.legend(fontsize=7)
            break
    fig.tight_layout()
    return save_figure(fig, out, dpi=100)
