"""YAML that expands through aliases ("billion laughs"), nests thousands deep or is huge is
refused in one line wherever the toolkit reads YAML it did not write this run: a run's
config.yaml, a model's embedded config, a level type's parameter file (a user's ``conf/``:
tests/test_unnamed_conf.py)."""

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
from safety_rl_common.yaml_files import expanded_size, load_yaml, nesting_depth, read_yaml

#: 100,000 levels of lists: Python's stack ends a recursive reader near a thousand.
DEEP = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"


def huge(megabytes: int = 3) -> str:
    """Plain YAML past the size limit (1 MiB by default)."""
    return "".join(f"key{i}: {i}\n" for i in range(megabytes * 80_000))


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


@pytest.mark.parametrize(("text", "depth"), [("1", 0), ("[1]", 1), ("a: {b: [1, {c: 2}]}", 4)])
def test_nesting_depth_counts_mappings_and_lists(text, depth):
    assert nesting_depth(text, "x.yaml") == depth


def test_deep_nesting_is_refused_before_any_recursion(monkeypatch):
    with pytest.raises(UserError, match=r"x.yaml: its YAML nests deeper than 64 levels; .*DEPTH"):
        load_yaml(DEEP, "x.yaml")
    assert load_yaml("a: " + "[" * 63 + "]" * 63, "x.yaml")  # a mapping and 63 lists: read
    monkeypatch.setenv("SAFELIFE_MAX_YAML_DEPTH", "3")
    with pytest.raises(UserError, match="deeper than 3 levels"):
        load_yaml("a: {b: [1, {c: 2}]}", "x.yaml")


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(huge())
    monkeypatch.setattr(yaml, "safe_load", lambda *_: pytest.fail("parsed"))
    with pytest.raises(UserError, match=r"big.yaml: its YAML is \d+ KiB, over the limit of 1024"):
        read_yaml(path)
    monkeypatch.setenv("SAFELIFE_MAX_YAML_KB", "1")
    with pytest.raises(UserError, match="SAFELIFE_MAX_YAML_KB"):
        load_yaml("a: " + "x" * 2000, "x.yaml")


def test_a_file_that_is_not_utf8_or_not_a_file_is_refused(tmp_path):
    (tmp_path / "latin.yaml").write_bytes(b"a: \xe9\n")
    with pytest.raises(UserError, match="latin.yaml: not UTF-8 text"):
        read_yaml(tmp_path / "latin.yaml")
    with pytest.raises(UserError, match="not a regular file"):
        read_yaml(tmp_path)


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


@pytest.mark.parametrize(
    ("text", "said"),
    [(bomb(), "aliases expanded"), (DEEP, "nests deeper"), (huge(), "over the limit of 1024")],
)
def test_a_bad_parameter_file_is_refused(tmp_path, text, said):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError, match=said):
        load_params(path)


@pytest.mark.parametrize("where", ["resume", "benchmark"])
@pytest.mark.parametrize(
    ("text", "said"),
    [(bomb(), "aliases expanded"), (DEEP, "nests deeper"), (huge(), "over the limit of 1024")],
)
def test_the_commands_refuse_a_bad_config_in_one_line(tmp_path, where, text, said):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(text)
    with zipfile.ZipFile(run / "final_model.zip", "w") as archive:
        archive.writestr("data", '{"clip_range": 0.2}')  # what tells a PPO model
        archive.writestr(CONFIG_ENTRY, text)
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
    assert said in lines[-1] and "Traceback" not in done.stderr, done.stderr
