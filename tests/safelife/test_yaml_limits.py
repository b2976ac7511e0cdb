"""YAML that expands through aliases ("billion laughs") is refused in one line wherever the
toolkit reads YAML it did not write this run: a run's config.yaml, a model's embedded config,
a level type's parameter file."""

from __future__ import annotations

import subprocess
import sys
import time
import zipfile

import pytest
import yaml

from safelife_rl.procgen.params import ParamsError, load_params
from safelife_rl.training.files import CONFIG_ENTRY
from safelife_rl.training.resume import load_run_config, trained_config
from safety_rl_common.errors import UserError
from safety_rl_common.yaml_files import expanded_size, load_yaml


def bomb(levels: int = 11) -> str:
    """About 250 bytes that expand to 4**(levels + 1) nodes."""
    names = [f"n{i}" for i in range(levels + 1)]
    lines = [f"{names[0]}: &{names[0]} [x, x, x, x]"]
    lines += [
        f"{new}: &{new} [*{old}, *{old}, *{old}, *{old}]" for old, new in zip(names, names[1:])
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text, size",
    [
        ("1", 1),
        ("[1, 2]", 3),
        ("a: [1, 2]", 5),
        ("a: &x [1, 2]\nb: *x", 9),
        ("a: &x [1, 2]\nb: [*x, *x]", 13),
    ],
)
def test_expanded_size_counts_aliases_as_copies(text, size):
    assert expanded_size(yaml.compose(text)) == size


def test_a_bomb_is_refused_at_once_and_the_limit_can_be_raised(monkeypatch):
    text = bomb(6)  # 4**7 + ... nodes, about 22,000
    assert len(text) < 300
    started = time.perf_counter()
    with pytest.raises(
        UserError,
        match=r"x.yaml: its YAML, aliases expanded, is \d+ nodes, over "
        r"the limit .* SAFELIFE_MAX_YAML_NODES",
    ):
        monkeypatch.setenv("SAFELIFE_MAX_YAML_NODES", "1000")
        load_yaml(text, "x.yaml")
    assert time.perf_counter() - started < 1
    monkeypatch.setenv("SAFELIFE_MAX_YAML_NODES", "100000")
    assert len(load_yaml(text, "x.yaml")) == 7
    with pytest.raises(UserError, match="over the limit of 100000"):
        load_yaml(bomb(), "x.yaml")


def test_a_run_folder_with_a_bomb_config_is_refused(tmp_path):
    (tmp_path / "config.yaml").write_text(bomb())
    with pytest.raises(UserError, match="config.yaml: its YAML, aliases expanded"):
        load_run_config(tmp_path)


def test_a_model_with_a_bomb_config_is_refused(tmp_path):
    model = tmp_path / "model.zip"
    with zipfile.ZipFile(model, "w") as archive:
        archive.writestr("data", "{}")
        archive.writestr(CONFIG_ENTRY, bomb())
    with pytest.raises(UserError, match=f"model.zip \\({CONFIG_ENTRY}\\): its YAML"):
        trained_config(model)


def test_a_bomb_parameter_file_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    with pytest.raises(ParamsError, match="aliases expanded"):
        load_params(path)


@pytest.mark.parametrize("where", ["resume", "benchmark"])
def test_the_commands_refuse_a_bomb_in_one_line(tmp_path, where):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(bomb())
    with zipfile.ZipFile(run / "final_model.zip", "w") as archive:
        archive.writestr("data", '{"clip_range": 0.2}')  # what tells a PPO model
        archive.writestr(CONFIG_ENTRY, bomb())
    argv = (
        ["train", f"resume={run}", f"hydra.run.dir={tmp_path / 'out'}"]
        if where == "resume"
        else [
            "benchmark",
            "append-still",
            "--policy",
            str(run / "final_model.zip"),
            "--levels",
            "1",
            "--episodes",
            "1",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-m", "safelife_rl", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert "aliases expanded" in lines[-1] and "Traceback" not in done.stderr, done.stderr
