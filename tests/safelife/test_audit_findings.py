"""Bad input the hostile audit (tests/reliability) found ending in a traceback: each now ends
in one line naming the problem."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from safelife_rl.engine.level_files import load_levels
from safelife_rl.procgen.bank import LevelBank
from safelife_rl.procgen.source import ProceduralLevels, generate_levels
from safelife_rl.training.config import check_settings
from safety_rl_common.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "safelife" / "traces" / "append-still-000.npz"


WORKERS = r"workers must be a whole number from 0 to \d+ \(4 per CPU core\), got "


@pytest.mark.parametrize("workers", ["abc", 2.5, True, -1, [1], 10**12])
def test_level_workers_must_be_a_whole_number(workers):
    with pytest.raises(UserError, match=WORKERS):
        ProceduralLevels("append-still", workers=workers)
    with pytest.raises(UserError, match=WORKERS):
        list(generate_levels("append-still", [0], workers=workers))


def run(*argv, cwd):
    return subprocess.run(
        [sys.executable, "-m", "safelife_rl", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_callback_that_is_not_a_config_is_named(tmp_path):
    result = run(
        "train",
        "experiment=paper",
        "env=append-still",
        "n_envs=2",
        "env.kwargs.view_shape=[17,17]",
        "+callbacks.bogus=1",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "python -m safelife_rl train: error: callbacks.bogus must be a callback's config with a "
        "_target_ (or null), got 1"
    ]
    assert not (tmp_path / "run").exists()


def test_an_output_under_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    result = run(
        "replay",
        str(TRACE),
        "--out",
        str(tmp_path / "r.npz"),
        "--gif",
        str(tmp_path / "file" / "x.gif"),
        cwd=tmp_path,
    )
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"python -m safelife_rl replay: error: {tmp_path / 'file'}: File exists"
    ]


@pytest.mark.parametrize(
    "value, named",
    [
        ("nan", "cannot convert float NaN to integer"),
        ("-1", "a rollout of 2 envs x -1 steps does not split into 4 minibatches"),
    ],
)
def test_a_value_a_resolver_refuses_is_one_line_and_leaves_no_folder(tmp_path, value, named):
    result = run(
        "train",
        "experiment=paper",
        "env=append-still",
        "n_envs=2",
        f"algo.n_steps={value}",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert named in result.stderr and "full_key: algo.batch_size" in result.stderr
    assert not (tmp_path / "run").exists()


def test_evaluation_episodes_are_bounded_before_the_run(tmp_path):
    result = run(
        "train",
        "experiment=paper",
        "env=append-still",
        "n_envs=2",
        "env.kwargs.view_shape=[17,17]",
        "callbacks.evaluation.n_episodes=1000000000000",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "python -m safelife_rl train: error: callbacks.evaluation.n_episodes is 1000000000000 "
        "episodes, over the limit of 1000000; raise it with SAFELIFE_MAX_EPISODES=<episodes>"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["env.id=Nope-v0"], "no env 'Nope-v0' is registered (from env id 'Nope-v0')"),
        (["env.kwargs.view_shape=17"], "safelife_rl/AppendStill-v1 does not take the env kwargs"),
        (["+env.kwargs.bogus=1"], "got an unexpected keyword argument 'bogus'"),
        (["callbacks.evaluation.seed=-1"], "callbacks.evaluation.seed must be a whole number >= 0"),
    ],
)
def test_bad_env_settings_are_one_line(tmp_path, argv, message):
    result = run(
        "train",
        "experiment=paper",
        "env=append-still",
        "n_envs=2",
        *argv,
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr and not (tmp_path / "run").exists()


def test_benchmark_episodes_are_bounded(tmp_path):
    result = run(
        "benchmark", "append-still", "--policy", "noop", "--episodes", "1000000000000", cwd=tmp_path
    )
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "python -m safelife_rl benchmark: error: --episodes x levels is 100000000000000 episodes, "
        "over the limit of 1000000; raise it with SAFELIFE_MAX_EPISODES=<episodes>"
    ]


def test_play_a_task_plays_its_fixed_suite():
    """``play append-still`` failed on its first reset: the loop picks levels by number, which
    procedural levels have not."""
    import io

    from safelife_rl.apps.play import play, play_env
    from safelife_rl.envs.registration import suite_file

    env = play_env("append-still", time_limit=5)
    result = play(env, ["wait", "next", "wait"], io.StringIO())
    assert env.level.name == load_levels(suite_file("append-still"))[1].name
    assert result["levels_completed"] == 0


@pytest.mark.parametrize("package, command", [("safelife_rl", "train"), ("drest", "train")])
def test_a_run_folder_under_a_file_is_one_line(tmp_path, package, command):
    """Hydra makes the run's folder before the app starts: its file error was a traceback."""
    (tmp_path / "file").write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", package, command, f"hydra.run.dir={tmp_path / 'file' / 'x'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"python -m {package} {command}: error: {tmp_path / 'file' / 'x'}: Not a directory"
    ]


