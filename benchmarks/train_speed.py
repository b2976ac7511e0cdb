"""Training speed: env steps per second of PPO on SafeLife in the SafeLife paper's setup
(prune-still, 16 envs x 20 steps, 3 epochs, 4 minibatches, 25x25 view, the SafeLife CNN),
beside the original SafeLife PPO run by ``baselines.sh`` in the same run.

    .venv/bin/python benchmarks/train_speed.py [--steps 32000] [--warmup 3200] [--repeats 1]
        [--env-step] [--against CHECKOUT]...
        [--baseline-output FILE | --no-baseline] [OVERRIDE ...]

Extra arguments are Hydra overrides of safelife_rl/conf/train.yaml on top of experiment=paper (e.g.
vec_env=subproc torch_threads=2). Besides wall-clock speed it prints the speed per second of
this process's CPU time, which is what one idle core gives a single-threaded run even when other
jobs share the machine (worker processes of vec_env=subproc are not counted there).

``--env-step`` times the training vec env's step alone, without the network and without the
original's run: reset once, then random actions, the envs with their training wrappers and
``Monitor``. ``--against CHECKOUT`` (another checkout of this repository, e.g.
``git worktree add ../base COMMIT``; may be given again) times that checkout's code beside this
one's: every repeat starts one fresh process on each checkout (``PYTHONPATH``), all on one CPU,
and has them take turns, ``--steps / 20`` env steps at a time, so that other jobs on the machine
slow them alike; it prints each one's rate of every repeat, the load average and the ratios of
the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as python -m safelife_rl train sets it

import numpy as np
from baselines import add_arguments, measure, ratio_line
from hydra import compose, initialize_config_module

import safelife_rl
from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.run import plain

ROOT = Path(__file__).resolve().parents[1]
TURNS = 20  # turns of each checkout per repeat of --against


def random_steps(env, seed: int) -> Callable[[int], int]:
    """``advance(steps)``: step ``env`` (reset once, now) with random actions for at least
    ``steps`` env steps; it returns how many."""
    sync_training_steps(env, 0)  # the schedules where training starts them
    env.seed(seed)
    env.reset()
    env.action_space.seed(seed)
    actions = [
        np.array([env.action_space.sample() for _ in range(env.num_envs)]) for _ in range(256)
    ]
    calls = count()

    def advance(steps: int) -> int:
        vector_steps = -(-steps // env.num_envs)
        for _ in range(vector_steps):
            env.step(actions[next(calls) % len(actions)])
        return vector_steps * env.num_envs

    return advance


def training(cfg, env) -> Callable[[int], int]:
    """``advance(steps)``: train PPO on ``env`` for at least ``steps`` env steps; it returns
    how many."""
    import torch

    from safelife_rl.training.models import build_model

    torch.set_num_threads(cfg.torch_threads)
    model = build_model(cfg, env)

    def advance(steps: int) -> int:
        before = model.num_timesteps
        model.learn(steps, reset_num_timesteps=before == 0)
        return model.num_timesteps - before

    return advance


def serve(advance: Callable[[int], int]) -> None:
    """Take turns for :func:`compare`: for each line of stdin (a number of env steps), step and
    answer ``steps wall-clock-seconds CPU-seconds``."""
    print("ready", flush=True)
    for line in sys.stdin:
        start, cpu = time.perf_counter(), time.process_time()
        steps = advance(int(line))
        print(steps, time.perf_counter() - start, time.process_time() - cpu, flush=True)


def commit_of(checkout: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True)
        return done.stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (
        "+changes" if git("status", "--porcelain") else ""
    )


def compare(args: argparse.Namespace) -> None:
    """The rate on the code of each ``args.against`` checkout and on this one's, each repeat in
    fresh processes that take turns (the order rotating from turn to turn)."""
    sides = [checkout.resolve() for checkout in args.against] + [ROOT]
    names = [f"against {i + 1}" for i in range(len(args.against))] + ["this"]
    command = [sys.executable, __file__, "--serve", "--no-baseline", "--warmup", str(args.warmup)]
    command += ["--env-step"] * args.env_step + args.overrides
    for name, checkout in zip(names, sides):
        print(f"{name}: {checkout} ({commit_of(checkout)})")
    # one CPU for all: on a shared virtual machine each CPU's speed drifts with its neighbours'
    # load, and a process keeps to its CPU, which made rates differ by 10-20% from process to
    # process; taking turns on one CPU, they see the same
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    print(f"on CPU {cpu}, taking turns of {max(1, args.steps // TURNS):,} env steps")
    totals = np.zeros((args.repeats, len(sides), 3))  # env steps, wall-clock and CPU seconds
    for repeat in range(args.repeats):
        load = os.getloadavg()[0]
        children = [
            subprocess.Popen(
                command,
                env={**os.environ, "PYTHONPATH": str(checkout)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for checkout in sides
        ]
        try:
            for name, child in zip(names, children):
                lines = iter(child.stdout.readline, "")
                header = list(iter(lines.__next__, "ready\n"))
                if repeat == 0:
                    print(f"  {name}: {''.join(header).strip()}")
            for turn in range(TURNS):
                for side in np.roll(range(len(sides)), -turn).tolist():
                    print(max(1, args.steps // TURNS), file=children[side].stdin, flush=True)
                    totals[repeat, side] += [
                        float(x) for x in children[side].stdout.readline().split()
                    ]
        except (StopIteration, ValueError) as error:
            raise SystemExit(
                f"a process of the comparison failed ({error!r}): see above"
            ) from error
        finally:
            for child in children:
                child.stdin.close()
                child.wait()
        rates = totals[repeat, :, 0, None] / totals[repeat, :, 1:]
        figures = ", ".join(
            f"{name} {wall:,.0f} ({cpu:,.0f})" for name, (wall, cpu) in zip(names, rates)
        )
        print(
            f"repeat {repeat + 1}: {figures} env steps/s (per CPU second); "
            f"1-minute load before: {load:.1f}",
            flush=True,
        )
    rates = totals[:, :, 0, None] / totals[:, :, 1:]
    for unit, column in (("env steps/s", 0), ("env steps per CPU second", 1)):
        medians = np.median(rates[:, :, column], axis=0)
        figures = ", ".join(
            f"{name} {m:,.0f} ({m / medians[-1]:.3f} of this)" for name, m in zip(names, medians)
        )
        print(f"medians, {unit}: {figures}")
    print(f"1-minute load after: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32_000, help="timed env steps per repeat")
    parser.add_argument("--warmup", type=int, default=3_200, help="untimed env steps first")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs (median reported)")
    parser.add_argument(
        "--env-step", action="store_true", help="time the vec env's step alone (random actions)"
    )
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        help="another checkout: time its code beside this one's (may be given again)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # for --against
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    add_arguments(parser)
    args = parser.parse_args()
    if args.against:
        compare(args)
        return
    figures = {} if args.env_step else measure("safelife-ppo", args.steps, args)
    with initialize_config_module("safelife_rl.conf", version_base=None):
        cfg = compose("train", overrides=["experiment=paper", *args.overrides])
    env = make_vec_env(
        cfg.env.id,
        plain(cfg.env.kwargs),
        plain(cfg.wrappers),
        cfg.n_envs,
        cfg.vec_env,
        device=cfg.device,
    )  # vec_env=device steps on cfg.device
    kind = type(getattr(env, "vector", env)).__name__  # the Gymnasium vector env under SB3's
    what = "the vec env's step (random actions)" if args.env_step else "PPO training"
    setting = (
        f"{what}, {cfg.env.id}, {cfg.n_envs} envs ({kind}), "
        f"{tuple(cfg.env.kwargs.view_shape)} view, {cfg.torch_threads} torch thread(s)"
    )
    loads = [os.getloadavg()[0]]
    rates, cpu_rates = [], []
    try:
        advance = random_steps(env, cfg.seed) if args.env_step else training(cfg, env)
        advance(args.warmup)
        if args.serve:
            print(f"{setting}; code in {Path(safelife_rl.__file__).parents[1]}")
            serve(advance)
            return
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            steps = advance(args.steps)
            rates.append(steps / (time.perf_counter() - start))
            cpu_rates.append(steps / (time.process_time() - cpu))
            loads.append(os.getloadavg()[0])
    finally:
        env.close()
    rate = statistics.median(rates)
    print(f"{setting}: {rate:,.0f} env steps/s (runs: {', '.join(f'{r:,.0f}' for r in rates)})")
    if kind != "AsyncVectorEnv":
        print(
            f"per second of this process's CPU time: {statistics.median(cpu_rates):,.0f} env steps"
        )
    print(
        f"1-minute load average before and after each run: "
        f"{', '.join(f'{load:.1f}' for load in loads)} on {os.cpu_count()} cores "
        "(wall-clock timings are only comparable on an otherwise idle machine)"
    )
    if not args.env_step:
        print(ratio_line("ours", rate, "env steps/s", figures, "safelife-ppo prune-still"))


if __name__ == "__main__":
    main()
