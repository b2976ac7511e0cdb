"""The SafeLife paper reproduction: the quick sweep end to end (tables, figures, claims, every
task x penalty), resuming an interrupted sweep, the table formulas and claim rules on hand cases,
and bad input."""

import csv
import json
import math
import re
import shutil
import sys

import numpy as np
import pytest

from safelife_rl.apps.reproduce import claims, cli, sweep, tables
from safelife_rl.apps.reproduce.runs import (
    QUICK_PENALTIES,
    TABLE1_TASKS,
    TABLE2_TASKS,
    Run,
    RunResult,
    load_episodes,
)

PNG = b"\x89PNG\r\n\x1a\n"
CELL = re.compile(r"^(n/a|-?\d+\.\d+ ± \d+\.\d+)$")
IQM_CELL = re.compile(r"^(n/a|(-?\d+\.\d+) \[\2, \2\])$")  # one seed: an interval of no width


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """``all --quick``: 10 tiny runs (5 tasks x penalties 0 and 0.5, seed 0), benchmarked."""
    out = tmp_path_factory.mktemp("quick")
    summary = cli.run(["all", "--quick", "--out", str(out)])
    assert summary["runs"] == len(TABLE1_TASKS + TABLE2_TASKS) * len(QUICK_PENALTIES)
    return out


def read_csv(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    "name, tasks, columns",
    [
        ("table1", TABLE1_TASKS, tables.TABLE1_COLUMNS),
        ("table2", TABLE2_TASKS, tables.TABLE2_COLUMNS),
    ],
)
def test_quick_tables_have_every_task_and_penalty(quick, name, tasks, columns):
    rows = read_csv(quick / f"{name}.csv")
    assert [(r["task"], float(r["penalty"])) for r in rows] == [
        (t, p) for t in tasks for p in QUICK_PENALTIES
    ]
    for row in rows:
        assert row["seeds"] == "1" and row["episodes"] == "6"  # 3 levels x 2 episodes
        for column, _, _ in columns:  # one seed: its score is the IQM, with no width
            assert row[f"{column}_iqm_low"] == row[f"{column}_iqm"] == row[f"{column}_iqm_high"]
        assert 0 <= float(row["length_mean"]) <= 100  # paper-quick's time limit
    lines = (quick / f"{name}.md").read_text().splitlines()
    assert len(lines) == 2 + len(rows)
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert all(CELL.match(c) for c in cells[2 : 2 + 2 * len(columns) : 2]), line
        assert all(IQM_CELL.match(c) for c in cells[3 : 3 + 2 * len(columns) : 2]), line
    assert (quick / f"{name}.png").read_bytes().startswith(PNG)


def test_quick_table_cells_are_the_episodes_statistics(quick):
    """Each table value is the mean / population std of the runs' benchmark episodes, whose
    green side effect is the episode's side effect over its inaction total."""
    rows = {(r["task"], float(r["penalty"])): r for r in read_csv(quick / "table1.csv")}
    for task in TABLE1_TASKS:
        for penalty in QUICK_PENALTIES:
            path = Run(task, penalty, 0).folder(quick) / "benchmark.csv"
            raw = read_csv(path)
            for episode in raw:
                effect, total = json.loads(episode["side_effects"]).get("life-green", (0, 0))
                expected = effect / total if total > 0 else math.nan
                assert float(episode["green"]) == pytest.approx(expected, nan_ok=True)
            episodes = load_episodes(path)
            for column in ("performance", "green", "yellow"):
                values = np.array([e[column] for e in episodes])
                values = values[~np.isnan(values)]
                row = rows[task, penalty]
                if len(values):
                    assert float(row[f"{column}_mean"]) == pytest.approx(values.mean(), abs=1e-5)
                    assert float(row[f"{column}_std"]) == pytest.approx(values.std(), abs=1e-5)
                    assert float(row[f"{column}_iqm"]) == pytest.approx(values.mean(), abs=1e-5)
                else:
                    assert row[f"{column}_mean"] == "nan"


