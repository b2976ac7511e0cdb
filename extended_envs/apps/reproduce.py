"""Reproduce the paper's Table 1 and Figures 1-2, one command each.

    extended-envs reproduce table1 [--quick] [--steps N] [--seeds K] [--jobs J]
    extended-envs reproduce figures [--quick] [--steps N] [--seeds K] [--jobs J]

``--steps``, ``--seeds`` and ``--jobs`` are ints >= 1. A bad flag or a bad saved run ends the
command with one line ``extended_envs.apps.reproduce: error: ...`` (``--traceback`` for the whole
traceback).

``table1``: Q, DQN, A2C and PPO on TemptingButton (Example 2), 100k steps, 5 seeds; average
reward per step ± standard error beside the paper's numbers (table1.csv, table1.md,
table1.png). ``figures``: DQN, PPO and their reality checks on CartPole * IgnoreRewards and
CartPole * IncentivizeLearningRate (Definition 12); CartPole episode returns against episode
number, averaged over seeds (figure1.png, figure2.png, figures.csv), 100k steps, 3 seeds.
``--quick`` shrinks steps and seeds to a smoke run. Outputs go to
``outputs/extended_envs/<command>/`` (``--out``). Each run's result is saved in ``runs/`` there as
it finishes, and a run whose file exists is not run again: an interrupted command resumes, and
rerunning with fewer ``--seeds`` summarises the runs done so far. Delete ``runs/`` to start over.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from tqdm.auto import tqdm

from extended_envs import agents, reality_check, run_environment
from extended_envs.apps.cli import PROG as CLI
from extended_envs.checks import check
from extended_envs.combination import cartpole_combination
from safety_rl_common.checks import is_number
from safety_rl_common.errors import (
    REPORTED,
    ArgumentParser,
    UserError,
    add_traceback_flag,
    one_line_errors,
)
from safety_rl_common.figures import save_figure
from safety_rl_common.files import write_text

PROG = f"{CLI} reproduce"

PAPER_TABLE1 = {
    "QLearner": -0.44858,
    "DQNAgent": -0.46687,
    "A2CAgent": -0.49820,
    "PPOAgent": -0.24217,
}
TABLE1_AGENTS = ("QLearner", "DQNAgent", "A2CAgent", "PPOAgent")

# CartPole needs more than SB3's generic defaults to learn within a short run (cf. rl-zoo).
FIGURE_AGENTS: dict[str, dict[str, Any]] = {
    "DQNAgent": {"learning_rate": 1e-3, "buffer_size": 50_000, "learning_starts": 1000,
                 "batch_size": 64, "target_update_interval": 500, "exploration_fraction": 0.2,
                 "exploration_final_eps": 0.04},
    "PPOAgent": {"learning_rate": 1e-3, "n_steps": 512, "batch_size": 64, "gae_lambda": 0.8,
                 "gamma": 0.98},
}  # fmt: skip
FIGURE_ENVS = {"figure1": "IgnoreRewards", "figure2": "IncentivizeLearningRate"}


#: Seeds one reproduction may run per agent (the paper takes 3 or 5).
MAX_SEEDS = 10_000
#: Worker processes: more than 4 per CPU core only wait for the cores.
MAX_JOBS = 4 * (os.cpu_count() or 1)


def load_run(path: Path, valid: Callable[[Any], bool]) -> Any:
    """The run result saved in ``path``; a UserError unless it is one that ``valid`` accepts."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{path} is not a saved run result ({error}); delete it to rerun") from None
    if not valid(result):
        raise UserError(
            f"{path} is not a saved run result of this run (it holds {result!r:.80}); "
            "delete it to rerun"
        )
    return result


def is_finite_number(value: Any) -> bool:
    """A finite int or float, as JSON gives them (``true``, ``NaN`` and ``Infinity`` are not)."""
    return is_number(value) and math.isfinite(value)


def is_saved(result: Any, head: list[Any], numbers: int, lists: int = 0) -> bool:
    """Whether ``result`` is ``head`` followed by ``lists`` lists of numbers, then ``numbers``
    numbers (a saved run's layout). Types are compared too: JSON's ``true`` is not the seed 1."""
    tail = numbers + lists
    return (
        isinstance(result, list)
        and len(result) == len(head) + tail
        and all(type(x) is type(y) and x == y for x, y in zip(result, head))
        and all(
            isinstance(x, list) and all(map(is_finite_number, x))
            for x in result[len(head) : len(head) + lists]
        )
        and all(map(is_finite_number, result[len(head) + lists :]))
    )


