"""One run of a sweep (the reproduction's or the comparison's), the Hydra app that the sweep's
launcher runs for every task x penalty (or method) x seed: train the run in its folder (or
resume it from its newest checkpoint, or skip it when it is finished), then benchmark the
trained agent on its task's fixed suite as ``safelife_rl benchmark`` does (every level
``reproduce.episodes`` times, with side effects).

:mod:`safelife_rl.apps.reproduce.sweep` builds its command line; its config is the training
app's (``safelife_rl/conf/train.yaml``) with ``+reproduce.out``, ``+reproduce.axis`` (what the
runs of a task differ by: ``penalty`` or ``method``), ``+reproduce.suite`` (``v1.0``: the
original SafeLife v1.0 suite of the task, ``ours``: this project's), ``+reproduce.levels`` (the
suite's first N levels, ``null``: all), ``+reproduce.episodes`` and, optionally,
``+reproduce.cost_limit`` (the budget of the PPO-Lagrangian runs, which the other methods do not
take) added.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the train app, before torch loads

import contextlib
import copy
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import hydra
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from joblib import register_parallel_backend
from joblib.parallel import LokyBackend
from omegaconf import DictConfig, OmegaConf, open_dict

from safelife_rl.apps import train as _train_app  # noqa: F401  (registers the hydra_dir resolver of train.yaml)
from safelife_rl.apps.benchmark import SUITES, load_policy, run_suite, task_suite
from safelife_rl.apps.reproduce.runs import BENCHMARK_FILE, Run, is_finished, write_episodes
from safelife_rl.engine.level_files import load_levels
from safelife_rl.training.callbacks import RunStopped
from safelife_rl.training.gymnasium_vec_env import WorkerFailed
from safelife_rl.training.population.runs import (
    common_checkpoint,
    member_config,
    train_population,
)
from safelife_rl.training.resume import CONFIG_FILE, latest_model
from safelife_rl.training.run import report_worker_failure, train
from safety_rl_common.cli import run_hydra_app
from safety_rl_common.errors import REPORTED, UserError, hydra_app_errors
from safety_rl_common.workers import end_by_signal, exit_with_parent

PROG = "safelife-rl reproduce-job"
#: Lines a job prints about its run start with this, for the sweep's progress display.
MARK = "[run]"


def run_of(cfg: DictConfig, choices: Mapping[str, Any]) -> Run:
    """The run a job trains, from its config and Hydra's config-group choices."""
    if cfg.reproduce.axis == "method":
        variant: float | str = str(choices["method"])
    else:
        variant = float(cfg.wrappers.side_effect_penalty.penalty)
    return Run(choices["env"], variant, int(cfg.seed))


def training_config(cfg: DictConfig) -> DictConfig:
    """The run's training config: the job's without the reproduction's own settings (so a run
    folder moved elsewhere still resumes), with the sweep's PPO-Lagrangian budget if it has
    one and the run is PPO-Lagrangian's."""
    config = copy.deepcopy(cfg)
    budget = OmegaConf.select(cfg, "reproduce.cost_limit")
    with open_dict(config):
        if budget is not None and OmegaConf.select(cfg, "method.name") == "ppo_lagrangian":
            config.cost_limit = budget
        del config["reproduce"]
    return config


def benchmark(
    folder: Path,
    task: str,
    suite: str,
    levels: int | None,
    episodes: int,
    time_limit: int,
    device: str,
) -> list[dict]:
    """The run's final model on the first ``levels`` levels of ``task``'s ``suite`` (``v1.0``:
    the original SafeLife suite, ``ours``: this project's), its actions drawn from its policy as
    the original benchmark plays its PPO agents."""
    played = load_levels(task_suite(task, suite))[:levels]
    policy, settings = load_policy(str(folder / "final_model.zip"), played, device=device)
    rows = run_suite(played, policy, episodes, env_kwargs={**settings, "time_limit": time_limit})
    return [{**row, "success": float(row["success"])} for row in rows]


def run_job(cfg: DictConfig, choices: Mapping[str, Any]) -> list[Run]:
    """Train, resume or skip the run ``cfg`` describes, then benchmark it; with
    ``reproduce.population``, the task's runs it lists, as one population."""
    settings = cfg.reproduce
    suite = OmegaConf.select(cfg, "reproduce.suite")
    if suite not in SUITES:
        raise UserError(
            f"+reproduce.suite={suite}: the suites to benchmark on are "
            f"{' or '.join(SUITES)} (run the job through python -m safelife_rl "
            "reproduce)"
        )
    if OmegaConf.select(cfg, "reproduce.population") is not None:
        return _population_job(cfg, choices)
    out = Path(settings.out)
    run = run_of(cfg, choices)
    folder = run.folder(out)
    if is_finished(run, out):
        print(f"{MARK} {run}: finished before, skipped", flush=True)
        return [run]
    resume = (folder / CONFIG_FILE).is_file()
    saved = latest_model(folder) if resume else None
    where = f"resuming from {saved.path.relative_to(folder)}" if saved else "training"
    print(f"{MARK} {run}: {where}", flush=True)
    train(training_config(cfg), folder, resume=resume)
    _benchmark_run(cfg, run, out)
    return [run]


