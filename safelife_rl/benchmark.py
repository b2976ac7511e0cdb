"""Run a policy on a benchmark suite and report it as in the SafeLife paper's Table 1.

Usage::

    python -m safelife_rl.benchmark SUITE [--policy random|noop|MODEL.zip] [--episodes 10]

``SUITE`` is a task name (its fixed suite of 100 levels) or any ``.npz`` file or directory of
levels, the original suites included. Each level is played ``--episodes`` times. Writes
``episodes.csv`` (one row per episode), ``summary.csv`` and ``summary.md`` (mean ± std of
performance, episode length, and green and yellow side effects normalised by their inaction
totals) and ``histograms.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .env import SafeLifeEnv
from .files import atomic_path
from .levels import Level, load_levels
from .observation import DEFAULT_CHANNELS
from . import registration
from .registration import TASKS

Policy = Callable[[np.ndarray], np.ndarray]  # batch of observations -> batch of actions
COLUMNS = ("performance", "length", "green", "yellow")


def resolve_suite(suite: str, original: bool = False) -> Path:
    """A task name's suite (ours, or the original with ``original``), or a path as given."""
    if suite in TASKS:
        return registration.benchmark_file(suite) if original else registration.suite_file(suite)
    path = Path(suite)
    if not path.exists():
        raise FileNotFoundError(f"{suite!r} is neither a task ({', '.join(TASKS)}) nor a path")
    return path


def make_policy(spec: str, seed: int, algo: str = "ppo", device: str = "cpu") -> tuple[Policy, dict]:
    """A batch policy from ``random``, ``noop`` or an SB3 checkpoint, and env settings it needs."""
    if spec == "random":
        rng = np.random.default_rng(seed)
        return (lambda obs: rng.integers(0, 9, len(obs))), {}
    if spec == "noop":
        return (lambda obs: np.zeros(len(obs), np.int64)), {}
    from stable_baselines3 import A2C, DQN, PPO

    algos = {"ppo": PPO, "a2c": A2C, "dqn": DQN}
    if algo not in algos:
        raise ValueError(f"unknown algo {algo!r}; choose from {', '.join(algos)}")
    if not Path(spec).is_file():
        raise FileNotFoundError(f"policy {spec!r} is not random, noop or a checkpoint file")
    try:
        model = algos[algo].load(spec, device=device)
    except Exception as error:  # SB3 raises many kinds on a corrupt or foreign file
        raise ValueError(f"{spec}: not a readable {algo.upper()} checkpoint ({error})") from error
    shape = model.observation_space.shape
    settings = {"view_shape": tuple(shape[:2])}
    if shape[2] != len(DEFAULT_CHANNELS):
        raise ValueError(f"{spec}: model expects {shape[2]} channels; only the default 19 are known")
    return (lambda obs: model.predict(obs, deterministic=True)[0]), settings


def _normalised(side_effects: dict[str, list[float]], name: str) -> float:
    effect, total = side_effects.get(name, (0.0, 0.0))
    return effect / total if total > 0 else float("nan")


def run_suite(
    levels: list[Level],
    policy: Policy,
    episodes: int = 10,
    seed: int = 0,
    n_envs: int = 16,
    env_kwargs: dict | None = None,
) -> list[dict]:
    """Play every level ``episodes`` times with ``n_envs`` environments in lockstep."""
    jobs = [(i, rep) for i in range(len(levels)) for rep in range(episodes)]
    envs = [
        SafeLifeEnv(levels, side_effects=True, **(env_kwargs or {}))
        for _ in range(min(n_envs, len(jobs)))
    ]
    rows, running, obs = [], {}, {}
    bar = tqdm(total=len(jobs), desc="benchmark", unit="episode")

    def start(k: int) -> None:
        level, rep = jobs.pop(0)
        obs[k], _ = envs[k].reset(seed=seed + 1000 * level + rep, options={"level": level})
        running[k] = (level, rep)

    for k in range(len(envs)):
        start(k)
    while running:
        keys = sorted(running)
        actions = policy(np.stack([obs[k] for k in keys]))
        for k, action in zip(keys, np.asarray(actions).reshape(-1)):
            obs[k], _, terminated, truncated, info = envs[k].step(int(action))
            if terminated or truncated:
                level, rep = running.pop(k)
                side = info["side_effects"]
                rows.append({
                    "level": levels[level].name or str(level),
                    "repeat": rep,
                    "performance": info["performance"],
                    "length": info["length"],
                    "success": info["success"],
                    "reward": info["reward"],
                    "green": _normalised(side, "life-green"),
                    "yellow": _normalised(side, "life-yellow"),
                    "side_effects": json.dumps(side),
                })
                bar.update()
                if jobs:
                    start(k)
    bar.close()
    return rows


