"""Tables 1 and 2 from the runs' benchmark episodes: one row per task and penalty, each column
its mean ± standard deviation over levels x episodes (all seeds' episodes pooled, as the paper's
Table 1 over levels x episodes) and, beside it, the standard deviation of the seeds' means.

Standard deviations are the population's (NumPy's default): 0 for a single sample. ``green``
and ``yellow`` are side effects normalised by their inaction totals, episode by episode; an
episode on a level without such cells (NaN) is left out of that column.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from safelife_rl.apps.reproduce.runs import RunResult

#: (column in the table, episode key, digits)
TABLE1_COLUMNS = (("performance", "performance", 3), ("length", "length", 1),
                  ("green", "green", 3), ("yellow", "yellow", 3))
TABLE2_COLUMNS = (("completed", "success", 3), ("length", "length", 1), ("green", "green", 3))


@dataclass(frozen=True)
class Stat:
    mean: float
    std: float  # over levels x episodes (and seeds)
    seed_std: float  # of the seeds' means
    n: int  # episodes with a value

    def cell(self, digits: int) -> str:
        if self.n == 0:
            return "n/a"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f} [± {self.seed_std:.{digits}f}]"


def mean_std(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean and population standard deviation of the non-NaN values, and their number (NaN,
    NaN, 0 if there are none)."""
    array = np.asarray(list(values), np.float64)
    array = array[~np.isnan(array)]
    if not len(array):
        return float("nan"), float("nan"), 0
    return float(array.mean()), float(array.std()), len(array)


def stat(per_seed: Sequence[Sequence[float]]) -> Stat:
    """The statistic of one column over the seeds' episodes (one list per seed)."""
    mean, std, n = mean_std(v for seed in per_seed for v in seed)
    seed_means = [mean_std(seed)[0] for seed in per_seed]
    _, seed_std, _ = mean_std(seed_means)
    return Stat(mean, std, seed_std, n)


@dataclass(frozen=True)
class Row:
    task: str
    penalty: float
    seeds: int
    episodes: int
    stats: dict[str, Stat]


def table_rows(results: Sequence[RunResult], columns: Sequence[tuple[str, str, int]]) -> list[Row]:
    """One row per (task, penalty) of ``results``, in the order they first appear."""
    groups: dict[tuple[str, float], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.run.task, result.run.penalty), []).append(result)
    rows = []
    for (task, penalty), group in groups.items():
        stats = {name: stat([[e[key] for e in r.episodes] for r in group])
                 for name, key, _ in columns}
        rows.append(Row(task, penalty, len(group), sum(len(r.episodes) for r in group), stats))
    return rows


def markdown(rows: Sequence[Row], columns: Sequence[tuple[str, str, int]]) -> str:
    names = [name for name, _, _ in columns]
    lines = ["| task | penalty | " + " | ".join(names) + " | seeds | episodes |",
             "|---|---|" + "---|" * len(names) + "---|---|"]
    for row in rows:
        cells = [row.stats[name].cell(digits) for name, _, digits in columns]
        lines.append(f"| {row.task} | {row.penalty:g} | " + " | ".join(cells)
                     + f" | {row.seeds} | {row.episodes} |")
    return "\n".join(lines) + "\n"


def csv_text(rows: Sequence[Row], columns: Sequence[tuple[str, str, int]]) -> str:
    """``task, penalty, seeds, episodes`` and per column ``<name>_mean``, ``<name>_std``,
    ``<name>_seed_std``."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    names = [name for name, _, _ in columns]
    writer.writerow(["task", "penalty", "seeds", "episodes",
                     *(f"{n}_{s}" for n in names for s in ("mean", "std", "seed_std"))])
    for row in rows:
        values = [getattr(row.stats[n], s) for n in names for s in ("mean", "std", "seed_std")]
        writer.writerow([row.task, f"{row.penalty:g}", row.seeds, row.episodes,
                         *(f"{v:.6g}" for v in values)])
    return text.getvalue()
