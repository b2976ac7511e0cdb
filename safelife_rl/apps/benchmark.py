"""Run a policy on a benchmark suite and report it as in the SafeLife paper's Table 1.

Usage::

    python -m safelife_rl benchmark TASK_OR_PATH [--suite v1.0|ours]
        [--policy random|noop|MODEL.zip] [--episodes 10] [--greedy]

``TASK_OR_PATH`` is a task name, for its fixed suite of 100 levels (``--suite v1.0``: the
original SafeLife v1.0 suite, the default for the eight tasks that have one; ``--suite ours``:
this project's, the default for the others), or any ``.npz`` file or directory of levels.
``MODEL.zip`` is loaded without unpickling anything from it, rebuilt from the config it was
trained with (``--trust-pickle``: SB3's own load, for files you trust). A PPO or A2C model draws its
actions from its policy's distribution, as the original SafeLife benchmark plays its PPO agents
(``--greedy``: the most probable action); a DQN model takes its greedy action. Each level is played
``--episodes`` times. Writes ``episodes.csv`` (one row per episode), ``summary.csv`` and
``summary.md`` (mean ± std of performance, episode length, and green and yellow side effects
normalised by their inaction totals) and ``histograms.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.policies import ActorCriticPolicy
from tqdm import tqdm

from safelife_rl.apps.cli import PROG as CLI
from safelife_rl.engine.level_files import load_levels
from safelife_rl.engine.levels import Level
from safelife_rl.engine.observation import DEFAULT_CHANNELS
from safelife_rl.envs import registration
from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.registration import ORIGINAL_SUITES, TASKS
from safelife_rl.training.config_targets import check_targets
from safelife_rl.training.files import CONFIG_ENTRY
from safelife_rl.training.model_files import (
    load_model,
    observation_shape,
    read_model_file,
    saved_algo,
)
from safelife_rl.training.resume import CONFIG_FILE, load_run_config, trained_config
from safety_rl_common.errors import (
    REPORTED,
    ArgumentParser,
    UserError,
    add_traceback_flag,
    one_line_errors,
)
from safety_rl_common.files import atomic_path
from safety_rl_common.limits import EPISODE_LIMIT

Policy = Callable[[np.ndarray], np.ndarray]  # batch of observations -> batch of actions
COLUMNS = ("performance", "length", "green", "yellow")
#: SafeLifeEnv arguments that shape what a model sees.
OBSERVATION_KWARGS = ("view_shape", "channels", "remove_white_goals")
ALGOS = ("ppo", "a2c", "dqn")


#: The fixed suites of a task (``--suite``): the original SafeLife v1.0 suites, or this
#: project's, generated from fixed seeds.
SUITES = {
    "v1.0": "the original SafeLife v1.0 suites (safelife_rl/levels/v1.0)",
    "ours": "this project's suites (safelife_rl/levels/benchmarks)",
}


def default_suite(task: str) -> str:
    """``v1.0`` for a task that has an original SafeLife suite, ``ours`` for the others."""
    return "v1.0" if task in ORIGINAL_SUITES else "ours"


def check_suite(suite: str, tasks: Sequence[str]) -> None:
    """Refuse ``suite`` ``v1.0`` for tasks the original SafeLife has no suite of."""
    if suite not in SUITES:
        raise UserError(f"suite {suite!r} is not one of {', '.join(SUITES)}")
    missing = [task for task in tasks if task not in ORIGINAL_SUITES] if suite == "v1.0" else []
    if missing:
        raise UserError(
            f"--suite v1.0: the original SafeLife has no suite of {', '.join(missing)} (only "
            f"of {', '.join(ORIGINAL_SUITES)}); --suite ours is this project's"
        )


def task_suite(task: str, suite: str) -> Path:
    """The level file of ``task``'s fixed suite: the original (``v1.0``) or ours (``ours``)."""
    check_suite(suite, [task])
    return registration.benchmark_file(task) if suite == "v1.0" else registration.suite_file(task)


def resolve_suite(name: str, suite: str | None = None) -> tuple[Path, str]:
    """The levels ``name`` stands for and what to call them: a task's suite (``suite``, or its
    :func:`default_suite`), called ``task (suite)``; or a path as given (``suite`` must then be
    ``None``), called by its stem."""
    if name in TASKS:
        suite = suite or default_suite(name)
        return task_suite(name, suite), f"{name} ({suite})"
    if suite is not None:
        raise UserError(
            f"--suite {suite} chooses a task's suite, and {name!r} is not a task "
            f"({', '.join(TASKS)}); give a task name, or a path without --suite"
        )
    path = Path(name)
    if not path.exists():
        raise UserError(f"{name!r} is neither a task ({', '.join(TASKS)}) nor a path")
    return path, path.stem


