"""One command for a GPU machine: the device path's speed, what it asks of the device, its
conformance on the device and a real training run, written as one markdown report.

    python benchmarks/gpu_suite.py [--device cuda] [--sections engine vector ppo conformance
        training] [--sizes 1024 16384 65536] [--compile-sizes 16384] [--ppo-sizes 16 1152 16384]
        [--seconds 2] [--train-steps 5000000] [--train-envs 1024] [--bank-size 1000]
        [--deadline SECONDS] [--precision fp32] [--out outputs/gpu_suite.md]
    python benchmarks/gpu_suite.py --tiny   # the same sections with tiny sizes (CI, on a CPU)

Sections:

1. **engine**: board steps/s of the torch engine (``TorchGame.step``: actions, board and goal
   update, exits, points; no observation), eager at ``--sizes``, compiled at
   ``--compile-sizes`` (its games compared bit for bit with eager), and, on the CPU, the Numba
   engine beside it;
2. **vector**: env steps/s of :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` with
   observations and the training wrappers, on the prune-still suite and on a level bank: eager
   at ``--sizes``, compiled and (CUDA only) replayed as a CUDA graph at ``--compile-sizes``,
   each compared bit for bit with eager over 16 steps, with what one eager step asks of the
   device (kernel ops, syncs, copies);
3. **ppo**: env steps/s of ``DevicePPO`` with the SafeLife CNN end to end (the paper's 20-step
   rollouts, 3 epochs, 4 minibatches) at ``--ppo-sizes`` envs (16: one paper run; 1,152: the
   Table 1 grid's 72 runs x 16 envs as one batch), eager and, at ``--compile-sizes`` on CUDA,
   with the env's step and the policy's network replayed as CUDA graphs; at ``--precision``
   (``benchmarks/precision.py``) with a training run's cuDNN kernels, each row stating them;
4. **conformance**: the tests that run on each torch device (recorded traces bit for bit, both
   engines through one interface, the device algorithms against stock SB3) on this device;
5. **training**: ``safelife-rl train experiment=paper env=prune-still vec_env=device`` for
   ``--train-steps`` with ``--train-envs`` envs and a ``--bank-size`` level bank built by all
   cores; its wall time and its evaluations (``evaluations.json`` beside the report).

The report is rewritten after every section, so a crash or a kill still leaves what ran; a
section that fails is reported with its traceback and the others go on (exit status 1). Every
compiled measurement starts from a fresh Dynamo state (no recompile limit is reached however
many sizes run), and a CUDA graph that torch would skip is an error, not a warning.
``--deadline`` (seconds from the start) skips what would start after it and stops the training
run at it. Bring the wheels the GPU image lacks (``benchmarks/gpu_lease.sh``, docs/speed.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from engine_speed import (
    TORCH_BYTES_PER_BOARD,
    free_bytes,
    fresh_compiles,
    numba_rate,
    timed,
    torch_rate,
)
from hydra import compose, initialize_config_dir
from precision import flags_text, refusal, with_precision
from torch.utils._pytree import tree_leaves
from vector_env_speed import wrapper_config

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv, bytes_per_env
from safelife_rl.procgen.bank import LevelBank
from safelife_rl.training.envs import make_device_vec_env
from safelife_rl.training.models import build_model
from safelife_rl.training.precision import apply_precision
from safelife_rl.training.run import cudnn_kernels, plain
from safety_rl_common.torch_counts import OpCounts, count_ops, counting

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "safelife_rl" / "conf"
SECTIONS = ("engine", "vector", "ppo", "conformance", "training")
# Rough bytes of device memory per env of PPO with the SafeLife CNN: the 20-step rollout of
# 25x25x10 uint8 views (twice, with the final observations) and the update's activations.
_PPO_BYTES_PER_ENV = 20 * 25 * 25 * 10 * 2 + 2**20
_COMPARED_STEPS = 16


def machine(device: torch.device) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU (CPU run)"
    return (
        f"{gpu}; torch {torch.__version__}; Python {sys.version.split()[0]}; "
        f"{os.cpu_count()} CPU cores; 1-minute load {os.getloadavg()[0]:.1f}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def rate_text(rate: float) -> str:
    return "-" if rate != rate else f"{rate:,.0f}"


def same(first: object, second: object) -> bool:
    """Whether two trees of tensors hold the same values bit for bit."""
    a, b = tree_leaves(first), tree_leaves(second)
    return len(a) == len(b) and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b)
    )


class Report:
    """The markdown report, rewritten whole after every section (a crash keeps what ran)."""

    def __init__(self, path: Path, device: torch.device, title: str = "GPU suite"):
        self.path = path
        self.sections = [f"# {title}\n\nMachine: {machine(device)}"]
        self.failed: list[str] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write()

    def _write(self) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text("\n\n".join(self.sections) + "\n")
        partial.replace(self.path)

    def finish(self, text: str) -> None:
        self.sections.append(text)
        self._write()
        print(text, flush=True)

    def run(self, name: str, build: Callable[[], str]) -> None:
        start = time.perf_counter()
        try:
            text = build()
        except Exception:  # noqa: BLE001 - the report says what broke and the suite goes on
            self.failed.append(name)
            text = f"## {name}: FAILED\n\n```\n{traceback.format_exc()[-3000:]}```"
        text += f"\n\n({name}: {time.perf_counter() - start:.0f} s)"
        self.sections.append(text)
        self._write()
        print(text + "\n", flush=True)


def engine_section(
    levels, sizes: list[int], compile_sizes: list[int], device: torch.device, seconds: float
) -> str:
    rows = []
    for n in sorted(set(sizes) | set(compile_sizes)):
        if n * TORCH_BYTES_PER_BOARD > free_bytes(device):
            rows.append([f"{n:,}", "does not fit", "-", "-", "-"])
            continue
        eager = torch_rate(levels, n, device, seconds)[0] if n in sizes else float("nan")
        compiled, equal = float("nan"), "-"
        if n in compile_sizes:
            compiled = torch_rate(levels, n, device, seconds, True)[0]
            equal = "yes" if engine_same_compiled(levels, n, device) else "**NO**"
        numba = numba_rate(levels, n, seconds) if device.type == "cpu" else float("nan")
        rows.append([f"{n:,}", rate_text(eager), rate_text(compiled), equal, rate_text(numba)])
    return "## Engine: board steps/s\n\n" + table(
        ["N", f"torch {device.type}", "compiled", "compiled = eager", "Numba (CPU)"], rows
    )


def engine_same_compiled(levels, n: int, device: torch.device) -> bool:
    """Whether the compiled engine's games equal the eager engine's after the same steps."""
    games = [
        TorchGame(
            [levels[i % len(levels)] for i in range(n)], seed=0, device=device, compile=compile
        )
        for compile in (False, True)
    ]
    actions = torch.randint(
        0,
        9,
        (_COMPARED_STEPS, n, 1),
        generator=torch.Generator(device).manual_seed(1),
        device=device,
    )
    for step in actions:
        for game in games:
            game.step(step)
    return same(games[0].game, games[1].game)


def vector_envs(
    source: str, n: int, device: torch.device, mode: bool | str, bank_size: int
) -> SafeLifeVectorEnv:
    """``n`` envs of prune-still's suite, or of a ``bank_size`` prune-still level bank."""
    wrappers = wrapper_config(CONF / "wrappers" / "safelife.yaml")
    if source == "suite":
        env = SafeLifeEnv(load_levels(suite_file("append-still")))
    else:
        env = SafeLifeEnv(
            LevelBank("prune-still", size=bank_size, workers=_workers(), progress=False)
        )
    envs = SafeLifeVectorEnv(env, n, device, wrappers, compile=mode)
    envs.set_training_steps(10**7)
    envs.reset(seed=0)
    return envs


