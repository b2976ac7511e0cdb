"""Where a population's time goes: ``torch.profiler`` over rollouts and updates of a population
in the paper's setup, the operators with the most device (or CPU) time, and the share of the
rollouts, the updates and the host's Python between them.

    python benchmarks/population_profile.py [--device cuda] [--members 72] [--rollouts 2]
        [--batching grouped vmap unfold] [--precision fp32] [--out FILE] [--tiny] [OVERRIDE ...]

Each ``--batching`` (how the members' networks run together; by default every one kept, see
``population_speed.KEPT_BATCHINGS``) is profiled in turn, its section written as soon as it is
done, with its precision and cuDNN flags.

Extra arguments are Hydra overrides of train.yaml over experiment=paper; the device is
``--device``'s.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from omegaconf import DictConfig
from population_speed import KEPT_BATCHINGS, TINY, config, members
from precision import default_device, flags_text, refusal, with_precision
from torch.profiler import ProfilerActivity, profile, record_function

from safelife_rl.training.device.stacked import BATCHING
from safelife_rl.training.population import PopulationPPO
from safelife_rl.training.population.runs import build_population


def profiled(population: PopulationPPO, rollouts: int) -> tuple[profile, dict[str, float]]:
    """The profile of ``rollouts`` rollouts and updates, and their wall seconds by part."""
    steps = population.n_envs * population.members[0].n_steps
    population.learn(steps)  # warm-up
    collect, train = population.collect_rollouts, population.train
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

    population.collect_rollouts = timed("rollouts", collect)
    population.train = timed("updates", train)
    activities = [ProfilerActivity.CPU]
    if population.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        population.learn(steps * rollouts)
    seconds["all"] = time.perf_counter() - start
    return prof, seconds


def profile_section(
    cfg: DictConfig, count: int, batching: str, precision: str, rollouts: int, rows: int
) -> tuple[str, float, dict[str, float]]:
    """The profile of ``count`` members batched by ``batching`` at ``precision``: its report
    (the rate, seconds by part, precision and cuDNN flags, the top ``rows`` operators), env
    steps/s and seconds by part."""
    population = build_population(members(with_precision(cfg, precision), count), batching)
    try:
        prof, seconds = profiled(population, rollouts)
    finally:
        population.env.close()
    steps = count * population.n_envs * population.members[0].n_steps * rollouts
    rate = steps / seconds["all"]
    key = "device_time_total" if population.device.type == "cuda" else "cpu_time_total"
    lines = [
        f"{count} members, {population.n_envs} envs each, on {population.device} "
        f"(batching: {population.stacked.batching}): {rate:,.0f} env steps/s",
        f"{precision}: {flags_text()}",
        "  ".join(f"{name} {value:.2f} s" for name, value in seconds.items()),
        prof.key_averages().table(sort_by=key, row_limit=rows),
    ]
    return "\n".join(lines), rate, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--members", type=int, default=72)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--rows", type=int, default=25, help="operators listed")
    parser.add_argument("--out", type=Path, help="also write the report here")
    parser.add_argument(
        "--batching",
        nargs="+",
        choices=BATCHING,
        default=KEPT_BATCHINGS,
        help="how the networks run (each profiled)",
    )
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--tiny", action="store_true", help="2 tiny members: a CPU smoke run")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    args = parser.parse_args()
    reason = refusal(args.device, [args.precision])
    if reason:
        parser.exit(2, f"population_profile.py: {reason}\n")
    overrides = [*(TINY if args.tiny else []), *args.overrides, f"device={args.device}"]
    cfg = config(overrides)
    torch.set_num_threads(cfg.torch_threads)
    count, rollouts = (2, 1) if args.tiny else (args.members, args.rollouts)
    report = ""
    for batching in args.batching:
        text = profile_section(cfg, count, batching, args.precision, rollouts, args.rows)[0]
        section = text + "\n\n"
        print(section, flush=True)
        report += section
        if args.out:  # each section as soon as it is done
            args.out.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
