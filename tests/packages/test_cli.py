"""One command line per package: ``safelife-rl``, ``drest`` and ``extended-envs`` list their
subcommands in plain text under the name typed, hand each its own arguments, refuse an unknown
one with one line, and every command's ``main`` returns an exit status."""

import importlib
import inspect
import os
import subprocess
import sys

import pytest

from drest.apps import cli as drest_cli
from drest.apps import train as drest_train
from extended_envs.apps import cli as extended_envs_cli
from safety_rl_common.cli import program_name
from safety_rl_common.errors import plain_text

CLIS = [
    (drest_cli, "drest", ["train", "reproduce", "generalise"]),
    (extended_envs_cli, "extended-envs", ["benchmark", "debate", "reproduce"]),
]


@pytest.mark.parametrize("cli, prog, commands", CLIS)
def test_help_lists_every_subcommand(cli, prog, commands, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {prog} ")
    assert list(cli.COMMANDS) == commands and all(f"    {c} " in out for c in commands)


@pytest.mark.parametrize("cli, prog, commands", CLIS)
def test_an_unknown_subcommand_is_one_line_and_status_2(cli, prog, commands, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["nope"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(f"{prog}: error: argument command: invalid choice")


@pytest.mark.parametrize("package", ["drest", "extended_envs"])
def test_reproduce_gets_its_own_flags_under_python_m(package):
    done = subprocess.run(
        [sys.executable, "-m", package, "reproduce", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "--out" in done.stdout


PACKAGES = [("safelife_rl", "safelife-rl"), ("drest", "drest"), ("extended_envs", "extended-envs")]


@pytest.mark.parametrize("package, script", PACKAGES)
def test_help_is_plain_text_under_the_name_typed(package, script):
    """``python -m PACKAGE --help`` names itself so, and shows no reStructuredText markup."""
    done = subprocess.run(
        [sys.executable, "-m", package, "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m {package} ")
    assert f"{script} COMMAND" in done.stdout
    assert "``" not in done.stdout and ":mod:" not in done.stdout


@pytest.mark.parametrize("package, script", PACKAGES)
def test_the_program_is_named_as_started(package, script, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"/venv/bin/{script}"])
    assert program_name(package, script) == script
    monkeypatch.setattr(sys, "argv", [f"/src/{package}/__main__.py"])
    assert program_name(package, script) == f"python -m {package}"
    monkeypatch.setattr(sys, "argv", ["/src/other/__main__.py"])
    assert program_name(package, script) == script


def test_plain_text_drops_the_markup_of_docstrings():
    text = (
        "``drest train`` runs :func:`~drest.apps.train.run` of :mod:`drest.apps.train`, "
        ":class:`UserError`. Usage::"
    )
    assert plain_text(text) == "drest train runs run of drest.apps.train, UserError. Usage:"
    assert plain_text(None) is None


def command_modules() -> list[str]:
    from safelife_rl.apps.cli import DELEGATED

    return sorted(
        {
            c.module
            for cli in (DELEGATED, drest_cli.COMMANDS, extended_envs_cli.COMMANDS)
            for c in cli.values()
        }
        | {"safelife_rl.apps.reproduce.job"}
    )


@pytest.mark.parametrize("module", command_modules())
def test_every_command_main_returns_an_exit_status(module):
    """Every subcommand's ``main(argv)`` (Hydra apps included) is typed to return the status."""
    main = importlib.import_module(module).main
    assert list(inspect.signature(main).parameters) == ["argv"]
    assert inspect.signature(main).return_annotation == "int"


def test_a_hydra_app_returns_status_0(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the app is handed its overrides there
    assert drest_train.main(["--cfg", "job", "seed=7"]) == 0
    assert "seed: 7" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, named",
    [
        (
            ["safelife_rl", "train", "total_timesteps=nan"],
            "Error merging override total_timesteps=nan; Value 'nan' of type 'float' could not be "
            "converted to Integer; full_key: total_timesteps",
        ),
        (["safelife_rl", "train", "n_env=4"], "Could not override 'n_env'"),
        (
            ["safelife_rl", "train", "algo=sac"],
            "Could not find 'algo/sac'; Available options in 'algo':; a2c; dqn; ppo",
        ),
        (["drest", "train", "foo=1"], "Could not override 'foo'"),
        (["extended_envs", "benchmark", "foo=1"], "Could not override 'foo'"),
        (["extended_envs", "debate", "alice=["], "no viable alternative at input '['"),
    ],
)
def test_a_config_hydra_cannot_compose_is_one_line_and_status_2(argv, named, tmp_path):
    """Hydra's own report of a bad override (several lines, status 1) becomes one line; found by
    the audit (tests/reliability); HYDRA_FULL_ERROR=1 still shows the traceback."""
    command = [sys.executable, "-m", *argv, f"hydra.run.dir={tmp_path / 'run'}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    prog = f"python -m {argv[0]} {argv[1]}"
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"{prog}: error: {result.stderr.split(': error: ', 1)[1].strip()}"
    ], result.stderr
    assert named in result.stderr and not (tmp_path / "run").exists()
    if argv[1] == "train" and argv[0] == "safelife_rl":
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "HYDRA_FULL_ERROR": "1"},
        )
        assert result.returncode == 1 and "Traceback" in result.stderr
