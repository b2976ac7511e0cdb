"""Milliseconds per side-effect score at the end of an episode, per benchmark suite.

Usage: python benchmarks/side_effect_speed.py [--levels 20] [--steps 100]

Each level is played with random actions for ``--steps`` steps, then scored (1000 samples, as
in the original). The baseline is the original SafeLife 1.2 measured on this project's 2-core
machine: 14-25 ms per episode on 26x26 boards (its PyPI sdist no longer builds here).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from safelife_rl import SafeLifeGame, load_levels
from safelife_rl.engine.side_effects import side_effect_score
from safelife_rl.envs.registration import benchmark_file

ORIGINAL_MS = (14.0, 25.0)


def time_suite(task: str, n_levels: int, steps: int) -> float:
    rng = np.random.default_rng(0)
    times = []
    for level in load_levels(benchmark_file(task))[:n_levels]:
        game = SafeLifeGame([level], rng=rng)
        for action in rng.integers(0, 9, steps):
            game.step(int(action))
        start = time.perf_counter()
        side_effect_score(game, rng=rng)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    time_suite("append-still", 1, 1)  # load compiled kernels before timing
    for task in ("append-still", "prune-still", "append-dynamic", "append-spawn", "prune-spawn"):
        ms = time_suite(task, args.levels, args.steps)
        print(
            f"{task:16s} {ms:6.1f} ms/episode   original / ours: "
            f"{ORIGINAL_MS[0] / ms:.1f}x-{ORIGINAL_MS[1] / ms:.1f}x"
        )


if __name__ == "__main__":
    main()
