"""``safelife_rl compare``: PPO and PPO + the impact penalty end to end on a tiny budget (2 seeds),
resuming, the table's statistics on hand cases, and bad input."""

import csv
import itertools

import numpy as np
import pytest
import torch
import yaml

from safelife_rl.apps import compare, compare_report
from safelife_rl.apps.reproduce.runs import Run, RunResult, load_episodes
from safety_rl_common.statistics import iqm

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """``--quick --methods ppo,penalty --seeds 2 --tasks append-still``: 4 tiny runs."""
    out = tmp_path_factory.mktemp("compare")
    summary = compare.compare(
        compare.parse(
            [
                "--quick",
                "--methods",
                "ppo,penalty",
                "--seeds",
                "2",
                "--tasks",
                "append-still",
                "--out",
                str(out),
            ]
        )
    )
    assert summary["runs"] == 4
    return out


def read_csv(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def seed_means(out, method, key):
    return [
        np.nanmean(
            [
                e[key]
                for e in load_episodes(
                    Run("append-still", method, seed).folder(out) / "benchmark.csv"
                )
            ]
        )
        for seed in (0, 1)
    ]


def test_each_method_trains_its_own_runs(quick):
    for method, penalty in (("ppo", 0.0), ("penalty", 0.3)):
        for seed in (0, 1):
            folder = quick / "runs" / "append-still" / method / f"seed_{seed}"
            config = yaml.safe_load((folder / "config.yaml").read_text())
            assert config["method"]["name"] == method and config["seed"] == seed
            assert config["wrappers"]["side_effect_penalty"]["penalty"] == penalty
            assert config["total_timesteps"] == 1536
            assert len(load_episodes(folder / "benchmark.csv")) == 6  # 3 levels x 2


def test_the_agents_are_benchmarked_on_our_suites(quick):
    """Every task has this project's suite, so a comparison benchmarks on it by default; the
    folder's settings and report say so."""
    import json

    from safelife_rl.engine.level_files import load_levels
    from safelife_rl.envs.registration import suite_file

    assert json.loads((quick / "sweep.json").read_text())["suite"] == "ours"
    expected = {level.name for level in load_levels(suite_file("append-still"))[:3]}
    for method in ("ppo", "penalty"):
        for seed in (0, 1):
            path = Run("append-still", method, seed).folder(quick) / "benchmark.csv"
            assert {row["level"] for row in read_csv(path)} == expected
    assert (
        "benchmarked on this project's suites (safelife_rl/levels/benchmarks), the first 3 "
        "levels of each played 2 times per agent;"
    ) in (quick / "report.md").read_text()


def test_the_table_is_the_seeds_iqm_and_improvement_over_ppo(quick):
    rows = {r["method"]: r for r in read_csv(quick / "comparison.csv")}
    assert list(rows) == ["ppo", "penalty"] and rows["ppo"]["seeds"] == "2"
    for method in ("ppo", "penalty"):
        for metric in ("performance", "reward", "green"):
            means = seed_means(quick, method, metric)
            row = rows[method]
            assert float(row[f"{metric}_iqm"]) == pytest.approx(iqm(means), abs=1e-5)
            assert (
                float(row[f"{metric}_iqm_low"])
                <= float(row[f"{metric}_iqm"])
                <= float(row[f"{metric}_iqm_high"])
            )
        assert row["yellow_iqm"] == ""  # append-still has no yellow life
    assert rows["ppo"]["performance_improvement"] == ""
    # P(penalty better than PPO): the share of seed pairs where it is, ties counting half
    for metric, sign in (("performance", 1), ("green", -1)):
        x, y = (sign * np.array(seed_means(quick, m, metric)) for m in ("penalty", "ppo"))
        pairs = [(a > b) + 0.5 * (a == b) for a, b in itertools.product(x, y)]
        assert float(rows["penalty"][f"{metric}_improvement"]) == pytest.approx(np.mean(pairs))
    table = (quick / "comparison.md").read_text()
    assert table.splitlines()[0].startswith(
        "| task | method | performance IQM [95% CI] | "
        "performance − ppo | "
        "performance P(better than ppo) |"
    )
    # the difference of the IQMs, penalty - PPO
    for metric in ("performance", "green"):
        means = {m: iqm(seed_means(quick, m, metric)) for m in ("penalty", "ppo")}
        assert float(rows["penalty"][f"{metric}_difference"]) == pytest.approx(
            means["penalty"] - means["ppo"], abs=1e-5
        )
    assert rows["ppo"]["green_difference"] == ""
    report = (quick / "report.md").read_text()
    assert "quick smoke run: not a result" in report and "1,536 steps per run" in report
    for name in ("comparison.png", "curves.png"):
        assert (quick / name).read_bytes().startswith(PNG)


def test_a_finished_comparison_is_not_rerun(quick, capsys):
    compare.main(
        [
            "--quick",
            "--methods",
            "ppo,penalty",
            "--seeds",
            "2",
            "--tasks",
            "append-still",
            "--out",
            str(quick),
        ]
    )
    printed = capsys.readouterr().out
    assert "runs to train" not in printed and "| append-still | penalty |" in printed


def result(task, method, seed, **columns):
    episodes = [{k: float(v) for k, v in columns.items()}]
    return RunResult(Run(task, method, seed), episodes, [], {"trained": {}, "random": {}})


def test_rows_on_hand_cases():
    """Three seeds per method on two tasks; the penalty's green side effects all below PPO's."""
    results = []
    for task in ("prune-still", "append-still"):
        for seed, (perf, green) in enumerate(((0.5, 0.4), (0.6, 0.5), (0.7, 0.6))):
            results.append(
                result(
                    task,
                    "ppo",
                    seed,
                    performance=perf,
                    reward=10 * perf,
                    green=green,
                    yellow=np.nan,
                )
            )
            results.append(
                result(
                    task,
                    "penalty",
                    seed,
                    performance=perf - 0.1,
                    reward=10 * perf,
                    green=green - 0.3,
                    yellow=np.nan,
                )
            )
    found = {(r.task, r.method): r.cells for r in compare_report.rows(results, "ppo")}
    assert list(found) == [
        (t, m) for t in ("prune-still", "append-still", "all tasks") for m in ("ppo", "penalty")
    ]
    ppo, penalty = found["prune-still", "ppo"], found["prune-still", "penalty"]
    assert ppo["performance"].iqm.point == pytest.approx(0.6)  # IQM of 3: their mean
    assert ppo["performance"].improvement is None and ppo["yellow"].iqm is None
    # {0.4, 0.5, 0.6} vs {0.5, 0.6, 0.7}: one win and two ties of nine pairs
    assert penalty["performance"].improvement.point == pytest.approx(2 / 9)
    better = penalty["green"].improvement  # lower is better: every pair
    assert (better.point, better.low, better.high) == (1.0, 1.0, 1.0)
    pooled = found["all tasks", "penalty"]
    assert pooled["performance"].improvement.point == pytest.approx(2 / 9)
    assert pooled["performance"].iqm.point == pytest.approx(0.5)  # middle of 6 scores
    assert pooled["reward"].iqm is None  # each task's reward has its own scale
    text = compare_report.markdown(compare_report.rows(results, "ppo"), "ppo")
    assert "| prune-still | ppo | 0.600 [0.500, 0.700] | — | — |" in text
    # green: {0.1, 0.2, 0.3} against {0.4, 0.5, 0.6}, 0.3 lower in every resample's IQM mean
    assert penalty["green"].difference.point == pytest.approx(-0.3)
    assert penalty["green"].difference.high < 0
    assert ppo["green"].difference is None
    assert "| 0.200 [0.100, 0.300] | -0.300 [" in text
    assert "| 1.00 [1.00, 1.00] | n/a | n/a | n/a | " in text
    assert penalty["cost"].iqm is None  # these episodes recorded no cost


def test_the_comparison_reports_the_summed_cost():
    """The cost each benchmark episode summed (``info["cost"]``), lower is better."""
    results = [
        result(
            "prune-still",
            method,
            seed,
            performance=0.5,
            reward=1.0,
            green=0.1,
            yellow=np.nan,
            cost=cost,
        )
        for method, costs in (("ppo", (4.0, 5.0, 6.0)), ("ppo_lagrangian", (1, 2, 3)))
        for seed, cost in enumerate(costs)
    ]
    found = {(r.task, r.method): r.cells for r in compare_report.rows(results, "ppo")}
    lagrangian = found["prune-still", "ppo_lagrangian"]["cost"]
    assert lagrangian.iqm.point == pytest.approx(2.0)
    assert lagrangian.difference.point == pytest.approx(-3.0)
    assert lagrangian.improvement.point == pytest.approx(1.0)
    assert "cost IQM [95% CI]" in compare_report.markdown(
        compare_report.rows(results, "ppo"), "ppo"
    )


def one_line_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        compare.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("safelife_rl compare: error: ")
    return err


def test_the_default_methods_each_have_their_config_and_others_are_refused(
    tmp_path, capsys, monkeypatch
):
    assert compare.DEFAULT_METHODS == ("ppo", "penalty", "aup", "aup_proj", "ppo_lagrangian")
    for method in compare.DEFAULT_METHODS:
        assert (compare.CONF / "method" / f"{method}.yaml").is_file(), method
    monkeypatch.setattr(compare, "launch", lambda *args, **kwargs: pytest.fail("launched"))
    err = one_line_error(["--methods", "ppo,no_such", "--out", str(tmp_path / "out")], capsys)
    assert (
        "--methods: method 'no_such' has no config safelife_rl/conf/method/no_such.yaml "
        "(there are: aup, aup_proj, " in err
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--methods", "ppo,nope"], "method 'nope' has no config"),
        (["--methods", "penalty"], "--methods must include ppo"),
        (["--methods", "ppo", "--tasks", "build-coop"], "--tasks: 'build-coop' is not one of"),
        (["--methods", "ppo", "--seeds", "0"], "--seeds must be from 1 to 100, got 0"),
        (["--methods", "ppo", "--steps", "-5"], "--steps must be at least 1, got -5"),
        (["--methods", "ppo", "method=penalty"], "'method=penalty': method is set by the sweep"),
        (["--methods", "ppo", "env=navigation"], "env is set by the sweep"),
        (["--methods", "ppo", "--penalties", "0"], "unrecognized arguments: --penalties"),
        (
            ["--methods", "ppo,aup", "--cost-limit", "2"],
            "--cost-limit is the budget of ppo_lagrangian, which --methods does not include",
        ),
        (
            ["--methods", "ppo,ppo_lagrangian", "--cost-limit", "-1"],
            "--cost-limit: cost_limit must be a finite non-negative number up to 1e+06 (a "
            "per-episode cost budget), got -1.0",
        ),
        (["--methods", "ppo,ppo_lagrangian", "--cost-limit", "nan"], "got nan"),
        (
            ["--methods", "ppo,ppo_lagrangian", "cost_limit=2"],
            "'cost_limit=2': the budget of ppo_lagrangian is --cost-limit",
        ),
        (
            ["--methods", "ppo", "--tasks", "append-still,prune-still-easy", "--suite", "v1.0"],
            "--suite v1.0: the original SafeLife has no suite of prune-still-easy (only of",
        ),
        (["--methods", "ppo", "--suite", "v2"], "argument --suite: invalid choice: 'v2'"),
        # every job's composed config is checked as the training app checks it, before launching
        (
            ["--methods", "ppo,aup", "n_envs=0"],
            "the job of append-still, method ppo: n_envs must be a positive integer",
        ),
        (["--methods", "ppo", "device=meta"], "device must be cpu, cuda, cuda:N, mps or auto"),
        (
            ["--methods", "ppo", "compile=true"],
            "compile=true compiles the device vector env's step",
        ),
        (["--methods", "ppo", "algo.learning_rate=nan"], "algo.learning_rate must be a finite"),
        (
            ["--methods", "ppo", "env.kwargs.view_shape=[0,0]"],
            "the job of append-still, method ppo: view_shape",
        ),
        (["--methods", "ppo", "env.kwargs.time_limit=0"], "time_limit must be a positive integer"),
        (
            ["--methods", "ppo,aup", "--quick", "torch_threads=0"],
            "the job of append-still, method ppo: torch_threads must be a positive integer",
        ),
        (
            ["--methods", "ppo,ppo_lagrangian", "--cost-limit", "1e300"],
            "--cost-limit: cost_limit must be a finite non-negative number up to 1e+06",
        ),
    ],
)
def test_bad_input_ends_with_one_line_before_running(argv, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(compare, "launch", lambda *args, **kwargs: pytest.fail("launched"))
    out = tmp_path / "out"
    assert named in one_line_error([*argv, "--out", str(out)], capsys)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="device=cuda is valid on this machine")
