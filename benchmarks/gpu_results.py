"""The SafeLife paper's protocol from GPU leases (issue 43, step 6): Table 2's 18 runs, then
Table 1's 72, each of the paper's 6M steps in its settings, trained by
``safelife-rl reproduce table2|table1 --population`` (one population per task) in a folder on
the machine's disk, stopped gracefully by a deadline so that a second call of the same command
on the same warm machine continues where the first stopped.

    python benchmarks/gpu_results.py [--seconds 540] [--steps 6000000] [--seeds 3]
        [--tables table2 table1] [--levels N] [--episodes N] [--bank-size 1000] [--jobs 4]
        [--grace 60] [--work /tmp/paper_results] [--out DIR] [--device cuda] [--precision fp32]
        [--graphs none|rollout|update|all]
    python benchmarks/gpu_results.py --tiny --device cpu   # the same on a CPU, tiny (CI)

Largest first: a table is started only once the tables before it are finished, and not with
less than ``--grace`` seconds left before the stop. Each is the reproduction's own sweep in
``--work``/``tableN`` (default ``/tmp/paper_results``): finished runs are skipped, stopped ones
resume from their newest checkpoint (a task's together, as one population). ``--grace`` seconds
(default 60) before the deadline (``--seconds`` from the start, default ``$RESULTS_SECONDS`` or
540) the reproduction gets SIGINT, as Ctrl-C: every population stops at its next rollout
boundary (the rollout under way is trained on; a periodic evaluation under way is finished
first) and saves a checkpoint of each member, losing nothing; a final evaluation or benchmark
under way is dropped and done again by the next call (the run's final model is saved). At the
deadline whatever still runs is killed: then the runs lose what they trained since their last
checkpoint (``callbacks.checkpoint.save_every``, the paper's 50,000 steps a member).

Writes into ``--out`` (default ``$OUT`` or ``outputs/gpu_results``) ``results.md`` (the machine,
precision, command, wall time; per table the runs finished, the steps saved a run, the env
steps/s this call achieved and the calls left at that speed), for each table whose runs are all
finished the reproduction's ``tableN.md``, ``report_tableN.md`` and ``tableN.csv``, and
``results_runs.tar.gz`` (the reports' figures and statements, and each run's config,
evaluations and benchmark episodes: ``benchmarks/lease_files.py``): at most 8 files.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from lease_files import MAX_FILES, copy_tables, machine, pack
from precision import refusal

from safelife_rl.apps.reproduce.runs import (
    PENALTIES,
    QUICK_PENALTIES,
    TABLE1_TASKS,
    TABLE2_TASKS,
    Run,
    grid,
    is_finished,
    progress,
)
from safelife_rl.apps.reproduce.sweep import FULL_STEPS, INTERRUPTED
from safelife_rl.training.device.graphs import GRAPHS
from safelife_rl.training.precision import PAPER, paper_deviation

ROOT = Path(__file__).resolve().parents[1]
#: Largest first, as issue 43 orders them: Table 2's runs, then Table 1's.
TABLES = {"table2": TABLE2_TASKS, "table1": TABLE1_TASKS}
#: ``--tiny``: the reproduction's ``--quick`` runs (1 seed, penalties 0 and 0.5, a thin network),
#: Table 1 on prune-still alone, each run this long.
TINY_TASKS = {"table2": TABLE2_TASKS, "table1": ("prune-still",)}
TINY_STEPS = 4096


@dataclass
class Progress:
    """A table's runs on the disk: how many are finished and the training steps each saved."""

    finished: int
    saved: list[int]

    @classmethod
    def of(cls, runs: list[Run], folder: Path, steps: int) -> Progress:
        return cls(
            sum(is_finished(run, folder) for run in runs),
            [progress(run, folder, steps) for run in runs],
        )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=float(os.environ.get("RESULTS_SECONDS", 540)),
        help="deadline from the start (default $RESULTS_SECONDS or 540)",
    )
    parser.add_argument("--steps", type=int, help=f"env steps a run (default {FULL_STEPS:,})")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES))
    parser.add_argument("--levels", type=int, help="benchmark levels a suite (default all 100)")
    parser.add_argument("--episodes", type=int, help="benchmark plays a level (default 10)")
    parser.add_argument("--bank-size", type=int, default=1000, help="training levels a task")
    parser.add_argument("--jobs", type=int, default=4, help="tasks (populations) trained at once")
    parser.add_argument(
        "--grace",
        type=float,
        help="seconds before the deadline that the runs are told to stop and save (default 60, "
        "tiny 20)",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/paper_results"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default=PAPER, help="of every run: fp32, tf32 or bf16")
    parser.add_argument(
        "--graphs",
        choices=GRAPHS,
        default="none",
        help="of every run: its trainer's bodies replayed as CUDA graphs (with compile=true)",
    )
    parser.add_argument("--tiny", action="store_true", help="a smoke run on a CPU")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "outputs/gpu_results"))
    )
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = TINY_STEPS if args.tiny else FULL_STEPS
    if args.grace is None:
        args.grace = 20.0 if args.tiny else 60.0
    return args


