"""Issue 43's results stage runs on a CPU as a lease runs it (``gpu_lease.sh results --device
cpu --tiny``): a call stopped by its deadline leaves Table 2's runs saved part-way and Table 1
not started; the same command again continues them from their checkpoints and brings back both
tables, their figures and the runs' files in at most 8 files."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

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
    # call whose stop came before training began saved nothing: the next goes further)
    for call in range(3):
        report = lease(tmp_path / f"call{call}", work, "--seconds", "30", "--grace", "12")
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