def run_all(
    jobs: Iterable[tuple[Any, ...]],
    worker: Callable,
    n_jobs: int,
    runs: Path,
    valid: Callable[[tuple[Any, ...], Any], bool],
) -> list[Any]:
    """``worker(*job)`` for every job, in ``n_jobs`` processes, with a progress bar.

    Each result is saved as JSON in ``runs/`` as it arrives; a job whose file exists is not run
    again (its saved result is used, if ``valid(job, result)``).
    """
    jobs = list(jobs)
    paths = [runs / ("_".join(map(str, job)) + ".json") for job in jobs]
    results: list[Any] = [
        load_run(p, lambda result, job=job: valid(job, result)) if p.exists() else None
        for p, job in zip(paths, jobs)
    ]
    todo = [i for i, result in enumerate(results) if result is None]

    def save(i: int, result: Any) -> None:
        write_text(paths[i], json.dumps(result))
        results[i] = result

    if n_jobs <= 1:
        for i in tqdm(todo, desc="runs"):
            save(i, worker(*jobs[i]))
        return results
    with ProcessPoolExecutor(n_jobs) as pool:
        futures = {pool.submit(worker, *jobs[i]): i for i in todo}
        for future in tqdm(as_completed(futures), total=len(todo), desc="runs"):
            save(futures[future], future.result())
    return results


def table1_run(agent_name: str, seed: int, steps: int) -> tuple[str, int, float, float]:
    from extended_envs.envs import TemptingButton

    start = time.perf_counter()
    result = run_environment(TemptingButton, getattr(agents, agent_name), steps, seed=seed)
    return agent_name, seed, result["reward_per_step"], time.perf_counter() - start


def table1_saved(job: tuple[str, int, int], result: Any) -> bool:
    """Whether ``result`` is what :func:`table1_run` returns for ``job``, as JSON (a run takes
    some time: its seconds divide the steps/s column)."""
    agent_name, seed, _ = job
    return is_saved(result, [agent_name, seed], numbers=2) and result[3] > 0


def table1(out: Path, steps: int, seeds: int, n_jobs: int) -> str:
    jobs = [(name, seed, steps) for seed in range(seeds) for name in TABLE1_AGENTS]
    start = time.perf_counter()
    results = run_all(jobs, table1_run, n_jobs, out / "runs", table1_saved)
    elapsed = time.perf_counter() - start
    rows, per_seed = [], {}
    for name in TABLE1_AGENTS:
        values = np.array([r for n, _, r, _ in results if n == name])
        per_seed[name] = ", ".join(f"{v:+.5f}" for v in values)
        stderr = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
        seconds = sum(t for n, _, _, t in results if n == name)
        rows.append((name, values.mean(), stderr, PAPER_TABLE1[name], steps * seeds / seconds))
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["agent", "seed", "reward_per_step", "seconds"])
    writer.writerows(results)
    write_text(out / "table1.csv", buffer.getvalue())
    lines = [
        f"TemptingButton, {steps} steps, {seeds} seeds ({elapsed:.0f} s wall clock, {n_jobs} jobs)",
        "",
        "| agent | reward/step ± stderr | per seed | paper | steps/s |",
        "|---|---|---|---|---|",
        *(f"| {n} | {m:+.5f} ± {s:.5f} | {per_seed[n]} | {p:+.5f} | {v:.0f} |"
          for n, m, s, p, v in rows),
    ]  # fmt: skip
    markdown = "\n".join(lines) + "\n"
    write_text(out / "table1.md", markdown)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [m for _, m, *_ in rows], 0.4, yerr=[s for _, _, s, *_ in rows], label="ours")
    ax.bar(x + 0.2, [p for *_, p, _ in rows], 0.4, label="paper")
    ax.set_xticks(x, [n.replace("Agent", "").replace("Learner", "") for n, *_ in rows])
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.axhline(-0.5, color="grey", ls=":", lw=1)
    ax.set_ylabel("reward per step")
    ax.set_title(f"TemptingButton, {steps} steps")
    ax.legend()
    save_figure(fig, out / "table1.png", dpi=120, bbox_inches="tight")
    return markdown


def figure_run(env_name: str, agent_name: str, checked: bool, seed: int, steps: int) -> tuple:
    agent_class = getattr(agents, agent_name)
    if checked:
        agent_class = reality_check(agent_class)
    hyperparams = {**FIGURE_AGENTS[agent_name], "total_timesteps": steps}
    combination = cartpole_combination(env_name)
    result = run_environment(combination, agent_class, steps, seed, **hyperparams)
    returns = result["env_summary"]["episode_returns"]
    return env_name, figure_label(agent_name, checked), seed, returns, result["reward_per_step"]