def test_a_benchmark_file_that_is_not_text_is_named(tmp_path):
    from safelife_rl.apps.reproduce.runs import load_episodes

    path = tmp_path / "benchmark.csv"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(UserError, match=r"benchmark.csv: not text \(.*\); delete the run's"):
        load_episodes(path)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(UserError, match="not a regular file"):
        load_episodes(path)


def test_a_figure_path_without_a_known_suffix(tmp_path):
    """The temporary file's random suffix chose the format: a path without a suffix failed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from safety_rl_common.figures import save_figure

    save_figure(plt.figure(), tmp_path / "plain")
    assert (tmp_path / "plain").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(UserError, match=r"x.nope: cannot save a figure as .nope; give one of "):
        save_figure(plt.figure(), tmp_path / "x.nope")
    assert not list(tmp_path.glob(".*"))


def test_an_atomic_write_never_replaces_a_special_file(tmp_path):
    """``replay --out /dev/full`` run as root renamed the new file over the device."""
    from safety_rl_common.files import write_text

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserError, match="fifo: not a regular file"):
        write_text(tmp_path / "fifo", "x")
    assert (tmp_path / "fifo").is_fifo() and not list(tmp_path.glob(".*"))
    result = run("replay", str(TRACE), "--out", str(tmp_path / "fifo"), cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert (tmp_path / "fifo").is_fifo()


@pytest.mark.parametrize(
    "override, message",
    [
        ("algo.gamma=abc", r"^algo.gamma must be a number, got 'abc'$"),
        ("algo.gae_lambda=abc", r"^algo.gae_lambda must be a number, got 'abc'$"),
        ("algo.ent_coef=abc", r"^algo.ent_coef must be a number, got 'abc'$"),
        ("algo.vf_coef=abc", r"^algo.vf_coef must be a number, got 'abc'$"),
        ("algo.max_grad_norm=abc", r"^algo.max_grad_norm must be a number, got 'abc'$"),
        ("algo.learning_rate=abc", r"^algo.learning_rate must be a number, got 'abc'$"),
        ("algo.clip_range=abc", r"^algo.clip_range must be a number, got 'abc'$"),
        ("algo.n_epochs=abc", r"^algo.n_epochs must be an integer, got 'abc'$"),
        ("algo.batch_size=2.5", r"^algo.batch_size must be an integer, got 2.5$"),
        (
            "algo.n_epochs=1000000000000",
            r"^algo.n_epochs is 1000000000000 epochs, over the limit of "
            r"1000; raise it with SAFELIFE_MAX_EPOCHS=<epochs>$",
        ),
        (
            "n_envs=1000000000000",
            r"^n_envs is 1000000000000 envs, over the limit of 65536; raise it "
            r"with SAFELIFE_MAX_ENVS=<envs>$",
        ),
        (
            "policy.name=Nope",
            r"^policy.name must be one of PPO's policies \(MlpPolicy, CnnPolicy, "
            r"MultiInputPolicy\), got 'Nope'$",
        ),
        (
            "torch_threads=1000000000000",
            r"^torch_threads must be at most \d+ \(4 per CPU core\), "
            r"got 1000000000000$",
        ),
    ],
)
def test_algo_settings_of_the_wrong_type_or_absurd_size_are_named(train_config, override, message):
    with pytest.raises(UserError, match=message):
        check_settings(train_config(override))


def test_a_bank_larger_than_the_limit_is_refused_before_drawing_seeds(tmp_path):
    with pytest.raises(
        UserError,
        match=r"^the level bank's size is 1000000000000 levels, over "
        r"the limit of 1000000; raise it with "
        r"SAFELIFE_MAX_BANK_LEVELS=<levels>$",
    ):
        LevelBank("append-still", size=10**12, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("workers", ["1000000000000", "-1"])
def test_make_suites_refuses_a_worker_count_in_one_line(tmp_path, capsys, workers):
    from safelife_rl.apps.make_suites import main

    with pytest.raises(SystemExit) as exited:
        main(["append-still", "--workers", workers, "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(
            f"make-suites: error: --workers must be a whole number from 0 to {4 * os.cpu_count()} "
            f"(4 per CPU core), got {workers}"
        )
    )
    assert not (tmp_path / "out").exists()


def test_resume_refuses_a_fifo_in_the_run_folder_without_opening_it(tmp_path, train_config):
    from safelife_rl.apps.train import resume_config
    from safelife_rl.training.run import train

    train(train_config("total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    for name in ("evaluations.json", "tensorboard/progress.csv", "train.lock"):
        path = tmp_path / name
        path.unlink(missing_ok=True)
        os.mkfifo(path)  # opening it to read would wait for a writer forever
        given = [f"resume={tmp_path}", "total_timesteps=128"]
        with pytest.raises(UserError, match=rf"^{path}: not a regular file \(a run folder"):
            train(resume_config(train_config(*given), given), tmp_path, resume=True)
        path.unlink()


def test_a_lock_file_that_is_a_fifo_is_refused(tmp_path):
    from safety_rl_common.locks import PidLock

    os.mkfifo(tmp_path / "train.lock")
    with pytest.raises(UserError, match="train.lock: not a regular file, so not a lock file"):
        PidLock(tmp_path / "train.lock", "being trained").acquire()


def test_levels_through_a_link_loop_are_one_line(tmp_path):
    loop = tmp_path / "loop.npz"
    loop.symlink_to(tmp_path / "back.npz")
    (tmp_path / "back.npz").symlink_to(loop)
    with pytest.raises(
        UserError,
        match=rf"^{loop}: a loop of symbolic links \(no file at its "
        r"end\)$",
    ):
        load_levels(loop)
    result = run("random-run", "--levels", str(loop), "--episodes", "1", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.splitlines()[-1] == (
        f"python -m safelife_rl random-run: error: {loop}: a loop of symbolic links (no file at "
        "its end)"
    )


@pytest.mark.parametrize(
    "override, message",
    [
        ("wrappers.side_effect_penalty.ramp.steps=[5,1]", r"^a ramp's steps must increase from 0"),
        ("wrappers.side_effect_penalty.ramp.steps=[-1,5]", r"^a ramp's steps must increase from 0"),
        (
            "wrappers.side_effect_penalty.ramp.values=abc",
            r"^a ramp's steps and values must be lists",
        ),
    ],
)
def test_a_bad_ramp_is_one_user_error_before_anything_is_written(
    tmp_path, train_config, override, message
):
    from safelife_rl.training.run import train

    with pytest.raises(UserError, match=message):
        train(train_config(override), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "algo.ent_coef=1000000000000",
            r"^algo.ent_coef must be in \[0, 1000\], got 1000000000000$",
        ),
        ("algo.vf_coef=1000000000000", r"^algo.vf_coef must be in \[0, 1000\], got 1000000000000$"),
        (
            "wrappers.exit_bonus.bonus=1000000000000",
            r"^the exit bonus must be in \[-1e\+06, 1e\+06\], got 1000000000000.0$",
        ),
        (
            "wrappers.movement_bonus.bonus=-1000000000000",
            r"^the movement bonus must be in \[-1e\+06, 1e\+06\], got -1000000000000.0$",
        ),
    ],
)
def test_absurd_loss_weights_and_bonuses_are_refused(tmp_path, train_config, override, message):
    from safelife_rl.training.run import train

    with pytest.raises(UserError, match=message):
        train(train_config(override), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("variable", ["SAFELIFE_MAX_READ_MB", "SAFELIFE_MAX_ENVS"])
def test_a_bad_limit_setting_is_refused_before_the_run_starts(
    tmp_path, train_config, monkeypatch, variable
):
    from safelife_rl.training.run import train

    monkeypatch.setenv(variable, "nan")
    with pytest.raises(UserError, match=rf"^{variable}='nan': give a positive number of "):
        train(train_config("env.kwargs.bank={size:4}"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_bad_read_limit_is_not_taken_for_a_corrupt_bank(tmp_path, monkeypatch):
    LevelBank("append-still", size=2, cache_dir=tmp_path, progress=False)
    monkeypatch.setenv("SAFELIFE_MAX_READ_MB", "abc")
    with pytest.raises(UserError, match="^SAFELIFE_MAX_READ_MB='abc'"):
        LevelBank("append-still", size=2, cache_dir=tmp_path, progress=False)