def table_runs(args: argparse.Namespace, table: str) -> list[Run]:
    if args.tiny:
        return grid(TINY_TASKS[table], QUICK_PENALTIES, 1)
    return grid(TABLES[table], PENALTIES, args.seeds)


def command(args: argparse.Namespace, table: str) -> list[str]:
    """The reproduction of ``table`` in its work folder: the paper's settings, one population
    per task on ``--device`` at ``--precision``."""
    tasks = TINY_TASKS[table] if args.tiny else TABLES[table]
    jobs = max(1, min(args.jobs, len(tasks)))
    if args.tiny:
        options = ["--quick", "--tasks", ",".join(tasks)]
        overrides = [f"callbacks.evaluation.eval_every={args.steps}"]  # one evaluation: CI's time
    else:
        options = ["--seeds", str(args.seeds)]
        overrides = [
            f"env.kwargs.bank={{size:{args.bank_size},progress:false}}",
            f"env.kwargs.workers={max(1, (os.cpu_count() or 1) // jobs)}",
        ]
    for name in ("levels", "episodes"):
        if getattr(args, name) is not None:
            options += [f"--{name}", str(getattr(args, name))]
    return [
        sys.executable, "-m", "safelife_rl", "reproduce", table, "--population", *options,
        "--steps", str(args.steps), "--out", str(args.work / table), f"device={args.device}",
        f"precision={args.precision}", f"hydra.launcher.n_jobs={jobs}", *overrides,
        *([] if args.graphs == "none" else [f"graphs={args.graphs}", "compile=true"]),
    ]  # fmt: skip


