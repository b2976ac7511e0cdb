"""The comparison's table and figures from its runs (``safelife_rl compare``).

A run's score on a metric is its mean over its benchmark episodes (performance, reward, green
and yellow side effects over their inaction totals, and the summed safety cost ``info["cost"]``
that PPO-Lagrangian is held to). Per task and method: the interquartile
mean (IQM) of the seeds' scores with its 95% stratified-bootstrap interval and, against the
baseline (PPO), the difference of the IQMs (method - PPO) and the probability of improvement:
the chance that a seed of the method does better than a seed of PPO (higher performance or
reward, lower side effects), each with its interval. With several tasks, an "all tasks" row
pools them as rliable pools the games of a benchmark (runs x tasks, each task a stratum);
reward is left out there, its scale being the task's. Learning curves: the IQM over seeds of
the periodic evaluations, with the same intervals.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from safelife_rl.apps.reproduce.figures import curve_steps
from safelife_rl.apps.reproduce.runs import RunResult, saved_config
from safelife_rl.apps.reproduce.tables import seed_scores
from safelife_rl.training.precision import PAPER, paper_deviation
from safety_rl_common.figures import save_figure
from safety_rl_common.files import write_text
from safety_rl_common.statistics import (
    Estimate,
    iqm_difference,
    iqm_interval,
    probability_of_improvement,
)


@dataclass(frozen=True)
class Metric:
    name: str
    key: str  # of a benchmark episode
    curve_key: str | None  # of a periodic evaluation (None: no curve)
    higher_is_better: bool
    pooled: bool = True  # in the "all tasks" row


METRICS = (
    Metric("performance", "performance", "mean_performance", True),
    Metric("reward", "reward", None, True, pooled=False),
    Metric("green", "green", "mean_side_effects/normalized/green", False),
    Metric("yellow", "yellow", None, False),
    Metric("cost", "cost", "mean_cost", False),
)
ALL_TASKS = "all tasks"


@dataclass(frozen=True)
class Cell:
    iqm: Estimate | None  # None: no scores (a still task has no yellow life)
    improvement: Estimate | None  # over the baseline; None for the baseline itself
    difference: Estimate | None = None  # IQM minus the baseline's; None for the baseline


def score_matrix(
    results: Sequence[RunResult], tasks: Sequence[str], method: str, metric: Metric
) -> np.ndarray:
    """Scores ``(seeds, tasks)`` of ``method``: each seed's mean over its benchmark episodes,
    seeds in order; tasks without a score (NaN) dropped."""
    columns = []
    for task in tasks:
        runs = sorted(
            (r for r in results if r.run.task == task and r.run.variant == method),
            key=lambda r: r.run.seed,
        )
        scores = seed_scores([[e.get(metric.key, np.nan) for e in r.episodes] for r in runs])
        if len(scores) == len(runs) and len(runs):
            columns.append(scores)
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))


def cell(
    results: Sequence[RunResult], tasks: Sequence[str], method: str, baseline: str, metric: Metric
) -> Cell:
    scores = score_matrix(results, tasks, method, metric)
    if not scores.size:
        return Cell(None, None)
    if method == baseline:
        return Cell(iqm_interval(scores), None)
    base = score_matrix(results, tasks, baseline, metric)
    sign = 1.0 if metric.higher_is_better else -1.0
    return Cell(
        iqm_interval(scores),
        probability_of_improvement(sign * scores, sign * base),
        iqm_difference(scores, base),
    )


@dataclass(frozen=True)
class Row:
    task: str  # or ALL_TASKS
    method: str
    seeds: int
    cells: dict[str, Cell]


def rows(results: Sequence[RunResult], baseline: str) -> list[Row]:
    """One row per task and method, then per method over all tasks (if several)."""
    tasks = list(dict.fromkeys(r.run.task for r in results))
    methods = list(dict.fromkeys(r.run.variant for r in results))
    found = []
    groups = [(task, [task]) for task in tasks] + ([(ALL_TASKS, tasks)] if len(tasks) > 1 else [])
    for label, group in groups:
        for method in methods:
            seeds = len(
                {r.run.seed for r in results if r.run.variant == method and r.run.task in group}
            )
            cells = {
                m.name: cell(results, group, str(method), baseline, m)
                if m.pooled or label != ALL_TASKS
                else Cell(None, None)
                for m in METRICS
            }
            found.append(Row(label, str(method), seeds, cells))
    return found


def _text(estimate: Estimate | None, digits: int = 3) -> str:
    return "n/a" if estimate is None else estimate.cell(digits)


def markdown(found: Sequence[Row], baseline: str) -> str:
    header = " | ".join(
        f"{m.name} IQM [95% CI] | {m.name} − {baseline} | {m.name} P(better than {baseline})"
        for m in METRICS
    )
    lines = [
        f"| task | method | {header} | seeds |",
        "|---|---|" + "---|---|---|" * len(METRICS) + "---|",
    ]
    for row in found:
        cells = []
        for metric in METRICS:
            here = row.cells[metric.name]
            digits = 1 if metric.name == "reward" else 3
            if row.method == baseline and here.iqm:
                against = "— | —"
            else:
                against = f"{_text(here.difference, digits)} | {_text(here.improvement, 2)}"
            cells.append(f"{_text(here.iqm, digits)} | {against}")
        lines.append(f"| {row.task} | {row.method} | " + " | ".join(cells) + f" | {row.seeds} |")
    return "\n".join(lines) + "\n"


def csv_text(found: Sequence[Row]) -> str:
    """``task, method, seeds`` and per metric ``<m>_iqm``, ``<m>_iqm_low``, ``<m>_iqm_high``,
    and the same of ``<m>_improvement`` and ``<m>_difference`` (empty where there is none)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    kinds = ("iqm", "improvement", "difference")
    fields = [
        f"{m.name}_{kind}{end}" for m in METRICS for kind in kinds for end in ("", "_low", "_high")
    ]
    writer.writerow(["task", "method", "seeds", *fields])
    for row in found:
        values = []
        for metric in METRICS:
            here = row.cells[metric.name]
            for estimate in (here.iqm, here.improvement, here.difference):
                values += (
                    [""] * 3
                    if estimate is None
                    else [f"{v:.6g}" for v in (estimate.point, estimate.low, estimate.high)]
                )
        writer.writerow([row.task, row.method, row.seeds, *values])
    return text.getvalue()


