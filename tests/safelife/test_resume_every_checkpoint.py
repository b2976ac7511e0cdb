"""Exact resume at every checkpoint: a run with periodic evaluations, cut after any of its
checkpoints (before, at and after each evaluation, or before its first) and resumed, writes
every file the uninterrupted run writes, the same: its checkpoints and final model, progress
rows, TensorBoard scalars, periodic and final evaluations, and the benchmark of its final
model. So does a population resumed together, and each of its members resumed on its own."""

from __future__ import annotations

import io
import json
import random
import shutil
import zipfile
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from omegaconf import open_dict

from safelife_rl.apps.reproduce.job import benchmark
from safelife_rl.apps.train import resume_config
from safelife_rl.training.callbacks import checkpoint_steps, checkpoints
from safelife_rl.training.evaluation import own_streams
from safelife_rl.training.population.runs import train_population
from safelife_rl.training.run import train
from tests.safelife.conftest import config, scalars
from tests.safelife.test_exact_resume import rows

TOTAL = 128
# rollouts of 32 steps (2 envs x 16): checkpoints at 32, 64 and 96 and the final model at 128;
# evaluations at 48 (mid-rollout: after the checkpoint of 32, before that of 64), at 96 (the
# rollout's last step: before the checkpoint of 96) and the final one at 128
SHORT = [
    f"total_timesteps={TOTAL}",
    "callbacks.checkpoint.save_every=32",
    "callbacks.evaluation.eval_every=48",
]
CUTS = [0, 32, 64, 96]  # 0: killed before its first checkpoint, so it starts over
DEVICE = ["vec_env=device", "env.kwargs.bank={size:4,progress:false}"]
#: entries of a saved model that hold no clock reading (SB3's ``data`` holds its start time):
#: torch's, compared as the tensors they hold, and the rollout record's, byte for byte
TENSOR_ENTRIES = ("policy.pth", "policy.optimizer.pth", "pytorch_variables.pth")
RECORD_ENTRIES = (
    "rollout_actions.npy",
    "rollout_starts.npy",
    "rollout_state.json",
    "run_config.yaml",
)


