"""The runs of a sweep: the reproduction's grid (task x impact penalty x seed) or the comparison's
(task x method x seed), where each run lives under the output folder, and what a finished run
left there.

A run's folder, ``OUT/runs/<task>/penalty_<p>/seed_<s>/`` (reproduction) or
``OUT/runs/<task>/<method>/seed_<s>/`` (comparison), is a training run of ``safelife_rl train``
(config, checkpoints, TensorBoard, ``evaluations.json``, ``evaluation.json``) plus
:data:`BENCHMARK_FILE`, the trained agent's benchmark episodes, written last: a run is finished
when it exists.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from safelife_rl.training.callbacks import checkpoint_steps, checkpoints
from safelife_rl.training.resume import CONFIG_FILE
from safety_rl_common.errors import UserError
from safety_rl_common.files import check_readable_file, write_text
from safety_rl_common.yaml_files import read_yaml

#: Table 1's tasks (creation and removal, static and with spawners) and Table 2's.
TABLE1_TASKS = ("append-still", "prune-still", "append-spawn", "prune-spawn")
TABLE2_TASKS = ("navigation",)
#: The impact penalties of the original training code's sweep.
PENALTIES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: ``--quick``: no penalty and the largest.
QUICK_PENALTIES = (0.0, 0.5)
BENCHMARK_FILE = "benchmark.csv"
#: Columns of a benchmark episode (as ``safelife_rl.apps.benchmark.run_suite`` reports it) that the
#: tables use; ``green`` and ``yellow`` are side effects over their inaction totals (NaN where a
#: level has no such cells).
NUMBER_COLUMNS = ("performance", "length", "success", "reward", "green", "yellow")
#: Columns of later versions' benchmarks: the episode's summed safety cost (``info["cost"]``);
#: NaN in a benchmark written before it.
OPTIONAL_COLUMNS = ("cost",)
#: Columns a level makes undefined (side effects over an inaction total of 0), NaN there, and
#: the cost, NaN in benchmarks written before it was recorded.
MAY_BE_NAN = ("green", "yellow", "cost")
#: The values an episode can give (a performance is a share of the level's points, at most 1).
RANGES = {
    "performance": (-math.inf, 1.0),
    "length": (1, 1e9),
    "success": (0, 1),
    "cost": (0, math.inf),
}
WHOLE = ("length", "success")


@dataclass(frozen=True, order=True)
class Run:
    """One run of a sweep: a task, what its runs differ by (``variant``: the impact penalty of
    the reproduction, a float, or the method of the comparison, its ``method=`` choice) and a
    seed."""

    task: str
    variant: float | str
    seed: int

    @property
    def penalty(self) -> float:
        """The impact penalty of a reproduction run."""
        if not isinstance(self.variant, float):
            raise TypeError(f"{self} is a run of a method, not of an impact penalty")
        return self.variant

    def label(self) -> str:
        """``penalty <p>`` or the method's name."""
        return f"penalty {self.variant:g}" if isinstance(self.variant, float) else self.variant

    def folder(self, out: Path) -> Path:
        return out / "runs" / self.task / self.label().replace(" ", "_") / f"seed_{self.seed}"

    def __str__(self) -> str:
        return f"{self.task} {self.label()} seed {self.seed}"


@dataclass
class RunResult:
    """What a finished run left: its benchmark episodes, its periodic evaluations during
    training (``step`` and the ``mean_*`` scalars) and the final evaluation of the trained and a
    random agent on the same episodes."""

    run: Run
    episodes: list[dict[str, float]]
    evaluations: list[dict[str, float]]
    final: dict[str, dict[str, float]]


def grid(
    tasks: tuple[str, ...], variants: tuple[float, ...] | tuple[str, ...], seeds: int
) -> list[Run]:
    """Every run of the sweep, seed by seed (an interrupted local sweep has whole seeds done)."""
    return [Run(t, v, s) for s in range(seeds) for t in tasks for v in variants]


def is_finished(run: Run, out: Path) -> bool:
    return (run.folder(out) / BENCHMARK_FILE).is_file()


def saved_steps(run: Run, out: Path) -> int:
    """Training steps the run has saved so far: its newest checkpoint's."""
    found = checkpoints(run.folder(out) / "checkpoints")
    return checkpoint_steps(found[-1]) if found else 0


