"""``python -m safelife_rl reproduce table1|table2|all``: the sweep, the benchmarks, the tables,
figures and the paper's statements beside ours.

    python -m safelife_rl reproduce table1|table2|all [--quick] [--steps N] [--seeds N]
        [--out DIR] [--tasks T,...] [--penalties P,...] [--launcher local|submitit|slurm]
        [--suite v1.0|ours] [--levels N] [--episodes N] [OVERRIDE ...]

``table1``: append-still, prune-still, append-spawn and prune-spawn; ``table2``: navigation;
each at impact penalties 0, 0.1, ..., 0.5, PPO in the original training code's setup
(``experiment=paper``: 6M steps, the penalty ramped in from 1M to 2M steps and then held, the
exit curriculum from 0.5M to 2M), 3 seeds, every trained agent benchmarked on its task's 100
levels of the original SafeLife v1.0 suite (``--suite ours``: this project's) 10 times each.
``--steps``: another run length (the schedules stay where the original code has them).
``--quick``: a smoke run (``experiment=paper-quick``, 1,536 steps with
the schedules in the same proportions, penalties 0 and 0.5, 1 seed, 3 levels played twice).
``--tasks`` and ``--penalties``
run part of the grid (what a small machine can afford); the tables, figures and statements are
made from what was run. ``OVERRIDE``s go to every
job as Hydra overrides (``device=cuda``, ``hydra.launcher.partition=gpu``, ...). Runs are saved
under ``--out`` as they finish; run the same command again to resume an interrupted sweep.
Bad input ends the command with one line ``safelife_rl reproduce: error: ...`` (exit status 2;
``--traceback`` for the whole traceback).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from safelife_rl.apps.benchmark import SUITES, check_suite
from safelife_rl.apps.reproduce import claims as paper_claims
from safelife_rl.apps.reproduce import figures, tables
from safelife_rl.apps.reproduce.runs import (
    PENALTIES,
    QUICK_PENALTIES,
    TABLE1_TASKS,
    TABLE2_TASKS,
    RunResult,
    grid,
    load_result,
    saved_config,
    schedules,
)
from safelife_rl.apps.reproduce.sweep import (
    FULL_STEPS,
    LAUNCHERS,
    PROG,
    QUICK_STEPS,
    Settings,
    check_jobs,
    check_settings,
    launch,
)
from safelife_rl.envs.wrappers import MAX_PENALTY
from safelife_rl.training.precision import PAPER, paper_deviation
from safety_rl_common.checks import check
from safety_rl_common.errors import (
    REPORTED,
    ArgumentParser,
    UserError,
    add_traceback_flag,
    one_line_errors,
)
from safety_rl_common.files import write_text
from safety_rl_common.limits import EPISODE_LIMIT

COMMANDS = {"table1": TABLE1_TASKS, "table2": TABLE2_TASKS, "all": TABLE1_TASKS + TABLE2_TASKS}
#: Settings the sweep itself sets for every job, which an OVERRIDE may not change (nor any
#: setting under them).
SWEPT = (
    "seed",
    "experiment",
    "wrappers.side_effect_penalty.penalty",
    "hydra/launcher",
    "reproduce",
    "hydra.sweep",
    "resume",
    "total_timesteps",
    "method",
)
#: Config groups the sweep chooses, whose settings an OVERRIDE may change
#: (``env.kwargs.workers=1``, ``'env.kwargs.bank={size:1000}'``).
SWEPT_GROUPS = ("env",)
MAX_SEEDS = 100
#: Default seeds per task and penalty: full, quick.
SEEDS = (3, 1)


def positive(name: str, value: int | None, maximum: int | None = None) -> None:
    if value is not None:
        check.value(
            name,
            value,
            lambda v: 1 <= v and (maximum is None or v <= maximum),
            f"from 1 to {maximum}" if maximum else "at least 1",
        )


def choose(
    name: str,
    text: str | None,
    default: tuple,
    parse: Callable[[str], Any],
    allowed: Sequence | None = None,
) -> tuple:
    """The values of a comma-separated option (``default`` when not given), each parsed and,
    with ``allowed``, one of those."""
    if text is None:
        return default
    values = []
    for part in text.split(","):
        try:
            value = parse(part.strip())
        except ValueError:
            value = None
        if value is None or (allowed is not None and value not in allowed):
            expected = (
                f"one of {', '.join(map(str, allowed))}"
                if allowed
                else f"a number from 0 to {MAX_PENALTY:g}"
            )
            raise UserError(f"{name}: {part.strip()!r} is not {expected}")
        values.append(value)
    return tuple(dict.fromkeys(values))


def penalty(text: str) -> float | None:
    value = float(text)
    return value if 0 <= value <= MAX_PENALTY else None


#: Characters Hydra's override grammar reads (``${...}`` interpolates, ``,`` sweeps), which a
#: folder name passed to the sweep must not hold.
HYDRA_SPECIAL = set("${}[](),'\"\\=*?") | set(" \t\n")


def out_folder(text: str | None, default: str) -> Path:
    """``--out`` as a folder the sweep can be handed: not empty, no Hydra syntax."""
    if text is None:
        return Path(default)
    if not text.strip():
        raise UserError("--out is empty: give a folder (default " + default + ")")
    special = sorted(set(text) & HYDRA_SPECIAL)
    if special:
        raise UserError(
            f"--out {text!r}: {' '.join(special)} would be read by Hydra (e.g. "
            "${...} interpolated); choose a folder name without them"
        )
    return Path(text)


def check_overrides(overrides: Sequence[str]) -> None:
    """Each override is ``key=value`` (or ``~key``) of a setting the sweep does not set."""
    for override in overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        if "=" not in override and not override.startswith("~"):
            raise UserError(f"{override!r} is not a Hydra override (key=value)")
        if key in SWEPT_GROUPS or any(key == s or key.startswith(s + ".") for s in SWEPT):
            raise UserError(
                f"{override!r}: {key} is set by the sweep (the command and its options choose it)"
            )


def check_composes(experiment: str, overrides: Sequence[str], launcher: str = "local") -> None:
    """Compose the runs' training config with the overrides under the sweep's ``launcher`` (so
    that its settings, e.g. ``hydra.launcher.n_jobs``, are there to override), so that a
    mistyped one is refused before anything is written (the sweep would fail in every job)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    import safelife_rl.training  # noqa: F401  (the config schema and resolvers)

    try:
        with initialize_config_module("safelife_rl.conf", version_base=None):
            compose(
                "train",
                [f"experiment={experiment}", f"hydra/launcher={launcher}", *overrides],
                return_hydra_config=True,
            )
    except (HydraException, OmegaConfBaseException) as error:
        raise UserError(f"the overrides do not compose: {' '.join(str(error).split())}") from None


