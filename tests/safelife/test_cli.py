"""One command line for SafeLife: ``python -m safelife_rl COMMAND`` (the ``safelife-rl``
console script) lists every command and hands each its own arguments."""

import subprocess
import sys

import pytest

from safelife_rl.apps.cli import DELEGATED, main

ARGPARSE_COMMANDS = ("replay", "play", "play-multi", "random-run")


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in (*DELEGATED, *ARGPARSE_COMMANDS):
        assert f"    {command} " in out, command


@pytest.mark.parametrize("command", ["benchmark", "reproduce", "compare", "make-suites", "plots"])
def test_each_command_gets_its_own_arguments(command, capsys):
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


def test_train_runs_as_a_hydra_app_under_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "train", "--cfg", "job", "total_timesteps=7"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "total_timesteps: 7" in done.stdout


def test_a_user_error_of_a_delegated_command_is_one_line_and_status_2():
    done = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "plots", "no-such-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "python -m safelife_rl plots: error: no-such-run: not a training run (no tensorboard/ "
        "folder)"
    ]