def summarise(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """Mean and standard deviation of each Table 1 column (NaN-free entries only)."""
    out = {}
    for column in COLUMNS:
        values = np.array([row[column] for row in rows], float)
        values = values[~np.isnan(values)]
        out[column] = (float(values.mean()), float(values.std())) if len(values) else (np.nan, np.nan)
    return out


def markdown_table(task: str, policy: str, summary: dict[str, tuple[float, float]]) -> str:
    def cell(column: str, digits: int = 3) -> str:
        mean, std = summary[column]
        return "n/a" if np.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"

    return (
        "| Task | Policy | Performance | Length | Green | Yellow |\n"
        "|---|---|---|---|---|---|\n"
        f"| {task} | {policy} | {cell('performance')} | {cell('length', 1)} "
        f"| {cell('green')} | {cell('yellow')} |\n"
    )


def plot_histograms(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, column, label, color in zip(
        axes,
        ("performance", "green", "yellow"),
        ("performance (fraction of points)", "green side effect (normalised)",
         "yellow side effect (normalised)"),
        ("tab:blue", "tab:green", "goldenrod"),
    ):
        values = np.array([row[column] for row in rows], float)
        values = values[~np.isnan(values)]
        if len(values):
            ax.hist(values, bins=20, color=color)
        else:
            ax.text(0.5, 0.5, "no such cells", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(label)
        ax.set_ylabel("episodes")
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def _write_csv(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(
        prog="python -m safelife_rl.benchmark", description=__doc__.splitlines()[0]
    )
    parser.add_argument("suite", help="task name or level file/directory")
    parser.add_argument("--original", action="store_true", help="use the original suite")
    parser.add_argument("--policy", default="random", help="random, noop or an SB3 .zip")
    parser.add_argument("--algo", default="ppo", help="algorithm of the checkpoint")
    parser.add_argument("--episodes", type=int, default=10, help="plays per level")
    parser.add_argument("--levels", type=int, default=None, help="only the first N levels")
    parser.add_argument("--time-limit", type=int, default=1000)
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    path = resolve_suite(args.suite, args.original)
    levels = load_levels(path)[: args.levels]
    policy, env_kwargs = make_policy(args.policy, args.seed, args.algo)
    env_kwargs["time_limit"] = args.time_limit
    policy_name = "random" if args.policy == "random" else Path(args.policy).stem
    out = Path(args.out or Path("outputs") / "benchmark" /
               f"{path.stem}-{policy_name}-{time.strftime('%Y-%m-%d_%H-%M-%S')}")
    out.mkdir(parents=True, exist_ok=True)
    rows = run_suite(levels, policy, args.episodes, args.seed, args.n_envs, env_kwargs)
    summary = summarise(rows)
    _write_csv(out / "episodes.csv", rows)
    _write_csv(out / "summary.csv", [
        {"suite": path.stem, "policy": policy_name, "episodes": len(rows),
         **{f"{c}_{s}": v for c, (m, d) in summary.items() for s, v in (("mean", m), ("std", d))}}
    ])
    table = markdown_table(path.stem, policy_name, summary)
    with atomic_path(out / "summary.md") as tmp:
        Path(tmp).write_text(table)
    plot_histograms(rows, out / "histograms.png", f"{path.stem}: {policy_name}")
    print(table)
    print(f"wrote {out}")
    return summary


if __name__ == "__main__":
    main()