def test_quick_figures_report_and_claims(quick):
    for name in ("figure3.png", "figure5.png", "figure6.png"):
        assert (quick / name).read_bytes().startswith(PNG)
    report = (quick / "report_all.md").read_text()
    assert "not the paper's results" in report
    for heading in ("## Table 1", "## Table 2", "## Figure 3", "## The paper's statements"):
        assert heading in report
    found = read_csv(quick / "claims_all.csv")
    assert len(found) == 10
    decided = f"({claims.AGREES}|{claims.DISAGREES})"
    verdict = re.compile(rf"^({decided}( \(.+ only\))?|{claims.NO_DATA})$")
    assert all(verdict.match(c["verdict"]) for c in found), found
    assert all(c["statement"] in report and c["measured"] for c in found)


def test_part_of_the_grid_makes_its_own_tables_figures_and_verdicts(quick, tmp_path, capsys):
    """``--tasks`` and ``--penalties`` choose runs from the grid; everything is made from them
    and a statement about tasks not run says which it was decided on."""
    out = tmp_path / "out"
    shutil.copytree(quick, out)
    for name in ("table1.csv", "figure3.png", "figure5.png", "figure6.png"):
        (out / name).unlink()
    capsys.readouterr()
    cli.main(
        ["table1", "--quick", "--tasks", "prune-still", "--penalties", "0.5,0", "--out", str(out)]
    )
    assert "runs to train" not in capsys.readouterr().out  # all were finished
    rows = read_csv(out / "table1.csv")
    assert [(r["task"], float(r["penalty"])) for r in rows] == [
        ("prune-still", 0.0),
        ("prune-still", 0.5),
    ]
    assert (out / "figure3.png").is_file() and (out / "figure6.png").is_file()
    assert not (out / "figure5.png").exists()
    report = (out / "report_table1.md").read_text()
    assert "tasks prune-still, penalties 0, 0.5," in report
    assert "## Figure 6" in report and "Figure 5" not in report
    verdicts = {c["statement"]: c["verdict"] for c in read_csv(out / "claims_table1.csv")}
    competence = next(v for k, v in verdicts.items() if k.startswith("The agents demonstrate"))
    assert competence.endswith("(prune-still only)")
    assert next(v for k, v in verdicts.items() if "yellow" in k) == claims.NO_DATA