def figure_saved(job: tuple[str, str, bool, int, int], result: Any) -> bool:
    """Whether ``result`` is what :func:`figure_run` returns for ``job``, as JSON."""
    env_name, agent_name, checked, seed, _ = job
    return is_saved(result, [env_name, figure_label(agent_name, checked), seed], 1, lists=1)


def figure_label(agent_name: str, checked: bool) -> str:
    short = agent_name.removesuffix("Agent")
    return f"RC({short})" if checked else short


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    window = max(1, min(window, len(values)))
    return np.convolve(values, np.ones(window) / window, mode="valid")


def figures(out: Path, steps: int, seeds: int, n_jobs: int) -> str:
    jobs = [  # seed by seed, so that an interrupted command has every curve for some seeds
        (env_name, agent_name, checked, seed, steps)
        for seed in range(seeds)
        for env_name in FIGURE_ENVS.values()
        for agent_name in FIGURE_AGENTS
        for checked in (False, True)
    ]
    results = run_all(jobs, figure_run, n_jobs, out / "runs", figure_saved)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["env", "agent", "seed", "episode", "return"])
    lines = [f"CartPole combinations, {steps} steps, {seeds} seeds", "",
             ("| env | agent | episodes | mean return, last 20% of episodes | reward/step ± std "
              "| per seed |"), "|---|---|---|---|---|---|"]  # fmt: skip
    for figure, env_name in FIGURE_ENVS.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        for label in dict.fromkeys(r[1] for r in results if r[0] == env_name):
            runs = [r for r in results if r[0] == env_name and r[1] == label]
            for _, _, seed, returns, _ in runs:
                writer.writerows((env_name, label, seed, i, ret) for i, ret in enumerate(returns))
            n = min(len(r[3]) for r in runs)
            if n == 0:
                continue
            mean = np.mean([r[3][:n] for r in runs], axis=0)
            tail = mean[int(0.8 * n) :]
            per_step = np.array([r[4] for r in runs])
            std = per_step.std(ddof=1) if len(runs) > 1 else float("nan")
            seeds_text = ", ".join(f"{v:+.3f}" for v in per_step)
            lines.append(f"| {env_name} | {label} | {n} | {tail.mean():.1f} "
                         f"| {per_step.mean():+.3f} ± {std:.3f} | {seeds_text} |")  # fmt: skip
            ax.plot(smooth(mean, max(1, n // 20)), label=label)
        ax.set_xlabel("episode")
        ax.set_ylabel("episode reward (moving average)")
        ax.set_title(f"CartPole * {env_name}")
        ax.legend()
        save_figure(fig, out / f"{figure}.png", dpi=120, bbox_inches="tight")
    write_text(out / "figures.csv", buffer.getvalue())
    markdown = "\n".join(lines) + "\n"
    write_text(out / "figures.md", markdown)
    return markdown


def main(argv: list[str] | None = None) -> int:
    """``extended-envs reproduce ...``; the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    with one_line_errors(PROG, REPORTED, traceback="--traceback" in argv):
        run(argv)
    return 0


def run(argv: list[str]) -> None:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["table1", "figures"])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few steps, one seed")
    parser.add_argument("--steps", type=int, help="per run (default 100000)")
    parser.add_argument("--seeds", type=int, help="per agent (table1 5, figures 3)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    parser.add_argument("--out", type=Path, help="output folder")
    add_traceback_flag(parser)
    args = parser.parse_args(argv)
    full_steps, full_seeds = (100_000, 5) if args.command == "table1" else (100_000, 3)
    steps = (2_000 if args.quick else full_steps) if args.steps is None else args.steps
    seeds = (1 if args.quick else full_seeds) if args.seeds is None else args.seeds
    check.count("--steps", steps)
    check.count("--seeds", seeds)
    check.value(
        "--seeds",
        seeds,
        lambda v: v <= MAX_SEEDS,
        f"at most {MAX_SEEDS} (the jobs are listed, and their results kept, up front)",
    )
    check.count("--jobs", args.jobs)
    check.value(
        "--jobs", args.jobs, lambda v: v <= MAX_JOBS, f"at most {MAX_JOBS} (4 per CPU core)"
    )
    out = args.out or Path("outputs/extended_envs") / args.command
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    command = table1 if args.command == "table1" else figures
    print(command(out, steps, seeds, args.jobs))
    print(f"written to {out}/")
