"""Population training speed: env steps per second of P PPO members trained as one population
(the SafeLife paper's setup: 16 envs x 20 steps a member, 3 epochs, 4 minibatches, 25x25 view,
the SafeLife CNN), beside single runs of the current paths measured in the same process: the
device path (DevicePPO on the device vector env: the same trainer at P = 1) and SB3's PPO on
the batched NumPy env.

    .venv/bin/python benchmarks/population_speed.py [--members 18] [--rollouts 4]
        [--single-rollouts 4] [--paths device batched] [--batching auto] [--precision fp32]
        [--ops]
        [OVERRIDE ...]

P separate runs spend P times one run's CPU time, so the population's env steps per CPU-second
(all members together) over one run's is the speed-up of training the grid as a population
on the same cores. Levels: the task's fixed suite, shuffled (no level generation timed).
Extra arguments are Hydra overrides of train.yaml over experiment=paper (e.g. device=cuda
env=append-still n_envs=16). Every run at ``--precision`` (``benchmarks/precision.py``), its
cuDNN kernels as a training run chooses them (autotuned, not deterministic: not the
deterministic ones SB3's seeding turns on). ``--ops`` counts instead what a rollout step asks
of the device at each population size (:mod:`safety_rl_common.torch_counts`, members batched
by each ``--batching``, ``auto`` as on CUDA): a rollout's ops per step, an env step's alone
and the difference.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as python -m safelife_rl train sets it

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict
from precision import flags_text, with_precision

from safelife_rl.envs.registration import suite_file
from safelife_rl.training.device.stacked import BATCHING, CUDA_AUTO
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.models import build_model
from safelife_rl.training.population.runs import build_population
from safelife_rl.training.precision import PRECISIONS, apply_precision
from safelife_rl.training.run import cudnn_kernels, plain
from safety_rl_common.torch_counts import count_ops, counting

CONF = Path(__file__).resolve().parents[1] / "safelife_rl" / "conf"
PENALTIES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: the ways of batching the members' networks kept to be measured (not ``auto``'s choice of
#: one of them, not ``loop``'s member by member)
KEPT_BATCHINGS = [batching for batching in BATCHING if batching not in ("auto", "loop")]
#: the paper's setup at a size that runs in seconds on a CPU (``--tiny``: CI)
TINY = ["n_envs=2", "algo.n_steps=4", "policy.kwargs.features_extractor_kwargs.features_dim=16"]


def config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", overrides=["experiment=paper", *overrides])
    with open_dict(cfg):
        cfg.env.kwargs.levels = suite_file(cfg.env.eval_kwargs.levels.task)
        cfg.env.kwargs.shuffle = True
    return cfg


def members(cfg: DictConfig, count: int) -> list[DictConfig]:
    """The grid of one task: penalties x seeds, ``count`` of them."""
    out = []
    for k in range(count):
        member = cfg.copy()
        with open_dict(member):
            member.seed = k // len(PENALTIES)
            member.wrappers.side_effect_penalty.penalty = PENALTIES[k % len(PENALTIES)]
        out.append(member)
    return out


def timed(learn, steps: int) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of ``learn(steps)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    learn(steps)
    return time.perf_counter() - wall, time.process_time() - cpu


def population_rates(
    cfg: DictConfig, count: int, rollouts: int, batching: str = "auto"
) -> tuple[float, float]:
    """All members' env steps per wall second and per CPU second."""
    population = build_population(members(cfg, count), batching)
    per_rollout = cfg.n_envs * cfg.algo.n_steps
    try:
        population.learn(per_rollout)  # warm-up: first allocations and kernels
        wall, cpu = timed(population.learn, per_rollout * rollouts)
    finally:
        population.env.close()
    steps = count * per_rollout * rollouts
    return steps / wall, steps / cpu


def rollout_ops(cfg: DictConfig, count: int, batching: str = CUDA_AUTO) -> str:
    """What a rollout step of ``count`` members (``batching``) asks of the device, counted over
    its second rollout (the first builds what is reused), beside one env step's."""
    population = build_population(members(cfg, count), batching)
    try:
        population.learn(cfg.n_envs * cfg.algo.n_steps)
        with counting() as rollout:
            population.collect_rollouts([])
        actions = population._last_obs.new_zeros(len(population._last_obs), dtype=torch.long)
        env = count_ops(population.venv.step, actions)
    finally:
        population.env.close()
    per_step = rollout.kernels / cfg.algo.n_steps
    return (
        f"population of {count:3d} ({batching}): {per_step:,.0f} kernel ops a rollout step "
        f"({rollout}), "
        f"an env step alone {env.kernels:,}: {per_step - env.kernels:,.0f} outside the env step"
    )


def single_rates(cfg: DictConfig, path: str, rollouts: int) -> tuple[float, float]:
    """One run's env steps per wall second and per CPU second on ``vec_env=path``."""
    env = make_vec_env(
        cfg.env.id,
        plain(cfg.env.kwargs),
        plain(cfg.wrappers),
        cfg.n_envs,
        path,
        device=cfg.device,
    )
    per_rollout = cfg.n_envs * cfg.algo.n_steps
    try:
        with open_dict(cfg):
            cfg.vec_env = path
        model = build_model(cfg, env)
        apply_precision(cfg.precision, model.policy)  # as a run
        cudnn_kernels(cfg.get("cudnn_deterministic", False))  # as a run: not SB3's seeding's
        model.learn(per_rollout)
        wall, cpu = timed(model.learn, per_rollout * rollouts)
    finally:
        env.close()
    steps = per_rollout * rollouts
    return steps / wall, steps / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[18], help="population sizes")
    parser.add_argument("--rollouts", type=int, default=4, help="timed rollouts a member")
    parser.add_argument("--single-rollouts", type=int, default=4, help="timed rollouts a run")
    parser.add_argument(
        "--paths", nargs="*", default=["device", "batched"], help="single-run paths to time"
    )
    parser.add_argument(
        "--batching",
        nargs="+",
        choices=BATCHING,
        default=["auto"],
        help="how the networks run (each timed)",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
    parser.add_argument("--ops", action="store_true", help="count a rollout step's ops instead")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    args = parser.parse_args()
    cfg = with_precision(config(args.overrides), args.precision)
    torch.set_num_threads(cfg.torch_threads)
    if args.ops:
        for count in args.members:
            for batching in args.batching:  # auto: as on CUDA
                print(rollout_ops(cfg, count, CUDA_AUTO if batching == "auto" else batching))
        return
    print(
        f"{cfg.env.id} on {cfg.device}, {cfg.n_envs} envs x {cfg.algo.n_steps} steps a run, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.precision} "
        "(cuDNN: as a run sets it)"
    )
    singles = {}
    for path in args.paths:
        wall, cpu = single_rates(cfg, path, args.single_rollouts)
        singles[path] = cpu
        print(f"one run, vec_env={path:8s} {wall:10,.0f} env steps/s  {cpu:10,.0f} per CPU-s")
    for count in args.members:
        for batching in args.batching:
            wall, cpu = population_rates(cfg, count, args.rollouts, batching)
            ratios = "  ".join(f"{cpu / rate:.2f}x {path}" for path, rate in singles.items())
            print(
                f"population of {count:3d} ({batching:6s}) {wall:10,.0f} env steps/s  "
                f"{cpu:10,.0f} per CPU-s" + (f"  (per CPU-s: {ratios})" if ratios else "")
            )
    print(f"{args.precision}, {flags_text()}")


if __name__ == "__main__":
    main()
