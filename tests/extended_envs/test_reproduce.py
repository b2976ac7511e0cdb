"""The reproduction commands end to end on tiny budgets: files, per-seed results, resuming."""

import csv
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extended_envs.apps import reproduce
from safety_rl_common.errors import UserError


def test_table1_writes_results_and_resumes_from_saved_runs(tmp_path):
    args = ["table1", "--steps", "40", "--seeds", "2", "--jobs", "1", "--out", str(tmp_path)]
    reproduce.main(args)
    for name in ("table1.csv", "table1.md", "table1.png"):
        assert (tmp_path / name).stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "table1.csv").open()))
    assert sorted((r["agent"], r["seed"]) for r in rows) == sorted(
        (agent, str(seed)) for agent in reproduce.TABLE1_AGENTS for seed in (0, 1)
    )
    assert all(-1 <= float(r["reward_per_step"]) <= 1 for r in rows)
    # A saved run is used as it is, not run again.
    saved = tmp_path / "runs" / "QLearner_1_40.json"
    result = json.loads(saved.read_text())
    saved.write_text(json.dumps([*result[:2], 0.123, result[3]]))
    reproduce.main(args)
    assert "+0.12300" in (tmp_path / "table1.md").read_text()
    saved.write_text("{not json")
    with pytest.raises(UserError, match="QLearner_1_40.json is not a saved run result"):
        reproduce.main([*args, "--traceback"])


def test_figures_write_every_curve(tmp_path):
    reproduce.main(
        ["figures", "--steps", "60", "--seeds", "1", "--jobs", "1", "--out", str(tmp_path)]
    )
    for name in ("figure1.png", "figure2.png", "figures.csv", "figures.md"):
        assert (tmp_path / name).stat().st_size > 0
    table = (tmp_path / "figures.md").read_text()
    for env_name in reproduce.FIGURE_ENVS.values():
        for label in ("DQN", "RC(DQN)", "PPO", "RC(PPO)"):
            assert f"| {env_name} | {label} |" in table


def one_line_error(argv, capsys) -> str:
    """The command's stderr, which must be one ``prog: error:`` line after exit status 2."""
    with pytest.raises(SystemExit) as exited:
        reproduce.main(argv)
    assert exited.value.code == 2
    return error_line(capsys.readouterr().err)


def error_line(err: str) -> str:
    """The last line of ``err``: the one error line (tqdm's bars may come before it)."""
    assert "Traceback" not in err
    line = err.rstrip("\n").split("\n")[-1]
    assert line.startswith("extended-envs reproduce: error: "), err
    return line


