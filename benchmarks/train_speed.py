"""Training speed: env steps per second of PPO on SafeLife in the SafeLife paper's setup
(prune-still, 16 envs x 20 steps, 3 epochs, 4 minibatches, 25x25 view, the SafeLife CNN),
beside the original SafeLife PPO run by ``baselines.sh`` in the same run.

    .venv/bin/python benchmarks/train_speed.py [--steps 32000] [--warmup 3200] [--repeats 1]
        [--baseline-output FILE | --no-baseline] [OVERRIDE ...]

Extra arguments are Hydra overrides of safelife_rl/conf/train.yaml on top of experiment=paper (e.g.
vec_env=subproc torch_threads=2). Besides wall-clock speed it prints the speed per second of
this process's CPU time, which is what one idle core gives a single-threaded run even when other
jobs share the machine (worker processes of vec_env=subproc are not counted there).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as python -m safelife_rl train sets it

from baselines import add_arguments, measure, ratio_line
from hydra import compose, initialize_config_dir

from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.models import build_model
from safelife_rl.training.run import plain

CONF = Path(__file__).resolve().parents[1] / "safelife_rl" / "conf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32_000, help="timed env steps per repeat")
    parser.add_argument("--warmup", type=int, default=3_200, help="untimed env steps first")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs (median reported)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    add_arguments(parser)
    args = parser.parse_args()
    figures = measure("safelife-ppo", args.steps, args)
    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", overrides=["experiment=paper", *args.overrides])
    import torch

    torch.set_num_threads(cfg.torch_threads)
    env = make_vec_env(
        cfg.env.id,
        plain(cfg.env.kwargs),
        plain(cfg.wrappers),
        cfg.n_envs,
        cfg.vec_env,
        device=cfg.device,
    )  # vec_env=device steps on cfg.device
    loads = [os.getloadavg()[0]]
    rates, cpu_rates = [], []
    try:
        model = build_model(cfg, env)
        model.learn(args.warmup)
        for _ in range(args.repeats):
            start, cpu, steps0 = time.perf_counter(), time.process_time(), model.num_timesteps
            model.learn(args.steps, reset_num_timesteps=False)
            steps = model.num_timesteps - steps0
            rates.append(steps / (time.perf_counter() - start))
            cpu_rates.append(steps / (time.process_time() - cpu))
            loads.append(os.getloadavg()[0])
    finally:
        env.close()
    rate = statistics.median(rates)
    kind = type(getattr(env, "vector", env)).__name__  # the Gymnasium vector env under SB3's
    print(
        f"PPO training, {cfg.env.id}, {cfg.n_envs} envs ({kind}), "
        f"{tuple(cfg.env.kwargs.view_shape)} view, {cfg.torch_threads} torch thread(s): "
        f"{rate:,.0f} env steps/s (runs: {', '.join(f'{r:,.0f}' for r in rates)})"
    )
    if kind != "AsyncVectorEnv":
        print(
            f"per second of this process's CPU time: {statistics.median(cpu_rates):,.0f} env steps"
        )
    print(
        f"1-minute load average before and after each run: "
        f"{', '.join(f'{load:.1f}' for load in loads)} on {os.cpu_count()} cores "
        "(wall-clock timings are only comparable on an otherwise idle machine)"
    )
    print(ratio_line("ours", rate, "env steps/s", figures, "safelife-ppo prune-still"))


if __name__ == "__main__":
    main()
