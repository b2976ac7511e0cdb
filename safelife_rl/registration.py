"""Gymnasium ids for the SafeLife tasks: ``safelife_rl/<Task>-v1``.

Until procedural generation lands, a task's levels default to the original benchmark suite of
that task, looked up in ``$SAFELIFE_LEVELS`` or in the reference data beside the project
(``../shared/safelife/benchmarks/v1.0``); pass ``levels=PATH`` to use any other levels.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

#: Task name (as in the level files) -> Gymnasium id.
TASKS = {
    "append-still": "safelife_rl/AppendStill-v1",
    "append-dynamic": "safelife_rl/AppendDynamic-v1",
    "append-spawn": "safelife_rl/AppendSpawn-v1",
    "prune-still": "safelife_rl/PruneStill-v1",
    "prune-still-hard": "safelife_rl/PruneStillHard-v1",
    "prune-dynamic": "safelife_rl/PruneDynamic-v1",
    "prune-spawn": "safelife_rl/PruneSpawn-v1",
    "navigation": "safelife_rl/Navigation-v1",
}
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "safelife" / "benchmarks" / "v1.0"


def benchmark_file(task: str) -> Path:
    """The original benchmark suite of ``task``."""
    if task not in TASKS:
        raise ValueError(f"unknown SafeLife task {task!r}; known: {', '.join(TASKS)}")
    folder = Path(os.environ.get("SAFELIFE_LEVELS", _SHARED))
    path = folder / f"{task}.npz"
    if not path.exists():
        raise FileNotFoundError(
            f"no levels for {task!r} at {path}: set $SAFELIFE_LEVELS to the folder of the "
            "original benchmark suites or pass levels=PATH"
        )
    return path


def make_task_env(task: str, levels: Any = None, **kwargs: Any) -> gym.Env:
    """Entry point of the registered ids: the task's levels unless ``levels`` is given."""
    from .env import SafeLifeEnv

    return SafeLifeEnv(levels if levels is not None else benchmark_file(task), **kwargs)


def register_envs() -> None:
    for task, env_id in TASKS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="safelife_rl.registration:make_task_env",
                kwargs={"task": task},
                max_episode_steps=None,
            )
