"""Reproduce the paper's Table 1 and Figures 1-2, one command each.

    python -m extended_envs.reproduce table1 [--quick] [--steps N] [--seeds K] [--jobs J]
    python -m extended_envs.reproduce figures [--quick] [--steps N] [--seeds K] [--jobs J]

``table1``: Q, DQN, A2C and PPO on TemptingButton (Example 2), 100k steps, 5 seeds; average
reward per step ± standard error beside the paper's numbers (table1.csv, table1.md,
table1.png). ``figures``: DQN, PPO and their reality checks on CartPole * IgnoreRewards and
CartPole * IncentivizeLearningRate (Definition 12); CartPole episode returns against episode
number, averaged over seeds (figure1.png, figure2.png, figures.csv). ``--quick`` shrinks
steps and seeds to a smoke run. Outputs go to ``outputs/extended_envs/<command>/`` (``--out``).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from extended_envs import agents, reality_check, run_environment  # noqa: E402
from extended_envs.combination import cartpole_combination  # noqa: E402
from extended_envs.files import write_atomically  # noqa: E402

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


def write_text(path: Path, text: str) -> None:
    write_atomically(path, lambda tmp: tmp.write_text(text))


def save_figure(path: Path, fig: plt.Figure) -> None:
    write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"))
    plt.close(fig)


def run_all(
    jobs: Iterable[tuple[Any, ...]], worker: Callable, n_jobs: int, log: Path | None = None
) -> list[Any]:
    """``worker(*job)`` for every job, in ``n_jobs`` processes, with a progress bar.

    Each result is also appended to ``log`` as it arrives, so a long run shows partial results.
    """
    jobs = list(jobs)
    if log is not None:
        log.write_text("")

    def logged(result: Any) -> Any:
        if log is not None:
            with log.open("a") as f:
                f.write(",".join(map(str, result)) + "\n")
        return result

    if n_jobs <= 1:
        return [logged(worker(*job)) for job in tqdm(jobs, desc="runs")]
    with ProcessPoolExecutor(n_jobs, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = {pool.submit(worker, *job): i for i, job in enumerate(jobs)}
        results: list[Any] = [None] * len(jobs)
        for future in tqdm(as_completed(futures), total=len(jobs), desc="runs"):
            results[futures[future]] = logged(future.result())
        return results


def table1_run(agent_name: str, seed: int, steps: int) -> tuple[str, int, float, float]:
    from extended_envs.envs import TemptingButton

    start = time.perf_counter()
    result = run_environment(TemptingButton, getattr(agents, agent_name), steps, seed=seed)
    return agent_name, seed, result["reward_per_step"], time.perf_counter() - start


def table1(out: Path, steps: int, seeds: int, n_jobs: int) -> str:
    jobs = [(name, seed, steps) for seed in range(seeds) for name in TABLE1_AGENTS]
    start = time.perf_counter()
    results = run_all(jobs, table1_run, n_jobs, log=out / "runs.log")
    elapsed = time.perf_counter() - start
    rows = []
    for name in TABLE1_AGENTS:
        values = np.array([r for n, _, r, _ in results if n == name])
        stderr = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
        seconds = sum(t for n, _, _, t in results if n == name)
        rows.append((name, values.mean(), stderr, PAPER_TABLE1[name], steps * seeds / seconds))
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["agent", "reward_per_step", "stderr", "paper", "steps_per_second"])
    writer.writerows([(n, f"{m:.5f}", f"{s:.5f}", p, f"{v:.0f}") for n, m, s, p, v in rows])
    write_text(out / "table1.csv", buffer.getvalue())
    lines = [
        f"TemptingButton, {steps} steps, {seeds} seeds ({elapsed:.0f} s wall clock, {n_jobs} jobs)",
        "",
        "| agent | reward/step ± stderr | paper | steps/s |",
        "|---|---|---|---|",
        *(f"| {n} | {m:+.5f} ± {s:.5f} | {p:+.5f} | {v:.0f} |" for n, m, s, p, v in rows),
    ]
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
    save_figure(out / "table1.png", fig)
    return markdown


def figure_run(env_name: str, agent_name: str, checked: bool, seed: int, steps: int) -> tuple:
    agent_class = getattr(agents, agent_name)
    if checked:
        agent_class = reality_check(agent_class)
    hyperparams = {**FIGURE_AGENTS[agent_name], "total_timesteps": steps}
    combination = cartpole_combination(env_name)
    result = run_environment(combination, agent_class, steps, seed, **hyperparams)
    short = agent_name.removesuffix("Agent")
    label = f"RC({short})" if checked else short
    returns = result["env_summary"]["episode_returns"]
    return env_name, label, seed, returns, result["reward_per_step"]


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    window = max(1, min(window, len(values)))
    return np.convolve(values, np.ones(window) / window, mode="valid")


def figures(out: Path, steps: int, seeds: int, n_jobs: int) -> str:
    jobs = [
        (env_name, agent_name, checked, seed, steps)
        for env_name in FIGURE_ENVS.values()
        for agent_name in FIGURE_AGENTS
        for checked in (False, True)
        for seed in range(seeds)
    ]
    results = run_all(jobs, figure_run, n_jobs)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["env", "agent", "seed", "episode", "return"])
    lines = [f"CartPole combinations, {steps} steps, {seeds} seeds", "",
             "| env | agent | episodes | mean return, last 20% of episodes | reward/step |",
             "|---|---|---|---|---|"]  # fmt: skip
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
            per_step = np.mean([r[4] for r in runs])
            lines.append(f"| {env_name} | {label} | {n} | {tail.mean():.1f} | {per_step:+.3f} |")
            ax.plot(smooth(mean, max(1, n // 20)), label=label)
        ax.set_xlabel("episode")
        ax.set_ylabel("episode reward (moving average)")
        ax.set_title(f"CartPole * {env_name}")
        ax.legend()
        save_figure(out / f"{figure}.png", fig)
    write_text(out / "figures.csv", buffer.getvalue())
    markdown = "\n".join(lines) + "\n"
    write_text(out / "figures.md", markdown)
    return markdown


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["table1", "figures"])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few steps, one seed")
    parser.add_argument("--steps", type=int, help="per run (table1 100000, figures 50000)")
    parser.add_argument("--seeds", type=int, help="per agent (table1 5, figures 3)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    parser.add_argument("--out", type=Path, help="output folder")
    args = parser.parse_args(argv)
    full_steps, full_seeds = (100_000, 5) if args.command == "table1" else (50_000, 3)
    steps = args.steps or (2_000 if args.quick else full_steps)
    seeds = args.seeds or (1 if args.quick else full_seeds)
    if steps < 1 or seeds < 1:
        parser.error("--steps and --seeds must be positive")
    out = args.out or Path("outputs/extended_envs") / args.command
    out.mkdir(parents=True, exist_ok=True)
    command = table1 if args.command == "table1" else figures
    print(command(out, steps, seeds, args.jobs))
    print(f"written to {out}/")


if __name__ == "__main__":
    main()