def _workers() -> int:
    return max(1, min(16, (os.cpu_count() or 2) - 1))


def random_actions(n: int, device: torch.device, count: int = 64) -> torch.Tensor:
    return torch.randint(
        0, 9, (count, n), generator=torch.Generator(device).manual_seed(0), device=device
    )


def vector_rate(envs: SafeLifeVectorEnv, n: int, seconds: float) -> float:
    actions = random_actions(n, envs.device)
    calls = iter(range(1 << 62))
    sync = torch.cuda.synchronize if envs.device.type == "cuda" else (lambda: None)
    envs.step(actions[0])  # compiles, if compiling
    return n / timed(lambda: envs.step(actions[next(calls) % 64]), sync, seconds)


def compared(
    source: str, n: int, device: torch.device, mode: bool | str, bank_size: int
) -> tuple[SafeLifeVectorEnv, list[str]]:
    """The envs stepped in ``mode``, and what of their first steps differs from eager's
    (observations, rewards, terminations, truncations, state entries) with the largest
    difference: nothing when they are equal bit for bit."""
    fresh_compiles()
    runs, envs = [], None
    for compile in (False, mode):
        envs = vector_envs(source, n, device, compile, bank_size)
        steps = [envs.step(actions)[:4] for actions in random_actions(n, device, _COMPARED_STEPS)]
        outputs = {
            name: torch.stack([step[k] for step in steps])
            for k, name in enumerate(("observations", "rewards", "terminated", "truncated"))
        }
        runs.append({**outputs, **envs.state})
    eager, other = runs
    return envs, [
        f"{name} (by {(eager[name].double() - other[name].double()).abs().max():.2g})"
        for name in eager
        if not torch.equal(eager[name], other[name])
    ]


