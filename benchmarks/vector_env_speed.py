"""Env steps per second of the device vector env, beside the CPU batched vec env.

Usage: python benchmarks/vector_env_speed.py [--sizes 64 1024] [--threads 1] [--seconds 3]
                                              [--wrappers safelife_rl/conf/wrappers/safelife.yaml]
                                              [--compile]

N envs play the append-still suite (``suite_file``, levels in order, 1000-step episodes) with
random actions under the training wrappers of ``safelife_rl/conf/wrappers/safelife.yaml`` (the
impact penalty switched on, schedules at their end). One env step is everything an agent gets: the
game step, its observation, the shaped reward, episode ends and restarts. Columns:
``SafeLifeVectorEnv`` on the CPU and, when there is one, on CUDA (observations left on the device),
and ``vec_env=batched`` (``BatchedVectorEnv``: the Numba engine, each env with its Gymnasium wrapper
chain and SB3's ``Monitor``) at N up to 1024. Beside them, the original SafeLife environment's
steps/s on the same suite with the same observations (``baselines.sh safelife-env``, run in the
same run; one env, random actions, no wrappers). ``--compile`` adds the compiled step
(``compile=True``; compiling takes a minute or more per size, not timed). Under each size, what one
step of the vector env asks of the device (:mod:`safety_rl_common.torch_counts`): kernel ops,
syncs and host<->device copies.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from baselines import add_arguments, measure, ratio_line
from engine_speed import fresh_compiles, timed
from omegaconf import OmegaConf

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv, bytes_per_env, free_memory
from safety_rl_common.torch_counts import OpCounts, count_ops

_CONF = Path(__file__).resolve().parents[1] / "safelife_rl" / "conf" / "wrappers" / "safelife.yaml"
_NUMBA_MAX = 1024  # building thousands of wrapped single envs takes longer than the timing


def wrapper_config(path: str | Path) -> dict:
    config = OmegaConf.to_container(OmegaConf.load(path))
    if config.get("side_effect_penalty"):
        config["side_effect_penalty"]["penalty"] = 0.1
    return config


def device_rate(
    levels, wrappers: dict, n: int, device: torch.device, seconds: float, compile: bool = False
) -> tuple[float, OpCounts | None]:
    """Env steps/s of the vector env, and what one step asks of the device (counted on the
    eager step: the compiled one is the same code, and dispatch modes do not see into it)."""
    if compile:
        fresh_compiles()
    envs = SafeLifeVectorEnv(SafeLifeEnv(levels), n, device, wrappers, compile=compile)
    envs.set_training_steps(10**7)
    envs.reset(seed=0)
    generator = torch.Generator(device).manual_seed(0)
    actions = torch.randint(0, 9, (64, n), generator=generator, device=device)
    calls = iter(range(1 << 62))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    envs.step(actions[0])  # compiles, if compiling
    rate = n / timed(lambda: envs.step(actions[next(calls) % 64]), sync, seconds)
    counts = None if compile else count_ops(envs.step, actions[0])
    envs.close()
    return rate, counts


def numba_rate(wrappers: dict, n: int, seconds: float) -> float:
    from safelife_rl.envs.wrappers import sync_training_steps
    from safelife_rl.training.envs import make_vec_env

    kwargs = {"levels": str(suite_file("append-still"))}
    envs = make_vec_env("safelife_rl/AppendStill-v1", kwargs, wrappers, n, "batched")
    sync_training_steps(envs, 10**7)
    envs.seed(0)
    envs.reset()
    rng = np.random.default_rng(0)
    rate = n / timed(lambda: envs.step(rng.integers(0, 9, n)), lambda: None, seconds)
    envs.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--wrappers", default=str(_CONF), help="wrapper config (YAML)")
    parser.add_argument("--compile", action="store_true", help="also time the compiled step")
    parser.add_argument(
        "--baseline-steps",
        type=int,
        default=16_000,
        help="steps of the original env (baselines.sh safelife-env)",
    )
    add_arguments(parser)
    args = parser.parse_args()
    figures = measure("safelife-env", args.baseline_steps, args)
    torch.set_num_threads(args.threads)
    levels = load_levels(suite_file("append-still"))
    wrappers = wrapper_config(args.wrappers)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    modes = [(d, False) for d in devices] + ([(d, True) for d in devices] if args.compile else [])
    names = [f"{'compiled' if c else 'vector'} {d.type}" for d, c in modes] + ["numba batched"]
    print(
        f"env steps/s with observations (torch {torch.__version__}, {args.threads} CPU thread(s))"
    )
    print(f"{'N':>7} " + " ".join(f"{name:>14}" for name in names))
    for n in args.sizes:
        rates, counts = [], {}
        for device, compile in modes:
            need = n * bytes_per_env(levels[0].shape, (15, 15), 19)
            rate = float("nan")
            if need < (free_memory(device) or need + 1):
                rate, counts[names[len(rates)]] = device_rate(
                    levels, wrappers, n, device, args.seconds, compile
                )
            rates.append(rate)
        rates.append(numba_rate(wrappers, n, args.seconds) if n <= _NUMBA_MAX else float("nan"))
        print(f"{n:>7} " + " ".join(f"{rate:>14,.0f}" for rate in rates), flush=True)
        for name, count in counts.items():
            if count is not None:
                print(f"  {name}, one step: {count}")
        for name, rate in zip(names, rates):
            if rate == rate:
                print(
                    ratio_line(
                        f"  {name}, N={n}",
                        rate,
                        "env steps/s",
                        figures,
                        "safelife-env append-still",
                    )
                )


if __name__ == "__main__":
    main()
