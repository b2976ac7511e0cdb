"""The training app's ``env=`` options: one per SafeLife task, made from the task tables (no
file per task, no private base among the options), each naming its task's id and fixed suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS
from safelife_rl.envs.registration import TASKS, suite_file


@pytest.mark.parametrize("task", [*TASKS, *MULTI_AGENT_TASKS])
def test_every_task_is_an_env_option(task, train_config):
    multi = task in MULTI_AGENT_TASKS
    cfg = train_config(f"env={task}", *(["experiment=multi"] if multi else []))
    assert cfg.env.id == (MULTI_AGENT_TASKS[task] if multi else TASKS[task])
    assert cfg.env.eval_kwargs.levels == {
        "_target_": "safelife_rl.envs.registration.suite_file",
        "task": task,
    }
    assert suite_file(task).is_file()
    assert cfg.env.eval_kwargs.side_effects and not cfg.env.eval_kwargs.shuffle
    assert ("bank" in cfg.env.kwargs) != multi  # level banks are single-agent


def test_the_help_lists_every_task_and_no_private_base():
    out = subprocess.run(
        [sys.executable, "-m", "safelife_rl", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    env_line = next(line for line in out.splitlines() if line.startswith("env:"))
    options = {o.strip() for o in env_line.split(":", 1)[1].split(",")}
    assert {*TASKS, *MULTI_AGENT_TASKS} <= options
    assert not any(o.startswith("_") for o in options), options