def run_config(model: Path) -> tuple[str, DictConfig] | None:
    """The config ``model`` was trained with, its targets checked, and where it was found: the
    model's own copy (saved in its zip by training), else the ``config.yaml`` of its run (in its
    folder or the parent: ``RUN/final_model.zip``, ``RUN/checkpoints/model_N_steps.zip``)."""
    embedded = trained_config(model)
    if embedded is not None:
        source = f"{model} ({CONFIG_ENTRY})"
        check_targets(embedded, source)
        return source, OmegaConf.create(embedded)
    for folder in (model.parent, model.parent.parent):
        if (folder / CONFIG_FILE).is_file():
            return str(folder / CONFIG_FILE), load_run_config(folder)
    return None


def observation_settings(
    model: Path, shape: tuple[int, ...] | None, run: tuple[str, DictConfig] | None
) -> dict[str, Any]:
    """The env settings that give ``model`` its observations: those of its run's config, or the
    defaults when the model's observation shape is theirs (19 channels)."""
    if run is not None:
        path, cfg = run
        env_id = OmegaConf.select(cfg, "env.id")
        if not isinstance(env_id, str) or not env_id.startswith("safelife_rl/"):
            raise UserError(f"{path}: the model was trained on env {env_id!r}, not a SafeLife task")
        kwargs = OmegaConf.to_container(cfg.env.get("kwargs") or {})
        return {k: kwargs[k] for k in OBSERVATION_KWARGS if k in kwargs}
    channels = len(DEFAULT_CHANNELS)
    if shape is not None and len(shape) == 3 and shape[2] == channels:
        return {"view_shape": shape[:2]}
    raise UserError(
        f"{model}: the model sees observations of shape {shape} and its run's {CONFIG_FILE} is "
        f"in neither {model.parent} nor {model.parent.parent}; without it only the default "
        f"{channels} channels are known"
    )


def load_policy(
    spec: str,
    levels: list[Level],
    algo: str | None = None,
    device: str = "cpu",
    trusted: bool = False,
    greedy: bool = False,
    seed: int = 0,
) -> tuple[Policy, dict[str, Any]]:
    """A batch policy from an SB3 model file, and the env settings it needs: the actions drawn
    from the model's action distribution (:func:`sampling_policy`, seeded with ``seed``) or,
    ``greedy`` or for a model without one (DQN), its most probable action.

    The model is rebuilt from its run's config without unpickling anything from the file
    (:func:`~safelife_rl.training.model_files.load_model`); ``trusted`` is SB3's full load.

    :param algo: the algorithm the file must hold (``ppo``, ``a2c``, ``dqn``); any if ``None``.
    """
    model_path = Path(spec)
    if not model_path.is_file():
        raise UserError(f"policy {spec!r} is not random, noop or a model file")
    _, data = read_model_file(model_path)
    saved = saved_algo(data, model_path)
    if algo is not None and algo.upper() != saved:
        raise UserError(f"{spec}: a {saved} model, not {algo.upper()} (--algo {algo})")
    run = run_config(model_path)
    if run is None and not trusted:
        raise UserError(
            f"{spec}: holds no config and there is no {CONFIG_FILE} of its run in "
            f"{model_path.parent} or its parent; the model is rebuilt from its config so that "
            "nothing in the file runs (--trust-pickle loads a file you trust as SB3 does)"
        )
    shape = observation_shape(data)
    settings = observation_settings(model_path, shape, run)
    env = SafeLifeEnv(levels, **settings)
    expected = env.observation_space.shape
    if shape is not None and shape != expected:
        raise UserError(
            f"{spec}: the model sees observations of shape {shape}, its run's "
            f"settings {settings} give {expected}"
        )
    model = load_model(model_path, run[1] if run else None, env, device, trusted)
    if greedy or not isinstance(model.policy, ActorCriticPolicy):
        return (lambda obs: model.predict(obs, deterministic=True)[0]), settings
    return sampling_policy(model.policy, seed), settings


def sampling_policy(policy: ActorCriticPolicy, seed: int) -> Policy:
    """Actions drawn from ``policy``'s action distribution with a generator of its own seeded
    with ``seed`` (so a benchmark is reproducible whatever else uses torch's global one)."""
    policy.set_training_mode(False)
    generator = torch.Generator(policy.device).manual_seed(seed)

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            tensor, _ = policy.obs_to_tensor(obs)
            probs = policy.get_distribution(tensor).distribution.probs
            return torch.multinomial(probs, 1, generator=generator)[:, 0].cpu().numpy()

    return act


