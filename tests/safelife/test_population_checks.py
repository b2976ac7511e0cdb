"""A population checks what a single run checks, before it launches: the memory it needs (saying
how many members fit), every member's settings, and the members' resume files (a rollout
record changed since it was saved, a member's config changed in how it trains), each refused
in one line with nothing written."""

from __future__ import annotations

import io
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from safelife_rl.apps.reproduce import cli
from safelife_rl.apps.train import resume_config
from safelife_rl.training.population import runs as population_runs
from safelife_rl.training.population.runs import check_population, train_population
from safelife_rl.training.rollout_record import ACTIONS_ENTRY
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError
from tests.safelife.conftest import config
from tests.safelife.test_population_runs import members
from tests.safelife.test_reproduce import one_line_error

QUICK = ["table1", "--quick", "--population", "--tasks", "prune-still"]


@pytest.fixture
def not_launched(monkeypatch):
    monkeypatch.setattr(cli, "launch", lambda *args, **kwargs: pytest.fail("launched"))


def test_a_population_the_memory_cannot_hold_is_refused_before_launching(
    tmp_path, capsys, monkeypatch, not_launched
):
    """``algo.n_steps=10000000``: a single run refuses its rollout buffer; the population's
    estimate refuses the sweep before any job starts (it launched, and a job then tried to
    allocate 173 GB for its first member's buffer)."""
    monkeypatch.setattr(population_runs, "free_memory", lambda device: 2**30)
    out = tmp_path / "out"
    err = one_line_error([*QUICK, "--out", str(out), "algo.n_steps=10000000"], capsys)
    assert re.search(
        r"the job of prune-still, penalty 0.0: a population of 2 needs about [\d.]+ GiB on cpu, "
        r"which has 1.0 GiB free: at most about 0 members fit",
        err,
    )
    assert not out.exists()


def test_the_estimate_says_how_many_members_fit(train_config, monkeypatch):
    cfg = members(train_config, count=1)[0]
    args = (cfg, 4, *_spaces_and_board(cfg))
    need = population_runs.population_bytes(*args)
    monkeypatch.setattr(population_runs, "free_memory", lambda device: need * 3 // 4)
    with pytest.raises(UserError, match=r"a population of 4 needs .* at most about 3 members fit"):
        population_runs.check_population_memory(*args)


def _spaces_and_board(cfg):
    from safelife_rl.training.envs import make_env

    env = make_env(cfg.env.id, {"view_shape": [17, 17], "time_limit": 30}, None)
    env.reset(seed=0)
    try:
        return env.observation_space, env.action_space, env.unwrapped.game.boards.shape[1:]
    finally:
        env.close()


@pytest.mark.parametrize("value, shown", [("1e308", "1e+308"), ("2", "2")])
def test_a_learning_rate_past_1_is_refused_for_a_run_and_every_member(
    value, shown, train_config, tmp_path, capsys, not_launched
):
    """``1e308`` trained to NaN and ended the job with a traceback."""
    message = f"algo.learning_rate must be a positive number up to 1 (a learning rate), got {shown}"
    with pytest.raises(UserError, match=re.escape(message)):
        train(train_config(f"algo.learning_rate={value}", "total_timesteps=64"), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match=re.escape(message)):
        check_population(members(train_config, f"algo.learning_rate={value}"))
    err = one_line_error(
        [*QUICK, "--out", str(tmp_path / "out"), f"algo.learning_rate={value}"], capsys
    )
    assert message in err


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> list[Path]:
    """Two members stopped after their checkpoint of 64 steps."""
    folders = [tmp_path_factory.mktemp("population") / name for name in ("a", "b")]
    train_population(members(config, "total_timesteps=128"), folders)
    for folder in folders:
        (folder / "final_model.zip").unlink()
        (folder / "checkpoints" / "model_128_steps.zip").unlink()
    return folders


def copies(folders: list[Path], tmp_path: Path) -> list[Path]:
    return [Path(shutil.copytree(f, tmp_path / f.name)) for f in folders]


def contents(folders: list[Path]) -> dict[str, bytes]:
    """Every file of the folders but their locks, by path."""
    return {
        str(path): path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "train.lock"
    }


def tamper_actions(checkpoint: Path) -> None:
    """Each recorded action moved to the next of SafeLife's 9: in range, other steps."""
    with zipfile.ZipFile(checkpoint) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    actions = np.load(io.BytesIO(entries[ACTIONS_ENTRY]), allow_pickle=False)
    stream = io.BytesIO()
    np.save(stream, (actions + 1) % 9)
    entries[ACTIONS_ENTRY] = stream.getvalue()
    with zipfile.ZipFile(checkpoint, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)


def test_tampered_actions_are_refused_in_one_line_with_nothing_written(population, tmp_path):
    """In-range actions replayed without complaint and trained other weights; the record's
    digest refuses them, for the members resumed together and for one resumed alone."""
    folders = copies(population, tmp_path)
    tamper_actions(folders[1] / "checkpoints" / "model_64_steps.zip")
    before = contents(folders)
    message = r"model_64_steps.zip: its rollout record does not match the digest the run saved"
    with pytest.raises(UserError, match=message):
        train_population(members(config, "total_timesteps=128"), folders, resume=True)
    given = [f"resume={folders[1]}"]
    with pytest.raises(UserError, match=message):
        train(resume_config(config(*given), given), folders[1], resume=True)
    assert contents(folders) == before


def test_a_member_whose_config_changed_how_it_trains_is_refused(population, tmp_path):
    """``vec_env: device`` -> ``subproc`` in a member's config.yaml resumed it with SB3's PPO
    in place of DevicePPO, the algorithm it trained with."""
    (folder,) = copies(population[1:], tmp_path)
    saved = yaml.safe_load((folder / "config.yaml").read_text())
    saved["vec_env"] = "subproc"
    (folder / "config.yaml").write_text(yaml.safe_dump(saved))
    before = contents([folder])
    given = [f"resume={folder}"]
    with pytest.raises(UserError, match=r"in vec_env \('device' -> 'subproc', which trains with"):
        train(resume_config(config(*given), given), folder, resume=True)
    assert contents([folder]) == before
