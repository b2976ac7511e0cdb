"""Training speed: env steps per second of PPO on SafeLife in the SafeLife paper's setup
(prune-still, 16 envs x 20 steps, 25x25 view, the SafeLife CNN), against the original SafeLife
PPO's ~700 steps/s on this machine.

    .venv/bin/python benchmarks/train_speed.py [--steps 32000] [--warmup 3200] [OVERRIDE ...]

Extra arguments are Hydra overrides of conf/train.yaml on top of experiment=paper (e.g.
vec_env=dummy torch_threads=2).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.run import build_model, plain

ORIGINAL_STEPS_PER_SECOND = 700.0
CONF = Path(__file__).resolve().parents[1] / "conf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32_000, help="timed env steps")
    parser.add_argument("--warmup", type=int, default=3_200, help="untimed env steps first")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    args = parser.parse_args()
    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", overrides=["experiment=paper", *args.overrides])
    import torch

    torch.set_num_threads(cfg.torch_threads)
    env = make_vec_env(
        cfg.env.id, plain(cfg.env.kwargs), plain(cfg.wrappers), cfg.n_envs, cfg.vec_env
    )
    try:
        model = build_model(cfg, env)
        model.learn(args.warmup)
        start, steps0 = time.perf_counter(), model.num_timesteps
        model.learn(args.steps, reset_num_timesteps=False)
        rate = (model.num_timesteps - steps0) / (time.perf_counter() - start)
    finally:
        env.close()
    print(f"PPO training, {cfg.env.id}, {cfg.n_envs} envs ({cfg.vec_env.value}), "
          f"{tuple(cfg.env.kwargs.view_shape)} view: {rate:,.0f} env steps/s")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
          "(timings are only comparable on an otherwise idle machine)")
    print(f"speed / original SafeLife PPO ({ORIGINAL_STEPS_PER_SECOND:.0f} steps/s): "
          f"{rate / ORIGINAL_STEPS_PER_SECOND:.2f}x")


if __name__ == "__main__":
    main()