def test_an_interrupted_sweep_resumes(quick, tmp_path, capsys):
    """A finished run is skipped, a run stopped after its first checkpoint continues from it,
    a run never started is trained."""
    out = tmp_path / "out"
    shutil.copytree(quick, out)
    finished = Run("append-still", 0.0, 0).folder(out) / "final_model.zip"
    finished_time = finished.stat().st_mtime_ns
    stopped = Run("navigation", 0.0, 0).folder(out)
    for name in (
        "benchmark.csv",
        "evaluation.json",
        "final_model.zip",
        "checkpoints/model_1536_steps.zip",
    ):
        (stopped / name).unlink()
    checkpoint_time = (stopped / "checkpoints/model_768_steps.zip").stat().st_mtime_ns
    shutil.rmtree(Run("navigation", 0.5, 0).folder(out))
    capsys.readouterr()
    cli.main(["all", "--quick", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "2 of 10 runs to train" in printed
    assert (
        "[run] navigation penalty 0 seed 0: resuming from checkpoints/model_768_steps.zip"
        in printed
    )
    assert "[run] navigation penalty 0.5 seed 0: training" in printed
    assert "append-still" not in "".join(re.findall(r"\[run\].*", printed))
    assert finished.stat().st_mtime_ns == finished_time
    assert (stopped / "checkpoints/model_768_steps.zip").stat().st_mtime_ns == checkpoint_time
    history = json.loads((stopped / "evaluations.json").read_text())
    assert [h["step"] for h in history] == [768, 1536]
    assert len(read_csv(out / "table2.csv")) == 2


def test_a_damaged_saved_run_is_named(quick, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(quick, out)
    damaged = Run("prune-spawn", 0.5, 0).folder(out) / "benchmark.csv"
    damaged.write_text("level,performance\nprune-spawn-000,0.5\n")
    err = one_line_error(["all", "--quick", "--out", str(out)], capsys)
    assert f"{damaged}: not a benchmark of episodes (no length, success" in err
    assert "delete the run's folder to rerun it" in err


def test_stat_pools_levels_episodes_and_seeds():
    # seed 0: two episodes; seed 1: three, and one level without green cells (NaN)
    found = tables.stat([[0.0, 1.0], [1.0, 1.0, 1.0, math.nan]])
    assert found.n == 5
    assert found.mean == pytest.approx(0.8)
    assert found.std == pytest.approx(0.4)  # sqrt((0.8**2 + 4 * 0.2**2) / 5)
    # seed scores 0.5 and 1.0: IQM their mean, every resample's IQM 0.5, 0.75 or 1
    assert (found.iqm.point, found.iqm.low, found.iqm.high) == (0.75, 0.5, 1.0)
    single = tables.stat([[0.3]])
    assert (single.mean, single.std) == (0.3, 0.0)
    assert single.cell(3) == "0.300 ± 0.000" and single.iqm_cell(3) == "0.300 [0.300, 0.300]"
    assert tables.stat([[math.nan]]).cell(3) == tables.stat([[math.nan]]).iqm_cell(3) == "n/a"
    assert tables.stat([[0.0, 1.0]], interval=False).iqm is None


def result(task, penalty, seed=0, **columns):
    """A run result whose benchmark episodes have the given column values (lists)."""
    n = len(next(iter(columns.values())))
    episodes = [{k: float(v[i]) for k, v in columns.items()} for i in range(n)]
    return RunResult(Run(task, penalty, seed), episodes, [], {"trained": {}, "random": {}})


def test_table_rows_group_by_task_and_penalty():
    results = [
        result("prune-still", 0.0, 0, performance=[1, 0], green=[0.5, 0.5]),
        result("prune-still", 0.0, 1, performance=[1, 1], green=[0.1, 0.3]),
        result("prune-still", 0.5, 0, performance=[0, 0], green=[0, 0]),
    ]
    columns = (("performance", "performance", 3), ("green", "green", 3))
    rows = tables.table_rows(results, columns)
    assert [(r.task, r.variant, r.seeds, r.episodes) for r in rows] == [
        ("prune-still", 0.0, 2, 4),
        ("prune-still", 0.5, 1, 2),
    ]
    assert rows[0].stats["performance"].mean == pytest.approx(0.75)
    assert rows[0].stats["performance"].iqm.point == pytest.approx(0.75)  # seeds 0.5 and 1
    assert rows[0].stats["green"].mean == pytest.approx(0.35)
    text = tables.markdown(rows, columns)
    assert (
        "| prune-still | 0 | 0.750 ± 0.433 | 0.750 [0.500, 1.000] | 0.350 ± 0.166 | "
        "0.350 [0.200, 0.500] | 2 | 4 |"
    ) in text
    parsed = list(csv.DictReader(tables.csv_text(rows, columns).splitlines()))
    assert parsed[1]["performance_mean"] == "0" and parsed[1]["green_std"] == "0"
    assert parsed[0]["green_iqm_low"] == "0.2" and parsed[0]["green_iqm_high"] == "0.5"


def test_claim_rules_on_hand_cases():
    traded = [
        result("append-still", 0.0, performance=[0.6], green=[0.4]),
        result("append-still", 0.5, performance=[0.1], green=[0.1]),
    ]
    assert claims.trade_off(traded, "append-still").verdict == claims.AGREES
    safer_only = [traded[0], result("append-still", 0.5, performance=[0.7], green=[0.1])]
    assert claims.trade_off(safer_only, "append-still").verdict == claims.DISAGREES
    assert claims.trade_off(traded[:1], "append-still").verdict == claims.NO_DATA
    idle = [result("append-still", 0.0, performance=[0.0], green=[0.4]), traded[1]]
    assert claims.trade_off(idle, "append-still").verdict == claims.NO_DATA
    inactive = [
        *traded,
        result("prune-still", 0.0, performance=[0.8], green=[0.4], success=[1]),
        result("prune-still", 0.5, performance=[0.3], green=[0.1], success=[0]),
    ]
    traded[1].episodes[0]["success"] = 0.0
    assert claims.inaction(inactive).verdict == claims.AGREES  # 0.1 <= 0.3, 0.3 <= 0.4
    inactive[3].episodes[0]["success"] = 1.0  # completes its levels: not inaction
    assert claims.inaction(inactive).verdict == claims.DISAGREES
    navigation = [
        result("navigation", 0.0, success=[1, 0, 0, 0], green=[0.2] * 4),
        result("navigation", 0.1, success=[0, 0, 0, 0], green=[0.2] * 4),
        result("navigation", 0.5, success=[1, 1, 1, 1], green=[0.0] * 4),
    ]
    assert claims.navigation_hard(navigation).verdict == claims.AGREES  # 25% completed
    assert claims.navigation_mild_penalty(navigation).verdict == claims.AGREES  # 0.1 is mild
    navigation[1] = result("navigation", 0.1, success=[0, 0, 0, 0], green=[0.1] * 4)
    assert claims.navigation_mild_penalty(navigation).verdict == claims.DISAGREES  # safer


def test_early_fall_of_side_effects_against_the_random_start():
    def run(task, greens, random_green=1.0):
        evaluations = [{"step": 100 * (i + 1), claims.GREEN: g} for i, g in enumerate(greens)]
        final = {"trained": {}, "random": {claims.GREEN: random_green}}
        return RunResult(Run(task, 0.0, 0), [], evaluations, final)

    # a random agent's 1.0, then 0.7 and 0.5 in the first half (40% lower), 0.6 in the second
    results = [run(task, [0.7, 0.5, 0.6, 0.6]) for task in claims.STILL_TASKS]
    found = claims.early_fall(results)
    assert found.verdict == claims.AGREES
    assert "1.000 -> 0.600 -> 0.600 (first half -40%, second half +0% on it)" in found.measured
    results[0] = run("append-still", [0.7, 0.5, 0.3, 0.3])  # falls on by half
    found = claims.early_fall(results)
    assert found.verdict == claims.DISAGREES and "second half -50% on it" in found.measured
    results[0] = run("append-still", [0.95, 0.95, 0.9, 0.9])  # hardly falls at first
    assert claims.early_fall(results).verdict == claims.DISAGREES
    assert claims.early_fall(results[1:]).verdict == f"{claims.AGREES} (prune-still only)"
    assert claims.early_fall([]).verdict == claims.NO_DATA


def test_sweep_command_launches_the_unfinished_combinations(tmp_path):
    settings = sweep.Settings(
        "paper", sweep.FULL_STEPS, None, 10, ("device=cuda", "hydra.launcher.partition=gpu")
    )
    runs = [Run("navigation", 0.0, 1), Run("navigation", 0.5, 1), Run("prune-still", 0.5, 2)]
    command = sweep.job_command(runs, settings, "slurm", tmp_path)
    assert command[1:6] == ["-m", "safelife_rl", "reproduce-job", "-m", "hydra/launcher=slurm"]
    for part in (
        "experiment=paper",
        "env=navigation,prune-still",
        "wrappers.side_effect_penalty.penalty=0.0,0.5",
        "seed=1,2",
        "total_timesteps=6000000",
        f"+reproduce.out={tmp_path.resolve()}",
        "+reproduce.axis=penalty",
        "+reproduce.suite=v1.0",
        "+reproduce.levels=null",
        "+reproduce.episodes=10",
    ):
        assert part in command
    assert command[-2:] == ["device=cuda", "hydra.launcher.partition=gpu"]
    # neither the launcher nor a setting a resume may change makes another sweep
    assert settings.as_json()["overrides"] == []
    methods = sweep.Settings("paper", 5000, None, 10, (), axis="method", suite="ours")
    command = sweep.job_command(
        [Run("prune-still", "ppo", 0), Run("prune-still", "penalty", 0)], methods, "local", tmp_path
    )
    assert "method=penalty,ppo" in command and "total_timesteps=5000" in command
    assert "+reproduce.axis=method" in command and "+reproduce.suite=ours" in command


@pytest.mark.parametrize("status, expected", [(130, SystemExit), (1, sweep.UserError)])
def test_a_stopped_or_failed_sweep_says_so_in_one_line(
    status, expected, tmp_path, capsys, monkeypatch
):
    script = f"print('[run] prune-still penalty 0 seed 0: training'); print('boom'); exit({status})"
    monkeypatch.setattr(sweep, "job_command", lambda *args: [sys.executable, "-c", script])
    settings = sweep.Settings("paper-quick", sweep.QUICK_STEPS, 3, 2, ())
    with pytest.raises(expected) as raised:
        sweep.launch([Run("prune-still", 0.0, 0)], settings, "local", tmp_path)
    printed = capsys.readouterr()
    assert "[run] prune-still penalty 0 seed 0: training" in printed.out  # shown above the bar
    (log,) = (tmp_path / "logs").iterdir()
    assert log.read_text().splitlines()[-1] == "boom"
    if status == 130:
        assert raised.value.code == 130
        assert "interrupted with 1 runs unfinished; run the same command again" in printed.err
    else:
        assert f"(exit status 1) with 1 runs unfinished, last line of its log {log}: boom" in str(
            raised.value
        )


def one_line_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("safelife-rl reproduce: error: ")
    return err


@pytest.mark.parametrize(
    "argv, named",
    [
        (["table3"], "invalid choice: 'table3'"),
        (["--quick"], "the following arguments are required: command"),
        (["--quick", "table2", "--tasks", "x"], "--tasks: 'x' is not one of navigation"),
        (
            ["table1", "--tasks", "prune-still,navigation"],
            "--tasks: 'navigation' is not one of append-still, prune-still, append-spawn, "
            "prune-spawn",
        ),
        (
            ["table1", "--penalties", "0,-0.1"],
            "--penalties: '-0.1' is not a number from 0 to 1e+06",
        ),
        (["table2", "--penalties", "0,x"], "--penalties: 'x' is not a number from 0"),
        (["table2", "--penalties", "inf"], "--penalties: 'inf' is not a number from 0"),
        (["table2", "--penalties", "1e308"], "--penalties: '1e308' is not a number from 0"),
        (["table2", "--penalties", "nan"], "--penalties: 'nan' is not a number from 0"),
        (
            ["table2", "--episodes", "1000000000000"],
            "--episodes x --levels (per agent) is "
            "100000000000000 episodes, over the limit of 1000000; raise it with "
            "SAFELIFE_MAX_EPISODES",
        ),
        (
            ["table1", "algo.gama=0.9"],
            "the overrides do not compose: Could not override 'algo.gama'",
        ),
        (["table1", "--seeds", "0"], "--seeds must be from 1 to 100, got 0"),
        (["table1", "--seeds", "two"], "argument --seeds: invalid int value: 'two'"),
        (["table2", "--episodes", "0"], "--episodes must be at least 1, got 0"),
        (["all", "--levels", "101"], "--levels must be from 1 to 100, got 101"),
        (["all", "--launcher", "cloud"], "argument --launcher: invalid choice: 'cloud'"),
        (["table1", "env=navigation"], "'env=navigation': env is set by the sweep"),
        (["table1", "wrappers.side_effect_penalty.penalty=1"], "is set by the sweep"),
        (["table1", "nonsense"], "'nonsense' is not a Hydra override"),
        (["table1", "--steps", "0"], "--steps must be at least 1, got 0"),
        (
            ["table1", "total_timesteps=5"],
            "'total_timesteps=5': total_timesteps is set by the sweep",
        ),
        (["table1", "method=aup"], "method is set by the sweep"),
        (["table1", "--quick", "--stpes", "5"], "unrecognized arguments: --stpes"),
        (["table1", "--suite", "v2"], "argument --suite: invalid choice: 'v2'"),
    ],
)
def test_bad_input_ends_with_one_line_before_running(argv, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "launch", lambda *args: pytest.fail("launched"))
    out = tmp_path / "out"
    assert named in one_line_error([*argv, "--out", str(out)], capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    "out, named",
    [
        ("", "--out is empty: give a folder"),
        ("o_${oc.env:HOME}", "--out 'o_${oc.env:HOME}': $ { } would be read by Hydra"),
        ("a,b", "--out 'a,b': , would be read by Hydra"),
    ],
)
def test_an_out_that_hydra_would_read_is_refused(out, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "launch", lambda *args: pytest.fail("launched"))
    monkeypatch.chdir(tmp_path)
    assert named in one_line_error(["table1", "--quick", "--out", out], capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_of_runs_without_its_settings_is_refused(quick, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "launch", lambda *args: pytest.fail("launched"))
    out = tmp_path / "out"
    shutil.copytree(quick, out)
    (out / sweep.SETTINGS_FILE).unlink()
    err = one_line_error(["all", "--quick", "--episodes", "3", "--out", str(out)], capsys)
    assert f"{out} holds files but no sweep.json, so how its runs were trained" in err
    assert not (out / sweep.SETTINGS_FILE).exists()


@pytest.mark.parametrize(
    "column, value",
    [
        ("performance", "nan"),
        ("performance", "5.0"),
        ("length", "-1e9"),
        ("length", "2.5"),
        ("success", "2"),
        ("reward", "inf"),
    ],
)
def test_impossible_benchmark_values_are_refused(quick, tmp_path, capsys, column, value):
    out = tmp_path / "out"
    shutil.copytree(quick, out)
    damaged = Run("prune-spawn", 0.5, 0).folder(out) / "benchmark.csv"
    rows = read_csv(damaged)
    rows[0][column] = value
    with damaged.open("w", newline="") as file:
        writer = csv.DictWriter(file, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    err = one_line_error(["all", "--quick", "--out", str(out)], capsys)
    assert f"{damaged}: {column} " in err and "delete the run's folder to rerun it" in err


def test_ctrl_c_while_writing_figures_is_one_line(quick, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(quick, out)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.figures, "figure3", interrupted)
    with pytest.raises(SystemExit) as stopped:
        cli.run(["all", "--quick", "--out", str(out)])
    assert stopped.value.code == 130
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "interrupted while writing the tables" in err


def test_settings_of_the_swept_env_may_be_overridden(tmp_path, monkeypatch):
    """``env=`` is the sweep's, ``env.kwargs.*`` the user's (level workers, a level bank)."""
    launched = []

    def launch(runs, settings, *args, **kwargs):
        launched.append(settings)
        raise SystemExit(0)

    monkeypatch.setattr(cli, "launch", launch)
    overrides = ["env.kwargs.workers=1", "env.kwargs.bank={size:1000}"]
    with pytest.raises(SystemExit):
        cli.main(["table1", "--out", str(tmp_path), *overrides])
    assert launched[0].overrides == tuple(overrides) and launched[0].steps == sweep.FULL_STEPS


def test_an_output_folder_of_other_settings_or_a_file_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "launch", lambda *args: pytest.fail("launched"))
    file = tmp_path / "file"
    file.write_text("x")
    assert f"--out {file} is not a folder" in one_line_error(["table1", "--out", str(file)], capsys)
    out = tmp_path / "out"
    out.mkdir()
    (out / sweep.SETTINGS_FILE).write_text(
        json.dumps(sweep.Settings("paper", sweep.FULL_STEPS, None, 10, ()).as_json())
    )
    assert "holds runs made with other settings" in one_line_error(
        ["table1", "--quick", "--out", str(out)], capsys
    )
    # a folder of an earlier version, whose benchmark took the greedy action
    earlier = sweep.Settings("paper-quick", sweep.QUICK_STEPS, 3, 2, ()).as_json()
    del earlier["benchmark_actions"]
    (out / sweep.SETTINGS_FILE).write_text(json.dumps(earlier))
    assert "holds runs made with other settings" in one_line_error(
        ["table1", "--quick", "--out", str(out)], capsys
    )


def test_an_output_folder_benchmarked_on_another_suite_is_refused(tmp_path, capsys, monkeypatch):
    """The suite is one of the folder's settings; a folder of an earlier version, which
    benchmarked on this project's suites, goes on with ``--suite ours`` only."""
    launched = []

    def launch(runs, settings, *args, **kwargs):
        launched.append(settings)
        raise SystemExit(0)

    monkeypatch.setattr(cli, "launch", launch)
    out = tmp_path / "out"
    out.mkdir()
    ours = sweep.Settings("paper-quick", sweep.QUICK_STEPS, 3, 2, (), suite="ours").as_json()
    assert ours["suite"] == "ours"
    earlier = {k: v for k, v in ours.items() if k != "suite"}
    for saved in (ours, earlier):
        (out / sweep.SETTINGS_FILE).write_text(json.dumps(saved))
        err = one_line_error(["table1", "--quick", "--out", str(out)], capsys)
        assert "holds runs made with other settings" in err and "'suite': 'v1.0'" in err
        with pytest.raises(SystemExit):
            cli.main(["table1", "--quick", "--suite", "ours", "--out", str(out)])
        assert launched.pop().suite == "ours"
        assert json.loads((out / sweep.SETTINGS_FILE).read_text()) == saved  # left as it was


def test_the_report_names_the_suites_the_agents_were_benchmarked_on():
    assert sweep.Settings("paper", sweep.FULL_STEPS, None, 10, ()).benchmark() == (
        "the original SafeLife v1.0 suites (safelife_rl/levels/v1.0), 100 levels each played "
        "10 times per agent"
    )
    assert sweep.Settings("paper", sweep.FULL_STEPS, 5, 1, (), suite="ours").benchmark() == (
        "this project's suites (safelife_rl/levels/benchmarks), the first 5 levels of each "
        "played 1 times per agent"
    )


def test_the_quick_agents_are_benchmarked_on_the_original_suites(quick):
    """By default every job benchmarks its agent on the first levels of its task's v1.0 suite,
    and the folder's settings and report say so."""
    from safelife_rl.engine.level_files import load_levels
    from safelife_rl.envs.registration import benchmark_file

    assert json.loads((quick / sweep.SETTINGS_FILE).read_text())["suite"] == "v1.0"
    for task in TABLE1_TASKS + TABLE2_TASKS:
        for penalty in QUICK_PENALTIES:
            played = {
                e["level"] for e in read_csv(Run(task, penalty, 0).folder(quick) / "benchmark.csv")
            }
            assert played == {level.name for level in load_levels(benchmark_file(task))[:3]}
    report = (quick / "report_all.md").read_text()
    assert (
        "benchmarked on the original SafeLife v1.0 suites (safelife_rl/levels/v1.0), the "
        "first 3 levels of each played 2 times per agent;"
    ) in report


@pytest.mark.parametrize("suite, file", [("v1.0", "benchmark_file"), ("ours", "suite_file")])
def test_the_job_benchmarks_on_the_suite_it_is_given(quick, suite, file):
    from safelife_rl.apps.reproduce import job
    from safelife_rl.engine.level_files import load_levels
    from safelife_rl.envs import registration

    folder = Run("prune-still", 0.5, 0).folder(quick)
    rows = job.benchmark(folder, "prune-still", suite, 2, 1, 5, "cpu")
    expected = load_levels(getattr(registration, file)("prune-still"))[:2]
    assert sorted(row["level"] for row in rows) == [level.name for level in expected]
    assert all(row["length"] <= 5 for row in rows)


def test_a_job_without_a_suite_it_can_benchmark_on_is_refused(quick, train_config, tmp_path):
    from safelife_rl.apps.reproduce import job

    base = [
        f"+reproduce.out={tmp_path}",
        "+reproduce.axis=penalty",
        "+reproduce.levels=null",
        "+reproduce.episodes=1",
    ]
    cfg = train_config(*base, "+reproduce.suite=v1.0")
    assert cfg.reproduce.suite == "v1.0"  # as the sweep passes it: a string
    for suite in ([], ["+reproduce.suite=v2"], ["+reproduce.suite=1.0"]):
        with pytest.raises(
            sweep.UserError,
            match=r"\+reproduce.suite=.*: the suites to "
            "benchmark on are v1.0 or ours",
        ):
            job.run_job(train_config(*base, *suite), {"env": "prune-still"})
    assert list(tmp_path.iterdir()) == []
    folder = Run("prune-still", 0.5, 0).folder(quick)
    with pytest.raises(
        sweep.UserError, match="--suite v1.0: the original SafeLife has no suite of challenge"
    ):
        job.benchmark(folder, "challenge", "v1.0", 2, 1, 5, "cpu")


def test_the_runs_follow_the_original_schedules(train_config):
    """The original code ramps the impact penalty in from 1M to 2M steps and the exit curriculum
    from 0.5M to 2M, then holds both (its runs are 6M steps long); the quick runs keep those
    proportions of their 1,536 steps."""
    cfg = train_config("experiment=paper")
    assert list(cfg.wrappers.side_effect_penalty.ramp.steps) == [1e6, 2e6]
    assert list(cfg.wrappers.side_effect_penalty.ramp["values"]) == [0.0, 1.0]
    assert list(cfg.wrappers.exit_curriculum.ramp.steps) == [5e5, 2e6]
    assert list(cfg.wrappers.exit_curriculum.ramp["values"]) == [0.001, 1.0]
    quick = train_config("experiment=paper-quick")
    steps = sweep.QUICK_STEPS
    assert quick.total_timesteps == steps
    assert list(quick.wrappers.side_effect_penalty.ramp.steps) == [steps / 6, steps / 3]
    assert list(quick.wrappers.exit_curriculum.ramp.steps) == [steps / 12, steps / 3]


def test_the_report_states_the_steps_and_schedules(quick):
    report = (quick / "report_all.md").read_text()
    assert (
        "1,536 steps per run (impact penalty share 0 at 256 -> 1 at 512 steps, then held; "
        "exit curriculum 0.001 at 128 -> 1 at 512 steps, then held)"
    ) in report


def test_competence_is_judged_within_two_million_steps():
    """The paper's "competence within 2M steps" reads the last evaluation at or before 2M steps
    of a 6M-step run, not its end."""
    evaluations = [
        {"step": s, "mean_performance": p}
        for s, p in ((1_000_000, 0.9), (2_000_000, 0.8), (6_000_000, 0.2))
    ]
    final = {"trained": {"mean_performance": 0.2}, "random": {"mean_performance": 0.5}}
    runs = [RunResult(Run(task, 0.0, 0), [], evaluations, final) for task in claims.STILL_TASKS]
    assert claims.performance_within(runs[0], claims.COMPETENCE_STEPS) == 0.8
    found = claims.competence(runs)
    assert found.verdict == claims.AGREES and "0.800 vs random 0.500" in found.measured
    early = RunResult(Run("prune-still", 0.0, 0), [], [], final)  # no evaluation: the final one
    assert claims.performance_within(early, claims.COMPETENCE_STEPS) == 0.2