@pytest.mark.parametrize(
    "flags, named",
    [
        (
            ["--steps", "0", "--seeds", "1"],
            "--steps must be a positive integer (at most 2**53), got 0",
        ),
        (["--steps", "-5"], "--steps must be a positive integer (at most 2**53), got -5"),
        (["--seeds", "0"], "--seeds must be a positive integer (at most 2**53), got 0"),
        (["--jobs", "0"], "--jobs must be a positive integer (at most 2**53), got 0"),
        (["--jobs", "-2"], "--jobs must be a positive integer (at most 2**53), got -2"),
        (["--steps", "1e3"], "argument --steps: invalid int value: '1e3'"),
        (["--seeds", "many"], "argument --seeds: invalid int value: 'many'"),
        (["--stepz", "3"], "unrecognized arguments: --stepz 3"),
        (
            ["--seeds", "1000000000000"],
            "--seeds must be at most 10000 (the jobs are listed, "
            "and their results kept, up front), got 1000000000000",
        ),
        (
            ["--jobs", "1000000000000"],
            f"--jobs must be at most {reproduce.MAX_JOBS} (4 per CPU core), got 1000000000000",
        ),
    ],
)
def test_bad_flags_end_with_one_line_before_running(flags, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(reproduce, "run_all", lambda *args: pytest.fail("ran"))
    out = tmp_path / "out"
    assert named in one_line_error(["table1", *flags, "--out", str(out)], capsys)
    assert not out.exists()  # nothing made


def test_bad_command_and_out_file(tmp_path, capsys):
    assert "invalid choice: 'table2'" in one_line_error(["table2"], capsys)
    file = tmp_path / "file"
    file.write_text("x")
    assert f"--out {file} is not a folder" in one_line_error(["table1", "--out", str(file)], capsys)


def test_traceback_flag_shows_the_error(tmp_path):
    with pytest.raises(UserError, match="--steps"):
        reproduce.main(["table1", "--steps", "0", "--traceback", "--out", str(tmp_path)])


@pytest.fixture(scope="module")
def saved_runs(tmp_path_factory):
    """A finished tiny table1: its runs/ files, keyed by name."""
    out = tmp_path_factory.mktemp("table1")
    reproduce.main(["table1", "--steps", "5", "--seeds", "1", "--jobs", "1", "--out", str(out)])
    return {p.name: p.read_bytes() for p in (out / "runs").iterdir()}


def mutated_bytes(data, original: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
    i = data.draw(st.integers(0, len(original) - 1))
    if kind == "flip":
        flipped = original[i] ^ data.draw(st.integers(1, 255))
        return original[:i] + bytes([flipped]) + original[i + 1 :]
    if kind == "truncate":
        return original[:i]
    return original[:i] + data.draw(st.binary(min_size=1, max_size=4)) + original[i:]


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.lists(st.integers(), max_size=2), st.just({}),
)  # fmt: skip


def mutated_fields(data, original: bytes) -> bytes:
    fields = json.loads(original)
    kind = data.draw(st.sampled_from(["replace", "drop", "append"]))
    i = data.draw(st.integers(0, len(fields) - 1))
    if kind == "replace":
        fields[i] = data.draw(JSON_VALUES)
    elif kind == "drop":
        del fields[i]
    else:
        fields.append(data.draw(JSON_VALUES))
    return json.dumps(fields).encode()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_saved_runs_are_used_or_named(saved_runs, data, tmp_path_factory, capsys):
    out = tmp_path_factory.mktemp("mutated")
    (out / "runs").mkdir()
    capsys.readouterr()
    for name, content in saved_runs.items():
        (out / "runs" / name).write_bytes(content)
    name = data.draw(st.sampled_from(sorted(saved_runs)))
    mutate = data.draw(st.sampled_from([mutated_bytes, mutated_fields]))
    (out / "runs" / name).write_bytes(mutate(data, saved_runs[name]))
    argv = ["table1", "--steps", "5", "--seeds", "1", "--jobs", "1", "--out", str(out)]
    try:
        reproduce.main(argv)
    except SystemExit as exited:
        assert exited.code == 2
        assert f"runs/{name} is not a saved run result" in error_line(capsys.readouterr().err)
        assert not (out / "table1.md").exists()  # nothing written from a bad run
    else:  # the mutation kept a valid result (say, another reward): it is what the table shows
        result = json.loads((out / "runs" / name).read_text())
        assert f"{result[2]:+.5f}" in (out / "table1.md").read_text()


def test_saved_figure_runs_must_be_this_runs_result():
    job = ("IgnoreRewards", "DQNAgent", True, 1, 60)
    good = ["IgnoreRewards", "RC(DQN)", 1, [10.0, 12], -0.5]
    assert reproduce.figure_saved(job, good)
    bad = [
        good[:4], [*good, 1], {}, None,
        ["IgnoreRewards", "DQN", 1, [10.0], -0.5],  # another run's label
        ["IgnoreRewards", "RC(DQN)", True, [1.0], 0.1],  # JSON true is not the seed 1
        ["IgnoreRewards", "RC(DQN)", 1, [1.0, None], 0.1],
        ["IgnoreRewards", "RC(DQN)", 1, [1.0], float("nan")],
        ["IgnoreRewards", "RC(DQN)", 1, 3, 0.1],
    ]  # fmt: skip
    assert not any(reproduce.figure_saved(job, result) for result in bad)


def test_saved_table1_runs_took_some_time():
    """Their seconds divide the steps/s column: 0 s is no real run (Hypothesis found it)."""
    job = ("QLearner", 0, 5)
    assert reproduce.table1_saved(job, ["QLearner", 0, -0.2, 0.0004])
    assert not reproduce.table1_saved(job, ["QLearner", 0, -0.2, 0])
    assert not reproduce.table1_saved(job, ["QLearner", 0, -0.2, 0.0])