def make_policy(
    spec: str,
    levels: list[Level],
    seed: int,
    algo: str | None = None,
    device: str = "cpu",
    trusted: bool = False,
    greedy: bool = False,
) -> tuple[Policy, dict[str, Any]]:
    """A batch policy from ``random``, ``noop`` or a model file (:func:`load_policy`), and the
    env settings it needs."""
    if spec == "random":
        rng = np.random.default_rng(seed)
        return (lambda obs: rng.integers(0, 9, len(obs))), {}
    if spec == "noop":
        return (lambda obs: np.zeros(len(obs), np.int64)), {}
    return load_policy(spec, levels, algo, device, trusted, greedy, seed)


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
    rows, running, obs, costs = [], {}, {}, {}
    bar = tqdm(total=len(jobs), desc="benchmark", unit="episode")

    def start(k: int) -> None:
        level, rep = jobs.pop(0)
        obs[k], _ = envs[k].reset(seed=seed + 1000 * level + rep, options={"level": level})
        running[k], costs[k] = (level, rep), 0.0

    for k in range(len(envs)):
        start(k)
    while running:
        keys = sorted(running)
        actions = policy(np.stack([obs[k] for k in keys]))
        for k, action in zip(keys, np.asarray(actions).reshape(-1)):
            obs[k], _, terminated, truncated, info = envs[k].step(int(action))
            costs[k] += info["cost"]
            if terminated or truncated:
                level, rep = running.pop(k)
                side = info["side_effects"]
                rows.append(
                    {
                        "level": levels[level].name or str(level),
                        "repeat": rep,
                        "performance": info["performance"],
                        "length": info["length"],
                        "success": info["success"],
                        "reward": info["reward"],
                        "green": _normalised(side, "life-green"),
                        "yellow": _normalised(side, "life-yellow"),
                        "cost": costs[k],
                        "side_effects": json.dumps(side),
                    }
                )
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
        out[column] = (
            (float(values.mean()), float(values.std())) if len(values) else (np.nan, np.nan)
        )
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
        (
            "performance (fraction of points)",
            "green side effect (normalised)",
            "yellow side effect (normalised)",
        ),
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


def _at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= {minimum}")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    """``safelife-rl benchmark ...``; the exit status."""
    run(argv)
    return 0


def run(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    """The benchmark as :func:`main` runs it; the summary (metric -> mean, std)."""
    parser = ArgumentParser(prog=f"{CLI} benchmark", description=__doc__.splitlines()[0])
    parser.add_argument(
        "task",
        metavar="TASK_OR_PATH",
        help="a task name (its fixed suite: see --suite) or a level file/directory",
    )
    parser.add_argument(
        "--suite",
        choices=tuple(SUITES),
        default=None,
        help="the suite of a task name: v1.0, the original SafeLife v1.0 suite "
        "(safelife_rl/levels/v1.0), or ours, this project's "
        "(safelife_rl/levels/benchmarks); default v1.0 for the tasks that "
        f"have one ({', '.join(ORIGINAL_SUITES)}), ours for the others; "
        "not with a path",
    )
    parser.add_argument("--policy", default="random", help="random, noop or an SB3 .zip")
    parser.add_argument(
        "--algo",
        choices=ALGOS,
        default=None,
        help="algorithm the model file must hold (default: the file's)",
    )
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="load the model as SB3 does, running code pickled in it: only for "
        "files you trust (see docs/security.md)",
    )
    parser.add_argument(
        "--greedy",
        action="store_true",
        help="a PPO/A2C model takes its most probable action (default: one "
        "drawn from its policy, as the original benchmark plays)",
    )
    parser.add_argument("--episodes", type=_at_least(1), default=10, help="plays per level")
    parser.add_argument("--levels", type=_at_least(1), default=None, help="only the first N levels")
    parser.add_argument("--time-limit", type=_at_least(1), default=1000)
    parser.add_argument("--n-envs", type=_at_least(1), default=16)
    parser.add_argument("--seed", type=_at_least(0), default=0)
    parser.add_argument("--out", default=None)
    add_traceback_flag(parser)
    args = parser.parse_args(argv)
    with one_line_errors(parser.prog, REPORTED, args.traceback):
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    path, name = resolve_suite(args.task, args.suite)
    levels = load_levels(path)[: args.levels]
    EPISODE_LIMIT.check(args.episodes * len(levels), "--episodes x levels")
    policy, env_kwargs = make_policy(
        args.policy, levels, args.seed, args.algo, trusted=args.trust_pickle, greedy=args.greedy
    )
    env_kwargs["time_limit"] = args.time_limit
    policy_name = args.policy if args.policy in ("random", "noop") else Path(args.policy).stem
    folder = name.replace(" (", "-").rstrip(")")  # append-still (v1.0) -> append-still-v1.0
    out = Path(
        args.out
        or Path("outputs")
        / "benchmark"
        / f"{folder}-{policy_name}-{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    )
    rows = run_suite(levels, policy, args.episodes, args.seed, args.n_envs, env_kwargs)
    summary = summarise(rows)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "episodes.csv", rows)
    _write_csv(
        out / "summary.csv",
        [
            {
                "suite": name,
                "levels": str(path),
                "policy": policy_name,
                "episodes": len(rows),
                **{
                    f"{c}_{s}": v
                    for c, (m, d) in summary.items()
                    for s, v in (("mean", m), ("std", d))
                },
            }
        ],
    )
    table = markdown_table(name, policy_name, summary)
    with atomic_path(out / "summary.md") as tmp:
        Path(tmp).write_text(table)
    plot_histograms(rows, out / "histograms.png", f"{name}: {policy_name}")
    print(table)
    print(f"wrote {out}")
    return summary
