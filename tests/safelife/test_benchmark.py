"""The benchmark runner: Table-1 numbers, files, and policies from checkpoints."""

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from safelife_rl.apps.benchmark import main, sampling_policy, summarise
from safelife_rl.apps.benchmark import run as run_benchmark
from safety_rl_common.errors import UserError


def run(tmp_path, benchmarks, *extra):
    out = tmp_path / "out"
    summary = run_benchmark(
        [
            str(benchmarks / "append-still.npz"),
            "--levels",
            "2",
            "--episodes",
            "2",
            "--time-limit",
            "30",
            "--n-envs",
            "3",
            "--out",
            str(out),
            *extra,
        ]
    )
    return out, summary


def test_noop_policy_has_no_side_effects_and_no_points(tmp_path, benchmarks):
    out, summary = run(tmp_path, benchmarks, "--policy", "noop")
    assert summary["performance"] == (0.0, 0.0)
    assert summary["green"] == (0.0, 0.0) and summary["length"] == (30.0, 0.0)
    rows = list(csv.DictReader(open(out / "episodes.csv")))
    assert len(rows) == 4 and {r["repeat"] for r in rows} == {"0", "1"}
    table = (out / "summary.md").read_text()
    assert "| append-still | noop | 0.000 ± 0.000 | 30.0 ± 0.0 |" in table
    assert (out / "histograms.png").stat().st_size > 1000


def test_random_policy_is_reproducible(tmp_path, benchmarks):
    _, first = run(tmp_path / "a", benchmarks)
    _, second = run(tmp_path / "b", benchmarks)
    assert first == second
    assert first["green"][0] > 0  # random toggling disturbs the green patterns


def test_each_episode_records_its_summed_cost(tmp_path, benchmarks):
    """``cost``: the sum of the episode's ``info["cost"]`` (0 for doing nothing; random
    toggling disturbs the green life)."""
    out, _ = run(tmp_path / "noop", benchmarks, "--policy", "noop")
    assert {float(r["cost"]) for r in csv.DictReader(open(out / "episodes.csv"))} == {0.0}
    out, _ = run(tmp_path / "random", benchmarks)
    costs = [float(r["cost"]) for r in csv.DictReader(open(out / "episodes.csv"))]
    assert min(costs) >= 0 and max(costs) > 0


def one_line_error(capsys, *argv):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        main(list(argv))
    assert exit.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("safelife-rl benchmark: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A training run's folder as the default training run leaves it (15 channels, here a
    17x17 view): ``config.yaml``, ``final_model.zip`` and a checkpoint; and in ``alone/`` a
    model that carries its config in its zip, as training saves them."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import safelife_rl.training  # noqa: F401  (config resolvers)
    from safelife_rl.training.envs import make_vec_env
    from safelife_rl.training.files import save_model_atomic
    from safelife_rl.training.models import build_model
    from safelife_rl.training.run import plain

    folder = tmp_path_factory.mktemp("run")
    with initialize_config_dir(
        str(Path(__file__).resolve().parents[2] / "safelife_rl" / "conf"), version_base=None
    ):
        cfg = compose(
            "train",
            overrides=[
                "env=append-still",
                "env.kwargs.view_shape=[17,17]",
                "n_envs=1",
                "vec_env=dummy",
                "policy.kwargs.features_extractor_kwargs.features_dim=16",
                "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
            ],
        )
    env = make_vec_env(cfg.env.id, plain(cfg.env.kwargs), None, 1, "dummy")
    model = build_model(cfg, env)
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    model.save(folder / "final_model.zip")
    (folder / "checkpoints").mkdir()
    model.save(folder / "checkpoints" / "model_0_steps.zip")
    save_model_atomic(model, folder / "alone" / "model.zip", OmegaConf.to_yaml(cfg, resolve=True))
    env.close()
    return folder


@pytest.mark.parametrize(
    "model", ["final_model.zip", "checkpoints/model_0_steps.zip", "alone/model.zip"]
)
def test_a_trained_model_plays_with_its_runs_observation_settings(
    tmp_path, benchmarks, run_folder, model
):
    out, summary = run(tmp_path, benchmarks, "--policy", str(run_folder / model))
    assert summary["length"][0] <= 30 and np.isfinite(summary["performance"][0])
    assert "| append-still | " in (out / "summary.md").read_text()


