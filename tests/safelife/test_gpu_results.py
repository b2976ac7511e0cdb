"""Issue 43's results stage runs on a CPU as a lease runs it (``gpu_lease.sh results --device
cpu --tiny``): a call stopped by its deadline leaves Table 2's runs saved part-way and Table 1
not started; the same command again continues them from their checkpoints and brings back both
tables, their figures and the runs' files in at most 8 files."""

import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_results  # noqa: E402
import lease_files  # noqa: E402


def lease(out: Path, work: Path, *args: str) -> str:
    """One call of the stage; its report."""
    result = subprocess.run(
        ["benchmarks/gpu_lease.sh", "results", "--device", "cpu", "--tiny", "--work", str(work),
         *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(out)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return (out / "results.md").read_text()


def saved(work: Path, table: str) -> gpu_results.Progress:
    args = gpu_results.parse(["--tiny", "--device", "cpu"])
    runs = gpu_results.table_runs(args, table)
    return gpu_results.Progress.of(runs, work / table, gpu_results.TINY_STEPS)


def test_a_call_stopped_by_its_deadline_is_continued_by_the_next(tmp_path):
    work = tmp_path / "work"
    # stopped by the deadline: Table 2's runs saved where they were, Table 1 waits for it (a
    # call whose stop came before training began, on a busy machine, saved nothing: the next
    # is given longer)
    for call, seconds in enumerate((30, 50, 80)):
        report = lease(tmp_path / f"call{call}", work, "--seconds", str(seconds), "--grace", "12")
        assert "- stopped at the deadline: the runs saved where they were" in report
        assert "- not started: table2 is not finished (largest first)" in report
        assert "run the same command again on this machine to continue" in report
        first = saved(work, "table2")
        if min(first.saved) > 0:
            break
    assert first.finished == 0 and 0 < min(first.saved) < gpu_results.TINY_STEPS, report
    assert saved(work, "table1").saved == [0, 0]
    assert sorted(p.name for p in (tmp_path / f"call{call}").iterdir()) == [
        "results.md",
        "results_runs.tar.gz",
    ]
    # the same command continues the runs from their checkpoints, then trains Table 1
    out = tmp_path / "last"
    report = lease(out, work)
    assert (
        "[run] navigation: resuming 2 runs as one population" in (work / "table2.log").read_text()
    )
    left = 2 * gpu_results.TINY_STEPS - sum(first.saved)
    assert f"- this call: {left:,} env steps saved in " in report
    for table in ("table2", "table1"):
        done = saved(work, table)
        assert done.finished == 2 and done.saved == [gpu_results.TINY_STEPS] * 2
    assert report.count("- finished\n- runs finished: 2 / 2") == 2
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(
        ["results.md", "results_runs.tar.gz"]
        + [f"{t}.md" for t in ("table1", "table2")]
        + [f"report_{t}.md" for t in ("table1", "table2")]
        + [f"{t}.csv" for t in ("table1", "table2")]
    )
    assert len(files) <= lease_files.MAX_FILES
    assert "| prune-still |" in (out / "table1.md").read_text()
    with tarfile.open(out / "results_runs.tar.gz") as archive:
        names = set(archive.getnames())
    for name in ("table2/table2.png", "table1/table1.png", "table1/figure3.png",
                 "table1/claims_table1.csv", "table2/sweep.json",
                 "table2/runs/navigation/penalty_0.5/seed_0/benchmark.csv",
                 "table1/runs/prune-still/penalty_0/seed_0/evaluations.json"):  # fmt: skip
        assert name in names, name
    assert not any(name.endswith(".zip") for name in names)  # the models stay on the machine


def test_a_precision_the_device_cannot_run_is_refused_before_anything_runs(tmp_path):
    result = subprocess.run(
        ["benchmarks/gpu_lease.sh", "results", "--device", "cpu", "--precision", "tf32"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out")},
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "precision=tf32 is TensorFloat" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("script", "ended"),
    [
        ("import time\ntry: time.sleep(60)\nexcept KeyboardInterrupt: raise SystemExit(130)",
         "stopped at the deadline"),
        ("import signal, subprocess, sys, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
         "print('started', child.pid, flush=True)\ntime.sleep(60)", "killed at the deadline"),
        ("raise SystemExit(3)", "FAILED (exit status 3; "),
    ],
)  # fmt: skip
def test_the_reproduction_is_asked_to_stop_then_killed_with_its_session(tmp_path, script, ended):
    """SIGINT at the stop; at the deadline, every process of its session killed (a child
    included); a failure named with its status."""
    begun = time.monotonic()
    argv = [sys.executable, "-c", script]
    result = gpu_results.run_until(argv, tmp_path / "log", begun + 1, begun + 3)
    assert result.startswith(ended), result
    assert time.monotonic() - begun < 10
    children = [
        int(line.split()[1])
        for line in (tmp_path / "log").read_text().splitlines()
        if line.startswith("started ")
    ]
    assert len(children) == (ended == "killed at the deadline")
    for pid in children:  # the child, in the session: killed too
        while Path(f"/proc/{pid}").exists() and time.monotonic() - begun < 10:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists()
