"""Steps per second of the SafeLife environment and engine under random actions.

Usage: python benchmarks/safelife_speed.py [--steps 20000] [--levels PATH]

The baseline is the original SafeLife 1.2 (C extension) measured on this project's 2-core
machine: 1,800 env steps/s on the append-still benchmark suite and 2,400 on procedural
append-still levels (its PyPI sdist no longer builds here, so it cannot be rerun in the same
process).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from safelife_rl import SafeLifeEnv, SafeLifeGame, load_levels
from safelife_rl.procgen import ProceduralLevels
from safelife_rl.registration import benchmark_file

ORIGINAL_ENV_STEPS_PER_S = 1800.0
ORIGINAL_PROCGEN_STEPS_PER_S = 2400.0


def env_rate(levels, steps: int) -> float:
    """Env steps per second; ``levels`` as for SafeLifeEnv (a procedural source included)."""
    env = SafeLifeEnv(levels)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 9, steps)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def engine_rate(levels, steps: int, batch: int) -> float:
    """Board steps per second of the bare engine (no observations), ``batch`` boards a call."""
    rng = np.random.default_rng(0)
    game = SafeLifeGame(levels[:batch], rng=rng)
    actions = rng.integers(0, 9, (steps // batch, batch))
    start = time.perf_counter()
    for row in actions:
        game.step(row)
    return actions.size / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--levels", default=None, help="default: the append-still suite")
    args = parser.parse_args()
    levels = load_levels(args.levels or benchmark_file("append-still"))
    env_rate(levels, 500)  # load compiled kernels before timing
    rates = {
        "env (15x15x19 observations)": env_rate(levels, args.steps),
        "env, procedural levels": env_rate(ProceduralLevels("append-still"), args.steps),
        "engine, 1 board per call": engine_rate(levels, args.steps, 1),
        "engine, 64 boards per call": engine_rate(levels * 64, args.steps * 4, 64),
    }
    for name, rate in rates.items():
        print(f"{name:32s} {rate:10,.0f} steps/s")
    ratio = rates["env (15x15x19 observations)"] / ORIGINAL_ENV_STEPS_PER_S
    print(f"env speed / original SafeLife env ({ORIGINAL_ENV_STEPS_PER_S:,.0f} steps/s): {ratio:.2f}x")
    ratio = rates["env, procedural levels"] / ORIGINAL_PROCGEN_STEPS_PER_S
    print(f"procedural / original ({ORIGINAL_PROCGEN_STEPS_PER_S:,.0f} steps/s): {ratio:.2f}x")


if __name__ == "__main__":
    main()
