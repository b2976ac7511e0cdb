"""Where a population's time goes: ``torch.profiler`` over rollouts and updates of a population
in the paper's setup, the operators with the most device (or CPU) time, and the share of the
rollouts, the updates and the host's Python between them.

    python benchmarks/population_profile.py [--members 72] [--rollouts 2] [--out FILE]
        [--batching vmap unfold] [OVERRIDE ...]

Each ``--batching`` (how the members' networks run together) is profiled in turn, its section
written as soon as it is done.

Extra arguments are Hydra overrides of train.yaml over experiment=paper (``device=cuda``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from population_speed import config, members
from torch.profiler import ProfilerActivity, profile, record_function

from safelife_rl.training.population import PopulationPPO
from safelife_rl.training.population.runs import build_population


def profiled(population: PopulationPPO, rollouts: int) -> tuple[profile, dict[str, float]]:
    """The profile of ``rollouts`` rollouts and updates, and their wall seconds by part."""
    steps = population.n_envs * population.members[0].n_steps
    population.learn(steps)  # warm-up
    collect, train = population._collect_rollouts, population._train
    seconds = {"rollouts": 0.0, "updates": 0.0}

    def timed(name: str, part):  # each part synchronised, so its wall time is its own
        def run(*args):
            start = time.perf_counter()
            with record_function(name):
                result = part(*args)
            if population.device.type == "cuda":
                torch.cuda.synchronize()
            seconds[name] += time.perf_counter() - start
            return result

        return run

    population._collect_rollouts = timed("rollouts", collect)
    population._train = timed("updates", train)
    activities = [ProfilerActivity.CPU]
    if population.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        population.learn(steps * rollouts)
    seconds["all"] = time.perf_counter() - start
    return prof, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=72)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--rows", type=int, default=25, help="operators listed")
    parser.add_argument("--out", type=Path, help="also write the report here")
    parser.add_argument(
        "--batching", nargs="+", default=["auto"], help="how the networks run (each profiled)"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    args = parser.parse_args()
    cfg = config(args.overrides)
    torch.set_num_threads(cfg.torch_threads)
    report = ""
    for batching in args.batching:
        population = build_population(members(cfg, args.members), batching)
        try:
            prof, seconds = profiled(population, args.rollouts)
        finally:
            population.env.close()
        steps = args.members * population.n_envs * population.members[0].n_steps * args.rollouts
        key = "device_time_total" if population.device.type == "cuda" else "cpu_time_total"
        lines = [
            f"{args.members} members, {population.n_envs} envs each, on {population.device} "
            f"(batching: {population.stacked.batching}): "
            f"{steps / seconds['all']:,.0f} env steps/s",
            "  ".join(f"{name} {value:.2f} s" for name, value in seconds.items()),
            prof.key_averages().table(sort_by=key, row_limit=args.rows),
        ]
        section = "\n".join(lines) + "\n\n"
        print(section, flush=True)
        report += section
        if args.out:  # each section as soon as it is done
            args.out.write_text(report)


if __name__ == "__main__":
    main()
