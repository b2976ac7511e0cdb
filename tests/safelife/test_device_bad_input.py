"""The device path's bad input (issue 22): each refused in one line before anything runs, both
through the training app (``python -m safelife_rl train vec_env=device ...``) and through
``gymnasium.make_vec`` / :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` directly."""

import gymnasium as gym
import pytest
import torch

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError

from .test_kill_resume import app, finish
from .test_vector_env import tiny_levels

SUITE = "{_target_:safelife_rl.envs.registration.suite_file,task:append-still}"
#: a tiny device run on the fixed suite (no level bank to make)
ON_THE_DEVICE = [
    "experiment=quick",  # the main job trains on a level bank, which levels= does not take
    "vec_env=device",
    f"+env.kwargs.levels={SUITE}",
    "total_timesteps=64",
]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
TOO_MANY = (
    r"num_envs=10000000000 envs of 26x26 boards need about \d+\.\d GiB on cpu, which "
    r"has \d+\.\d GiB free; use at most about \d+ envs"
)
UNAPPLIED = (
    r"cannot apply the wrapper\(s\) continuing \(.*ContinuingEnv\), obs \(gymnasium.*"
    r"FlattenObservation\); it applies "
)
CONTINUING = {"_target_": "safelife_rl.training.ContinuingEnv"}
FLATTEN = {"_target_": "gymnasium.wrappers.FlattenObservation"}

# (what is wrong, the training app's overrides, its message, make_vec's kwargs, its message)
CASES = [
    pytest.param(
        ["n_envs=10000000000"], TOO_MANY, {"num_envs": 10**10}, TOO_MANY, id="n_envs-over-memory"
    ),
    pytest.param(
        ["env.kwargs.levels=null"],
        r"give it a level list \(levels=...\) or a level bank.*in a training run: "
        r"'env.kwargs.bank=\{size:1000\}'",
        {"levels": None},
        r"give it a level list \(levels=...\) or a level bank",
        id="procedural-levels",
    ),
    pytest.param(
        [
            "wrappers.continuing={_target_:safelife_rl.training.ContinuingEnv}",
            "+wrappers.obs={_target_:gymnasium.wrappers.FlattenObservation}",
        ],
        UNAPPLIED,
        {
            "training_wrappers": {
                "exit_bonus": {"_target_": "safelife_rl.training.ExitBonus"},
                "continuing": CONTINUING,
                "obs": FLATTEN,
            }
        },
        UNAPPLIED,
        id="wrappers",
    ),
    pytest.param(
        ["device=gpu0"],
        "device must be cpu, cuda, cuda:N, mps or auto .*, got .gpu0.",
        {"device": "gpu0"},
        "unknown torch device 'gpu0'",
        id="unknown-device",
    ),
    pytest.param(
        ["device=cuda"],
        "device=cuda, but torch finds no CUDA GPU",
        {"device": "cuda"},
        "torch device 'cuda' is not available here",
        id="absent-cuda",
        marks=NO_CUDA,
    ),
    pytest.param(
        ["compile=cudagraphs"],
        r"compile='cudagraphs' replays CUDA graphs, which need a CUDA device; got "
        r"device=cpu \(use compile=True there\)",
        {"compile": "cudagraphs"},
        r"compile='cudagraphs' .* got device=cpu",
        id="cuda-graph-on-cpu",
    ),
    pytest.param(
        ["compile=fast"],
        "compile must be one of false, true, cudagraphs, got 'fast'",
        {"compile": "fast"},
        r"compile must be one of \(False, True, 'cudagraphs'\), "
        "got 'fast'",
        id="compile-mode",
    ),
]


@pytest.mark.parametrize("overrides, app_message, kwargs, message", CASES)
def test_the_training_app_refuses_before_it_writes(
    tmp_path, train_config, overrides, app_message, kwargs, message, monkeypatch
):
    monkeypatch.setenv("SAFELIFE_MAX_ENVS", str(10**11))  # the memory check is what refuses
    with pytest.raises(UserError, match=app_message):
        train(train_config(*ON_THE_DEVICE, *overrides), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides, app_message, kwargs, message", CASES)
def test_make_vec_refuses(overrides, app_message, kwargs, message):
    settings = {"num_envs": 2, "device": "cpu", "levels": suite_file("append-still"), **kwargs}
    with pytest.raises(UserError, match=message):
        gym.make_vec(
            "safelife_rl/AppendStill-v1", vectorization_mode="vector_entry_point", **settings
        )


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "+algo.target_kl=0.01",
            r"vec_env=device trains PPO without target_kl .*: use vec_env=batched",
        ),
        (
            "algo=a2c",
            r"vec_env=device trains PPO and PPOLagrangian, not stable_baselines3.A2C: use",
        ),
    ],
    ids=["target-kl", "a2c"],
)
def test_what_the_device_trainer_does_not_train_is_refused_before_it_writes(
    tmp_path, train_config, override, message
):
    """The NumPy path trains them; the device trainer (one PPO update, no early stop) not."""
    with pytest.raises(UserError, match=message):
        train(train_config(*ON_THE_DEVICE, override), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_training_app_compiles_only_the_device_step(tmp_path, train_config):
    with pytest.raises(
        UserError,
        match="compile=true compiles the device vector env's step; "
        r"add vec_env=device \(vec_env=auto steps on the host\)",
    ):
        train(train_config("compile=true"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_vector_env_refuses_levels_of_several_shapes():
    levels = load_levels(suite_file("append-still"))[:1] + tiny_levels()[:1]  # 26x26, 9x9
    with pytest.raises(
        UserError,
        match=r"plays all boards in one tensor, but the levels have "
        r"shapes \[\(\d+, \d+\), \(\d+, \d+\)\]",
    ):
        SafeLifeVectorEnv(SafeLifeEnv(levels), 2)


def test_the_command_line_reports_it_in_one_line(tmp_path):
    code, _, err = finish(
        app(*ON_THE_DEVICE, "compile=cudagraphs", f"hydra.run.dir={tmp_path / 'run'}")
    )
    assert code == 2 and err.strip().splitlines() == [
        "python -m safelife_rl train: error: compile='cudagraphs' replays CUDA graphs, which "
        "need a CUDA device; got device=cpu (use compile=True there)"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["graphs=all"],
            r"graphs=all replays the device trainer's rollout and update as CUDA "
            r"graphs; add vec_env=device \(vec_env=auto steps on the host\)",
        ),
        ([*ON_THE_DEVICE, "graphs=sometimes"], "graphs must be one of none, rollout, update, all"),
        pytest.param(
            [*ON_THE_DEVICE, "graphs=rollout"],
            r"graphs=rollout replays CUDA graphs, which need a CUDA device; got device=cpu "
            r"\(use graphs=none\)",
            marks=NO_CUDA,
        ),
    ],
    ids=["host-vec-env", "unknown", "no-cuda"],
)
def test_the_training_app_refuses_graphs_it_cannot_replay(
    tmp_path, train_config, overrides, message
):
    with pytest.raises(UserError, match=message):
        train(train_config(*overrides), tmp_path / "run")
    assert not (tmp_path / "run").exists()