def progress(run: Run, out: Path, steps: int) -> int:
    """Training steps of a run of ``steps`` done so far: all of them once it is finished, else
    those saved (its newest checkpoint's, at most ``steps``)."""
    return steps if is_finished(run, out) else min(saved_steps(run, out), steps)


def write_episodes(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write benchmark episodes as CSV, whole or not at all."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, text.getvalue())


def _number(value: str, path: Path, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(
            f"{path}: {key} {value!r} is not a number; delete the run's folder to rerun it"
        ) from None
    if math.isnan(number) and key in MAY_BE_NAN:
        return number
    if not math.isfinite(number):
        raise UserError(f"{path}: {key} is {number}; delete the run's folder to rerun it")
    low, high = RANGES.get(key, (-math.inf, math.inf))
    if not low <= number <= high or (key in WHOLE and not number.is_integer()):
        raise UserError(
            f"{path}: {key} {number} is not a possible value (a "
            f"{'whole number' if key in WHOLE else 'number'} in [{low}, {high}]); "
            "delete the run's folder to rerun it"
        )
    return number


def load_episodes(path: Path) -> list[dict[str, float]]:
    """A run's benchmark episodes; a UserError naming the file if it is not one."""
    check_readable_file(path)  # a FIFO would block
    with path.open(newline="", encoding="utf-8") as handle:
        try:
            reader = csv.DictReader(handle)
            missing = [c for c in ("level", *NUMBER_COLUMNS) if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(
                    f"{path}: not a benchmark of episodes (no {', '.join(missing)} "
                    "column); delete the run's folder to rerun it"
                )
            rows = [
                {
                    "level": row["level"],
                    **{c: _number(row[c], path, c) for c in NUMBER_COLUMNS},
                    **{c: _number(row.get(c) or "nan", path, c) for c in OPTIONAL_COLUMNS},
                }
                for row in reader
            ]
        except UnicodeDecodeError as error:
            raise UserError(
                f"{path}: not text ({error}); delete the run's folder to rerun it"
            ) from None
    if not rows:
        raise UserError(f"{path}: no episodes; delete the run's folder to rerun it")
    return rows


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise UserError(
            f"{path}: not readable JSON ({error}); delete the run's folder to rerun it"
        ) from None


def load_result(run: Run, out: Path) -> RunResult:
    """A finished run's results, read from its folder."""
    folder = run.folder(out)
    evaluations = _load_json(folder / "evaluations.json")
    final = _load_json(folder / "evaluation.json")
    if not (
        isinstance(evaluations, list)
        and all(isinstance(e, dict) and "step" in e for e in evaluations)
    ):
        raise UserError(f"{folder / 'evaluations.json'}: not a list of evaluations")
    if not (
        isinstance(final, dict)
        and all(isinstance(final.get(k), dict) for k in ("trained", "random"))
    ):
        raise UserError(f"{folder / 'evaluation.json'}: no trained and random evaluation")
    episodes = load_episodes(folder / BENCHMARK_FILE)
    return RunResult(run, episodes, evaluations, {k: final[k] for k in ("trained", "random")})


def _ramp(name: str, wrapper: Any) -> str:
    if not isinstance(wrapper, dict) or not isinstance(wrapper.get("ramp"), dict):
        return f"no {name}"
    steps, values = wrapper["ramp"]["steps"], wrapper["ramp"]["values"]
    points = " -> ".join(f"{v:g} at {s:,.0f}" for s, v in zip(steps, values))
    return f"{name} {points} steps, then held"


def saved_config(result: RunResult, out: Path) -> dict[str, Any]:
    """The config a run saved (``config.yaml`` of its folder)."""
    path = result.run.folder(out) / CONFIG_FILE
    try:
        config = read_yaml(path)
    except (OSError, ValueError, yaml.YAMLError):
        config = None
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a run's config; delete the run's folder to rerun it")
    return config


def schedules(result: RunResult, out: Path) -> str:
    """The schedules a run was trained with, as its saved config has them: ``impact penalty
    share 0 at 1,000,000 -> 1 at 2,000,000 steps, then held; exit curriculum ...``."""
    wrappers = saved_config(result, out).get("wrappers") or {}
    if not isinstance(wrappers, dict):
        wrappers = {}
    return (
        _ramp("impact penalty share", wrappers.get("side_effect_penalty"))
        + "; "
        + _ramp("exit curriculum", wrappers.get("exit_curriculum"))
    )
