"""The course of PPO-Lagrangian runs from their TensorBoard logs.

Usage: python benchmarks/lagrangian_trace.py RUN [RUN ...] [--at 0 50000 100000 ...]

Per run: the mean training-episode cost over the last 10% of its steps (``safety/episode_cost``)
against its budget (``safety/cost_limit``), and the multiplier at the end. Then, at each of
``--at`` steps, the range over the runs of ``safety/multiplier``, ``safety/episode_cost`` and
``rollout/ep_len_mean``, each run's averaged over the 50k steps around the point (the first
25k for 0). ``docs/safelife/methods.md`` has the figures for the prune-still-easy comparison.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from safelife_rl.training.plots import read_scalars

TAGS = {
    "multiplier": "safety/multiplier",
    "episode cost": "safety/episode_cost",
    "episode length": "rollout/ep_len_mean",
}
HALF_WINDOW = 25_000


def mean_near(events: tuple[np.ndarray, np.ndarray], step: int) -> float:
    low, high = (0, HALF_WINDOW) if step == 0 else (step - HALF_WINDOW, step + HALF_WINDOW)
    steps, values = events
    near = values[(low <= steps) & (steps <= high)]
    return float(near.mean()) if len(near) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument(
        "--at",
        nargs="+",
        type=int,
        default=[
            0,
            50_000,
            100_000,
            200_000,
            300_000,
            400_000,
            500_000,
            600_000,
            800_000,
            1_000_000,
        ],
    )
    args = parser.parse_args()
    logs = {run: read_scalars(run) for run in args.runs}
    for run, log in logs.items():
        (cost_steps, costs), (steps, multipliers) = (
            log[TAGS["episode cost"]],
            log[TAGS["multiplier"]],
        )
        tail = costs[cost_steps >= 0.9 * steps[-1]].mean()
        budget = log["safety/cost_limit"][1][-1]
        print(
            f"{run}: episode cost over the last 10% of {steps[-1]:,} steps {tail:.2f} "
            f"(budget {budget:g}, ratio {tail / budget:.2f}); multiplier {multipliers[-1]:.2f}"
        )
    print("\n| steps | " + " | ".join(f"{k // 1000}k" if k else "start" for k in args.at) + " |")
    print("|---" * (len(args.at) + 1) + "|")
    for name, tag in TAGS.items():
        cells = []
        for step in args.at:
            values = np.array([mean_near(log[tag], step) for log in logs.values()])
            values = values[~np.isnan(values)]
            cells.append(f"{values.min():.1f}-{values.max():.1f}" if len(values) else "n/a")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
