"""Stopping and resuming training runs: nothing lost, nothing logged twice, nothing half-written,
and a resume that cannot honour the run's config refused."""

import csv
import json
import os
import signal

import pytest
import torch
from omegaconf import OmegaConf

from safelife_rl.apps.train import resume_config
from safelife_rl.training import run as run_module
from safelife_rl.training.callbacks import RunStopped
from safelife_rl.training.config import check_device, check_settings
from safelife_rl.training.resume import (
    config_differences,
    remove_stale_temporaries,
    trained_config,
)
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError


def resumed(train_config, run_dir, *overrides):
    given = [f"resume={run_dir}", *overrides]
    return resume_config(train_config(*given), given)


def csv_steps(run_dir):
    with open(run_dir / "tensorboard" / "progress.csv", newline="") as file:
        return [int(row["time/total_timesteps"]) for row in csv.DictReader(file)]


def assert_logs_whole(run_dir, tb_scalars, rollout):
    """Every rollout logged once in progress.csv and TensorBoard, every evaluation once."""
    steps = csv_steps(run_dir)
    assert steps == list(range(rollout, steps[-1] + 1, rollout))
    logged = tb_scalars(run_dir / "tensorboard")
    for tag in ("time/fps", "train/value_loss"):
        tag_steps = [e.step for e in logged[tag]]
        assert tag_steps == sorted(set(tag_steps)), tag
    history = [h["step"] for h in json.loads((run_dir / "evaluations.json").read_text())]
    assert history == sorted(set(history))
    assert [e.step for e in logged["eval/performance"]] == history


def test_resuming_a_finished_run_changes_nothing(tmp_path, train_config):
    summary = train(train_config("total_timesteps=128"), tmp_path)
    final = (tmp_path / "final_model.zip").read_bytes()

    def files():  # but the lock, which names the last process to train the run
        return {
            p: p.stat().st_mtime_ns
            for p in tmp_path.rglob("*")
            if p.is_file() and p.name != "train.lock"
        }

    before = files()
    assert train(resumed(train_config, tmp_path), tmp_path, resume=True) == summary
    assert (tmp_path / "final_model.zip").read_bytes() == final
    assert files() == before


def test_a_run_killed_after_its_last_checkpoint_saves_its_final_model_on_resume(
    tmp_path, train_config
):
    train(train_config("total_timesteps=128"), tmp_path)  # last checkpoint at 128 steps
    (tmp_path / "final_model.zip").unlink()  # as if killed before the final save
    (tmp_path / "evaluation.json").unlink()
    summary = train(resumed(train_config, tmp_path), tmp_path, resume=True)
    assert summary["timesteps"] == 128 and (tmp_path / "final_model.zip").is_file()
    assert [h["step"] for h in json.loads((tmp_path / "evaluations.json").read_text())] == [64, 128]


def test_a_run_killed_while_plotting_is_plotted_on_resume(tmp_path, train_config):
    summary = train(
        train_config("total_timesteps=64", "callbacks.evaluation.eval_every=64"), tmp_path
    )
    (tmp_path / "learning_curve.png").unlink()  # as if SIGKILLed while writing it
    stale = tmp_path / ".learning_curve.png.p1jdobl0.png"
    stale.write_bytes(b"half a png")
    assert train(resumed(train_config, tmp_path), tmp_path, resume=True) == summary
    assert (tmp_path / "learning_curve.png").stat().st_size > 0 and not stale.exists()


def test_resuming_a_finished_run_for_more_steps_starts_from_its_final_model(
    tmp_path, train_config, tb_scalars
):
    train(train_config("total_timesteps=96", "callbacks.checkpoint.save_every=64"), tmp_path)
    summary = train(resumed(train_config, tmp_path, "total_timesteps=160"), tmp_path, True)
    assert summary["timesteps"] == 160
    assert csv_steps(tmp_path)[:3] == [32, 64, 96]  # the first run's rows are kept
    assert_logs_whole(tmp_path, tb_scalars, 32)


