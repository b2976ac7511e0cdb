"""Tables 1 and 2 from the runs' benchmark episodes: one row per task and penalty (or method),
each column its mean ± standard deviation over levels x episodes (all seeds' episodes pooled,
as the paper's Table 1 over levels x episodes) and, beside it, the spread over seeds as the
field reports it: the interquartile mean of the seeds' scores (a seed's score: its mean over
the benchmark episodes) with its 95% stratified-bootstrap interval (``rliable``, through
:mod:`safety_rl_common.statistics`).

Standard deviations are the population's (NumPy's default): 0 for a single sample; one seed
gives an interval of no width. ``green`` and ``yellow`` are side effects normalised by their
inaction totals, episode by episode; an episode on a level without such cells (NaN) is left out
of that column.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from safelife_rl.apps.reproduce.runs import RunResult
from safety_rl_common.statistics import Estimate, iqm_interval

#: (column in the table, episode key, digits)
TABLE1_COLUMNS = (
    ("performance", "performance", 3),
    ("length", "length", 1),
    ("green", "green", 3),
    ("yellow", "yellow", 3),
)
TABLE2_COLUMNS = (("completed", "success", 3), ("length", "length", 1), ("green", "green", 3))


@dataclass(frozen=True)
class Stat:
    mean: float
    std: float  # over levels x episodes (and seeds)
    n: int  # episodes with a value
    iqm: Estimate | None  # of the seeds' scores, with its 95% interval (None: no values)

    def cell(self, digits: int) -> str:
        return "n/a" if self.n == 0 else f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"

    def iqm_cell(self, digits: int) -> str:
        return "n/a" if self.iqm is None else self.iqm.cell(digits)


def mean_std(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean and population standard deviation of the non-NaN values, and their number (NaN,
    NaN, 0 if there are none)."""
    array = np.asarray(list(values), np.float64)
    array = array[~np.isnan(array)]
    if not len(array):
        return float("nan"), float("nan"), 0
    return float(array.mean()), float(array.std()), len(array)


def seed_scores(per_seed: Sequence[Sequence[float]]) -> np.ndarray:
    """Each seed's score: the mean of its non-NaN values (seeds without any left out)."""
    means = np.array([mean_std(seed)[0] for seed in per_seed], np.float64)
    return means[~np.isnan(means)]


def stat(per_seed: Sequence[Sequence[float]], interval: bool = True) -> Stat:
    """The statistic of one column over the seeds' episodes (one list per seed); ``interval``:
    also the IQM of the seeds' scores with its bootstrap interval."""
    mean, std, n = mean_std(v for seed in per_seed for v in seed)
    scores = seed_scores(per_seed)
    return Stat(mean, std, n, iqm_interval(scores) if interval and len(scores) else None)


@dataclass(frozen=True)
class Row:
    task: str
    variant: float | str  # the penalty (reproduce) or the method (compare)
    seeds: int
    episodes: int
    stats: dict[str, Stat]


def table_rows(results: Sequence[RunResult], columns: Sequence[tuple[str, str, int]]) -> list[Row]:
    """One row per (task, variant) of ``results``, in the order they first appear."""
    groups: dict[tuple[str, float | str], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.run.task, result.run.variant), []).append(result)
    rows = []
    for (task, variant), group in groups.items():
        stats = {
            name: stat([[e[key] for e in r.episodes] for r in group]) for name, key, _ in columns
        }
        rows.append(Row(task, variant, len(group), sum(len(r.episodes) for r in group), stats))
    return rows


def _variant(value: float | str) -> str:
    return f"{value:g}" if isinstance(value, float) else value


def markdown(
    rows: Sequence[Row], columns: Sequence[tuple[str, str, int]], variant: str = "penalty"
) -> str:
    """Per column two cells: mean ± std over levels x episodes, and the seeds' IQM [95% CI]."""
    names = [name for name, _, _ in columns]
    header = [f"{n} | {n} IQM [95% CI]" for n in names]
    lines = [
        f"| task | {variant} | " + " | ".join(header) + " | seeds | episodes |",
        "|---|---|" + "---|---|" * len(names) + "---|---|",
    ]
    for row in rows:
        cells = [
            f"{row.stats[name].cell(digits)} | {row.stats[name].iqm_cell(digits)}"
            for name, _, digits in columns
        ]
        lines.append(
            f"| {row.task} | {_variant(row.variant)} | "
            + " | ".join(cells)
            + f" | {row.seeds} | {row.episodes} |"
        )
    return "\n".join(lines) + "\n"


STAT_FIELDS = ("mean", "std", "iqm", "iqm_low", "iqm_high")


def _fields(found: Stat) -> list[float]:
    interval = found.iqm or Estimate(np.nan, np.nan, np.nan)
    return [found.mean, found.std, interval.point, interval.low, interval.high]


def csv_text(
    rows: Sequence[Row], columns: Sequence[tuple[str, str, int]], variant: str = "penalty"
) -> str:
    """``task, <variant>, seeds, episodes`` and per column ``<name>_mean``, ``<name>_std``
    (over levels x episodes), ``<name>_iqm``, ``<name>_iqm_low``, ``<name>_iqm_high`` (the
    seeds' IQM and its 95% interval)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    names = [name for name, _, _ in columns]
    writer.writerow(
        ["task", variant, "seeds", "episodes", *(f"{n}_{s}" for n in names for s in STAT_FIELDS)]
    )
    for row in rows:
        values = [v for n in names for v in _fields(row.stats[n])]
        writer.writerow(
            [
                row.task,
                _variant(row.variant),
                row.seeds,
                row.episodes,
                *(f"{v:.6g}" for v in values),
            ]
        )
    return text.getvalue()
