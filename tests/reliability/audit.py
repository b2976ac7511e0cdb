"""A hostile audit of the three packages' commands: a few hundred bad inputs (settings, flags,
level files, model files, run folders, bank caches, a reproduction's files, outputs and
links), each run as a process with a timeout and classified (see :mod:`runner`), and kill
trials: tiny training runs killed (SIGKILL or SIGTERM) at random moments and resumed, compared
bit for bit with the uninterrupted run.

    nice -n 10 .venv/bin/python -m tests.reliability.audit --out outputs/audit

prints a table per input kind and writes ``cases.json`` (every case: its command, outcome, last
line of stderr) and ``summary.md`` to ``--out``. ``--kinds`` picks input kinds, ``--every N``
runs every Nth case of each kind, ``--spawn`` starts each case as ``python -m PACKAGE``
instead of forking it from a process that imported the packages (the same outcomes, about
three times the CPU), ``--kill-trials N`` sets the number of kill trials (0: none),
``--failed-in OLD/cases.json`` reruns only the cases that failed in an earlier audit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from tests.reliability import cases as table
from tests.reliability.runner import TEMPORARY, Outcome, preload, run_case

COLUMNS = ("one-line", "accepted", "traceback", "multi-line", "hang", "killed", "code run")


def summary(outcomes: list[Outcome]) -> str:
    """A markdown table: cases per input kind by outcome, and the failures."""
    kinds = list(dict.fromkeys(o.case.kind for o in outcomes))
    head = [
        "input kind",
        "cases",
        *COLUMNS,
        "half-written",
        "wrote on refusal",
        "orphans",
        "failed",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind in [*kinds, "all"]:
        chosen = [o for o in outcomes if kind in ("all", o.case.kind)]
        counts = Counter(o.outcome for o in chosen)
        row = [
            kind,
            len(chosen),
            *(counts[c] for c in COLUMNS),
            sum(bool(o.half_written) for o in chosen),
            sum(bool(o.wrote_on_refusal) for o in chosen),
            sum(o.orphans > 0 for o in chosen),
            sum(o.failed for o in chosen),
        ]
        lines.append("| " + " | ".join(map(str, row)) + " |")
    failures = [o for o in outcomes if o.failed]
    if failures:
        lines += ["", "Failures:", ""]
        for o in failures:
            extra = [
                f"half-written {o.half_written}" if o.half_written else "",
                f"wrote {o.wrote_on_refusal[:3]}" if o.wrote_on_refusal else "",
                f"{o.orphans} orphans" if o.orphans else "",
            ]
            lines.append(
                f"- [{o.case.kind}] {o.case.name}: **{o.outcome}** (exit {o.code}, "
                f"{o.seconds:.0f} s) {' '.join(e for e in extra if e)} "
                f"`{o.last_line}`"
            )
    return "\n".join(lines)


def writable(folder: Path) -> None:
    """Give back write permission the cases took away, so the folder can be removed."""
    for dirpath, dirnames, _ in os.walk(folder):
        for name in dirnames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                path.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# kill trials


def kill_trials(work: Path, trials: int, seed: int = 0) -> list[dict]:
    """Tiny training runs (those of ``tests/safelife/test_kill_resume.py``) sent SIGKILL or
    SIGTERM once or twice at random moments, resumed after each, then compared with the
    uninterrupted run: final weights and progress rows bit for bit, every file complete, no
    temporary left, no process of the run alive after it was killed."""
    from tests.safelife import test_kill_resume as kr

    def reference(extra: tuple[str, ...]) -> tuple[float, object]:
        run = work / f"whole{len(extra)}"
        process = kr.app(*kr.TINY, *extra, f"hydra.run.dir={run}")
        kr.wait_for(run / "config.yaml", process)
        start = time.perf_counter()
        kr.wait_for(run / "learning_curve.png", process)
        seconds = time.perf_counter() - start
        code, _, err = kr.finish(process)
        assert code == 0, err
        return seconds, kr.final_state(run)

    settings = [(), ("env.kwargs.workers=1",)]  # in process, and with a level worker process
    references = {extra: reference(extra) for extra in settings}
    results = []
    for trial in tqdm(range(trials), desc="kill trials"):
        rng = random.Random(seed * 1000 + trial)
        extra = settings[trial % 2]
        seconds, whole = references[extra]
        run = work / f"trial{trial}"
        signals, phases, orphans = [], [], 0
        process = kr.app(*kr.TINY, *extra, f"hydra.run.dir={run}")
        for _ in range(rng.choice((1, 2))):
            kr.wait_for(run / "config.yaml", process)
            # half the signals in the last quarter (final save, evaluation, plots); a signal
            # that finds the run finished already (the machine's load varies) is counted apart
            time.sleep(rng.uniform(rng.choice((0.0, 0.7)), 0.95) * seconds)
            signum = rng.choice((signal.SIGKILL, signal.SIGTERM))
            below = kr.descendants(process.pid)
            process.send_signal(signum)
            try:
                process.communicate(timeout=120)
            except Exception:  # noqa: BLE001  (a run that ignores SIGTERM is killed, and counted)
                process.kill()
                process.communicate()
            time.sleep(2)
            orphans += sum(kr.alive(pid) for pid in below)
            for pid in below:
                if kr.alive(pid):
                    os.kill(pid, signal.SIGKILL)
            signals.append(signal.Signals(signum).name)
            phases.append(kr.phase_of(run))
            started = (run / "config.yaml").exists()
            process = (
                kr.app(f"resume={run}")
                if started
                else kr.app(*kr.TINY, *extra, f"hydra.run.dir={run}")
            )
        code, _, err = kr.finish(process)
        complete, problem = code == 0, "" if code == 0 else err.strip()[-300:]
        if complete:
            try:
                kr.check_complete(run)
            except AssertionError as error:
                complete, problem = False, f"incomplete: {error}"[:300]
        temporaries = [str(p.relative_to(run)) for p in run.rglob("*") if TEMPORARY.match(p.name)]
        exact = complete and kr.same_state(kr.final_state(run), whole)
        results.append(
            dict(
                trial=trial,
                workers=bool(extra),
                signals=signals,
                phases=phases,
                complete=complete,
                exact=exact,
                temporaries=temporaries,
                orphans=orphans,
                problem=problem,
            )
        )
    return results


def kill_summary(results: list[dict]) -> str:
    kills = [(s, p) for r in results for s, p in zip(r["signals"], r["phases"])]
    by = Counter(f"{s} in {p}" for s, p in kills)
    return (
        f"{len(results)} kill trials, {len(kills)} signals, "
        f"{sum(p != 'finished' for _, p in kills)} of them to a live run ("
        + ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
        + "): "
        f"{sum(r['complete'] for r in results)} complete, "
        f"{sum(r['exact'] for r in results)} end bit for bit as the uninterrupted run, "
        f"{sum(bool(r['temporaries']) for r in results)} left temporary files, "
        f"{sum(r['orphans'] for r in results)} orphaned processes"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/audit"))
    parser.add_argument("--kinds", nargs="*", help="only these input kinds")
    parser.add_argument("--every", type=int, default=1, help="every Nth case of each kind")
    parser.add_argument("--spawn", action="store_true", help="python -m PACKAGE per case")
    parser.add_argument("--kill-trials", type=int, default=12)
    parser.add_argument("--no-cases", action="store_true", help="only the kill trials")
    parser.add_argument(
        "--timeout", type=float, help="seconds a case may run (default: each case's own, 60 to 120)"
    )
    parser.add_argument("--match", help="only cases whose name holds this text")
    parser.add_argument(
        "--failed-in",
        type=Path,
        help="only the cases that failed in this cases.json of an earlier audit",
    )
    args = parser.parse_args(argv)
    if args.out.exists():
        writable(args.out)
        shutil.rmtree(args.out)
    work, fixtures, markers = args.out / "cases", args.out / "fixtures", args.out / "markers"
    markers.mkdir(parents=True)
    os.environ.update(TQDM_DISABLE="1", OMP_NUM_THREADS="1", SAFELIFE_CACHE=str(fixtures / "cache"))
    started = time.time()
    chosen = []
    if not args.no_cases:
        print("making fixtures (a tiny run, crafted files, a tiny reproduction) ...", flush=True)
        models = table.make_fixtures(fixtures, markers)
        chosen = table.all_cases(fixtures, markers, models)
    if args.kinds:
        chosen = [c for c in chosen if c.kind in args.kinds]
    if args.match:
        chosen = [c for c in chosen if args.match in c.name]
    if args.failed_in:
        failed = {
            (c["kind"], c["name"])
            for c in json.loads(args.failed_in.read_text())
            if c.get("failed")
        }
        chosen = [c for c in chosen if (c.kind, c.name) in failed]
    by_kind: dict[str, list] = {}
    for case in chosen:
        by_kind.setdefault(case.kind, []).append(case)
    chosen = [c for group in by_kind.values() for c in group[:: args.every]]
    if args.timeout:
        chosen = [dataclasses.replace(c, timeout=args.timeout) for c in chosen]
    if chosen and not args.spawn:
        preload()
    outcomes = []
    for index, case in enumerate(tqdm(chosen, desc="cases", file=sys.stdout)):
        outcomes.append(
            run_case(case, work, fixtures, markers, "spawn" if args.spawn else "fork", index)
        )
    cpu = os.times()
    text = summary(outcomes)
    kills = kill_trials(args.out / "kills", args.kill_trials) if args.kill_trials else []
    lines = [
        f"Audit of {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}, "
        f"load average at the end {os.getloadavg()[0]:.2f} "
        f"({os.cpu_count()} cores), cases {cpu.children_user + cpu.user:.0f} s CPU",
        "",
        text,
    ]
    if kills:
        lines += ["", kill_summary(kills)]
    report = "\n".join(lines)
    print(report)
    (args.out / "summary.md").write_text(report + "\n")
    (args.out / "cases.json").write_text(
        json.dumps(
            [
                dict(
                    kind=o.case.kind,
                    name=o.case.name,
                    argv=list(o.case.argv),
                    env=o.case.env,
                    outcome=o.outcome,
                    failed=o.failed,
                    code=o.code,
                    seconds=round(o.seconds, 2),
                    half_written=o.half_written,
                    wrote_on_refusal=o.wrote_on_refusal,
                    orphans=o.orphans,
                    stderr=o.stderr[-2000:],
                )
                for o in outcomes
            ]
            + [dict(kind="kill trial", **k) for k in kills],
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