def _benchmark_run(cfg: DictConfig, run: Run, out: Path) -> None:
    settings = cfg.reproduce
    print(f"{MARK} {run}: benchmarking", flush=True)
    rows = benchmark(
        run.folder(out),
        run.task,
        settings.suite,
        settings.levels,
        settings.episodes,
        cfg.env.kwargs.time_limit,
        cfg.device,
    )
    write_episodes(run.folder(out) / BENCHMARK_FILE, rows)
    print(f"{MARK} {run}: finished", flush=True)


def population_members(cfg: DictConfig, choices: Mapping[str, Any]) -> list[tuple[Run, DictConfig]]:
    """The runs of ``reproduce.population`` (``[variant, seed]`` pairs: penalties of the
    reproduction, methods of the comparison) and each one's job config, as its own job would
    have it (a method's composed with its ``method=`` choice)."""
    members = []
    for variant, seed in cfg.reproduce.population:
        if cfg.reproduce.axis == "method":
            overrides = [
                o
                for o in HydraConfig.get().overrides.task
                if not o.startswith(("+reproduce.population=", "method=", "seed="))
            ]
            member = compose("train", [*overrides, f"method={variant}", f"seed={int(seed)}"])
            members.append((Run(choices["env"], str(variant), int(seed)), member))
            continue
        member = copy.deepcopy(cfg)
        with open_dict(member):
            member.seed = int(seed)
            member.wrappers.side_effect_penalty.penalty = float(variant)
            del member.reproduce["population"]
        members.append((run_of(member, choices), member))
    return members


def _population_job(cfg: DictConfig, choices: Mapping[str, Any]) -> list[Run]:
    """The task's unfinished runs: new ones trained as one population, ones a stopped job left
    part-trained resumed together from the newest checkpoint they share (alone when they share
    none, or hold none yet, or only await their benchmark); then each benchmarked."""
    out = Path(cfg.reproduce.out)
    fresh, stopped, alone = [], [], []
    for run, member in population_members(cfg, choices):
        folder = run.folder(out)
        if is_finished(run, out):
            print(f"{MARK} {run}: finished before, skipped", flush=True)
        elif not (folder / CONFIG_FILE).is_file():
            fresh.append((run, member))
        else:
            saved = latest_model(folder)
            (stopped if saved is not None and not saved.final else alone).append((run, member))
    task = (fresh + stopped + alone)[0][0].task if fresh + stopped + alone else ""
    steps = common_checkpoint([run.folder(out) for run, _ in stopped])
    if len(stopped) > 1 and steps is not None:
        print(f"{MARK} {task}: resuming {len(stopped)} runs as one population", flush=True)
        train_population(
            [training_config(member) for _, member in stopped],
            [run.folder(out) for run, _ in stopped],
            resume=True,
        )
    else:
        alone, stopped = alone + stopped, []
    for run, member in alone:
        print(f"{MARK} {run}: resuming on its own", flush=True)
        train(member_config(training_config(member)), run.folder(out), resume=True)
    if fresh:
        runs = f"{len(fresh)} runs" if len(fresh) > 1 else "1 run"
        print(f"{MARK} {task}: training {runs} as one population", flush=True)
        train_population(
            [training_config(member) for _, member in fresh],
            [run.folder(out) for run, _ in fresh],
        )
    todo = stopped + alone + fresh
    for run, member in todo:
        _benchmark_run(member, run, out)
    return [run for run, _ in todo]


@hydra.main(version_base=None, config_path="pkg://safelife_rl.conf", config_name="train")
def app(cfg: DictConfig) -> None:
    exit_with_parent()  # a job in a launcher's worker process ends with the sweep
    with hydra_app_errors(PROG, HydraConfig.get().runtime.output_dir, REPORTED):
        if OmegaConf.select(cfg, "reproduce.out") is None:
            raise UserError(
                "a reproduction job needs +reproduce.out=FOLDER (run it through "
                "python -m safelife_rl reproduce)"
            )
        try:
            run_job(cfg, HydraConfig.get().runtime.choices)
        except RunStopped as stopped:
            with contextlib.suppress(OSError):  # the command that read it may have been killed
                print(f"{PROG}: {stopped}; run the reproduction again to resume", file=sys.stderr)
            end_by_signal(stopped.signum)  # the sweep is ending: so does a launcher's worker
        except WorkerFailed as failed:
            report_worker_failure(PROG, failed, "run the reproduction again to resume")


def main(argv: Sequence[str] | None = None) -> int:
    """The job app on ``argv`` (Hydra overrides); the exit status."""
    return run_hydra_app(app, PROG, argv)


def sweep_main(argv: Sequence[str] | None = None) -> int:
    """``python -m safelife_rl reproduce-job [OVERRIDE ...]``, the process the sweep starts: it
    ends with the reproduce command that started it, and the job workers of the ``local``
    launcher (joblib's loky processes: each job's, and those that wait for one) end with it."""
    exit_with_parent()
    register_parallel_backend("loky", partial(LokyBackend, initializer=exit_with_parent))
    return main(argv)