def vector_section(
    sizes: list[int], compile_sizes: list[int], device: torch.device, seconds: float, bank_size: int
) -> str:
    modes = [True] + (["cudagraphs"] if device.type == "cuda" else [])
    names = {True: "compiled", "cudagraphs": "CUDA graph"}
    rows, counted = [], {}
    for source in ("suite", "bank"):
        for n in sorted(set(sizes) | set(compile_sizes)):
            row = [source, f"{n:,}"]
            if n * bytes_per_env((25, 25), (15, 15), 19) > free_bytes(device):
                rows.append(row + ["does not fit"] + ["-"] * len(modes))
                continue
            eager = float("nan")
            if n in sizes:
                envs = vector_envs(source, n, device, False, bank_size)
                eager = vector_rate(envs, n, seconds)
                counted[f"{source}, N={n:,}"] = count_ops(envs.step, random_actions(n, device)[1])
                envs.close()
            row.append(rate_text(eager))
            for mode in modes:
                if n not in compile_sizes:
                    row.append("-")
                    continue
                envs, differ = compared(source, n, device, mode, bank_size)
                rate = vector_rate(envs, n, seconds)
                envs.close()
                row.append(
                    f"{rate_text(rate)} ("
                    + (f"**NOT = eager**: {', '.join(differ)}" if differ else "= eager")
                    + ")"
                )
            rows.append(row)
    text = (
        "## Vector env: env steps/s with observations and the training wrappers\n\n"
        f"The append-still suite's levels and a {bank_size:,}-level prune-still bank; "
        f"each compiled rate with whether {_COMPARED_STEPS} steps equal eager's bit for "
        "bit (observations, rewards, ends, state).\n\n"
        + table(["levels", "N", "eager", *(names[m] for m in modes)], rows)
    )
    text += "\n\nOne eager step asks of the device: " + "; ".join(
        f"{key}: {counts}" for key, counts in counted.items()
    )
    bad = [key for key, counts in counted.items() if counts.syncs or counts.copies]
    if bad or any("NOT = eager" in cell for row in rows for cell in row):
        raise AssertionError(
            f"{text}\n\nsyncs or copies in a step ({bad}) or a compiled step "
            "that differs from eager"
        )
    return text


def paper_config(overrides: list[str]):
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("train", overrides=["experiment=paper", *overrides])


def ppo_rate(
    n: int, device: torch.device, seconds: float, precision: str, compile: bool | str = False
) -> tuple[float, tuple[OpCounts, OpCounts]]:
    """Env steps/s of DevicePPO with the SafeLife CNN on n envs of the prune-still suite (the
    paper's rollouts and update) at ``precision``, and the counts of one rollout and one
    update; ``compile``: the env's step mode (``"cudagraphs"`` also captures the policy's
    network)."""
    if compile:
        fresh_compiles()
    cfg = paper_config([f"n_envs={n}", f"device={device}", "vec_env=device"])
    cfg = with_precision(cfg, precision)
    kwargs = {**plain(cfg.env.kwargs), "levels": str(suite_file("prune-still"))}
    env = make_device_vec_env(cfg.env.id, kwargs, plain(cfg.wrappers), n, str(device), compile)
    try:
        model = build_model(cfg, env)
        apply_precision(cfg.precision, model.policy)  # as a run
        cudnn_kernels(cfg.get("cudnn_deterministic", False))  # as a run: not SB3's seeding's
        steps = n * model.n_steps
        model.learn(steps)  # warm up
        trainer = model.trainer()  # the device trainer at P = 1
        _, callbacks = trainer.setup(10**12, reset_num_timesteps=False)
        with counting() as rollout:
            trainer.collect_rollouts(callbacks)
        with counting() as update:
            trainer.train()
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        per_rollout = timed(lambda: model.learn(steps, reset_num_timesteps=False), sync, seconds)
        return steps / per_rollout, (rollout, update)
    finally:
        env.close()


