"""Make (or check) the fixed benchmark suites: 100 generated levels per task.

Level ``i`` of task ``T`` is ``generate_level(T, suite_seed(T, i), "T-iii")``, so every suite
can be made again bit for bit (same NumPy and Numba versions)::

    python -m safelife_rl.procgen.make_suites                   # all tasks, 2 worker processes
    python -m safelife_rl.procgen.make_suites prune-still --workers 4
    python -m safelife_rl.procgen.make_suites --check           # compare with the shipped files
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np

from ..errors import ArgumentParser
from ..levels import Level, load_levels, save_levels
from ..registration import SUITES_DIR, TASKS
from .source import iter_levels

SUITE_SIZE = 100


def suite_seed(task: str, index: int) -> int:
    """The seed of level ``index`` of ``task``'s suite (a checksum of its name)."""
    return zlib.crc32(suite_name(task, index).encode())


def suite_name(task: str, index: int) -> str:
    return f"{task}-{index:03d}"


def make_suite(task: str, size: int = SUITE_SIZE, workers: int = 0,
               progress: bool = True) -> list[Level]:
    names = [suite_name(task, i) for i in range(size)]
    seeds = [suite_seed(task, i) for i in range(size)]
    return list(iter_levels(task, seeds, names, workers=workers, progress=progress))


def same_levels(a: list[Level], b: list[Level]) -> bool:
    """Whether two level lists agree in every array and value."""
    return len(a) == len(b) and all(
        x.name == y.name
        and x.agent_loc == y.agent_loc
        and x.spawn_prob == y.spawn_prob
        and x.min_performance == y.min_performance
        and np.array_equal(x.board, y.board)
        and np.array_equal(x.goals, y.goals)
        and np.array_equal(x.points_table, y.points_table)
        for x, y in zip(a, b)
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="python -m safelife_rl.procgen.make_suites", description=__doc__.splitlines()[0]
    )
    parser.add_argument("tasks", nargs="*", default=list(TASKS), help="default: every task")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--size", type=int, default=SUITE_SIZE)
    parser.add_argument("--out", type=Path, default=SUITES_DIR)
    parser.add_argument("--check", action="store_true",
                        help="regenerate and compare with the files in --out; write nothing")
    args = parser.parse_args(argv)
    unknown = [t for t in args.tasks if t not in TASKS]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    if args.size < 1 or args.workers < 0:
        parser.error(f"--size must be positive and --workers non-negative, got {args.size}, "
                     f"{args.workers}")
    failures = 0
    for task in args.tasks:
        levels = make_suite(task, args.size, args.workers)
        path = args.out / f"{task}.npz"
        if args.check:
            ok = path.exists() and same_levels(levels, load_levels(path))
            failures += not ok
            print(f"{path}: {'identical' if ok else 'DIFFERS'}")
        else:
            save_levels(levels, path)
            print(f"{path}: {len(levels)} levels, {path.stat().st_size / 1024:.0f} KiB")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
