"""``population_speed.py --against REV``: the old and the new code taking turns, each turn a
fresh process, at a tiny size against HEAD itself (no old API needed): both columns measured at
each size, and the temporary checkout of REV gone afterwards."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from population_speed import TINY  # noqa: E402

ROW = re.compile(r"P = +(\d+) .* repeat 1 .*: old +([\d,]+) +new +([\d,]+) env steps per CPU-s")


def worktrees() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout


def test_against_measures_old_and_new_taking_turns():
    if not (ROOT / ".git").exists():
        pytest.skip("--against checks a revision out with git: not a git checkout")
    before = worktrees()
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "population_speed.py"),
            *"--against HEAD --rollouts 1 --single-rollouts 1 --repeats 1".split(),
            *TINY,
            *"--members 1 2".split(),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = {int(p): (old, new) for p, old, new in ROW.findall(result.stdout)}
    assert sorted(rows) == [1, 2], result.stdout
    for old, new in rows.values():
        assert float(old.replace(",", "")) > 0 and float(new.replace(",", "")) > 0
    assert "P =   1 median new/old over 1: " in result.stdout
    assert "P =   2 median new/old over 1: " in result.stdout
    assert "population_speed_" not in worktrees() and worktrees() == before
