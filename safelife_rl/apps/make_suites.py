"""Make (or check) the fixed benchmark suites: 100 generated levels per task.

Level ``i`` of task ``T`` is ``generate_level(T, suite_seed(T, i), "T-iii")``, so every suite
can be made again bit for bit (same NumPy and Numba versions)::

    python -m safelife_rl make-suites                   # all tasks, 2 worker processes
    python -m safelife_rl make-suites prune-still --workers 4
    python -m safelife_rl make-suites --check           # compare with the shipped files
    python -m safelife_rl make-suites --multi-agent     # the multi-agent tasks' suites
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from safelife_rl.apps.cli import PROG as CLI
from safelife_rl.engine.level_files import load_levels, save_levels
from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.envs.registration import MULTI_AGENT_SUITES_DIR, SUITES_DIR, TASKS
from safelife_rl.procgen.params import MULTI_AGENT_TYPES
from safelife_rl.procgen.source import check_workers, iter_levels
from safety_rl_common.errors import ArgumentParser, UserError

SUITE_SIZE = 100


def suite_seed(task: str, index: int) -> int:
    """The seed of level ``index`` of ``task``'s suite (a checksum of its name)."""
    return zlib.crc32(suite_name(task, index).encode())


def suite_name(task: str, index: int) -> str:
    return f"{task}-{index:03d}"


def make_suite(
    task: str,
    size: int = SUITE_SIZE,
    workers: int = 0,
    progress: bool = True,
    multi_agent: bool = False,
) -> list[Level] | list[MultiAgentLevel]:
    """The suite of ``task`` (with ``multi_agent``, of a multi-agent task)."""
    names = [suite_name(task, i) for i in range(size)]
    seeds = [suite_seed(task, i) for i in range(size)]
    return list(
        iter_levels(task, seeds, names, workers=workers, progress=progress, multi_agent=multi_agent)
    )


def same_levels(
    a: list[Level] | list[MultiAgentLevel], b: list[Level] | list[MultiAgentLevel]
) -> bool:
    """Whether two level lists agree in every array and value."""
    return len(a) == len(b) and all(
        x.name == y.name
        and x.agent_locs == y.agent_locs
        and getattr(x, "agent_names", None) == getattr(y, "agent_names", None)
        and x.spawn_prob == y.spawn_prob
        and x.min_performance == y.min_performance
        and np.array_equal(x.board, y.board)
        and np.array_equal(x.goals, y.goals)
        and np.array_equal(x.points_tables, y.points_tables)
        for x, y in zip(a, b)
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=f"{CLI} make-suites", description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", help="default: every task")
    parser.add_argument(
        "--multi-agent",
        action="store_true",
        help="the multi-agent tasks' suites (default --out: "
        f"{MULTI_AGENT_SUITES_DIR.relative_to(SUITES_DIR.parents[1])})",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--size", type=int, default=SUITE_SIZE)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate and compare with the files in --out; write nothing",
    )
    args = parser.parse_args(argv)
    known = MULTI_AGENT_TYPES if args.multi_agent else tuple(TASKS)
    tasks = args.tasks or list(known)
    out = args.out or (MULTI_AGENT_SUITES_DIR if args.multi_agent else SUITES_DIR)
    unknown = [t for t in tasks if t not in known]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if args.size < 1:
        parser.error(f"--size must be positive, got {args.size}")
    try:
        check_workers(args.workers, "--workers")
    except UserError as error:
        parser.error(str(error))
    failures = 0
    for task in tasks:
        levels = make_suite(task, args.size, args.workers, multi_agent=args.multi_agent)
        path = out / f"{task}.npz"
        if args.check:
            ok = path.exists() and same_levels(levels, load_levels(path, args.multi_agent))
            failures += not ok
            print(f"{path}: {'identical' if ok else 'DIFFERS'}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_levels(levels, path)
            print(f"{path}: {len(levels)} levels, {path.stat().st_size / 1024:.0f} KiB")
    return 1 if failures else 0
