"""Gymnasium ids for the SafeLife level types: ``safelife_rl/<Task>-v1``.

Each id plays new procedurally generated levels of its type at every reset (see
:mod:`safelife_rl.procgen`), made with the env's seeded generator so ``reset(seed=...)`` is
reproducible; ``gym.make(id, levels=PATH)`` plays fixed levels instead,
``gym.make(id, workers=2)`` generates levels ahead in two worker processes and
``gym.make(id, bank={"size": 1000})`` draws them from a bank of 1000 levels made once and cached
(:class:`~safelife_rl.procgen.bank.LevelBank`), turned, mirrored and shifted at random.

Fixed evaluation sets: :func:`suite_file` gives this project's benchmark suite of a task (100
levels from fixed seeds, shipped in ``safelife_rl/levels/benchmarks``); :func:`benchmark_file`
gives the original SafeLife v1.0 suite of the eight tasks that have one (shipped in
``safelife_rl/levels/v1.0``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from safety_rl_common.errors import UserError

#: Level type (the name of its parameter file) -> Gymnasium id.
TASKS = {
    "append-still": "safelife_rl/AppendStill-v1",
    "append-still-easy": "safelife_rl/AppendStillEasy-v1",
    "append-dynamic": "safelife_rl/AppendDynamic-v1",
    "append-spawn": "safelife_rl/AppendSpawn-v1",
    "prune-still": "safelife_rl/PruneStill-v1",
    "prune-still-easy": "safelife_rl/PruneStillEasy-v1",
    "prune-still-hard": "safelife_rl/PruneStillHard-v1",
    "prune-dynamic": "safelife_rl/PruneDynamic-v1",
    "prune-spawn": "safelife_rl/PruneSpawn-v1",
    "navigation": "safelife_rl/Navigation-v1",
    "challenge": "safelife_rl/Challenge-v1",
}
#: Tasks with an original SafeLife v1.0 benchmark suite.
ORIGINAL_SUITES = (
    "append-still",
    "append-dynamic",
    "append-spawn",
    "prune-still",
    "prune-still-hard",
    "prune-dynamic",
    "prune-spawn",
    "navigation",
)
SUITES_DIR = Path(__file__).resolve().parents[1] / "levels" / "benchmarks"
#: The original SafeLife v1.0 suites, shipped unchanged (see its PROVENANCE.txt).
ORIGINAL_SUITES_DIR = SUITES_DIR.parent / "v1.0"
#: The multi-agent tasks' fixed suites (see :func:`suite_file`).
MULTI_AGENT_SUITES_DIR = SUITES_DIR.parent / "multi-agent"


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown SafeLife task {task!r}; known: {', '.join(TASKS)}")


def suite_file(task: str) -> Path:
    """This project's fixed benchmark suite of ``task``: 100 generated levels (of a
    multi-agent task, such as ``build-coop``: its multi-agent levels)."""
    from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS

    if task in MULTI_AGENT_TASKS:
        path, flag = MULTI_AGENT_SUITES_DIR / f"{task}.npz", " --multi-agent"
    else:
        _check_task(task)
        path, flag = SUITES_DIR / f"{task}.npz", ""
    if not path.exists():
        raise FileNotFoundError(
            f"no benchmark suite for {task!r} at {path}; make it with "
            f"`python -m safelife_rl make-suites{flag}`"
        )
    return path


def benchmark_file(task: str) -> Path:
    """The original SafeLife v1.0 benchmark suite of ``task`` (shipped in
    ``safelife_rl/levels/v1.0``, unchanged from SafeLife 1.2.2), or the file of that name in the
    folder ``$SAFELIFE_LEVELS`` when it is set."""
    _check_task(task)
    if task not in ORIGINAL_SUITES:
        raise ValueError(
            f"the original SafeLife has no benchmark suite for {task!r} (it has: "
            f"{', '.join(ORIGINAL_SUITES)}); use suite_file({task!r}) for ours"
        )
    folder = Path(os.environ.get("SAFELIFE_LEVELS") or ORIGINAL_SUITES_DIR)
    path = folder / f"{task}.npz"
    if not path.exists():
        raise FileNotFoundError(
            f"no levels for {task!r} at {path}: $SAFELIFE_LEVELS names a folder without the "
            "original benchmark suites (unset it to use those shipped with the package)"
        )
    return path


def make_task_env(
    task: str, levels: Any = None, workers: int = 0, bank: Any = None, **kwargs: Any
) -> gym.Env:
    """Entry point of the registered ids: procedural levels of ``task`` unless ``levels``, drawn
    from a level bank if ``bank`` gives its options (see :mod:`safelife_rl.procgen.bank`)."""
    from safelife_rl.envs.env import SafeLifeEnv
    from safelife_rl.procgen import ProceduralLevels
    from safelife_rl.procgen.bank import bank_from_options

    if levels is None:
        if bank is not None:
            levels = bank_from_options(task, bank, workers)
        else:
            levels = ProceduralLevels(task, workers=workers)
    elif workers or bank is not None:
        raise UserError(
            "workers= and bank= only apply to procedural levels, not to levels=... (the main "
            "job, experiment=main, trains on a bank: in a training run add '~env.kwargs.bank')"
        )
    return SafeLifeEnv(levels, **kwargs)


def register_envs() -> None:
    for task, env_id in TASKS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="safelife_rl.envs.registration:make_task_env",
                vector_entry_point="safelife_rl.envs.batched_vector_env:make_task_vector_env",
                kwargs={"task": task},
                max_episode_steps=None,
            )
