"""Steps per second of the SafeLife environment and engine under random actions.

Usage: python benchmarks/safelife_speed.py [--steps 20000] [--levels PATH]
    [--baseline-output FILE | --no-baseline]

The baseline is the original SafeLife 1.2.2 (C extension) under the same random actions on the
same append-still suite and on procedural append-still levels, run by
``baselines.sh safelife-env`` in the same run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from baselines import add_arguments, measure, ratio_line

from safelife_rl import SafeLifeEnv, SafeLifeGame, load_levels
from safelife_rl.envs.registration import benchmark_file
from safelife_rl.procgen import ProceduralLevels


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
    actions = rng.integers(0, 9, (steps // batch, batch, 1))
    start = time.perf_counter()
    for row in actions:
        game.step(row)
    return actions.size / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--levels", default=None, help="default: the append-still suite")
    add_arguments(parser)
    args = parser.parse_args()
    figures = measure("safelife-env", args.steps, args)
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
    print(
        ratio_line(
            "env",
            rates["env (15x15x19 observations)"],
            "steps/s",
            figures,
            "safelife-env append-still",
        )
    )
    print(
        ratio_line(
            "env, procedural",
            rates["env, procedural levels"],
            "steps/s",
            figures,
            "safelife-env procedural append-still",
        )
    )


if __name__ == "__main__":
    main()
