"""Exact resume: a run stopped (SIGTERM) or killed at any step and resumed ends bit for bit where
the uninterrupted run ends: the same final weights, progress rows and evaluations."""

import csv
import io
import json
import os
import signal
import zipfile

import numpy as np
import pytest
import torch

from safelife_rl.apps.train import resume_config
from safelife_rl.training import run as run_module
from safelife_rl.training.callbacks import RunStopped, TrainingClock
from safelife_rl.training.rollout_record import (
    ACTIONS_ENTRY,
    DIGEST_KEY,
    STARTS_ENTRY,
    STATE_ENTRY,
    digest,
)
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError

TOTAL = 160
ALGOS = {
    "ppo": [],  # 2 envs x 16 steps: rollouts of 32 steps
    "a2c": ["algo=a2c", "algo.n_steps=16"],
    "dqn": [
        "algo=dqn",
        "algo.n_steps=3",
        "algo.learning_starts=40",
        "algo.buffer_size=400",
        "algo.train_freq=4",
        "algo.batch_size=16",
        "algo.target_update_interval=30",
        "log_interval=2",
    ],
}
# vec_env=device: the SafeLife envs stepped as tensors (DevicePPO: the device trainer at P = 1),
# levels from a bank
DEVICE = ["vec_env=device", "env.kwargs.bank={size:4,progress:false}"]
ALGOS["lagrangian"] = ["method=ppo_lagrangian", "cost_limit=2"]
# AUP_proj: phase 1 takes 32 random and 64 DQN steps; phase 2 rollouts end at 128 and 160
ALGOS["aup"] = [
    "method=aup_proj",
    "method.buffer_steps=32",
    "method.aux_steps=64",
    "method.aux_agent.buffer_size=200",
]
ALGOS.update({f"device-{algo}": [*ALGOS[algo], *DEVICE] for algo in ("ppo", "lagrangian", "aup")})


class Killed(BaseException):
    """As SIGKILL: the run ends where it is, saving nothing."""


def stopping_at(steps, how):
    class StopAt(TrainingClock):
        def _on_step(self):
            if self.num_timesteps == steps:
                if how == "signal":
                    os.kill(os.getpid(), signal.SIGTERM)
                else:
                    raise Killed
            return True

    return StopAt


def weights(path):
    with zipfile.ZipFile(path) as archive:
        return torch.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)


def rows(run):
    """progress.csv without its clock readings."""
    with open(run / "tensorboard" / "progress.csv", newline="") as file:
        return [
            {k: v for k, v in row.items() if k not in ("time/fps", "time/time_elapsed")}
            for row in csv.DictReader(file)
        ]


def outcome(run):
    return (
        weights(run / "final_model.zip"),
        rows(run),
        json.loads((run / "evaluations.json").read_text()),
    )


def assert_same(a, b):
    (weights_a, rows_a, evaluations_a), (weights_b, rows_b, evaluations_b) = a, b
    assert weights_a.keys() == weights_b.keys()
    for key in weights_a:
        assert torch.equal(weights_a[key], weights_b[key]), key
    assert rows_a == rows_b
    assert evaluations_a == evaluations_b


_UNINTERRUPTED = {}


@pytest.fixture
def uninterrupted(tmp_path_factory, train_config):
    """``uninterrupted(algo)``: the outcome of the whole run (each run once per session)."""

    def get(algo):
        if algo not in _UNINTERRUPTED:
            run = tmp_path_factory.mktemp(algo) / "run"
            train(train_config(*ALGOS[algo], f"total_timesteps={TOTAL}"), run)
            _UNINTERRUPTED[algo] = outcome(run)
        return _UNINTERRUPTED[algo]

    return get


def stop_and_resume(train_config, run, algo, steps, how, monkeypatch):
    cfg = train_config(*ALGOS[algo], f"total_timesteps={TOTAL}")
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "TrainingClock", stopping_at(steps, how))
        with pytest.raises(RunStopped if how == "signal" else Killed):
            train(cfg, run)
    given = [f"resume={run}"]
    train(resume_config(train_config(*given), given), run, resume=True)


@pytest.mark.parametrize(
    "algo, steps, how",
    [
        ("ppo", 40, "signal"),  # mid-rollout: the rollout is finished and trained on first
        ("ppo", 64, "signal"),  # the last step of a rollout, before training on it
        ("ppo", 100, "kill"),  # killed mid-rollout: resumed from the 64-step checkpoint
        ("a2c", 74, "signal"),
        ("a2c", 130, "kill"),
        ("dqn", 50, "signal"),
        ("dqn", 70, "kill"),
        ("dqn", 150, "signal"),
        ("device-ppo", 40, "signal"),
        ("device-ppo", 64, "signal"),
        ("device-ppo", 100, "kill"),
        # the episode costs in progress at the checkpoint are counted again as the steps replay
        ("lagrangian", 100, "kill"),
        ("device-lagrangian", 40, "signal"),
        # killed in AUP's second phase: resumed from the 128-step checkpoint and the auxiliary model
        ("aup", 150, "kill"),
        ("device-aup", 150, "kill"),
    ],
)
def test_a_stopped_or_killed_run_resumes_bit_for_bit(
    tmp_path, train_config, uninterrupted, monkeypatch, algo, steps, how
):
    run = tmp_path / "run"
    stop_and_resume(train_config, run, algo, steps, how, monkeypatch)
    assert_same(outcome(run), uninterrupted(algo))


def test_checkpoints_land_on_rollout_boundaries_with_their_record(tmp_path, train_config):
    train(train_config("total_timesteps=96", "callbacks.checkpoint.save_every=40"), tmp_path)
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert saved == ["model_64_steps.zip", "model_96_steps.zip"]  # rollouts of 32 steps
    with zipfile.ZipFile(tmp_path / "checkpoints" / "model_64_steps.zip") as archive:
        actions = np.load(io.BytesIO(archive.read(ACTIONS_ENTRY)), allow_pickle=False)
        state = json.loads(archive.read(STATE_ENTRY))
    assert actions.shape == (32, 2) and state["steps"] == 64 and state["rollouts"] == 2


def test_a_damaged_record_is_refused_in_one_line(tmp_path, train_config, monkeypatch):
    run = tmp_path / "run"
    cfg = train_config(f"total_timesteps={TOTAL}")
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "TrainingClock", stopping_at(40, "signal"))
        with pytest.raises(RunStopped, match="at 64 steps"):
            train(cfg, run)
    path = run / "checkpoints" / "model_64_steps.zip"
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    actions = np.full((32, 2), 99, np.int64)  # not actions of SafeLife's 9
    stream = io.BytesIO()
    np.save(stream, actions)
    entries[ACTIONS_ENTRY] = stream.getvalue()
    # with the digest made anew (as whoever crafts a record can), the actions are still checked
    state = json.loads(entries[STATE_ENTRY])
    state[DIGEST_KEY] = digest(entries[ACTIONS_ENTRY], entries[STARTS_ENTRY], state)
    entries[STATE_ENTRY] = json.dumps(state).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    given = [f"resume={run}"]
    with pytest.raises(UserError, match="actions outside Discrete"):
        train(resume_config(train_config(*given), given), run, resume=True)
