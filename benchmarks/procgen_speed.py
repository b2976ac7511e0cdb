"""Levels per second of the procedural generator, per level type.

Usage: python benchmarks/procgen_speed.py [--levels 10] [--workers 0] [TYPE ...]

Each type generates ``--levels`` levels from seeds 0, 1, ... (after one warm-up level that
loads the compiled kernels); with ``--workers N`` they are shared among N processes. The
original SafeLife generator (C extension) cannot be built here, so there is no ratio to it;
its level iterator likewise generated levels in worker processes ahead of use.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from safelife_rl.procgen import LEVEL_TYPES, generate_level, generate_levels, load_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("types", nargs="*", default=list(LEVEL_TYPES))
    parser.add_argument("--levels", type=int, default=10)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    generate_level("prune-still", 0)  # load the compiled kernels
    print(f"{'level type':18s} {'levels/s':>9s} {'median s':>9s} {'max s':>7s}")
    for level_type in args.types:
        params = load_params(level_type)
        seeds = list(range(args.levels))
        if args.workers:
            start = time.perf_counter()
            generate_levels(params, seeds, workers=args.workers)
            total = time.perf_counter() - start
            print(f"{level_type:18s} {args.levels / total:9.2f}")
            continue
        times = []
        for seed in seeds:
            start = time.perf_counter()
            generate_level(params, seed)
            times.append(time.perf_counter() - start)
        print(
            f"{level_type:18s} {len(times) / sum(times):9.2f} {np.median(times):9.2f} "
            f"{max(times):7.2f}"
        )


if __name__ == "__main__":
    main()
