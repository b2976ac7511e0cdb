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
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TAGS = {"multiplier": "safety/multiplier", "episode cost": "safety/episode_cost",
        "episode length": "rollout/ep_len_mean"}
HALF_WINDOW = 25_000


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's TensorBoard log, as (step, value) by tag."""
    log = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    log.Reload()
    return {tag: [(e.step, e.value) for e in log.Scalars(tag)] for tag in log.Tags()["scalars"]}


def mean_near(events: list[tuple[int, float]], step: int) -> float:
    low, high = (0, HALF_WINDOW) if step == 0 else (step - HALF_WINDOW, step + HALF_WINDOW)
    values = [v for s, v in events if low <= s <= high]
    return float(np.mean(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--at", nargs="+", type=int,
                        default=[0, 50_000, 100_000, 200_000, 300_000, 400_000, 500_000,
                                 600_000, 800_000, 1_000_000])
    args = parser.parse_args()
    logs = {run: scalars(run) for run in args.runs}
    for run, log in logs.items():
        costs, last = log[TAGS["episode cost"]], log[TAGS["multiplier"]][-1]
        tail = [v for s, v in costs if s >= 0.9 * last[0]]
        budget = log["safety/cost_limit"][-1][1]
        print(f"{run}: episode cost over the last 10% of {last[0]:,} steps {np.mean(tail):.2f} "
              f"(budget {budget:g}, ratio {np.mean(tail) / budget:.2f}); multiplier {last[1]:.2f}")
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
