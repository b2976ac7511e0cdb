"""Cost of a level bank: generating it once, loading it again, and drawing a level per reset
against generating one.

Usage: python benchmarks/level_bank_speed.py [--task prune-still] [--size 200] [--workers 2]
                                             [--draws 2000] [--generate 20]

The bank goes to a fresh temporary cache folder, so it is always generated. Then it is loaded
from that cache as a later run would, ``--draws`` levels are drawn from it (random level,
symmetry and translation), and ``--generate`` levels are generated one by one in this process
as ``ProceduralLevels`` does at a reset without workers.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from safelife_rl.procgen import ProceduralLevels, generate_level
from safelife_rl.procgen.bank import LevelBank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="prune-still")
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--generate", type=int, default=20)
    args = parser.parse_args()
    generate_level(args.task, 0)  # load the compiled kernels
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        LevelBank(args.task, args.size, workers=args.workers, cache_dir=cache)
        made = time.perf_counter() - start
        start = time.perf_counter()
        bank = LevelBank(args.task, args.size, cache_dir=cache)
        loaded = time.perf_counter() - start
        size_kib = bank.path.stat().st_size / 1024
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(args.draws):
        bank.sample(rng)
    drawn = (time.perf_counter() - start) / args.draws
    source = ProceduralLevels(args.task)
    start = time.perf_counter()
    for _ in range(args.generate):
        source.sample(rng)
    generated = (time.perf_counter() - start) / args.generate
    print(
        f"bank of {args.size} {args.task} levels, {args.workers} workers: generated in "
        f"{made:.1f} s ({args.size / made:.1f} levels/s), {size_kib:.0f} KiB, "
        f"loaded again in {loaded * 1e3:.0f} ms"
    )
    print(
        f"per reset: draw from the bank {drawn * 1e6:.0f} us, generate a level "
        f"{generated * 1e3:.0f} ms ({generated / drawn:,.0f}x)"
    )


if __name__ == "__main__":
    main()