def test_a_run_killed_after_a_checkpoint_logs_each_step_once(tmp_path, train_config, tb_scalars):
    train(train_config("total_timesteps=192"), tmp_path)
    # as if killed at 150 steps: what was logged after the 128-step checkpoint is still there
    (tmp_path / "final_model.zip").unlink()
    (tmp_path / "evaluation.json").unlink()
    (tmp_path / "checkpoints" / "model_192_steps.zip").unlink()
    stale = tmp_path / "checkpoints" / ".model_192_steps.zip.abcd_123.zip"
    stale.write_bytes(b"half a checkpoint")
    summary = train(resumed(train_config, tmp_path), tmp_path, resume=True)
    assert summary["timesteps"] == 192 and not stale.exists()
    assert_logs_whole(tmp_path, tb_scalars, 32)
    assert [h["step"] for h in json.loads((tmp_path / "evaluations.json").read_text())] == [
        64,
        128,
        192,
    ]
    logged = tb_scalars(tmp_path / "tensorboard")
    assert [e.step for e in logged["schedule/exit_fraction"]] == list(range(32, 193, 32))


def test_a_run_killed_before_its_first_checkpoint_starts_over(tmp_path, train_config, tb_scalars):
    train(train_config("total_timesteps=64", "callbacks.checkpoint.save_every=1000"), tmp_path)
    (tmp_path / "final_model.zip").unlink()  # as if killed at 64 steps
    (tmp_path / "evaluation.json").unlink()
    summary = train(resumed(train_config, tmp_path, "total_timesteps=96"), tmp_path, True)
    assert summary["timesteps"] == 96
    assert_logs_whole(tmp_path, tb_scalars, 32)
    assert csv_steps(tmp_path) == [32, 64, 96]


@pytest.mark.parametrize(
    "phase, where",
    [
        ("evaluating the final model", "random_policy"),
        ("plotting the learning curve", "plot_runs"),
    ],
)
def test_a_signal_after_training_ends_with_a_message_and_resume_finishes(
    tmp_path, train_config, monkeypatch, phase, where
):
    original = getattr(run_module, where)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(run_module, where, interrupted)
    with pytest.raises(RunStopped, match=f"stopped by SIGTERM while {phase}"):
        train(train_config("total_timesteps=128"), tmp_path)
    monkeypatch.setattr(run_module, where, original)
    final = (tmp_path / "final_model.zip").read_bytes()
    summary = train(resumed(train_config, tmp_path), tmp_path, resume=True)
    assert summary["timesteps"] == 128 and summary["trained"]["episodes"] == 2
    assert (tmp_path / "final_model.zip").read_bytes() == final
    assert (tmp_path / "learning_curve.png").stat().st_size > 0
    history = [h["step"] for h in json.loads((tmp_path / "evaluations.json").read_text())]
    assert history == [64, 128]


