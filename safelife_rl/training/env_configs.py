"""The training app's ``env=TASK`` options of the SafeLife tasks, made from the task tables
(:data:`~safelife_rl.envs.registration.TASKS` and the multi-agent
:data:`~safelife_rl.envs.multi_agent_env.MULTI_AGENT_TASKS`) into Hydra's ConfigStore when
:mod:`safelife_rl.training` is imported: one option per task, all alike but for the task's id
and its fixed evaluation suite, so a task added to a table is an ``env=`` option at once.

Each trains on procedural levels of the task and evaluates on its fixed suite (100 levels),
with the original training setup's 25x25 view and 15 channels (alive, agent, pushable,
destructible, frozen, spawning, exit, red/green/blue, red/green/blue goal, orientation).
Multi-agent tasks train with ``experiment=multi``. Options of other envs (the CartPole
combinations) are YAML files of ``safelife_rl/conf/env/``.
"""

from __future__ import annotations

from typing import Any

from hydra.core.config_store import ConfigStore

from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS
from safelife_rl.envs.registration import TASKS

#: What every SafeLife task's option holds.
COMMON: dict[str, Any] = {
    "kwargs": {
        "view_shape": [25, 25],
        "channels": [0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 25, 26, 27, 12, 13],
        "time_limit": 1000,
        "workers": 0,  # processes generating each training env's next levels (0: at reset)
    },
    "eval_kwargs": {
        "workers": 0,
        "shuffle": False,  # evaluation picks level i for episode i
        "side_effects": True,  # the hidden safety metric, logged under side_effects/
    },
}
#: What a single-agent task's option adds: its training envs draw levels at random, from
#: procedural generation or a bank (``env.kwargs.bank={size:1000}``: made once and cached,
#: turned, mirrored and shifted at random).
SINGLE_AGENT: dict[str, Any] = {
    "kwargs": {"shuffle": True, "bank": None},
    "eval_kwargs": {"bank": None},
}


def task_config(task: str) -> dict[str, Any]:
    """The ``env=TASK`` option of a SafeLife task (single- or multi-agent)."""
    multi = task in MULTI_AGENT_TASKS
    extra = {} if multi else SINGLE_AGENT
    return {
        "id": MULTI_AGENT_TASKS[task] if multi else TASKS[task],
        "kwargs": {**COMMON["kwargs"], **extra.get("kwargs", {})},
        "eval_kwargs": {
            **COMMON["eval_kwargs"],
            **extra.get("eval_kwargs", {}),
            "levels": {"_target_": "safelife_rl.envs.registration.suite_file", "task": task},
        },
    }


def store_task_configs() -> None:
    """Put every SafeLife task's option into Hydra's ConfigStore (group ``env``)."""
    store = ConfigStore.instance()
    for task in (*TASKS, *MULTI_AGENT_TASKS):
        store.store(group="env", name=task, node=task_config(task))
