"""The audit's runner classifies what a command did (checked on a stand-in command that does
each thing), both ways of starting a case agree, and a few real cases of each cheap input kind
end in one line. The full audit: ``python -m tests.reliability.audit`` (docs/security.md)."""

import os

import pytest

from tests.reliability import cases
from tests.reliability.runner import Case, run_case

EXPECTED = {
    "one-line": ("one-line", False),
    "two-lines": ("multi-line", True),
    "traceback": ("traceback", True),
    "hang": ("hang", True),
    "marker": ("code run", True),
    "half-written": ("accepted", True),
    "write-then-refuse": ("one-line", True),
    "orphan": ("accepted", True),
    "memory": ("traceback", True),  # a MemoryError under the runner's address-space limit
    "ok": ("accepted", False),
}


@pytest.fixture
def places(tmp_path):
    (tmp_path / "markers").mkdir()
    (tmp_path / "fx").mkdir()
    return tmp_path


@pytest.mark.parametrize("mode", ["fork", "spawn"])
@pytest.mark.parametrize("what", list(EXPECTED))
def test_the_runner_classifies_each_outcome(places, what, mode):
    if mode == "spawn" and what in ("hang", "memory"):
        pytest.skip("the same code path as fork; spawn is slower")
    argv = ("tests.reliability.fake", what, *(("{marker}",) if what == "marker" else ()))
    case = Case("fake", what, argv, bad=False, watch=("{case}/run",), timeout=3)
    result = run_case(case, places / "cases", places / "fx", places / "markers", mode)
    outcome, failed = EXPECTED[what]
    assert (result.outcome, result.failed) == (outcome, failed), result.stderr
    assert bool(result.half_written) == (what == "half-written")
    assert bool(result.wrote_on_refusal) == (what == "write-then-refuse")
    assert (result.orphans > 0) == (what == "orphan")
    assert not os.listdir(places / "markers")  # the runner clears the marker after counting


def test_a_bad_input_accepted_is_a_failure(places):
    case = Case("fake", "ok", ("tests.reliability.fake", "ok"), bad=True)
    result = run_case(case, places / "cases", places / "fx", places / "markers")
    assert result.outcome == "accepted" and result.failed


@pytest.mark.slow
def test_real_cases_end_in_one_line_forked_as_spawned(places, monkeypatch):
    """Every 50th case of the setting and flag tables that needs no fixtures and no long run
    (no 10^12), both ways."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    chosen = [
        c
        for c in [
            *cases.train_cases(),
            *cases.drest_cases(),
            *cases.extended_cases(),
            *cases.flag_cases(),
        ]
        if "{fx}" not in " ".join(c.argv) and "1000000000000" not in c.name
    ][::50]
    found = {}
    for mode in ("fork", "spawn"):
        for index, case in enumerate(chosen):
            result = run_case(case, places / mode, places / "fx", places / "markers", mode, index)
            found.setdefault(case.name, []).append(result.outcome)
    assert all(a == b for a, b in found.values()), found
    assert sum(a == "one-line" for a, _ in found.values()) >= len(chosen) - 2, found
