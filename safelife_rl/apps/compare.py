"""``python -m safelife_rl compare``: train safety methods on SafeLife tasks x seeds, benchmark
every agent on its task's fixed suite with side effects, and compare them as the field reports
it: interquartile means with 95% stratified-bootstrap intervals and, against PPO, the
difference of the IQMs and the probability of improvement (rliable).

    python -m safelife_rl compare [--methods M,...] [--tasks T,...] [--seeds N] [--steps N]
        [--cost-limit C] [--quick] [--out DIR] [--launcher local|submitit|slurm]
        [--suite ours|v1.0] [--levels N] [--episodes N] [OVERRIDE ...]

Methods are the training app's ``method=`` choices (``safelife_rl/conf/method/``; default
``ppo,penalty,aup,aup_proj,ppo_lagrangian``, each needing its config file), trained in the
original SafeLife setup (``experiment=paper``) for 6M steps, as the original training code does
(``--steps`` to choose); ``--quick`` is a smoke run (``experiment=paper-quick``, 1,536 steps, 3
levels played twice). The agents are benchmarked on this project's suites, which every task
has (``--suite v1.0``: the original SafeLife v1.0 suites, of the tasks that have one). The runs
are the reproduction's (:mod:`safelife_rl.apps.reproduce.sweep`: one Hydra multirun, resumable:
run the same command again). ``OVERRIDE``s go to every job
(``device=cuda vec_env=device ...``); ``--cost-limit`` is PPO-Lagrangian's budget alone (the
other methods take none, so it cannot be an override). Bad input ends the command with one line
``safelife_rl compare: error: ...`` (exit status 2) before anything runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from importlib.resources import files

from safelife_rl.apps import compare_report
from safelife_rl.apps.reproduce.cli import (
    add_sweep_options,
    choose,
    output_folder,
    parse_with_overrides,
    sweep_settings,
    wants_population,
)
from safelife_rl.apps.reproduce.runs import grid, load_result, schedules
from safelife_rl.apps.reproduce.sweep import check_jobs, launch, population_groups
from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS
from safelife_rl.envs.registration import TASKS
from safelife_rl.training.methods import registry
from safelife_rl.training.methods.ppo_lagrangian import check_cost_limit
from safety_rl_common.errors import REPORTED, ArgumentParser, UserError, one_line_errors
from safety_rl_common.files import write_text

PROG = "safelife_rl compare"
BASELINE = "ppo"
DEFAULT_METHODS = (BASELINE, "penalty", "aup", "aup_proj", "ppo_lagrangian")
DEFAULT_TASKS = ("append-still", "prune-still")
#: Default seeds per task and method: full, quick.
SEEDS = (3, 2)
NAME = "safelife_compare"  # outputs/safelife_compare[_quick]
CONF = files("safelife_rl.conf")


def task_names() -> tuple[str, ...]:
    """The single-agent tasks (each an ``env=<task>`` option of the training app)."""
    return tuple(t for t in TASKS if t not in MULTI_AGENT_TASKS)


def check_methods(methods: Sequence[str]) -> None:
    """Each method has its config file; PPO, the baseline, is among them."""
    for method in methods:
        if not CONF.joinpath("method", f"{method}.yaml").is_file():
            known = sorted(
                p.name.removesuffix(".yaml")
                for p in CONF.joinpath("method").iterdir()
                if p.name.endswith(".yaml")
            )
            raise UserError(
                f"--methods: method {method!r} has no config "
                f"safelife_rl/conf/method/{method}.yaml (there are: "
                f"{', '.join(known)})"
            )
    if BASELINE not in methods:
        raise UserError(
            f"--methods must include {BASELINE}, the baseline of the probability of improvement"
        )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        usage=f"{PROG} [options] [OVERRIDE ...]",
        epilog="OVERRIDE: Hydra overrides for every job, e.g. device=cuda vec_env=device "
        "hydra.launcher.n_jobs=8 (docs/commands/compare.md)",
    )
    parser.add_argument(
        "--methods",
        metavar="M,...",
        help=f"methods (method= choices; default {','.join(DEFAULT_METHODS)})",
    )
    parser.add_argument(
        "--tasks", metavar="T,...", help=f"tasks (default {','.join(DEFAULT_TASKS)})"
    )
    parser.add_argument(
        "--cost-limit",
        type=float,
        metavar="C",
        help="the per-episode cost "
        f"budget of the runs of {', '.join(budget_takers())} (default: their "
        "config's, safelife_rl/conf/method/)",
    )
    add_sweep_options(parser, NAME, "method", SEEDS, "ours")
    return parse_with_overrides(parser, argv)


def budget_takers() -> list[str]:
    """The methods that take a per-episode cost budget (``cost_limit``)."""
    return [name for name, method in registry().items() if method.cost_limit]


def check_budget(
    cost_limit: float | None, methods: Sequence[str], overrides: Sequence[str]
) -> None:
    """A budget is a finite non-negative number, given only with a method that takes one, and
    only as ``--cost-limit`` (an override would reach every method's runs)."""
    takers = ", ".join(budget_takers())
    for override in overrides:
        if override.lstrip("+~").split("=", 1)[0] == "cost_limit":
            raise UserError(
                f"{override!r}: the budget of {takers} is --cost-limit (an "
                "override would reach the other methods' runs)"
            )
    if cost_limit is None:
        return
    if not set(methods) & set(budget_takers()):
        raise UserError(f"--cost-limit is the budget of {takers}, which --methods does not include")
    try:
        check_cost_limit(cost_limit)
    except UserError as error:
        raise UserError(f"--cost-limit: {error}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m safelife_rl compare ...``; the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    with one_line_errors(PROG, REPORTED, traceback=args.traceback):
        compare(args)
    return 0


def compare(args: argparse.Namespace) -> dict[str, float]:
    """Train, benchmark and compare as ``args`` say; the wall time and number of runs."""
    methods = choose("--methods", args.methods, DEFAULT_METHODS, str)
    check_methods(methods)
    tasks = choose("--tasks", args.tasks, DEFAULT_TASKS, str, task_names())
    check_budget(args.cost_limit, methods, args.overrides)
    settings, seeds = sweep_settings(args, "method", SEEDS, tasks)
    settings = replace(settings, cost_limit=args.cost_limit)
    runs = grid(tasks, methods, seeds)
    check_jobs(runs, settings)  # first: a bad override is one line, before any composing
    populations: list[list] = []
    if wants_population(args, settings):  # PPO and the penalty's, PPO-Lagrangian's runs
        for group in population_groups(runs, settings):
            populations.append([run for run in runs if run.variant in group])
            check_jobs(populations[-1], settings, population=True)
    alone = [run for run in runs if not any(run in together for together in populations)]
    out = output_folder(args, NAME, settings)
    start = time.perf_counter()
    launch(alone, settings, args.launcher, out, prog=PROG)
    for together in populations:
        launch(together, settings, args.launcher, out, prog=PROG, population=True)
    results = [load_result(run, out) for run in runs]
    wall = time.perf_counter() - start
    table = compare_report.write(results, out, BASELINE)
    budget = (
        ""
        if settings.cost_limit is None
        else f"the budget of {', '.join(budget_takers())}: {settings.cost_limit:g} per episode; "
    )
    header = (
        f"# Comparison of {', '.join(methods)}"
        + (" (quick smoke run: not a result)" if args.quick else "")
        + "\n\n"
        f"`experiment={settings.experiment}`, {settings.steps:,} steps per run "
        f"({schedules(results[0], out)}), {seeds} seed(s), tasks {', '.join(tasks)}, "
        f"benchmarked on {settings.benchmark()}; {budget}overrides: "
        f"{' '.join(settings.overrides) or 'none'}. Wall time "
        f"{wall:.0f} s ({len(runs)} runs, those finished before included as saved).\n\n"
    )
    write_text(out / "report.md", header + table)
    print(header + table)
    print(f"written to {out}/")
    return {"wall_seconds": wall, "runs": len(runs)}