def test_device_cuda_without_cuda_is_refused_before_launching(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(compare, "launch", lambda *args, **kwargs: pytest.fail("launched"))
    err = one_line_error(["--methods", "ppo", "device=cuda", "--out", str(tmp_path / "o")], capsys)
    assert "device=cuda, but torch finds no CUDA GPU on this machine" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("quick", [True, False])
def test_the_default_methods_are_valid_at_the_quick_and_full_budgets(quick):
    """Every default method's every job composes and passes the training app's checks (the
    quick budget gives AUP's random-play buffer at least one VAE batch)."""
    from safelife_rl.apps.reproduce.runs import grid
    from safelife_rl.apps.reproduce.sweep import check_jobs

    args = compare.parse(["--quick"] if quick else [])
    settings, seeds = compare.sweep_settings(args, "method", compare.SEEDS, compare.DEFAULT_TASKS)
    check_jobs(grid(compare.DEFAULT_TASKS, compare.DEFAULT_METHODS, seeds), settings)


def test_the_budget_reaches_the_lagrangian_runs_only(tmp_path):
    """``--cost-limit``: recorded with the sweep's settings (a folder of other budgets is
    refused), passed to every job, and set in the PPO-Lagrangian runs' configs alone."""
    from hydra import compose, initialize_config_module

    from safelife_rl.apps.reproduce import job, sweep

    settings = sweep.Settings("paper", 5000, None, 1, (), axis="method", cost_limit=2.5)
    assert settings.as_json()["cost_limit"] == 2.5
    assert "cost_limit" not in sweep.Settings("paper", 5000, None, 1, (), "method").as_json()
    command = sweep.job_command(
        [Run("prune-still", "ppo_lagrangian", 0)], settings, "local", tmp_path
    )
    assert "+reproduce.cost_limit=2.5" in command
    with initialize_config_module("safelife_rl.conf", version_base=None):
        configs = {
            method: compose(
                "train",
                overrides=[
                    f"method={method}",
                    "+reproduce.cost_limit=2.5",
                    f"+reproduce.out={tmp_path}",
                ],
            )
            for method in ("ppo", "ppo_lagrangian")
        }
    lagrangian, ppo = (job.training_config(configs[m]) for m in ("ppo_lagrangian", "ppo"))
    assert lagrangian.cost_limit == 2.5 and lagrangian.algo.cost_limit == 2.5
    assert ppo.cost_limit is None and "reproduce" not in ppo
    sweep.check_settings(tmp_path, settings)
    with pytest.raises(sweep.UserError, match="holds runs made with other settings"):
        sweep.check_settings(tmp_path, sweep.Settings("paper", 5000, None, 1, (), "method"))