def session(leader: int) -> list[int]:
    """The processes of the session ``leader`` started (the reproduction, its sweep, its jobs
    and their workers)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if int(fields[3]) == leader:  # the session id (field 6 of proc(5))
            members.append(int(stat.parent.name))
    return members


def run_until(argv: list[str], log: Path, stop_at: float, kill_at: float) -> str:
    """Run ``argv`` (its output into ``log``) until it ends; at ``stop_at`` (monotonic) send it
    SIGINT, as Ctrl-C, so that its runs save and it ends; at ``kill_at`` kill what still runs
    of its session. How it ended."""
    with log.open("a", encoding="utf-8") as output:
        output.write(" ".join(argv) + "\n")
        output.flush()
        process = subprocess.Popen(
            argv, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        stopped = False
        while process.poll() is None:
            now = time.monotonic()
            if now >= kill_at:
                for pid in session(process.pid):
                    with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                        os.kill(pid, signal.SIGKILL)
                process.wait()
                return "killed at the deadline: the steps since each run's last checkpoint lost"
            if now >= stop_at and not stopped:
                process.send_signal(signal.SIGINT)
                stopped = True
            time.sleep(0.5)
    if process.returncode == 0:
        return "finished"
    if stopped and process.returncode in INTERRUPTED:
        return "stopped at the deadline: the runs saved where they were"
    return f"FAILED (exit status {process.returncode}; log {log})"


def summary(
    args: argparse.Namespace, runs: list[Run], before: Progress, after: Progress, seconds: float
) -> list[str]:
    """The lines of ``results.md`` about a table's runs, before and after this call's
    ``seconds`` of its reproduction."""
    total = args.steps * len(runs)
    gained, done = sum(after.saved) - sum(before.saved), sum(after.saved)
    rate = gained / seconds if seconds > 0 else 0.0
    lines = [
        f"- runs finished: {after.finished} / {len(runs)} (before this call {before.finished})",
        f"- steps saved a run (min / median / max): {min(after.saved):,} / "
        f"{statistics.median(after.saved):,.0f} / {max(after.saved):,} of {args.steps:,} "
        f"({done / total:.1%} of the table's {total:,} env steps)",
    ]
    if seconds == 0:  # not run this call
        return lines
    lines.append(
        f"- this call: {gained:,} env steps saved in {seconds:.0f} s of the reproduction: "
        f"**{rate:,.0f} env steps/s**"
    )
    if after.finished < len(runs):
        left = total - done
        calls = f"about {math.ceil(left / (rate * args.seconds))}" if rate > 0 else "unknown"
        lines.append(
            f"- left: {left:,} env steps, {calls} calls of {args.seconds:.0f} s at this speed"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    reason = refusal(args.device, [args.precision])
    if reason:
        print(f"gpu_results.py: {reason}", file=sys.stderr)
        return 2
    start = time.monotonic()
    deadline = start + args.seconds
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    report = args.out / "results.md"
    precision = paper_deviation(args.precision) or "FP32, as the paper trained"
    lines = [
        f"# The paper's protocol from a lease: {machine(args.device)}",
        "",
        f"`precision={args.precision}`: {precision} (every run sets its cuDNN and matmul "
        f"flags as a training run does); {args.steps:,} steps a run; work folder {args.work}; "
        f"deadline {args.seconds:.0f} s, the runs told to stop and save {args.grace:.0f} s "
        f"before. Options: `{' '.join(sys.argv[1:] if argv is None else argv) or 'none'}`.",
    ]
    report.write_text("\n".join(lines) + "\n")
    status, waiting = 0, None
    for table in args.tables:
        runs, folder = table_runs(args, table), args.work / table
        before = Progress.of(runs, folder, args.steps)
        reproduce = command(args, table)
        lines += ["", f"## {table}: {len(runs)} runs of {args.steps:,} steps", "",
                  f"`{' '.join(reproduce[2:])}`", ""]  # fmt: skip
        seconds = 0.0
        if before.finished == len(runs) and (folder / f"report_{table}.md").is_file():
            ended = "finished before this call"
        elif waiting is not None:
            ended = f"not started: {waiting} is not finished (largest first)"
        elif deadline - time.monotonic() - args.grace < args.grace:
            ended = "not started: too little time left before the deadline"
        else:
            begun = time.monotonic()
            log = args.work / f"{table}.log"
            ended = run_until(reproduce, log, deadline - args.grace, deadline)
            seconds = time.monotonic() - begun
            if ended.startswith(("FAILED", "killed")):
                status = 1
        after = Progress.of(runs, folder, args.steps)
        lines += [f"- {ended}", *summary(args, runs, before, after, seconds)]
        if after.finished == len(runs):
            copies = copy_tables(folder, args.out, table)
            lines.append(f"- the reproduction's files: {', '.join(p.name for p in copies)}")
        else:
            waiting = waiting or table
        if ended.startswith("FAILED"):
            tail = (args.work / f"{table}.log").read_text(errors="replace")[-1500:]
            lines += ["", "```", tail, "```"]
        report.write_text("\n".join(lines) + "\n")
    too_large = pack(args.out / "results_runs.tar.gz", {f"{t}/": args.work / t for t in TABLES})
    files = len([p for p in args.out.iterdir() if p.is_file()])
    lines += [
        "",
        f"Wall time {time.monotonic() - start:.0f} s; {files} files written (a call brings "
        f"back {MAX_FILES})"
        + ("; run the same command again on this machine to continue." if waiting else "."),
    ]
    if too_large:
        lines.append(f"**{too_large}: it will not come back from a device call.**")
    report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