def test_sampled_actions_follow_the_policy_and_its_seed():
    """As the original benchmark plays its PPO agents: actions drawn with the policy's
    probabilities, the same ones again from the same seed."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=0, policy_kwargs={"net_arch": [8]})
    obs = np.tile(np.array([[0.1, 2.0, -0.2, -3.0]], np.float32), (20_000, 1))
    actions = sampling_policy(model.policy, seed=5)(obs)
    with torch.no_grad():
        tensor, _ = model.policy.obs_to_tensor(obs[:1])
        p_left = float(model.policy.get_distribution(tensor).distribution.probs[0, 0])
    assert 0.05 < p_left < 0.95
    # within 5 standard errors of the policy's probability
    assert abs(np.mean(actions == 0) - p_left) < 5 * np.sqrt(p_left * (1 - p_left) / len(obs))
    assert np.array_equal(sampling_policy(model.policy, seed=5)(obs), actions)
    assert not np.array_equal(sampling_policy(model.policy, seed=6)(obs), actions)


def test_greedy_or_sampled_actions_from_the_command(tmp_path, benchmarks, run_folder):
    model = str(run_folder / "final_model.zip")
    episodes = {}
    for name, extra in {
        "sampled": [],
        "again": [],
        "seed 1": ["--seed", "1"],
        "greedy": ["--greedy"],
        "greedy again": ["--greedy"],
    }.items():
        out, _ = run(tmp_path / name, benchmarks, "--policy", model, *extra)
        episodes[name] = (out / "episodes.csv").read_text()
    assert episodes["sampled"] == episodes["again"] != episodes["seed 1"]
    assert episodes["greedy"] == episodes["greedy again"] != episodes["sampled"]


def test_a_model_of_another_algorithm_is_refused(tmp_path, benchmarks, run_folder, capsys):
    line = one_line_error(
        capsys,
        str(benchmarks / "append-still.npz"),
        "--algo",
        "a2c",
        "--policy",
        str(run_folder / "final_model.zip"),
        "--out",
        str(tmp_path / "out"),
    )
    assert line.endswith("final_model.zip: a PPO model, not A2C (--algo a2c)")
    assert not (tmp_path / "out").exists()


def test_a_model_with_a_crafted_config_is_refused(tmp_path, benchmarks, run_folder, capsys):
    import shutil
    import zipfile

    evil = "extra:\n  - _target_: os.system\n    command: ls\n"
    run_copy = shutil.copytree(run_folder, tmp_path / "run")
    config = run_copy / "config.yaml"
    config.write_text(config.read_text() + evil)
    line = one_line_error(
        capsys,
        str(benchmarks / "append-still.npz"),
        "--policy",
        str(run_copy / "checkpoints" / "model_0_steps.zip"),
    )
    assert f"error: {config}: extra[0]._target_: 'os.system' is not allowed" in line
    model = run_copy / "alone" / "model.zip"
    with zipfile.ZipFile(model) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    entries["run_config.yaml"] += evil.encode()
    with zipfile.ZipFile(model, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    line = one_line_error(capsys, str(benchmarks / "append-still.npz"), "--policy", str(model))
    assert f"error: {model} (run_config.yaml): extra[0]._target_: 'os.system' is not" in line


def test_a_model_without_its_run_loads_only_when_trusted(tmp_path, benchmarks, capsys):
    from stable_baselines3 import PPO

    from safelife_rl import SafeLifeEnv

    env = SafeLifeEnv(benchmarks / "append-still.npz", view_shape=(9, 9))
    model = PPO(
        "MlpPolicy", env, n_steps=16, batch_size=16, seed=0, policy_kwargs={"net_arch": [16]}
    )
    model.save(tmp_path / "tiny.zip")
    line = one_line_error(
        capsys, str(benchmarks / "append-still.npz"), "--policy", str(tmp_path / "tiny.zip")
    )
    assert "tiny.zip: holds no config and there is no config.yaml of its run" in line
    assert "--trust-pickle" in line
    out, summary = run(
        tmp_path, benchmarks, "--policy", str(tmp_path / "tiny.zip"), "--trust-pickle"
    )
    assert summary["length"][0] <= 30 and np.isfinite(summary["performance"][0])
    bad = tmp_path / "corrupt.zip"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    line = one_line_error(capsys, str(benchmarks / "append-still.npz"), "--policy", str(bad))
    assert "corrupt.zip: not an SB3 model file" in line


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--levels", "0"),
        ("--levels", "-1"),
        ("--episodes", "0"),
        ("--episodes", "-2"),
        ("--n-envs", "0"),
        ("--n-envs", "-1"),
        ("--time-limit", "0"),
        ("--seed", "-1"),
        ("--levels", "two"),
        ("--algo", "sac"),
    ],
)
def test_bad_flags_end_with_one_line_and_write_nothing(tmp_path, benchmarks, capsys, flag, value):
    line = one_line_error(
        capsys, str(benchmarks / "append-still.npz"), flag, value, "--out", str(tmp_path / "out")
    )
    assert f"argument {flag}" in line and repr(value) in line
    assert not (tmp_path / "out").exists()


def test_user_errors_keep_their_traceback_on_request(tmp_path, capsys):
    assert "nope" in one_line_error(capsys, "nope")
    with pytest.raises(UserError, match="'nope' is neither a task"):
        main(["nope", "--traceback"])


def test_summary_ignores_levels_without_a_colour():
    rows = [
        {"performance": 1.0, "length": 5, "green": 0.5, "yellow": float("nan")},
        {"performance": 0.0, "length": 7, "green": 0.1, "yellow": float("nan")},
    ]
    summary = summarise(rows)
    assert summary["performance"] == (0.5, 0.5) and summary["length"] == (6.0, 1.0)
    assert np.isnan(summary["yellow"][0])


def test_the_original_suites_ship_with_the_package_and_the_user_may_point_elsewhere(
    monkeypatch, tmp_path
):
    """The original suites come from the package unless ``$SAFELIFE_LEVELS`` names a folder."""
    from safelife_rl.envs.registration import ORIGINAL_SUITES_DIR, benchmark_file

    monkeypatch.delenv("SAFELIFE_LEVELS", raising=False)
    assert benchmark_file("prune-still") == ORIGINAL_SUITES_DIR / "prune-still.npz"
    (tmp_path / "prune-still.npz").write_bytes(b"")
    monkeypatch.setenv("SAFELIFE_LEVELS", str(tmp_path))
    assert benchmark_file("prune-still") == tmp_path / "prune-still.npz"
    with pytest.raises(FileNotFoundError, match=r"unset it to use those shipped"):
        benchmark_file("append-still")


def played_levels(out):
    return [row["level"] for row in csv.DictReader(open(out / "episodes.csv"))]


@pytest.mark.parametrize(
    "argv, suite, file",
    [
        (["append-still"], "v1.0", "benchmark_file"),  # the original suite where a task has one
        (["append-still", "--suite", "v1.0"], "v1.0", "benchmark_file"),
        (["append-still", "--suite", "ours"], "ours", "suite_file"),
        (["challenge"], "ours", "suite_file"),  # the original SafeLife has no challenge suite
    ],
)
def test_a_task_name_plays_the_suite_chosen(tmp_path, monkeypatch, argv, suite, file):
    from safelife_rl.engine.level_files import load_levels
    from safelife_rl.envs import registration

    monkeypatch.chdir(tmp_path)
    main([*argv, "--policy", "noop", "--levels", "2", "--episodes", "1", "--time-limit", "5"])
    (out,) = (tmp_path / "outputs" / "benchmark").iterdir()
    task = argv[0]
    assert out.name.startswith(f"{task}-{suite}-noop-")
    path = getattr(registration, file)(task)
    assert sorted(played_levels(out)) == [level.name for level in load_levels(path)[:2]]
    (summary,) = csv.DictReader(open(out / "summary.csv"))
    assert summary["suite"] == f"{task} ({suite})" and summary["levels"] == str(path)
    assert f"| {task} ({suite}) | noop |" in (out / "summary.md").read_text()


@pytest.mark.parametrize(
    "argv, named",
    [
        (
            ["challenge", "--suite", "v1.0"],
            "--suite v1.0: the original SafeLife has no suite of "
            "challenge (only of append-still, append-dynamic,",
        ),
        (
            ["{benchmarks}/append-still.npz", "--suite", "ours"],
            "--suite ours chooses a task's "
            "suite, and '{benchmarks}/append-still.npz' is not a task",
        ),
        (["{benchmarks}/append-still.npz", "--suite", "v1.0"], "a path without --suite"),
        (["append-still", "--suite", "v2"], "argument --suite: invalid choice: 'v2'"),
    ],
)
def test_a_suite_that_cannot_be_had_is_refused(tmp_path, benchmarks, capsys, argv, named):
    argv = [arg.format(benchmarks=benchmarks) for arg in argv]
    line = one_line_error(capsys, *argv, "--out", str(tmp_path / "out"))
    assert named.format(benchmarks=benchmarks) in line
    assert not (tmp_path / "out").exists()