def test_checkpoints_carry_the_config_they_were_trained_with(tmp_path, train_config):
    train(train_config("total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    trained = trained_config(tmp_path / "checkpoints" / "model_64_steps.zip")
    assert trained == OmegaConf.to_container(OmegaConf.load(tmp_path / "config.yaml"))
    assert trained["algo"]["learning_rate"] == 3e-4


@pytest.mark.parametrize(
    "key, value, named",
    [
        ("algo.learning_rate", 0.001, "algo.learning_rate (0.0003 -> 0.001)"),
        ("algo._target_", "stable_baselines3.A2C", "algo._target_ ('stable_baselines3.PPO' -> "),
        ("env.id", "safelife_rl/PruneStill-v1", "env.id ('safelife_rl/AppendStill-v1' -> "),
    ],
)
def test_resume_refuses_an_edited_config_naming_the_differences(
    tmp_path, train_config, key, value, named
):
    train(train_config("total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    (tmp_path / "final_model.zip").unlink()
    saved = OmegaConf.load(tmp_path / "config.yaml")
    OmegaConf.update(saved, key, value)
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    cfg = resumed(train_config, tmp_path, "total_timesteps=128")
    with pytest.raises(UserError, match="differs from the config it was trained with") as error:
        train(cfg, tmp_path, resume=True)
    assert named in str(error.value)
    assert not (tmp_path / "checkpoints" / "model_128_steps.zip").exists()


def test_a_nan_in_the_saved_config_is_refused_as_such_not_as_a_change(tmp_path, train_config):
    nan = {"wrappers": {"exit_bonus": {"bonus": float("nan")}}}
    assert config_differences(nan, OmegaConf.create(nan)) == []
    train(train_config("total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    (tmp_path / "final_model.zip").unlink()
    saved = OmegaConf.load(tmp_path / "config.yaml")
    OmegaConf.update(saved, "wrappers.exit_bonus.bonus", float("nan"))
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    with pytest.raises(UserError, match=r"wrappers.exit_bonus.bonus \(0.5 -> nan\)"):
        train(resumed(train_config, tmp_path, "total_timesteps=128"), tmp_path, resume=True)


@pytest.mark.parametrize(
    "name, content",
    [
        ("evaluations.json", b'[{"step": 32, '),
        ("evaluations.json", b'{"step": 32}'),
        ("tensorboard/progress.csv", b"\xff\xfe\x00garbage\n"),
        ("tensorboard/progress.csv", b"time/total_timesteps,a\n64,1,2,3\n"),
    ],
)
def test_a_corrupt_log_is_refused_at_resume_naming_it(tmp_path, train_config, name, content):
    train(train_config("total_timesteps=64", "callbacks.evaluation.eval_every=32"), tmp_path)
    (tmp_path / name).write_bytes(content)
    checkpoints = sorted((tmp_path / "checkpoints").iterdir())
    with pytest.raises(UserError, match=f"{name}: .*restore it, or delete it"):
        train(resumed(train_config, tmp_path, "total_timesteps=128"), tmp_path, resume=True)
    assert sorted((tmp_path / "checkpoints").iterdir()) == checkpoints
    assert (tmp_path / name).read_bytes() == content


def test_only_temporaries_of_atomic_writes_are_removed(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    keep = [
        tmp_path / "config.yaml",
        tmp_path / ".hidden",
        tmp_path / "checkpoints" / "a.zip",
        tmp_path / ".evaluation.json.x",
    ]
    gone = [
        tmp_path / ".evaluation.json.k2j_9x0a.json",
        tmp_path / "checkpoints" / ".model_64_steps.zip.00000000.zip",
    ]
    for path in keep + gone:
        path.write_text("x")
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted(gone)
    assert all(p.exists() for p in keep)


@pytest.mark.parametrize("steps, refused", [(0, True), (-2, True), (1.5, True), (-1, False)])
def test_gradient_steps_are_positive_or_minus_one(train_config, steps, refused):
    cfg = train_config("algo=dqn", f"algo.gradient_steps={steps}")
    if refused:
        with pytest.raises(
            UserError,
            match=rf"^algo.gradient_steps must be a positive integer, "
            rf"or -1 .*, got {steps}$",
        ):
            check_settings(cfg)
    else:
        check_settings(cfg)


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "total_timesteps=-5",
            r"total_timesteps must be a positive integer \(at most 2\*\*53\), got -5$",
        ),
        ("log_interval=0", r"^log_interval must be a positive integer \(at most 2\*\*53\), got 0$"),
        ("algo.n_steps=0", "^algo.n_steps must be positive, got 0$"),
        ("algo.gamma=1.5", r"^algo.gamma must be in \[0, 1\], got 1.5$"),
        ("algo.learning_rate=nan", "^algo.learning_rate must be a finite number, got nan$"),
        ("+algo.n_step=3", r"^unknown key .algo.n_step. \(known: learning_rate, n_steps, "),
        ("seed=-1", r"^seed must be an integer in \[0, 4294967295\] \(SB3 seeds NumPy\), got -1$"),
        (
            "callbacks.evaluation.eval_every=0",
            r"^callbacks.evaluation.eval_every must be a positive "
            r"integer \(at most 2\*\*53\), got 0$",
        ),
        (
            "callbacks.evaluation.n_episodes=abc",
            "^callbacks.evaluation.n_episodes must be a positive",
        ),
        ("callbacks.checkpoint.keep=abc", r"^callbacks.checkpoint.keep must be an integer >= 0"),
        ("callbacks.evaluation.eval_every=nan", "callbacks.evaluation.eval_every must be a finite"),
        (
            "callbacks.checkpoint.save_every=0",
            "^callbacks.checkpoint.save_every must be a positive",
        ),
        (
            "callbacks.checkpoint.save_every=abc",
            "^callbacks.checkpoint.save_every must be a positive",
        ),
        (
            "wrappers.side_effect_penalty.penalty=nan",
            "side_effect_penalty.penalty must be a finite",
        ),
        ("wrappers.side_effect_penalty.penalty=1e308", r"penalty must be in \[0, 1e\+06\]"),
        ("wrappers.exit_bonus.bonus=-inf", "wrappers.exit_bonus.bonus must be a finite number"),
        ("wrappers.movement_bonus.bonus=nan", "movement_bonus.bonus must be a finite number"),
        ("wrappers.exit_curriculum.ramp.values=[0,inf]", "ramp.values.1 must be a finite number"),
        ("env.kwargs.time_limit=0", "time_limit must be a positive integer, got 0"),
        ("env.kwargs.workers=nan", "env.kwargs.workers must be a finite number"),
        ("device=meta", "^device must be cpu, cuda, cuda:N, mps or auto .*, got 'meta'$"),
        ("device=gpu", "^device must be cpu, cuda, cuda:N, mps or auto .*, got 'gpu'$"),
        (
            "env.kwargs.view_shape=[20001,20001]",
            "a side of view_shape is 20001 cells, over the limit",
        ),
        ("+algo.policy=MlpPolicy", "^unknown key 'algo.policy'"),
        (
            "~algo._target_",
            r"^algo must be an SB3 algorithm with _target_ \(e.g. algo=ppo\), got \{",
        ),
        ("algo.n_steps=10000000", "the rollout buffer of n_envs=2 x algo.n_steps=10000000 needs"),
    ],
)
def test_bad_run_settings_are_refused_before_anything_is_written(
    tmp_path, train_config, override, message
):
    with pytest.raises(UserError, match=message):
        train(train_config(override), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_is_refused_naming_device_auto(tmp_path, train_config):
    with pytest.raises(UserError, match="device=cuda, but torch finds no CUDA GPU.*device=auto"):
        train(train_config("device=cuda"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_device_auto_takes_cuda_where_there_is_one():
    assert check_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


def test_resume_refuses_a_config_naming_code_outside_the_allowlist(tmp_path, train_config):
    train(train_config("total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    marker = tmp_path / "ran"
    saved = OmegaConf.load(tmp_path / "config.yaml")
    saved.callbacks.extra = {"_target_": "pathlib.Path.touch", "self": str(marker)}
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    with pytest.raises(UserError, match="callbacks.extra._target_"):
        train(resumed(train_config, tmp_path, "total_timesteps=128"), tmp_path, resume=True)
    assert not marker.exists()


def test_plot_command_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    from safelife_rl.apps.plots import main

    with pytest.raises(SystemExit) as exit:
        main([str(tmp_path)])
    assert exit.value.code == 2
    expected = f"safelife-rl plots: error: {tmp_path}: not a training run (no tensorboard/ folder)"
    assert capsys.readouterr().err.strip().splitlines() == [expected]


def test_progress_csv_appends_rows_and_a_resume_drops_a_row_cut_short(tmp_path):
    from safelife_rl.training.logs import ResumableCSV

    path = tmp_path / "progress.csv"
    log = ResumableCSV(path)
    for step in (32, 64, 96):
        log.write({"time/total_timesteps": step, "train/loss": step / 10}, {})
    log.write({"time/total_timesteps": 128, "train/loss": 1.0, "eval/x": 2}, {})  # a new column
    log.close()
    assert path.read_text().splitlines() == [
        "time/total_timesteps,train/loss,eval/x",
        "32,3.2,",
        "64,6.4,",
        "96,9.6,",
        "128,1.0,2",
    ]
    with open(path, "a") as file:
        file.write("160,1")  # killed while appending
    ResumableCSV(path, keep_until=96).close()
    assert path.read_text().splitlines()[1:] == ["32,3.2,", "64,6.4,", "96,9.6,"]
    ResumableCSV(path).close()  # a new run starts a new log
    assert not path.exists()
