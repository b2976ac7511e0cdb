"""A ``conf/`` folder the user never named runs nothing (docs/security.md): the folder a command
runs from may hold anyone's configs (a cloned repository of someone else's experiments, a
shared drive). Its files only add names: one named like a package option, of the package's
files or of Hydra's ConfigStore, is never read, so its ``_target_`` is never instantiated; and
a file of it that the user does select is read through the bounded YAML reader, so a bomb, deep
nesting or a huge file ends the command in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import safelife_rl.training  # noqa: F401  (the ConfigStore's options: train_schema, env=TASK)
from hydra_plugins.safety_rl_toolkit.user_conf import ENV_VAR

#: A ``_target_`` of each kind that would run code or touch files if instantiated: pickles,
#: arrays with pickles, files opened for writing (the marker shows it ran).
TARGETS = {
    "torch.load": {"_target_": "torch.load", "f": "evil.pkl", "weights_only": False},
    "numpy.load": {"_target_": "numpy.load", "file": "evil.npy", "allow_pickle": True},
    "builtins.open": {"_target_": "builtins.open", "file": "MARKER", "mode": "w"},
}
#: Names the package has, files (``algo/ppo``, drest's ``agent/reinforce``) and ConfigStore
#: options (``env/<task>``, ``train_schema``), each shadowed with a config naming a target where
#: the package's config would instantiate it.
SHADOWS = {
    "env/prune-still.yaml": ("env", "kwargs", "levels"),
    "env/append-still.yaml": ("env", "kwargs", "levels"),
    "train_schema.yaml": ("env", "kwargs", "levels"),
    "algo/ppo.yaml": ("policy_kwargs",),
    "agent/reinforce.yaml": ("optimizer",),
}
#: 250 bytes of aliases that expand to 4**12 nodes.
BOMB = "n0: &n0 [x, x, x, x]\n" + "".join(
    f"n{i}: &n{i} [*n{i - 1}, *n{i - 1}, *n{i - 1}, *n{i - 1}]\n" for i in range(1, 12)
)
DEEP = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
HUGE = "".join(f"key{i}: {i}\n" for i in range(200_000))


def hostile_conf(folder: Path, target: str) -> Path:
    """A ``conf/`` in ``folder`` shadowing every name of :data:`SHADOWS` with ``target``, the
    shadowing files also as bombs elsewhere, and selectable experiments that are bad YAML."""
    marker = folder / "MARKER"
    shape = dict(TARGETS[target], **({"file": str(marker)} if target == "builtins.open" else {}))
    for name, keys in SHADOWS.items():
        path = folder / "conf" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        config: dict = shape
        for key in reversed(keys[1:] if name.startswith("env/") else keys):
            config = {key: config}
        path.write_text(yaml.safe_dump(config))
    experiments = folder / "conf" / "experiment"
    experiments.mkdir()
    for name, text in {"bomb": BOMB, "deep": DEEP, "huge": HUGE}.items():
        (experiments / f"{name}.yaml").write_text("# @package _global_\n" + text)
    return marker


def composed(module: str, config: str, overrides: list[str]) -> dict:
    with initialize_config_module(module, version_base=None):
        return OmegaConf.to_container(compose(config, overrides=overrides))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("module", "config", "overrides"),
    [
        ("safelife_rl.conf", "train", []),
        ("safelife_rl.conf", "train", ["env=append-still"]),
        ("drest.conf", "train", []),
    ],
)
def test_a_folder_never_shadows_a_package_option(
    target, module, config, overrides, tmp_path, monkeypatch
):
    marker = hostile_conf(tmp_path, target)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_VAR, "")
    alone = composed(module, config, overrides)
    monkeypatch.delenv(ENV_VAR)
    assert composed(module, config, overrides) == alone
    assert "_target_: " + target not in OmegaConf.to_yaml(alone)
    assert not marker.exists()


def test_the_folder_still_adds_new_names(tmp_path, monkeypatch):
    hostile_conf(tmp_path, "builtins.open")
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ntotal_timesteps: 1234\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert composed("safelife_rl.conf", "train", ["experiment=mine"])["total_timesteps"] == 1234


def _command(folder: Path, *argv: str, variable: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if variable is not None:
        env[ENV_VAR] = variable
    return subprocess.run(
        [sys.executable, "-m", "safelife_rl", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
        env=env,
    )


def test_the_command_composes_as_without_the_folder(tmp_path):
    marker = hostile_conf(tmp_path, "builtins.open")
    shown = _command(tmp_path, "train", "--cfg", "job")
    alone = _command(tmp_path, "train", "--cfg", "job", variable="")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == alone.stdout and "_target_: builtins.open" not in shown.stdout
    assert not marker.exists()


@pytest.mark.parametrize(
    ("experiment", "said"),
    [
        ("bomb", "bomb.yaml: its YAML, aliases expanded, is 29826169 nodes, over the limit"),
        ("deep", "deep.yaml: its YAML nests deeper than 64 levels"),
        ("huge", "huge.yaml: its YAML is"),
    ],
)
def test_a_bad_file_the_user_selects_ends_in_one_line(tmp_path, experiment, said):
    hostile_conf(tmp_path, "builtins.open")
    done = _command(tmp_path, "train", f"experiment={experiment}", "--cfg", "job")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