def interval_plot(found: Sequence[Row], path: Path) -> None:
    """Per task (rows) and metric (columns): each method's IQM with its 95% interval."""
    tasks = list(dict.fromkeys(r.task for r in found))
    fig, axes = plt.subplots(
        len(tasks),
        len(METRICS),
        squeeze=False,
        figsize=(3.6 * len(METRICS), 0.5 + 1.6 * len(tasks)),
    )
    for i, task in enumerate(tasks):
        task_rows = [r for r in found if r.task == task]
        for j, metric in enumerate(METRICS):
            ax = axes[i][j]
            for y, row in enumerate(task_rows):
                estimate = row.cells[metric.name].iqm
                if estimate is not None:
                    ax.errorbar(
                        [estimate.point],
                        [y],
                        capsize=3,
                        marker="o",
                        color=f"C{y}",
                        xerr=[[estimate.point - estimate.low], [estimate.high - estimate.point]],
                    )
            if all(row.cells[metric.name].iqm is None for row in task_rows):
                ax.text(0.5, 0.5, "n/a: no such cells", ha="center", transform=ax.transAxes)
            ax.set_yticks(range(len(task_rows)), [r.method for r in task_rows])
            ax.set_ylim(-0.5, len(task_rows) - 0.5)
            arrow = "higher" if metric.higher_is_better else "lower"
            ax.set_title(f"{task}: {metric.name} ({arrow} is better)", fontsize=9)
    fig.suptitle("IQM over seeds with 95% stratified-bootstrap intervals")
    fig.tight_layout()
    save_figure(fig, path, dpi=100, bbox_inches="tight")


def learning_curves(results: Sequence[RunResult], path: Path) -> None:
    """Per task (columns) and curve metric (rows): the methods' periodic evaluations on the
    task's suite, IQM over seeds with a 95% interval band."""
    tasks = list(dict.fromkeys(r.run.task for r in results))
    methods = list(dict.fromkeys(r.run.variant for r in results))
    metrics = [m for m in METRICS if m.curve_key]
    fig, axes = plt.subplots(
        len(metrics), len(tasks), squeeze=False, figsize=(5 * len(tasks), 3 * len(metrics))
    )
    for j, task in enumerate(tasks):
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for k, method in enumerate(methods):
                runs = [r for r in results if r.run.task == task and r.run.variant == method]
                steps, values = curve_steps(runs, metric.curve_key)
                estimates = [
                    iqm_interval(column[~np.isnan(column)]) if (~np.isnan(column)).any() else None
                    for column in values.T
                ]
                shown = [(s, e) for s, e in zip(steps, estimates) if e is not None]
                if not shown:
                    continue
                xs = [s for s, _ in shown]
                ax.plot(
                    xs,
                    [e.point for _, e in shown],
                    marker="o",
                    ms=3,
                    color=f"C{k}",
                    label=str(method),
                )
                ax.fill_between(
                    xs,
                    [e.low for _, e in shown],
                    [e.high for _, e in shown],
                    color=f"C{k}",
                    alpha=0.2,
                )
            ax.set_title(f"{task}: {metric.name}")
            ax.set_xlabel("training steps")
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    fig.suptitle("Evaluations during training: IQM over seeds, 95% stratified-bootstrap band")
    fig.tight_layout()
    save_figure(fig, path, dpi=100, bbox_inches="tight")


def write(results: Sequence[RunResult], out: Path, baseline: str) -> str:
    """``comparison.md``, ``comparison.csv``, ``comparison.png`` and ``curves.png`` in ``out``;
    returns the markdown of the table and figures."""
    found = rows(results, baseline)
    table = markdown(found, baseline)
    write_text(out / "comparison.md", table)
    write_text(out / "comparison.csv", csv_text(found))
    interval_plot(found, out / "comparison.png")
    learning_curves(results, out / "curves.png")
    deviation = paper_deviation(saved_config(results[0], out).get("precision", PAPER))
    return (
        ("" if deviation is None else f"**{deviation}**\n\n")
        + f"Benchmark scores: IQM over seeds (a seed's score: its mean over the benchmark "
        f"episodes) with 95% stratified-bootstrap intervals; against {baseline}, the "
        f"difference of the IQMs (an interval that excludes 0 is a difference) and the "
        f"probability that a seed of the method does better than one of {baseline} "
        f"(higher performance or reward, lower green or yellow side effects; an interval "
        f"that excludes 0.50 is a difference), computed with rliable.\n\n{table}\n"
        f"![IQM and intervals](comparison.png)\n\n![Learning curves](curves.png)\n"
    )
