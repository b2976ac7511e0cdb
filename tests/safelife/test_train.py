"""The training app: tiny real runs through the composed Hydra config, resume, sweeps'
launcher configs and Hydra's errors for bad input."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException

import safelife_rl.training  # noqa: F401  (config resolvers and schema)
from safelife_rl.apps.train import resume_config
from safelife_rl.training.envs import make_env, make_vec_env, registered_id
from safelife_rl.training.run import _eval_env_factory, load_run_config, train
from safety_rl_common.errors import UserError
from tests.safelife.conftest import TINY

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "safelife_rl" / "conf"


def test_ppo_run_writes_config_logs_checkpoints_model_and_evaluation(
    tmp_path, train_config, tb_scalars
):
    summary = train(train_config("total_timesteps=128", "vec_env=subproc"), tmp_path)
    assert summary["timesteps"] == 128 and summary["algo"] == "PPO"
    saved = load_run_config(tmp_path)
    assert saved.algo.batch_size == 8 and saved.env.id == "safelife_rl/AppendStill-v1"
    assert (tmp_path / "final_model.zip").exists()
    assert not (tmp_path / "train.lock").exists()  # a finished run holds no lock
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "model_128_steps.zip",
        "model_64_steps.zip",
    ]
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    for who in ("trained", "random"):
        assert evaluation[who]["episodes"] == 2 and evaluation[who]["mean_length"] == 30
        means = evaluation[who]  # each with its 95% interval over the episodes
        for name in ("reward", "performance", "success", "side_effects/normalized/total"):
            low, high = means[f"mean_{name}_low"], means[f"mean_{name}_high"]
            assert low <= means[f"mean_{name}"] <= high
    history = json.loads((tmp_path / "evaluations.json").read_text())
    # two periodic evaluations; the final summary is the one at the last step
    assert [h["step"] for h in history] == [64, 128]
    assert {k: v for k, v in history[-1].items() if k != "step"} == evaluation["trained"]
    logged = tb_scalars(tmp_path / "tensorboard")
    lengths = [e.value for e in logged["episode/length"]]
    assert lengths == [30.0] * 4  # 128 steps = 64 per env: 2 episodes each
    assert all(0 <= e.value <= 1 for e in logged["episode/performance"])
    assert all(e.value in (0.0, 1.0) for e in logged["episode/success"])
    assert all(math.isfinite(e.value) for e in logged["episode/shaped_reward"])
    # training starts at the original curriculum's 0.001 exit fraction
    fractions = [e.value for e in logged["schedule/exit_fraction"]]
    assert fractions and all(f == pytest.approx(0.001) for f in fractions)
    assert [e.step for e in logged["eval/performance"]] == [64, 128]
    assert all(math.isfinite(e.value) and e.value >= 0 for e in logged["train/value_loss"])


@pytest.mark.parametrize(
    "algo, extra",
    [
        ("a2c", []),
        (
            "dqn",
            [
                "algo.learning_starts=32",
                "algo.buffer_size=500",
                "algo.train_freq=4",
                "algo.batch_size=8",
                "algo.target_update_interval=32",
            ],
        ),
    ],
)
def test_a2c_and_dqn_train_with_the_safelife_cnn(tmp_path, algo, extra, train_config, tb_scalars):
    overrides = [f"algo={algo}", "total_timesteps=96", "callbacks.evaluation=null", *extra]
    summary = train(train_config(*overrides), tmp_path)
    assert summary["algo"] == algo.upper() and summary["timesteps"] >= 96
    logged = tb_scalars(tmp_path / "tensorboard")
    assert len(logged["episode/length"]) >= 2
    assert any(tag.startswith("train/") for tag in logged)


def test_same_seed_same_training(tmp_path, train_config):
    runs = [
        train(
            train_config(
                "total_timesteps=64",
                "callbacks.checkpoint=null",
                "callbacks.evaluation.eval_every=1000000",
            ),
            tmp_path / str(i),
        )
        for i in range(2)
    ]
    assert runs[0]["trained"] == runs[1]["trained"]


def test_level_workers_of_training_envs_stay_out_of_suite_evaluation(train_config):
    cfg = train_config("env.kwargs.workers=1")
    del cfg.env.eval_kwargs.workers  # as in configs saved before eval_kwargs had the key
    env = _eval_env_factory(cfg)()
    try:
        assert env.unwrapped.sampler is None and len(env.unwrapped.levels) == 100
    finally:
        env.close()


def test_resume_continues_from_the_last_checkpoint_keeping_the_logs(
    tmp_path, train_config, tb_scalars
):
    train(train_config("total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    first = tb_scalars(tmp_path / "tensorboard")["episode/length"]
    (tmp_path / "final_model.zip").unlink()  # as if killed after the checkpoint
    overrides = [
        f"resume={tmp_path}",
        "total_timesteps=160",
        "vec_env=dummy",
        "env.kwargs.workers=1",
    ]
    cfg = resume_config(train_config(*overrides), overrides)
    assert cfg.total_timesteps == 160 and cfg.callbacks.evaluation is None
    # how the envs run may change: they play the same episodes on the same levels
    assert cfg.vec_env == "dummy" and cfg.env.kwargs.workers == 1
    summary = train(cfg, tmp_path, resume=True)
    assert summary["timesteps"] == 160
    # checkpoints go on at multiples of save_every counted from the start of the run
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "model_128_steps.zip",
        "model_64_steps.zip",
    ]
    steps = [e.step for e in tb_scalars(tmp_path / "tensorboard")["episode/length"]]
    assert steps[: len(first)] == [e.step for e in first] and max(steps) > 64
    assert steps == sorted(steps)
    with pytest.raises(ValueError, match="only total_timesteps, vec_env.*not seed"):
        resume_config(train_config(f"resume={tmp_path}"), [f"resume={tmp_path}", "seed=3"])
    with pytest.raises(UserError, match="not a training run directory: no config.yaml"):
        (tmp_path / "empty").mkdir()
        train(cfg, tmp_path / "empty", resume=True)


@pytest.mark.parametrize(
    "overrides, error, message",
    [
        (["total_steps=5"], ConfigCompositionException, "Could not override 'total_steps'"),
        (["algo.gama=0.9"], ConfigCompositionException, "Could not override 'algo.gama'"),
        (["n_envs=many"], ConfigCompositionException, "n_envs=many"),
        (["vec_env=threads"], ConfigCompositionException, "vec_env=threads"),
        (["algo=sac"], MissingConfigException, "Could not find 'algo/sac'"),
    ],
)
def test_bad_config_fails_with_hydras_message(overrides, error, message, train_config):
    with pytest.raises(error, match=message):
        train_config(*overrides)


@pytest.mark.parametrize(
    "launcher, target",
    [
        ("local", "JoblibLauncher"),
        ("submitit", "LocalLauncher"),
        ("slurm", "SlurmLauncher"),
    ],
)
def test_sweep_launcher_configs(launcher, target, train_config):
    cfg = train_config(f"hydra/launcher={launcher}", return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith(target)


def compose_plain(*overrides):
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("train", overrides=list(overrides))


def test_every_env_config_names_a_registered_id():
    for path in sorted((CONF / "env").glob("[!_]*.yaml")):
        cfg = compose_plain("experiment=paper", f"env={path.stem}")
        registered_id(cfg.env.id)  # imports the id's module, fails if it is not registered


@pytest.mark.parametrize(
    "experiment, env_id, policy",
    [
        (
            "cartpole-ignore-rewards",
            "extended_envs:extended_envs/CartPole-IgnoreRewards-v0",
            "MlpPolicy",
        ),
        (
            "cartpole-incentivize-learning-rate",
            "extended_envs:extended_envs/CartPole-IncentivizeLearningRate-v0",
            "MlpPolicy",
        ),
    ],
)
def test_experiment_presets_pick_env_wrappers_and_policy(experiment, env_id, policy):
    cfg = compose_plain(f"experiment={experiment}")
    assert cfg.env.id == env_id and cfg.policy.name == policy
    assert "view_shape" not in cfg.env.kwargs  # none of the SafeLife quick run's settings


def test_safelife_kwargs_on_another_env_fail_with_a_clear_message():
    with pytest.raises(UserError, match="does not take the env kwargs"):
        make_env("drest:drest/Example-v0", {"view_shape": [17, 17]})


def tiny_other(experiment, *overrides):
    return compose_plain(
        f"experiment={experiment}",
        "n_envs=2",
        "progress_bar=false",
        "callbacks.checkpoint=null",
        *overrides,
    )


def test_cartpole_combination_trains_dqn_and_logs_episodes(tmp_path, tb_scalars):
    cfg = tiny_other(
        "cartpole-ignore-rewards",
        "total_timesteps=300",
        "algo.learning_starts=100",
        "callbacks.evaluation.eval_every=1000",
        "callbacks.evaluation.n_episodes=2",
    )
    summary = train(cfg, tmp_path)
    assert summary["algo"] == "DQN" and summary["timesteps"] >= 300
    assert summary["trained"]["episodes"] == 2 and summary["random"]["mean_length"] >= 8
    logged = tb_scalars(tmp_path / "tensorboard")
    lengths = [e.value for e in logged["episode/length"]]
    assert len(lengths) >= 3 and all(1 <= v <= 200 for v in lengths)  # CartPole's episodes
    assert "train/loss" in logged


def test_env_modules_are_imported_in_fresh_worker_processes():
    env = make_vec_env(
        "drest:drest/Example-v0", {"obs_type": "vector"}, None, 2, "subproc", start_method="spawn"
    )
    try:
        env.seed(0)
        assert env.reset().shape == (2, 6)  # x, y, 3 coins, 1 button
        _, _, dones, _ = env.step(np.zeros(2, np.int64))
        assert dones.shape == (2,)
    finally:
        env.close()


def test_command_line_rejects_unknown_keys():
    result = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "train", "n_env=4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "Could not override 'n_env'" in result.stderr


@pytest.mark.parametrize("asked", [False, True])
def test_cudnn_deterministic_kernels_only_where_asked(tmp_path, train_config, monkeypatch, asked):
    """SB3 turns on cuDNN's deterministic kernels (and off its autotuner) whenever it seeds a
    model on CUDA; a run leaves them on only with ``cudnn_deterministic=true``."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", not asked)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", asked)
    train(
        train_config(
            "total_timesteps=16",
            f"cudnn_deterministic={str(asked).lower()}",
            "callbacks.checkpoint=null",
            "callbacks.evaluation.eval_every=1000000",
        ),
        tmp_path,
    )
    assert torch.backends.cudnn.deterministic is asked
    assert torch.backends.cudnn.benchmark is not asked


def test_the_app_writes_the_runs_log_to_train_log_and_leaves_no_lock(tmp_path):
    """Hydra's job logging writes ``train.log``; the run logs its start, each evaluation with
    its intervals and the trained agent against the random one there (and to the console)."""
    run = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "safelife_rl",
            "train",
            *TINY,
            "total_timesteps=64",
            f"hydra.run.dir={run}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    log = (run / "train.log").read_text()
    assert (
        "training PPO on safelife_rl/AppendStill-v1 from 0 to 64 steps (2 envs, vec_env=auto)"
        in log
    )
    assert "Calculating estimates" not in log  # rliable's line per interval
    assert "evaluation at 64 steps: reward " in log and ", performance " in log
    assert "the trained and a random agent on the same 2 evaluation episodes" in log
    assert "trained (PPO)" in log and "\nrandom " in log
    assert "the trained and a random agent" in result.stdout
    assert not (run / "train.lock").exists()
