"""The GPU lease's one command runs whole on a CPU with tiny sizes (``--tiny``), so it is ready
when a GPU machine is lent: every section measured at several sizes (a recompile limit would
show), compiled steps equal to eager bit for bit, conformance passed, the run trained."""

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_lease_writes_its_whole_report_on_a_cpu(tmp_path):
    subprocess.run(
        ["benchmarks/gpu_lease.sh", "all", "--device", "cpu", "--tiny"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)},
        timeout=1200,  # minutes of CPU: a hang fails here, not in CI's own limit
    )
    quick = (tmp_path / "quick.md").read_text()
    assert quick.startswith("# GPU suite\n\nMachine: no GPU (CPU run); torch ")
    assert "FAILED" not in quick
    for title in (
        "## Vector env",
        "## Conformance on cpu",
        "## PPO with the SafeLife CNN",
        "## Engine: board steps/s",
    ):
        assert title in quick
    for size in (8, 16):  # the engine's and the vector env's rows: measured, compiled = eager
        engine = re.search(
            rf"^\| {size} \| [\d,]+ \| [\d,]+ \| yes \| [\d,]+ \|$", quick, re.MULTILINE
        )
        assert engine, size
        for levels in ("suite", "bank"):
            assert re.search(
                rf"^\| {levels} \| {size} \| [\d,]+ \| [\d,]+ \(= eager\) \|$", quick, re.MULTILINE
            ), (levels, size)
            assert f"{levels}, N={size}: " in quick
    assert quick.count(" 0 syncs, 0 copies") == 4  # one eager vector env step at each row
    assert re.search(r"^\| 16 \| [\d,]+ \| - \| 1 syncs, 1 copies \| 0 syncs", quick, re.MULTILINE)
    assert "PASSED: 2 passed" in quick
    train = (tmp_path / "train.md").read_text()
    assert "## Training: prune-still, 1,024 steps, 16 envs on cpu" in train
    assert re.search(r"^\| 1,024 \| [\d.]+ \| [\d.]+ \| 100 \|$", train, re.MULTILINE)
    assert (tmp_path / "train_evaluations.json").exists()
    table1 = (tmp_path / "table1_lease.md").read_text()
    for batching in ("auto", "grouped"):  # the networks batched both ways
        row = rf"^\| 2 \| 4 \| {batching} \| eager \| [\d,]+ \| [\d,]+ \| fp32; cuDNN benchmark on"
        assert re.search(row, table1, re.MULTILINE)
    assert "reproduce table1 --population --quick" in table1
    assert re.search(r"^finished after \d+ s", table1, re.MULTILINE)
    assert "| prune-still |" in (tmp_path / "table1.md").read_text()
    with tarfile.open(tmp_path / "table1_runs.tar.gz") as archive:  # the report's figures too
        assert {"table1.png", "figure3.png", "claims_table1.csv"} <= set(archive.getnames())
