"""One command for a GPU machine: the device path's speed, what it asks of the device, its
conformance on the device and a real training run, written as one markdown report.

    python benchmarks/gpu_suite.py [--device cuda] [--sizes 1024 4096 16384 65536]
        [--seconds 3] [--train-steps 2000000] [--train-envs 1024] [--out outputs/gpu_suite.md]
    python benchmarks/gpu_suite.py --tiny   # the same sections with tiny sizes (CI, on a CPU)

Sections, each at every size N that fits in the device's free memory:

1. **engine**: board steps/s of the torch engine (``TorchGame.step``: actions, board and goal
   update, exits, points; no observation), eager and compiled, and, on the CPU, of the Numba
   engine beside it;
2. **vector env**: env steps/s of :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`
   with observations and the training wrappers, eager, compiled and (CUDA only) replayed as a
   CUDA graph, with the kernel ops, syncs and copies of one eager step;
3. **PPO**: env steps/s of ``DevicePPO`` with the SafeLife CNN end to end (the paper's 20-step
   rollouts, 3 epochs, 4 minibatches, at N envs), eager and (CUDA only) with the env's step
   and the policy's network replayed as CUDA graphs, with the syncs and copies of one rollout
   and of one update;
4. **conformance**: the tests that run on each torch device (recorded traces bit for bit, both
   engines through one interface, the device algorithms against stock SB3) run on this device
   (``--tiny``: only the device algorithms against stock SB3);
5. **training**: ``safelife-rl train experiment=paper env=prune-still vec_env=device`` for
   ``--train-steps`` with ``--train-envs`` envs and a 1,000-level bank; its wall time and its
   last evaluation (performance, success, length).

The machine (GPU name, torch version, CPU cores, load) heads the report. Bring the wheels the
GPU image lacks (docs/speed.md, "Running the GPU suite").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from engine_speed import TORCH_BYTES_PER_BOARD, free_bytes, numba_rate, timed, torch_rate
from hydra import compose, initialize_config_dir
from vector_env_speed import device_rate, wrapper_config

from safelife_rl import load_levels
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import bytes_per_env
from safelife_rl.training.envs import make_device_vec_env
from safelife_rl.training.models import build_model
from safelife_rl.training.run import plain
from safety_rl_common.torch_counts import OpCounts, counting

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "safelife_rl" / "conf"
# Rough bytes of device memory per env of PPO with the SafeLife CNN: the 20-step rollout of
# 25x25x10 uint8 views (twice, with the final observations) and the update's activations.
_PPO_BYTES_PER_ENV = 20 * 25 * 25 * 10 * 2 + 2**20


def machine(device: torch.device) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU (CPU run)"
    return (f"{gpu}; torch {torch.__version__}; {os.cpu_count()} CPU cores; 1-minute load "
            f"{os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def rate_text(rate: float) -> str:
    return "-" if rate != rate else f"{rate:,.0f}"


def engine_section(levels, sizes: list[int], device: torch.device, seconds: float) -> str:
    rows = []
    for n in sizes:
        fits = n * TORCH_BYTES_PER_BOARD < free_bytes(device)
        eager, compiled = ((torch_rate(levels, n, device, seconds, compile)[0] if fits
                            else float("nan")) for compile in (False, True))
        numba = numba_rate(levels, n, seconds) if device.type == "cpu" else float("nan")
        rows.append([f"{n:,}", rate_text(eager), rate_text(compiled), rate_text(numba)])
    return ("## Engine: board steps/s\n\n"
            + table(["N", f"torch {device.type}", "compiled", "Numba (CPU)"], rows))


def vector_section(levels, sizes: list[int], device: torch.device, seconds: float) -> str:
    wrappers = wrapper_config(CONF / "wrappers" / "safelife.yaml")
    modes = [False, True] + (["cudagraphs"] if device.type == "cuda" else [])
    rows, counted = [], {}
    for n in sizes:
        need = n * bytes_per_env(levels[0].shape, (15, 15), 19)
        row = [f"{n:,}"]
        for mode in modes:
            rate, counts = float("nan"), None
            if need < free_bytes(device):
                rate, counts = device_rate(levels, wrappers, n, device, seconds, mode)
            row.append(rate_text(rate))
            if counts is not None:
                counted[n] = counts
        rows.append(row)
    names = {False: "eager", True: "compiled", "cudagraphs": "CUDA graph"}
    text = ("## Vector env: env steps/s with observations and the training wrappers\n\n"
            + table(["N", *(names[m] for m in modes)], rows))
    text += "\n\nOne eager step asks of the device: " + "; ".join(
        f"N={n:,}: {c}" for n, c in counted.items())
    return text


def paper_config(overrides: list[str]):
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("train", overrides=["experiment=paper", *overrides])


def ppo_rate(n: int, device: torch.device, seconds: float, compile: bool | str = False
             ) -> tuple[float, tuple[OpCounts, OpCounts]]:
    """Env steps/s of DevicePPO with the SafeLife CNN on n envs of the prune-still suite (the
    paper's rollouts and update), and the counts of one rollout and one update; ``compile``:
    the env's step mode (``"cudagraphs"`` also captures the policy's network)."""
    cfg = paper_config([f"n_envs={n}", f"device={device}", "vec_env=device"])
    kwargs = {**plain(cfg.env.kwargs), "levels": str(suite_file("prune-still"))}
    env = make_device_vec_env(cfg.env.id, kwargs, plain(cfg.wrappers), n, str(device),
                              compile)
    try:
        model = build_model(cfg, env)
        steps = n * model.n_steps
        model.learn(steps)  # warm up
        _, callback = model._setup_learn(10**12, reset_num_timesteps=False)
        with counting() as rollout:
            model.collect_rollouts(env, callback, model.rollout_buffer, model.n_steps)
        with counting() as update:
            model.train()
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        per_rollout = timed(lambda: model.learn(steps, reset_num_timesteps=False), sync,
                            seconds)
        return steps / per_rollout, (rollout, update)
    finally:
        env.close()


def ppo_section(sizes: list[int], device: torch.device, seconds: float) -> str:
    """Eager, and on CUDA with the env's step and the policy's network as CUDA graphs."""
    modes = [False] + (["cudagraphs"] if device.type == "cuda" else [])
    rows = []
    for n in sizes:
        if n * _PPO_BYTES_PER_ENV > free_bytes(device):
            rows.append([f"{n:,}", *("-" for _ in modes), "does not fit", ""])
            continue
        rates = []
        for mode in modes:
            rate, counts = ppo_rate(n, device, seconds, mode)
            rates.append(rate_text(rate))
            if mode is False:
                rollout, update = counts
        rows.append([f"{n:,}", *rates, f"{rollout.syncs} syncs, {rollout.copies} copies",
                     f"{update.syncs} syncs, {update.copies} copies"])
    names = {False: "env steps/s", "cudagraphs": "CUDA graphs"}
    return ("## PPO with the SafeLife CNN, end to end: env steps/s\n\n20-step rollouts, 3 epochs, "
            "4 minibatches (the paper's, at N envs); what one whole eager rollout (20 steps) "
            "and one whole update ask of the device beside each rate. CUDA graphs: the env's "
            "compiled step and the policy's network each replayed as a CUDA graph "
            "(`compile=cudagraphs`).\n\n"
            + table(["N", *(names[m] for m in modes), "one rollout", "one update"], rows))


#: the tests run on each torch device (``torch_device``), and a CPU-only smoke of them
CONFORMANCE = ["tests/safelife/test_torch_conformance.py", "tests/safelife/test_game_batch.py",
               "tests/safelife/test_device_training.py"]
TINY_CONFORMANCE = ["tests/safelife/test_device_training.py::"
                    "test_device_algorithms_make_the_updates_of_stock_sb3"]


def conformance_section(device: torch.device, tests: list[str]) -> str:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
               "-k", device.type, *tests]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    summary = (result.stdout.strip().splitlines() or ["no output"])[-1]
    return (f"## Conformance on {device.type}\n\n`{' '.join(command[1:])}`\n\n"
            f"{'PASSED' if result.returncode == 0 else 'FAILED'}: {summary}")


def training_section(device: torch.device, steps: int, n_envs: int, tiny: bool) -> str:
    with tempfile.TemporaryDirectory() as folder:
        # experiment=paper-quick draws from a bank of 4 levels; paper's gets one of 1,000
        experiment = ["experiment=paper-quick"] if tiny else [
            "experiment=paper", "env.kwargs.bank={size:1000,progress:false}"]
        overrides = [*experiment, "env=prune-still", "vec_env=device", f"device={device}",
                     f"n_envs={n_envs}", f"total_timesteps={steps}", "progress_bar=false",
                     f"hydra.run.dir={folder}/run"]
        command = [sys.executable, "-m", "safelife_rl", "train", *overrides]
        start = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                env={**os.environ, "SAFELIFE_CACHE": folder})
        wall = time.perf_counter() - start
        evaluations = Path(folder) / "run" / "evaluations.json"
        if result.returncode or not evaluations.exists():
            return (f"## Training\n\n`{' '.join(command[1:])}` FAILED after {wall:.0f} s:\n\n"
                    f"```\n{result.stderr[-2000:]}\n```")
        last = json.loads(evaluations.read_text())[-1]
    figures = {key: last.get(f"mean_{key}") for key in ("performance", "success", "length")}
    return (f"## Training: prune-still, {steps:,} steps, {n_envs:,} envs on {device.type}\n\n"
            f"`safelife-rl train {' '.join(overrides[:-1])}`\n\nwall time {wall:.0f} s "
            f"({steps / wall:,.0f} env steps/s with evaluations); last evaluation, at step "
            f"{last['step']:,}: "
            + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in figures.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--train-steps", type=int, default=2_000_000)
    parser.add_argument("--train-envs", type=int, default=1024)
    parser.add_argument("--tiny", action="store_true",
                        help="tiny sizes and a short run: the whole suite in a few minutes on a CPU")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "gpu_suite.md")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_suite: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.tiny:
        args.sizes, args.seconds, args.train_steps, args.train_envs = [16], 0.3, 1024, 16
    torch.manual_seed(0)
    np.random.seed(0)
    levels = load_levels(suite_file("append-still"))
    sections = [f"# GPU suite\n\nMachine: {machine(device)}"]
    for build in (lambda: engine_section(levels, args.sizes, device, args.seconds),
                  lambda: vector_section(levels, args.sizes, device, args.seconds),
                  lambda: ppo_section(args.sizes, device, args.seconds),
                  lambda: conformance_section(device,
                                              TINY_CONFORMANCE if args.tiny else CONFORMANCE),
                  lambda: training_section(device, args.train_steps, args.train_envs, args.tiny)):
        sections.append(build())
        print(sections[-1] + "\n", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n\n".join(sections) + "\n")
    print(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
