"""The SafeLife paper's Table 1 grid on one GPU lease: population training speed, then the grid
(4 tasks x 6 impact penalties x 3 seeds = 72 PPO runs) trained as one population per task and
benchmarked on the original v1.0 suites, sized to finish by a deadline.

    python benchmarks/gpu_table1.py [--seconds 480] [--steps N] [--seeds 3] [--levels 10]
        [--episodes 1] [--bank-size 200] [--jobs 4] [--batching auto grouped]
        [--graph-members 72] [--captured-members 72] [--grid-graphs] [--out DIR]
        [--device cuda] [--precision fp32]
    python benchmarks/gpu_table1.py --tiny --device cpu   # the same on a CPU in a minute (CI)

1. **speed**: env steps/s of populations of 18 (one task's penalties x seeds) and 72 (the whole
   grid as one batch) members in the paper's setup (16 envs x 20 steps a member, 3 epochs, 4
   minibatches, the SafeLife CNN), on the prune-still suite's levels, for each ``--batching``
   of the members' networks (``auto``: unfold on CUDA, convolutions as batched matrix
   products; ``grouped``: grouped convolutions and batched products written out), and at
   ``--graph-members`` with the env's step replayed as a CUDA graph (``compile=cudagraphs``:
   an eager step is some 800-1,000 kernel launches at 18-72 members), and at
   ``--captured-members`` with the trainer's rollout and update each one CUDA graph
   (``graphs=all``, the env's step compiled with ``compile=true`` and captured inside);
2. **grid**: ``safelife-rl reproduce table1 --population`` with the paper's settings, each run
   ``--steps`` long (default: as many as the measured speed allows by the deadline, with the
   impact-penalty and exit-curriculum schedules squeezed into the run in their proportions of
   the paper's 6M steps, as ``--quick`` squeezes them), training levels from a
   ``--bank-size`` bank per task, the agents benchmarked on the first ``--levels`` levels of
   each v1.0 suite ``--episodes`` times. ``--jobs`` tasks train at once (one process each);
   ``--grid-graphs`` trains them with ``graphs=all compile=true`` (sized by that speed).

Writes ``table1_lease.md`` (the speeds, the command, its wall time), the reproduction's
``table1.md``, ``report_table1.md`` and ``table1.csv``, and ``table1_runs.tar.gz`` (the report's
figures, its statements, and each run's config, evaluations and benchmark episodes, from which
``reproduce`` writes the tables again: ``benchmarks/lease_files.py``) into ``--out`` (default
``$OUT`` or ``outputs/gpu_table1``), the report rewritten after each stage.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
from lease_files import copy_tables, machine, pack
from population_speed import CAPTURED, TINY, config, population_rates
from precision import flags_text, refusal, with_precision

ROOT = Path(__file__).resolve().parents[1]
#: The paper's run length, and where its schedules move within it (steps).
PAPER_STEPS = 6_000_000
PENALTY_RAMP = (1_000_000, 2_000_000)
CURRICULUM_RAMP = (500_000, 2_000_000)
ROLLOUT = 16 * 20  # a member's env steps per rollout in the paper's setup
#: the grid's seconds outside training: start, level banks, final evaluations, benchmarks and
#: tables (the last lease's grid spent 200-350 s on them; 90 s was planned)
GRID_FIXED_SECONDS = 300
#: the speed rows' "env step" of the trainer with its rollout and update each one CUDA graph
CAPTURED_STEP = "compiled, trainer graphs=all"


def squeezed(steps: int, ramp: tuple[int, int]) -> str:
    return "[" + ",".join(str(max(1, step * steps // PAPER_STEPS)) for step in ramp) + "]"


def grid_command(args: argparse.Namespace, steps: int, out: Path) -> list[str]:
    if args.tiny:
        options = ["--quick", "--tasks", "prune-still,append-still", "--seeds", "1"]
        overrides = []
    else:
        options = ["--steps", str(steps), "--seeds", str(args.seeds)]
        overrides = [
            f"env.kwargs.bank={{size:{args.bank_size},progress:false}}",
            f"env.kwargs.workers={max(1, (os.cpu_count() or 1) // args.jobs)}",
            f"wrappers.side_effect_penalty.ramp.steps={squeezed(steps, PENALTY_RAMP)}",
            f"wrappers.exit_curriculum.ramp.steps={squeezed(steps, CURRICULUM_RAMP)}",
            # one evaluation episode a member at the end (20 a member every 100,000 steps, played
            # one env at a time, would take the lease): the benchmark is the result
            "callbacks.evaluation.n_episodes=1",
            f"callbacks.evaluation.eval_every={steps}",
            f"callbacks.checkpoint.save_every={max(steps // 2, ROLLOUT)}",
        ]
    if args.grid_graphs:
        overrides += list(CAPTURED)
    return [
        sys.executable, "-m", "safelife_rl", "reproduce", "table1", "--population",
        *options, "--levels", str(args.levels), "--episodes", str(args.episodes),
        "--out", str(out), f"device={args.device}", f"hydra.launcher.n_jobs={args.jobs}",
        *overrides,
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=480, help="deadline from the start")
    parser.add_argument("--steps", type=int, help="env steps a run (default: sized to fit)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--levels", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--bank-size", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=4, help="tasks trained at once")
    parser.add_argument("--members", type=int, nargs="+", default=[18, 72])
    parser.add_argument(
        "--graph-members",
        type=int,
        nargs="*",
        default=[72],
        help="populations also timed with the env's step as a CUDA graph (compile=cudagraphs)",
    )
    parser.add_argument(
        "--captured-members",
        type=int,
        nargs="*",
        default=[72],
        help="populations also timed with the trainer's rollout and update each a CUDA graph",
    )
    parser.add_argument(
        "--grid-graphs",
        action="store_true",
        help=f"the grid trained with {' '.join(CAPTURED)} (a run's graphs setting)",
    )
    parser.add_argument(
        "--batching",
        nargs="+",
        default=["auto", "grouped"],
        help="how the members' networks run, each timed (the grid trains with auto's)",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default="fp32", help="of the speed rows (not the grid's)")
    parser.add_argument("--tiny", action="store_true", help="a smoke run on a CPU")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "outputs/gpu_table1"))
    )
    args = parser.parse_args()
    reason = refusal(args.device, [args.precision])
    if reason:
        parser.exit(2, f"gpu_table1.py: {reason}\n")
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    report = args.out / "table1_lease.md"
    import pandas

    lines = [
        f"# Table 1 on one lease: {machine(args.device)}, pandas {pandas.__version__}\n",
        "## Population training speed (env steps/s, all members together)\n",
        "| members | envs | batching | env step | env steps/s | per CPU-s | precision |",
        "|---|---|---|---|---|---|---|",
    ]
    report.write_text("\n".join(lines) + "\n")
    overrides = [f"device={args.device}"]
    if args.tiny:
        overrides += TINY
        args.members = [2]
        args.graph_members = args.captured_members = []
    cfg = config(overrides)
    rates = {}
    plan = [(count, batching, "eager") for count in args.members for batching in args.batching]
    plan += [(count, "auto", "cudagraphs") for count in args.graph_members]
    plan += [(count, "auto", CAPTURED_STEP) for count in args.captured_members]
    for count, batching, step in plan:
        try:
            step_cfg = cfg
            if step == "cudagraphs":
                step_cfg = config([*overrides, f"compile={step}"])
            elif step == CAPTURED_STEP:
                step_cfg = config([*overrides, *CAPTURED])
            step_cfg = with_precision(step_cfg, args.precision)
            wall, cpu = population_rates(step_cfg, count, 1 if args.tiny else 3, batching)
        except Exception:  # reported; the grid is still tried
            lines += ["", "FAILED:", "```", traceback.format_exc()[-3000:], "```", ""]
            report.write_text("\n".join(lines) + "\n")
            continue
        if batching == "auto" and step == (CAPTURED_STEP if args.grid_graphs else "eager"):
            rates[count] = wall  # the grid's
        lines.append(
            f"| {count} | {count * cfg.n_envs:,} | {batching} | {step} | {wall:,.0f} | {cpu:,.0f} "
            f"| {args.precision}; {flags_text()} |"
        )
        report.write_text("\n".join(lines) + "\n")
    left = args.seconds - (time.perf_counter() - start)
    steps = args.steps
    if steps is None:  # what the grid's rate gives 72 runs in 60% of the time left
        grid_rate = rates[max(rates)] if rates else 0.0  # the largest population measured
        training = max(left - GRID_FIXED_SECONDS, 0) * 0.6
        steps = int(grid_rate / 72 * training) // ROLLOUT * ROLLOUT
        steps = max(steps, 10 * ROLLOUT)
    out = args.out / "grid" if args.tiny else Path("/tmp/table1_grid")
    command = grid_command(args, steps, out)
    lines += [
        "",
        "## The grid",
        "",
        f"`{' '.join(command[2:])}`",
        "",
        "(precision: a training run's default, fp32: TF32 off for cuDNN and matmuls)",
        "",
    ]
    report.write_text("\n".join(lines) + "\n")
    begin = time.perf_counter()
    try:
        result = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=max(left - 15, 30)
        )
        ended = "FAILED" if result.returncode else "finished"
        tail = (result.stdout + result.stderr)[-1500:]
    except subprocess.TimeoutExpired as stopped:
        ended = "stopped at the deadline"
        tail = ((stopped.stdout or b"") + (stopped.stderr or b"")).decode(errors="replace")[-1500:]
    lines.append(f"{ended} after {time.perf_counter() - begin:.0f} s, {steps:,} steps a run")
    copy_tables(out, args.out, "table1")
    # the figures and what the tables are made of (not the models), to write them again
    too_large = pack(args.out / "table1_runs.tar.gz", {"": out})
    if too_large:
        lines += ["", f"**{too_large}: it will not come back from a device call.**"]
    if ended != "finished":
        lines += ["", "```", tail, "```"]
    report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ended == "finished" else 1


if __name__ == "__main__":
    raise SystemExit(main())
