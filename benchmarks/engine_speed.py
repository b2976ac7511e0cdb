"""Board steps per second of the Numba engine and the torch engine, batch by batch.

Usage: python benchmarks/engine_speed.py [--sizes 1 64 1024 16384 65536] [--threads 1]
                                          [--seconds 2] [--levels PATH] [--compile]

Each batch of N games (the append-still suite's levels, repeated) plays random actions; one
board step is one game's action, board and goal update, exits and points (no observations).
The Numba engine runs on the CPU; the torch engine on the CPU and, when there is one, on CUDA.
``--compile`` adds the compiled step (``TorchGame(compile=True)``: the step as one
``torch.compile(fullgraph=True)`` graph; compiling takes tens of seconds per size, not timed).
Under each size, what one eager torch step asks of the device
(:mod:`safety_rl_common.torch_counts`: kernel ops, syncs, host<->device copies; the compiled
step is the same code, fused, and dispatch modes cannot see into it).
A batch that would not fit in the free memory is skipped. Beside them it prints the original
SafeLife environment's steps/s (``baselines.sh safelife-env``, run in the same run). An
original env step also makes an observation, which a board step does not, so read that ratio as
an upper bound; ``vector_env_speed.py`` compares steps with observations.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from baselines import add_arguments, measure, ratio_line

from safelife_rl import SafeLifeGame, load_levels
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.envs.registration import benchmark_file
from safety_rl_common.torch_counts import OpCounts, count_ops

# Peak bytes a torch step needs per board of 26x26 cells (int64 neighbourhood sums and their
# temporaries), with room to spare.
TORCH_BYTES_PER_BOARD = 26 * 26 * 8 * 16


def fresh_compiles() -> None:
    """Forget every compiled graph, so that the next compile starts from a clean Dynamo state
    (its recompile limit counts per code object over the whole process: nine sizes compiled in
    one process would stop there)."""
    torch._dynamo.reset()


def timed(step, sync, seconds: float) -> float:
    """Seconds per call of ``step``, timed over at least ``seconds`` and two calls."""
    step()
    sync()
    calls, start = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - start < seconds:
        step()
        calls += 1
    sync()
    return (time.perf_counter() - start) / calls


def numba_rate(levels, n: int, seconds: float) -> float:
    rng = np.random.default_rng(0)
    game = SafeLifeGame([levels[i % len(levels)] for i in range(n)], rng=rng)
    return n / timed(lambda: game.step(rng.integers(0, 9, (n, 1))), lambda: None, seconds)


def torch_rate(
    levels, n: int, device: torch.device, seconds: float, compile: bool = False
) -> tuple[float, OpCounts | None]:
    """Board steps/s of a batch of ``n`` games, and what one eager step asks of the device."""
    if compile:
        fresh_compiles()
    game = TorchGame(
        [levels[i % len(levels)] for i in range(n)], seed=0, device=device, compile=compile
    )
    generator = torch.Generator(device).manual_seed(0)
    actions = torch.randint(0, 9, (64, n, 1), generator=generator, device=device)
    calls = iter(range(1 << 62))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rate = n / timed(lambda: game.step(actions[next(calls) % 64]), sync, seconds)
    return rate, None if compile else count_ops(game.step, actions[0])


def free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 16384, 65536])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (the Numba kernels use one)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--levels", default=None, help="default: the append-still suite")
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
    levels = load_levels(args.levels or benchmark_file("append-still"))
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    modes = [(d, False) for d in devices] + ([(d, True) for d in devices] if args.compile else [])
    names = ["numba"] + [f"{'compiled' if c else 'torch'} {d.type}" for d, c in modes]
    print(f"board steps/s (torch {torch.__version__}, {args.threads} CPU thread(s))")
    print(f"{'N':>7} " + " ".join(f"{name:>14}" for name in names))
    best = {}
    for n in args.sizes:
        rates, counts = [numba_rate(levels, n, args.seconds)], {}
        for device, compile in modes:
            rate = float("nan")
            if n * TORCH_BYTES_PER_BOARD < free_bytes(device):
                rate, counts[names[len(rates)]] = torch_rate(
                    levels, n, device, args.seconds, compile
                )
            rates.append(rate)
        print(f"{n:>7} " + " ".join(f"{rate:>14,.0f}" for rate in rates), flush=True)
        for name, count in counts.items():
            if count is not None:
                print(f"  {name}, one step: {count}")
        for name, rate in zip(names, rates):
            if rate == rate and rate > best.get(name, (0, 0))[0]:
                best[name] = (rate, n)
    for name, (rate, n) in best.items():
        print(
            ratio_line(
                f"{name}, best (N={n})", rate, "board steps/s", figures, "safelife-env append-still"
            )
        )


if __name__ == "__main__":
    main()