def exactly(value: Any) -> Any:
    """``value`` with each tensor as its dtype, shape and bytes (equal: bit for bit)."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, tuple(value.shape), value.numpy().tobytes())
    if isinstance(value, dict):
        return {key: exactly(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [exactly(item) for item in value]
    return value


def model_entries(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        entries = {e: archive.read(e) for e in RECORD_ENTRIES}
        for name in TENSOR_ENTRIES:
            saved = torch.load(io.BytesIO(archive.read(name)), weights_only=True)
            entries[name] = exactly(saved)
    return entries


def written(run: Path) -> dict[str, Any]:
    """Everything ``run`` wrote that an exact resume must write the same (clock readings left
    out)."""
    files: dict[str, Any] = {}
    for path in [*checkpoints(run / "checkpoints"), run / "final_model.zip"]:
        files[str(path.relative_to(run))] = model_entries(path)
    summary = json.loads((run / "evaluation.json").read_text())
    summary.pop("steps_per_second", None)  # a clock reading (a population's summary has none)
    summary.pop("population", None)  # how it trained: its members resume alone too
    tensorboard = {
        tag: [(e.step, e.value) for e in events]
        for tag, events in scalars(run / "tensorboard").items()
        if not (tag.startswith("time/") or tag == "final/steps_per_second")
    }
    return {
        **files,
        "config.yaml": (run / "config.yaml").read_text(),
        "progress.csv": rows(run),
        "tensorboard": tensorboard,
        "evaluations.json": json.loads((run / "evaluations.json").read_text()),
        "evaluation.json": summary,
        # as JSON: NaN where a level has no yellow life
        "benchmark": json.dumps(benchmark(run, "append-still", "ours", 2, 1, 30, "cpu")),
    }


def cut(run: Path, steps: int, copy: Path) -> Path:
    """``copy``: ``run`` as a run killed after saving its checkpoint of ``steps`` steps would
    have left it (``0``: before its first), with what it logged and evaluated after it."""
    shutil.copytree(run, copy)
    for path in checkpoints(copy / "checkpoints"):
        if checkpoint_steps(path) > steps:
            path.unlink()
    for name in ("final_model.zip", "evaluation.json", "learning_curve.png"):
        (copy / name).unlink()
    return copy


def assert_same(resumed: dict[str, Any], expected: dict[str, Any]) -> None:
    assert resumed.keys() == expected.keys()
    for key in expected:  # one file at a time: a failure names it
        assert resumed[key] == expected[key], key


def resume_alone(run: Path) -> None:
    """``safelife-rl train resume=RUN``."""
    given = [f"resume={run}"]
    train(resume_config(config(*given), given), run, resume=True)


def population_configs() -> list:
    cfgs = []
    for k in range(2):
        cfg = config(*DEVICE, *SHORT)
        with open_dict(cfg):
            cfg.seed = k
            cfg.wrappers.side_effect_penalty.penalty = 0.1 * k
        cfgs.append(cfg)
    return cfgs


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    run = tmp_path_factory.mktemp("single") / "run"
    train(config(*SHORT), run)
    return run, written(run)


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> tuple[list[Path], list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("population")
    folders = [out / "a", out / "b"]
    train_population(population_configs(), folders)
    return folders, [written(folder) for folder in folders]


def test_the_runs_evaluate_between_their_checkpoints(single):
    run, _ = single
    assert [checkpoint_steps(p) for p in checkpoints(run / "checkpoints")] == [32, 64, 96, 128]
    evaluated = json.loads((run / "evaluations.json").read_text())
    assert [e["step"] for e in evaluated] == [48, 96, 128]


@pytest.mark.parametrize("steps", CUTS)
def test_a_run_resumed_at_any_checkpoint_writes_what_it_would_have(single, tmp_path, steps):
    run, expected = single
    resumed = cut(run, steps, tmp_path / "run")
    resume_alone(resumed)
    assert_same(written(resumed), expected)


@pytest.mark.parametrize("steps", CUTS[1:])  # resumed together from a checkpoint they share
def test_a_population_resumed_at_any_checkpoint_writes_what_it_would_have(
    population, tmp_path, steps
):
    folders, expected = population
    resumed = [cut(folder, steps, tmp_path / folder.name) for folder in folders]
    train_population(population_configs(), resumed, resume=True)
    for folder, files in zip(resumed, expected):
        assert_same(written(folder), files)


@pytest.mark.parametrize("steps", CUTS)
def test_a_member_resumed_alone_at_any_checkpoint_writes_what_it_would_have(
    population, tmp_path, steps
):
    """A member's folder resumed as a single run (``vec_env=device``) ends as the member ended
    in the population, evaluations included."""
    folders, expected = population
    resumed = cut(folders[1], steps, tmp_path / "b")
    resume_alone(resumed)
    assert_same(written(resumed), expected[1])


def test_what_an_evaluation_draws_depends_on_its_seed_alone():
    """:func:`own_streams`: the same draws whatever the run drew before, and the run's streams
    (torch's, NumPy's, Python's, the action space's) as they were after it."""
    space = gymnasium.spaces.Discrete(9)

    def draws():
        with own_streams(7, torch.device("cpu"), space):
            return (
                torch.rand(3).tolist(),
                np.random.rand(3).tolist(),
                random.random(),
                int(space.sample()),
            )

    def streams():
        return torch.get_rng_state(), np.random.get_state()[1], random.getstate(), space.sample()

    first = draws()
    torch.rand(5), np.random.rand(5), random.random(), space.sample()  # the run draws on
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    space.seed(1)
    expected = streams()
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    space.seed(1)
    assert draws() == first
    after = streams()
    assert torch.equal(after[0], expected[0]) and np.array_equal(after[1], expected[1])
    assert after[2:] == expected[2:]