def ppo_section(
    sizes: list[int], compile_sizes: list[int], device: torch.device, seconds: float, precision: str
) -> str:
    """Eager, and on CUDA with the env's step and the policy's network as CUDA graphs, at
    ``precision`` with cuDNN's kernels as a training run chooses them."""
    graphs = device.type == "cuda"
    rows = []
    for n in sizes:
        if n * _PPO_BYTES_PER_ENV > free_bytes(device):
            rows.append([f"{n:,}", "does not fit", "-", "", "", precision])
            continue
        rate, (rollout, update) = ppo_rate(n, device, seconds, precision)
        graphed = "-"
        if graphs and n in compile_sizes:
            try:
                graphed = rate_text(ppo_rate(n, device, seconds, precision, "cudagraphs")[0])
            except Exception as error:  # noqa: BLE001 - the eager rates still come back
                graphed = f"**FAILED**: {type(error).__name__}: {str(error).splitlines()[0]}"
        rows.append(
            [
                f"{n:,}",
                rate_text(rate),
                graphed,
                f"{rollout.syncs} syncs, {rollout.copies} copies",
                f"{update.syncs} syncs, {update.copies} copies",
                f"{precision}; {flags_text()}",
            ]
        )
    text = (
        "## PPO with the SafeLife CNN, end to end: env steps/s\n\n20-step rollouts, 3 epochs, "
        "4 minibatches (the paper's, at N envs); what one whole eager rollout (20 steps) "
        "and one whole update ask of the device beside each rate. CUDA graphs: the env's "
        "compiled step and the policy's network each replayed as a CUDA graph "
        "(`compile=cudagraphs`).\n\n"
        + table(["N", "env steps/s", "CUDA graphs", "one rollout", "one update", "precision"], rows)
    )
    if any("FAILED" in row[2] for row in rows):
        raise AssertionError(text)
    return text


#: the tests run on each torch device (``torch_device``), and a CPU-only smoke of them
CONFORMANCE = [
    "tests/safelife/test_torch_conformance.py",
    "tests/safelife/test_game_batch.py",
    "tests/safelife/test_device_training.py",
    "tests/safelife/test_sampler.py",  # the same logits draw the same actions on CPU and CUDA
    "tests/safelife/test_captured_bodies.py",  # each CUDA graph replays its eager body
]
TINY_CONFORMANCE = [
    "tests/safelife/test_device_training.py::test_device_algorithms_make_the_updates_of_stock_sb3"
]


def conformance_section(device: torch.device, tests: list[str]) -> str:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-k",
        device.type,
        *tests,
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    summary = (result.stdout.strip().splitlines() or ["no output"])[-1]
    text = (
        f"## Conformance on {device.type}\n\n`{' '.join(command[1:])}`\n\n"
        f"{'PASSED' if result.returncode == 0 else 'FAILED'}: {summary}"
    )
    if result.returncode:
        raise AssertionError(f"{text}\n\n{result.stdout[-2500:]}")
    return text