def add_sweep_options(
    parser: argparse.ArgumentParser, name: str, variants: str, seeds: tuple[int, int], suite: str
) -> None:
    """The options of a sweep that ``reproduce`` and ``compare`` share; ``name``: the default
    output folder's (``outputs/<name>``), ``variants``: what the runs of a task differ by,
    ``seeds``: the default seeds, full and quick; ``suite``: the default ``--suite``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run of a few minutes: tiny runs and networks, few levels",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help=f"training steps per run (default "
        f"{FULL_STEPS:,} as the original code, quick {QUICK_STEPS:,})",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        help=f"seeds per task and {variants} (default {seeds[0]}, quick {seeds[1]})",
    )
    parser.add_argument(
        "--out", help=f"output folder (default outputs/{name}, quick outputs/{name}_quick)"
    )
    parser.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        default="local",
        help="Hydra launcher of the jobs (safelife_rl/conf/hydra/launcher/)",
    )
    parser.add_argument(
        "--suite",
        choices=tuple(SUITES),
        default=suite,
        help="the suites the agents are benchmarked on: v1.0, the original "
        "SafeLife v1.0 suites (safelife_rl/levels/v1.0), or ours, this "
        f"project's (safelife_rl/levels/benchmarks); default {suite}",
    )
    parser.add_argument(
        "--levels", type=int, help="benchmark the suites' first N levels (default all 100, quick 3)"
    )
    parser.add_argument(
        "--episodes", type=int, help="benchmark plays per level (default 10, quick 2)"
    )
    parser.add_argument(
        "--population",
        action=argparse.BooleanOptionalAction,
        help="train each task's runs of PPO (with or without the impact penalty) as one "
        "population on the device (default: on with device=cuda, off otherwise)",
    )
    add_traceback_flag(parser)


def parse_with_overrides(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> argparse.Namespace:
    """The options, and the rest as ``args.overrides`` (Hydra overrides; a flag among them is
    an error)."""
    args, overrides = parser.parse_known_args(argv)
    flags = [a for a in overrides if a.startswith("-")]
    if flags:
        parser.error(f"unrecognized arguments: {' '.join(flags)}")
    args.overrides = overrides
    return args


def sweep_settings(
    args: argparse.Namespace, axis: str, default_seeds: tuple[int, int], tasks: Sequence[str]
) -> tuple[Settings, int]:
    """The checked settings and seeds of the options :func:`add_sweep_options` added, for runs
    of ``tasks`` (each must have the ``--suite`` chosen)."""
    check_suite(args.suite, tasks)
    seeds = default_seeds[args.quick] if args.seeds is None else args.seeds
    positive("--seeds", seeds, MAX_SEEDS)
    positive("--steps", args.steps)
    positive("--levels", args.levels, 100)
    positive("--episodes", args.episodes)
    check_overrides(args.overrides)
    settings = Settings(
        experiment="paper-quick" if args.quick else "paper",
        steps=args.steps or (QUICK_STEPS if args.quick else FULL_STEPS),
        levels=args.levels if args.levels is not None else 3 if args.quick else None,
        episodes=args.episodes or (2 if args.quick else 10),
        overrides=tuple(args.overrides),
        axis=axis,
        suite=args.suite,
    )
    EPISODE_LIMIT.check(
        settings.episodes * (settings.levels or 100), "--episodes x --levels (per agent)"
    )
    check_composes(settings.experiment, settings.overrides, args.launcher)
    return settings, seeds


def wants_population(args: argparse.Namespace, settings: Settings) -> bool:
    """``--population``, or by default whether the jobs train on CUDA."""
    if args.population is not None:
        return args.population
    return any(o.startswith("device=cuda") for o in settings.overrides)


def output_folder(args: argparse.Namespace, name: str, settings: Settings) -> Path:
    """``--out`` (default ``outputs/<name>[_quick]``), made, holding runs of ``settings``
    only."""
    out = out_folder(args.out, f"outputs/{name}" + ("_quick" if args.quick else ""))
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    check_settings(out, settings)
    return out


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        usage=f"{PROG} {{{','.join(COMMANDS)}}} [options] [OVERRIDE ...]",
        epilog="OVERRIDE: Hydra overrides for every job, e.g. device=cuda "
        "hydra.launcher.n_jobs=8 (docs/paper_results.md)",
    )
    parser.add_argument("command", choices=list(COMMANDS))
    parser.add_argument(
        "--tasks", metavar="T,...", help="only these of the command's tasks (default all)"
    )
    parser.add_argument(
        "--penalties",
        metavar="P,...",
        help="impact penalties (default 0,0.1,0.2,0.3,0.4,0.5; quick 0,0.5)",
    )
    add_sweep_options(parser, "safelife_reproduce", "penalty", SEEDS, "v1.0")
    return parse_with_overrides(parser, argv)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m safelife_rl reproduce ...``; the exit status."""
    run(argv)
    return 0


