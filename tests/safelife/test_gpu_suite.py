"""The GPU suite's one command runs whole on a CPU with tiny sizes (``--tiny``), so it is ready
when a GPU machine is lent: every section measured, conformance passed, the run trained."""

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_gpu_suite_writes_its_whole_report_on_a_cpu(tmp_path):
    report = tmp_path / "report.md"
    subprocess.run([sys.executable, "gpu_suite.py", "--device", "cpu", "--tiny", "--out",
                    str(report)], cwd=BENCHMARKS, check=True, capture_output=True, text=True)
    text = report.read_text()
    assert text.startswith("# GPU suite\n\nMachine: no GPU (CPU run); torch ")
    for title in ("## Engine: board steps/s", "## Vector env", "## PPO with the SafeLife CNN",
                  "## Conformance on cpu", "## Training: prune-still, 1,024 steps, 16 envs"):
        assert title in text
    rows = re.findall(r"^\| 16 \| (.*) \|$", text, re.MULTILINE)
    assert len(rows) == 3  # engine, vector env and PPO at N = 16, all measured
    engine, vector, ppo = (row.split(" | ") for row in rows)
    assert all(re.fullmatch(r"[\d,]+", cell) for cell in [*engine, *vector, ppo[0]])
    assert "0 syncs, 0 copies" in text  # the vector env's step
    assert re.search(r"\| 16 \| [\d,]+ \| 3 syncs, 2 copies \| 0 syncs", text)
    assert "PASSED: 2 passed" in text
    assert re.search(r"last evaluation, at step 1,024: performance [\d.]+, success", text)