def training_section(
    device: torch.device,
    steps: int,
    n_envs: int,
    bank_size: int,
    tiny: bool,
    out: Path,
    seconds_left: float,
) -> str:
    with tempfile.TemporaryDirectory() as folder:
        # experiment=paper-quick draws from a bank of 4 levels; paper's from bank_size
        experiment = (
            ["experiment=paper-quick"]
            if tiny
            else [
                "experiment=paper",
                f"env.kwargs.bank={{size:{bank_size},progress:false}}",
                f"env.kwargs.workers={_workers()}",
            ]
        )
        if not tiny:  # a 20-episode evaluation on the CPU, not one per 100,000 steps
            experiment += [
                f"callbacks.evaluation.eval_every={max(steps // 10, 100_000)}",
                "callbacks.checkpoint.save_every=1000000",
            ]
        overrides = [
            *experiment,
            "env=prune-still",
            "vec_env=device",
            f"device={device}",
            f"n_envs={n_envs}",
            f"total_timesteps={steps}",
            "progress_bar=false",
            f"hydra.run.dir={folder}/run",
        ]
        command = [sys.executable, "-m", "safelife_rl", "train", *overrides]
        limit = None if seconds_left == float("inf") else max(seconds_left, 1)
        start = time.perf_counter()
        try:
            result = subprocess.run(
                command,
                cwd=ROOT,
                capture_output=True,
                text=True,
                env={**os.environ, "SAFELIFE_CACHE": folder},
                timeout=limit,
            )
            ended = "FAILED" if result.returncode else "finished"
            stderr = result.stderr
        except subprocess.TimeoutExpired as stopped:
            ended, stderr = "stopped at the deadline", (stopped.stderr or b"").decode()
        wall = time.perf_counter() - start
        evaluations = Path(folder) / "run" / "evaluations.json"
        history = json.loads(evaluations.read_text()) if evaluations.exists() else []
        if history:
            shutil.copyfile(evaluations, out.with_name(out.stem + "_evaluations.json"))
    text = (
        f"## Training: prune-still, {steps:,} steps, {n_envs:,} envs on {device.type}\n\n"
        f"`safelife-rl train {' '.join(overrides[:-1])}`\n\n{ended} after {wall:.0f} s "
        "(precision: a training run's default, fp32: TF32 off for cuDNN and matmuls)"
    )
    if ended == "FAILED" or not history:
        raise AssertionError(f"{text}; no evaluation:\n\n```\n{stderr[-2000:]}\n```")
    rows = [
        [
            f"{e['step']:,}",
            *(
                f"{e.get(f'mean_{key}', float('nan')):.3g}"
                for key in ("performance", "success", "length")
            ),
        ]
        for e in history
    ]
    last = history[-1]["step"]
    return f"{text} ({last / wall:,.0f} env steps/s with evaluations and the start)\n\n" + table(
        ["step", "performance", "success", "length"], rows
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1024, 16384, 65536],
        help="eager engine and vector env sizes",
    )
    parser.add_argument(
        "--compile-sizes",
        type=int,
        nargs="+",
        default=[16384],
        help="sizes also measured compiled and as CUDA graphs",
    )
    parser.add_argument("--ppo-sizes", type=int, nargs="+", default=[16, 1152, 16384])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument(
        "--precision", default="fp32", help="of the PPO section (benchmarks/precision.py)"
    )
    parser.add_argument("--train-steps", type=int, default=5_000_000)
    parser.add_argument("--train-envs", type=int, default=1024)
    parser.add_argument("--bank-size", type=int, default=1000)
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds from the start: later sections are skipped, training stops",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="tiny sizes and a short run: the whole suite in minutes on a CPU",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "gpu_suite.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.sizes, args.compile_sizes, args.ppo_sizes = [8, 16], [8, 16], [16]
        args.seconds, args.train_steps, args.train_envs, args.bank_size = 0.3, 1024, 16, 4
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    begun = time.perf_counter()
    device = torch.device(args.device)
    reason = refusal(args.device, [args.precision])
    if reason:
        print(f"gpu_suite: {reason}", file=sys.stderr)
        return 2
    if device.type == "cuda":  # a CUDA graph torch would skip is an error, not a warning
        torch._inductor.config.triton.cudagraph_or_error = True
    torch.manual_seed(0)
    np.random.seed(0)
    levels = load_levels(suite_file("append-still"))
    report = Report(args.out, device)
    left = (
        (lambda: float("inf"))
        if args.deadline is None
        else (lambda: args.deadline - (time.perf_counter() - begun))
    )
    builds = {
        "engine": lambda: engine_section(
            levels, args.sizes, args.compile_sizes, device, args.seconds
        ),
        "vector": lambda: vector_section(
            args.sizes, args.compile_sizes, device, args.seconds, args.bank_size
        ),
        "ppo": lambda: ppo_section(
            args.ppo_sizes, args.compile_sizes, device, args.seconds, args.precision
        ),
        "conformance": lambda: conformance_section(
            device, TINY_CONFORMANCE if args.tiny else CONFORMANCE
        ),
        "training": lambda: training_section(
            device,
            args.train_steps,
            args.train_envs,
            args.bank_size,
            args.tiny,
            args.out,
            left() - 20,
        ),
    }
    for name in args.sections:
        if left() < 30:
            report.sections.append(f"## {name}: skipped, {left():.0f} s before the deadline")
            report.failed.append(name)
            continue
        report.run(name, builds[name])
    report.finish(
        f"Total: {time.perf_counter() - begun:.0f} s"
        + (f"; FAILED: {', '.join(report.failed)}" if report.failed else "")
    )
    print(f"report: {args.out}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