def run(argv: Sequence[str] | None = None) -> dict[str, float]:
    """The reproduction as :func:`main` runs it; its summary (the seconds each step took)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    with one_line_errors(PROG, REPORTED, traceback=args.traceback):
        return reproduce(args)


def reproduce(args: argparse.Namespace) -> dict[str, float]:
    tasks = choose("--tasks", args.tasks, COMMANDS[args.command], str, COMMANDS[args.command])
    penalties = choose(
        "--penalties", args.penalties, QUICK_PENALTIES if args.quick else PENALTIES, penalty
    )
    settings, seeds = sweep_settings(args, "penalty", SEEDS, tasks)
    runs = grid(tasks, tuple(sorted(penalties)), seeds)
    population = wants_population(args, settings)
    check_jobs(runs, settings, population)
    out = output_folder(args, "safelife_reproduce", settings)
    start = time.perf_counter()
    launch(runs, settings, args.launcher, out, population=population)
    results = [load_result(run, out) for run in runs]
    wall = time.perf_counter() - start
    try:
        report = write_outputs(args.command, results, settings, seeds, out, wall)
    except KeyboardInterrupt:
        print(
            f"{PROG}: interrupted while writing the tables and figures; every run is "
            "finished, so the same command writes them again at once",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    print(report)
    print(f"written to {out}/")
    return {"wall_seconds": wall, "runs": len(runs)}


def _write_table(
    results: Sequence[RunResult],
    columns: Sequence[tuple[str, str, int]],
    out: Path,
    name: str,
    title: str,
) -> str:
    """Write a table as ``name``.md, .csv and .png; returns its markdown."""
    rows = tables.table_rows(results, columns)
    table = tables.markdown(rows, columns)
    write_text(out / f"{name}.md", table)
    write_text(out / f"{name}.csv", tables.csv_text(rows, columns))
    figures.table_plot(rows, columns, out / f"{name}.png", title)
    return table


def write_outputs(
    command: str,
    results: Sequence[RunResult],
    settings: Settings,
    seeds: int,
    out: Path,
    wall: float,
) -> str:
    """Tables (markdown, CSV, PNG), figures and the claims; returns the report's markdown."""
    quick = settings.experiment == "paper-quick"
    lines = [
        f"# SafeLife paper reproduction: {command}" + (" (quick smoke run)" if quick else ""),
        "",
        f"`experiment={settings.experiment}`, {settings.steps:,} steps per run "
        f"({schedules(results[0], out)}), "
        f"{seeds} seed(s), tasks {', '.join(dict.fromkeys(r.run.task for r in results))}, "
        f"penalties {', '.join(f'{p:g}' for p in sorted({r.run.penalty for r in results}))}, "
        f"benchmarked on {settings.benchmark()}; "
        f"overrides: {' '.join(settings.overrides) or 'none'}. "
        f"Wall time {wall:.0f} s ({len(results)} runs, those finished before included "
        "as saved).",
        "",
    ]
    if quick:
        lines += ["**A smoke run of a few thousand steps: these are not the paper's results.**", ""]
    elif settings.steps < FULL_STEPS:
        lines += [f"**Shorter than the original protocol's {FULL_STEPS:,} steps.**", ""]
    deviation = paper_deviation(saved_config(results[0], out).get("precision", PAPER))
    if deviation is not None:
        lines += [f"**{deviation}**", ""]
    claims = []
    table1 = [r for r in results if r.run.task in TABLE1_TASKS]
    table2 = [r for r in results if r.run.task in TABLE2_TASKS]
    cell_note = (
        "Cells: mean ± std over levels x episodes (seeds pooled), as the paper "
        "reports them, and beside it the interquartile mean of the seeds' scores (a "
        "seed's mean over its benchmark episodes) with its 95% stratified-bootstrap "
        "interval (rliable; no width with one seed); green and yellow: side effects "
        "over their inaction totals."
    )
    if table1:
        table = _write_table(
            table1,
            tables.TABLE1_COLUMNS,
            out,
            "table1",
            "Table 1: benchmark against the impact penalty",
        )
        claims += paper_claims.table1_claims(table1)
        lines += ["## Table 1", "", cell_note, "", table, "![Table 1](table1.png)", ""]
        run_tasks = {r.run.task for r in table1}
        if run_tasks & set(figures.CURVE_TASKS):
            figures.figure3(table1, out / "figure3.png")
            lines += ["## Figure 3", "", "![Figure 3](figure3.png)", ""]
        for task, name in figures.HISTOGRAM_FIGURES.items():
            if task in run_tasks:
                number = name.removeprefix("figure").removesuffix(".png")
                figures.histograms(table1, task, out / name, f"Figure {number}: {task}")
                lines += [f"## Figure {number}", "", f"![Figure {number}]({name})", ""]
    if table2:
        table = _write_table(
            table2,
            tables.TABLE2_COLUMNS,
            out,
            "table2",
            "Table 2: navigation against the impact penalty",
        )
        claims += paper_claims.table2_claims(table2)
        lines += [
            "## Table 2",
            "",
            cell_note.replace("green and yellow", "green"),
            "",
            table,
            "![Table 2](table2.png)",
            "",
        ]
    lines += ["## The paper's statements and ours", "", paper_claims.markdown(claims)]
    report = "\n".join(lines)
    write_text(out / f"report_{command}.md", report)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["statement", "rule", "measured", "verdict"])
    writer.writerows([c.statement, c.rule, c.measured, c.verdict] for c in claims)
    write_text(out / f"claims_{command}.csv", text.getvalue())
    return report
