"""The paper's figures from the runs: Figure 3 (training curves of performance and green side
effects for the creation and removal tasks, from the periodic evaluations on the task's suite),
Figures 5 and 6 (histograms of benchmark performance and green side effects per penalty for
append-still and prune-still), and the tables as plots against the penalty."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from safelife_rl.apps.reproduce.runs import RunResult
from safelife_rl.apps.reproduce.tables import Row
from safety_rl_common.figures import save_figure

CURVE_TASKS = ("append-still", "prune-still")
#: (label, key of a periodic evaluation)
CURVES = (
    ("performance", "mean_performance"),
    ("green side effect", "mean_side_effects/normalized/green"),
)
HISTOGRAM_FIGURES = {"append-still": "figure5.png", "prune-still": "figure6.png"}


def _penalties(results: Sequence[RunResult], task: str) -> list[float]:
    return sorted({r.run.penalty for r in results if r.run.task == task})


def curve_steps(results: Sequence[RunResult], key: str) -> tuple[np.ndarray, np.ndarray]:
    """The steps all runs evaluated at, and evaluation ``key`` there: ``(runs, steps)``, NaN
    where an evaluation lacks it."""
    steps = sorted(set.intersection(*({e["step"] for e in r.evaluations} for r in results)))
    values = [
        [next(e.get(key, np.nan) for e in r.evaluations if e["step"] == s) for s in steps]
        for r in results
    ]
    return np.asarray(steps, float), np.asarray(values, float).reshape(len(results), len(steps))


def curve(results: Sequence[RunResult], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps and the seeds' mean of evaluation ``key`` at the steps all runs evaluated at."""
    steps, values = curve_steps(results, key)
    return steps, np.nanmean(values, axis=0)


def figure3(results: Sequence[RunResult], path: Path) -> None:
    """Evaluation curves during training of the :data:`CURVE_TASKS` that were run, one line per
    penalty (mean over seeds); the dotted line is a random agent on the same evaluation
    episodes."""
    tasks = [t for t in CURVE_TASKS if any(r.run.task == t for r in results)]
    fig, axes = plt.subplots(len(CURVES), len(tasks), figsize=(5 * len(tasks), 6), squeeze=False)
    for col, task in enumerate(tasks):
        runs = [r for r in results if r.run.task == task]
        for row, (label, key) in enumerate(CURVES):
            ax = axes[row][col]
            for penalty in _penalties(results, task):
                steps, values = curve([r for r in runs if r.run.penalty == penalty], key)
                ax.plot(steps, values, marker="o", ms=3, label=f"penalty {penalty:g}")
            random = np.nanmean([r.final["random"].get(key, np.nan) for r in runs])
            ax.axhline(random, color="grey", ls=":", label="random agent")
            ax.set_title(f"{task}: {label}")
            ax.set_xlabel("training steps")
            ax.set_ylabel(label)
            if row == 0 and col == 0:
                ax.legend(fontsize=7)
    fig.suptitle("Figure 3: evaluations on the task's suite during training")
    fig.tight_layout()
    save_figure(fig, path, dpi=100, bbox_inches="tight")


def histograms(results: Sequence[RunResult], task: str, path: Path, title: str) -> None:
    """Benchmark episodes of ``task``: performance and green side effects, one row per
    penalty (all seeds' episodes)."""
    penalties = _penalties(results, task)
    fig, axes = plt.subplots(
        max(len(penalties), 1),
        2,
        figsize=(8, 1.8 * max(len(penalties), 1)),
        squeeze=False,
        sharex="col",
    )
    for row, penalty in enumerate(penalties):
        episodes = [
            e
            for r in results
            if r.run.task == task and r.run.penalty == penalty
            for e in r.episodes
        ]
        for col, (key, color) in enumerate((("performance", "tab:blue"), ("green", "tab:green"))):
            values = np.array([e[key] for e in episodes], float)
            values = values[~np.isnan(values)]
            ax = axes[row][col]
            ax.hist(
                values, bins=20, range=(0.0, max(1.0, float(values.max(initial=0.0)))), color=color
            )
            ax.set_ylabel(f"penalty {penalty:g}\nepisodes")
    axes[-1][0].set_xlabel("performance (share of the level's points)")
    axes[-1][1].set_xlabel("green side effect (normalised)")
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=100, bbox_inches="tight")


def table_plot(
    rows: Sequence[Row], columns: Sequence[tuple[str, str, int]], path: Path, title: str
) -> None:
    """Each column of a table against the penalty, one line per task; bars: the standard
    deviation over levels x episodes."""
    fig, axes = plt.subplots(1, len(columns), figsize=(4 * len(columns), 3.2), squeeze=False)
    for ax, (name, _, _) in zip(axes[0], columns):
        for task in dict.fromkeys(r.task for r in rows):
            task_rows = [r for r in rows if r.task == task]
            ax.errorbar(
                [r.variant for r in task_rows],
                [r.stats[name].mean for r in task_rows],
                yerr=[r.stats[name].std for r in task_rows],
                marker="o",
                capsize=3,
                label=task,
            )
        ax.set_xlabel("impact penalty")
        ax.set_ylabel(name)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=100, bbox_inches="tight")
