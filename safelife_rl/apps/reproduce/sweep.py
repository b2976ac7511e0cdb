"""Launching the runs through Hydra's launchers, resuming what an earlier sweep left, showing
progress: the runner of ``safelife_rl reproduce`` and ``safelife_rl compare``.

The sweep is one Hydra multirun of :mod:`safelife_rl.apps.reproduce.job` over the tasks,
penalties (or methods) and seeds that still have unfinished runs (``hydra/launcher=local``:
joblib on this machine; ``submitit`` or ``slurm``: the same jobs as submitit jobs). Each job trains
its run in the run's own folder, so a job whose run is finished returns at once and an unfinished
one resumes from its newest checkpoint: an interrupted sweep continues when the command is run
again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from safelife_rl.apps.benchmark import SUITES
from safelife_rl.apps.cli import PROG as CLI
from safelife_rl.apps.reproduce.job import MARK
from safelife_rl.apps.reproduce.runs import Run, is_finished, progress
from safelife_rl.training.resume import RESUME_OVERRIDES
from safety_rl_common.errors import UserError
from safety_rl_common.files import write_json

PROG = f"{CLI} reproduce"  # the command (safelife_rl.apps.reproduce.cli)
LAUNCHERS = ("local", "submitit", "slurm")
#: Exit statuses of a sweep stopped by SIGINT or SIGTERM (as the shell and Python report them).
INTERRUPTED = (130, 143, -2, -15)
SETTINGS_FILE = "sweep.json"
#: How the benchmark plays the trained agents (recorded so that an output folder benchmarked
#: otherwise by an earlier version is refused, not mixed in).
BENCHMARK_ACTIONS = "sampled from the policy"
#: The original training code's run length (``start-training.py --steps``, default 6e6; the
#: jobs set it over ``experiment=paper``'s 2M) and the smoke run's (paper-quick.yaml).
FULL_STEPS = 6_000_000
QUICK_STEPS = 1536
#: What the runs of a task differ by, and the Hydra override that sets it.
AXES = {"penalty": "wrappers.side_effect_penalty.penalty", "method": "method"}


@dataclass(frozen=True)
class Settings:
    """What the runs of one output folder are trained and benchmarked with."""

    experiment: str  # paper or paper-quick
    steps: int  # training steps per run
    levels: int | None  # the suites' first N levels (None: all 100)
    episodes: int  # plays per level
    overrides: tuple[str, ...]  # the user's Hydra overrides
    axis: str = "penalty"  # what the runs of a task differ by: a key of AXES
    cost_limit: float | None = None  # the PPO-Lagrangian runs' budget (None: their config's)
    suite: str = "v1.0"  # the tasks' suites the agents are benchmarked on: a key of SUITES

    def training_overrides(self) -> list[str]:
        """The overrides that change what a run learns or how it is benchmarked (launcher
        settings and those a resume may change are left out)."""
        return [
            o
            for o in self.overrides
            if not o.startswith(("hydra.", "hydra/"))
            and o.lstrip("+~").split("=", 1)[0] not in RESUME_OVERRIDES
        ]

    def benchmark(self) -> str:
        """What the agents are benchmarked on, for a report: ``the original SafeLife v1.0 suites
        (safelife_rl/levels/v1.0), 100 levels each played 10 times per agent``."""
        levels = (
            "100 levels each" if self.levels is None else f"the first {self.levels} levels of each"
        )
        return f"{SUITES[self.suite]}, {levels} played {self.episodes} times per agent"

    def as_json(self) -> dict:
        budget = {} if self.cost_limit is None else {"cost_limit": self.cost_limit}
        return {
            "experiment": self.experiment,
            "steps": self.steps,
            "axis": self.axis,
            "suite": self.suite,
            "levels": self.levels,
            "episodes": self.episodes,
            "benchmark_actions": BENCHMARK_ACTIONS,
            "overrides": self.training_overrides(),
            **budget,
        }


def check_settings(out: Path, settings: Settings) -> None:
    """Refuse to mix runs made with other settings into ``out``'s tables; record the settings
    of a new output folder."""
    path = out / SETTINGS_FILE
    if path.is_file():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            saved = None
        if isinstance(saved, dict):  # a folder of an earlier version: benchmarked on ours
            saved.setdefault("suite", "ours")
        if saved != settings.as_json():
            raise UserError(
                f"{out} holds runs made with other settings ({path}: {saved}, now "
                f"{settings.as_json()}); use another --out, or delete {out} to start over"
            )
    else:
        if any(p.name not in ("logs", "hydra") for p in out.iterdir()):
            raise UserError(
                f"{out} holds files but no {SETTINGS_FILE}, so how its runs were "
                "trained and benchmarked is unknown; use another --out, or delete "
                f"{out} to start over"
            )
        write_json(path, settings.as_json())


def _variant_override(settings: Settings, variant: float | str) -> str:
    value = repr(variant) if isinstance(variant, float) else variant
    return f"{AXES[settings.axis]}={value}"


def population_groups(runs: Sequence[Run], settings: Settings) -> list[set[float | str]]:
    """The variants of ``runs`` whose runs populations can train, grouped by the population
    they train in (one algorithm each): every penalty of the reproduction in one; of the
    comparison's methods, PPO and PPO with the impact penalty in one, PPO-Lagrangian's in
    another. Composed as their jobs will be."""
    from hydra import compose, initialize_config_module

    from safelife_rl.apps.reproduce.job import training_config
    from safelife_rl.training.population.runs import check_population, member_config

    variants = dict.fromkeys(r.variant for r in runs)
    if settings.axis != "method":
        return [set(variants)]
    user = [o for o in settings.overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    task = runs[0].task
    groups: dict[str, set[float | str]] = {}
    with initialize_config_module("safelife_rl.conf", version_base=None):
        for method in variants:
            overrides = [f"experiment={settings.experiment}", f"env={task}", f"method={method}"]
            cfg = training_config(compose("train", [*overrides, "+reproduce.axis=method", *user]))
            try:
                check_population([member_config(cfg)])
            except UserError:
                continue
            groups.setdefault(cfg.algo._target_, set()).add(method)
    return list(groups.values())


def check_jobs(runs: Sequence[Run], settings: Settings, population: bool = False) -> None:
    """Compose the training config of every task x variant of ``runs`` as its job will and
    check it as the training app does (its settings, its method's, the env the method needs;
    with ``population``, what a population member needs), before anything is launched or
    written: a bad override ends the command in one line naming the job, not a sweep stopped
    after its runs were launched."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from safelife_rl.apps.reproduce.job import training_config
    from safelife_rl.training.config import check_settings
    from safelife_rl.training.methods import method_of

    user = [o for o in settings.overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    budget = (
        [] if settings.cost_limit is None else [f"+reproduce.cost_limit={settings.cost_limit!r}"]
    )
    built: set[str] = set()
    members = Counter(r.task for r in runs)  # with population: one population per task
    with initialize_config_module("safelife_rl.conf", version_base=None):
        for task, variant in dict.fromkeys((r.task, r.variant) for r in runs):
            job = f"the job of {task}, {settings.axis} {variant}"
            overrides = [
                f"experiment={settings.experiment}",
                f"env={task}",
                _variant_override(settings, variant),
                f"total_timesteps={settings.steps}",
                "progress_bar=false",
                f"+reproduce.axis={settings.axis}",
                *budget,
                *user,
            ]
            try:
                cfg = training_config(compose("train", overrides))
                check_settings(cfg)
                method_of(cfg).check_env(cfg)
                if population:
                    _check_member(cfg)
                if task not in built:
                    _build_one_env(cfg, members[task] if population else 0)
                    built.add(task)
            except UserError as error:
                raise UserError(f"{job}: {error}") from None
            except (HydraException, OmegaConfBaseException) as error:
                message = " ".join(str(error).split())
                raise UserError(f"{job}: {message}") from None


def _check_member(cfg: Any) -> None:
    """A population's member: PPO on levels the device keeps (a bank or a list)."""
    from omegaconf import OmegaConf

    from safelife_rl.training.population.runs import check_population, member_config

    if all(OmegaConf.select(cfg, f"env.kwargs.{key}") is None for key in ("bank", "levels")):
        raise UserError(
            "a population steps its envs on the device, which keeps their levels there: "
            "train from a level bank (env.kwargs.bank={size:1000}), or use --no-population"
        )
    check_population([member_config(cfg)])


def _build_one_env(cfg: Any, members: int = 0) -> None:
    """Make (and close) one env as a job's run will, which checks the env's settings
    (``env.kwargs``, ``wrappers``); on procedural levels drawn in this process, so that a
    level bank is not built here nor level workers started. With ``members``: the memory a
    population of that many needs, with the env's spaces and the board of a level it draws."""
    from omegaconf import OmegaConf

    from safelife_rl.training.config import user_errors_of_instantiate
    from safelife_rl.training.envs import make_env
    from safelife_rl.training.population.runs import check_population_memory, member_config

    kwargs = OmegaConf.to_container(cfg.env.kwargs, resolve=True)
    kwargs.pop("bank", None)
    kwargs.pop("workers", None)
    with user_errors_of_instantiate():
        env = make_env(cfg.env.id, kwargs, OmegaConf.to_container(cfg.wrappers, resolve=True))
    try:
        if members:
            env.reset(seed=0)
            board = env.unwrapped.game.boards.shape[1:]
            check_population_memory(
                member_config(cfg), members, env.observation_space, env.action_space, board
            )
    finally:
        env.close()


def job_command(
    runs: Sequence[Run], settings: Settings, launcher: str, out: Path, population: bool = False
) -> list[str]:
    """The Hydra multirun that trains ``runs``: every combination of their tasks, variants
    (penalties or methods) and seeds (a combination finished before is skipped by its job);
    with ``population``, one job per task that trains its variants and seeds as one population
    (``+reproduce.population``: their ``[variant, seed]`` pairs)."""
    tasks = ",".join(dict.fromkeys(r.task for r in runs))
    variants = ",".join(
        f"{v!r}" if isinstance(v, float) else v for v in sorted({r.variant for r in runs})
    )
    seeds = ",".join(str(s) for s in sorted({r.seed for r in runs}))
    grid = [f"{AXES[settings.axis]}={variants}", f"seed={seeds}"]
    if population:
        pairs = sorted({(r.variant, r.seed) for r in runs})
        grid = ["+reproduce.population=[" + ",".join(f"[{v!r},{s}]" for v, s in pairs) + "]"]
    out = out.resolve()
    return [
        sys.executable, "-m", "safelife_rl", "reproduce-job", "-m",
        f"hydra/launcher={launcher}", f"experiment={settings.experiment}", f"env={tasks}",
        *grid,
        f"total_timesteps={settings.steps}", "progress_bar=false", f"+reproduce.out={out}",
        f"+reproduce.axis={settings.axis}", f"+reproduce.suite={settings.suite}",
        f"+reproduce.levels={'null' if settings.levels is None else settings.levels}",
        f"+reproduce.episodes={settings.episodes}",
        *([] if settings.cost_limit is None else
          [f"+reproduce.cost_limit={settings.cost_limit!r}"]),
        f"hydra.sweep.dir={out}/hydra/{time.strftime('%Y-%m-%d_%H-%M-%S')}",
        *settings.overrides,
    ]  # fmt: skip


def _echo_marked_lines(stream: IO[str], log: IO[str]) -> None:
    """Copy the sweep's output into its log, showing the jobs' lines about their runs."""
    for line in stream:
        log.write(line)
        log.flush()
        if line.startswith(MARK):
            tqdm.write(line.rstrip("\n"))


def launch(
    runs: Sequence[Run],
    settings: Settings,
    launcher: str,
    out: Path,
    prog: str = PROG,
    population: bool = False,
) -> None:
    """Train and benchmark the unfinished ``runs`` through Hydra's launcher, with a progress bar
    of training steps saved (checkpoints) over all runs; the sweep's output goes to
    ``out/logs/``; ``prog``: the command, named when it stops; ``population``: each task's runs
    trained as one population (:mod:`safelife_rl.training.population`)."""
    todo = [run for run in runs if not is_finished(run, out)]
    steps = settings.steps
    if not todo:
        return
    command = job_command(todo, settings, launcher, out, population)
    log_path = out / "logs" / f"sweep_{time.strftime('%Y-%m-%d_%H-%M-%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)

    def done() -> int:
        return sum(progress(r, out, steps) for r in runs)

    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    print(
        f"{len(todo)} of {len(runs)} runs to train and benchmark ({launcher} launcher); "
        f"log: {log_path}",
        flush=True,
    )
    with log_path.open("w", encoding="utf-8") as log:
        log.write(" ".join(command) + "\n")
        # a process group of its own, which a terminal's Ctrl-C does not reach: the command
        # ends the sweep (its processes and their workers each end with their parent)
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            process_group=0,
        )
        assert process.stdout is not None
        reader = threading.Thread(target=_echo_marked_lines, args=(process.stdout, log))
        reader.start()
        bar = tqdm(total=steps * len(runs), initial=done(), unit="step", desc="sweep")
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C
        try:
            while process.poll() is None:
                time.sleep(2)
                bar.n = done()
                bar.set_postfix_str(f"{sum(is_finished(r, out) for r in runs)}/{len(runs)} runs")
        except KeyboardInterrupt:
            process.terminate()
            process.wait()
        finally:
            signal.signal(signal.SIGTERM, previous)
        reader.join()  # until every process of the sweep has ended (each holds the log's pipe)
        bar.n = done()
        bar.close()
    unfinished = [run for run in runs if not is_finished(run, out)]
    if process.returncode in INTERRUPTED:
        print(
            f"{prog}: interrupted with {len(unfinished)} runs unfinished; run the same "
            f"command again to resume them (log: {log_path})",
            file=sys.stderr,
        )
        raise SystemExit(130)
    if process.returncode != 0 or unfinished:
        last = [line for line in log_path.read_text(encoding="utf-8").splitlines() if line]
        raise UserError(
            f"the sweep stopped (exit status {process.returncode}) with {len(unfinished)} "
            f"runs unfinished, last line of its log {log_path}: {last[-1] if last else ''}"
        )
