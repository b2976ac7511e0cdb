"""The self-reflection benchmark: an agent's average reward per step over the battery.

The battery (:func:`extended_envs.envs.battery`) is every environment of the library and its
``minus_rewards`` negation, so an agent that ignores rewards scores exactly 0 and a score above 0
means the agent does better than indifference across the battery (the paper's practical stand-in
for the self-reflection measure of Definition 3).

Run it with Hydra::

    extended-envs benchmark agent=QLearner steps=1000 seeds=[0,1,2] reality_check=true

``agent`` is a class of :mod:`extended_envs.agents` (or a short alias) or the import path
``package.module.Class`` of any agent class (an :class:`~extended_envs.core.Agent` or any
class with ``act`` and ``train``). The agent class is checked first
(:func:`~extended_envs.agent_checker.check_agent`): one whose ``act`` changes it or draws
randomness, or that is not semi-deterministic, is refused before anything runs.

It writes ``results.csv`` (one row per agent, environment and seed: ``agent,env,seed,nsteps,reward``
with the total reward, as in the reference library's result table), ``results.md`` (reward per
step of each environment and of its negation, and the measure) and ``results.png`` into the run
directory. Settings are typed (:class:`extended_envs.config.BenchmarkConfig`); a bad setting, agent,
environment or hyperparameter ends the command with one line ``extended_envs.apps.benchmark: error:
...`` (``HYDRA_FULL_ERROR=1`` for the traceback).
"""

from __future__ import annotations

import csv
import importlib
import io
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tqdm.auto import tqdm

from extended_envs import reality_check
from extended_envs.agent_checker import check_agent
from extended_envs.apps.cli import PROG as CLI
from extended_envs.checks import check, check_seed
from extended_envs.config import BenchmarkConfig, typed
from extended_envs.core import (
    ExtendedEnvironment,
    is_agent_class,
    resolve_hyperparams,
    run_environment,
)
from extended_envs.envs import BY_NAME, battery, minus_rewards
from safety_rl_common.cli import run_hydra_app
from safety_rl_common.errors import REPORTED, UserError, hydra_app_errors
from safety_rl_common.files import atomic_path, write_text

PROG = f"{CLI} benchmark"

FIELDS = ["agent", "env", "seed", "nsteps", "reward"]
ALIASES = {
    "random": "RandomAgent",
    "constant": "ConstantAgent",
    "q": "QLearner",
    "dqn": "DQNAgent",
    "ppo": "PPOAgent",
    "a2c": "A2CAgent",
}


IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def agent_class(name: str) -> type:
    """The agent class called ``name`` in :mod:`extended_envs.agents` (or a short alias), or
    the class at the import path ``name`` (``package.module.Class``)."""
    if "." in name:
        return imported_agent_class(name)
    from extended_envs import agents  # imports torch: only once the configuration is valid

    resolved = ALIASES.get(name.lower(), name)
    if resolved not in agents.__all__:
        choices = ", ".join([*agents.__all__, *ALIASES])
        raise UserError(
            f"unknown agent {name!r}; choose one of: {choices}, or give the import path "
            "of an agent class (module.Class)"
        )
    return getattr(agents, resolved)


def imported_agent_class(path: str) -> type:
    """The class at ``path`` (``module.Class``), which must have ``act`` and ``train``.

    Importing the module runs its code: it is the module the user named on the command line.
    """
    if not IMPORT_PATH.fullmatch(path):
        raise UserError(f"agent={path!r} is not an import path module.Class (dotted Python names)")
    module_name, class_name = path.rsplit(".", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise UserError(f"agent={path!r}: cannot import module {module_name!r} ({error})") from None
    value = getattr(module, class_name, None)
    if value is None:
        raise UserError(f"agent={path!r}: module {module_name!r} has no {class_name!r}")
    if not is_agent_class(value):
        raise UserError(
            f"agent={path!r} is not an agent class: expected a class with act(obs) and "
            "train(o_prev, a, r, o_next) methods"
        )
    return value


def run_battery(
    agent: type,
    steps: int,
    seeds: Sequence[int],
    environments: Sequence[type[ExtendedEnvironment]] | None = None,
    progress: bool = False,
    **hyperparams: Any,
) -> list[dict[str, Any]]:
    """One row per (seed, environment): the total reward of ``steps`` steps of ``agent``."""
    check.count("steps", steps)
    if not seeds:
        raise UserError("seeds must name at least one seed, got []")
    for seed in seeds:
        check_seed(seed, "each of seeds")
    environments = battery() if environments is None else environments
    rows = []
    jobs = [(seed, env) for seed in seeds for env in environments]
    bar = tqdm(jobs, desc=f"battery {agent.__name__}", disable=not progress, unit="env")
    for seed, env in bar:
        bar.set_postfix_str(f"seed {seed} {env.__name__}", refresh=False)
        result = run_environment(env, agent, steps, seed=seed, **hyperparams)
        rows.append(
            {
                "agent": agent.__name__,
                "env": env.__name__,
                "seed": int(seed),
                "nsteps": steps,
                "reward": result["total_reward"],
            }
        )
    return rows


def per_seed_measures(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """For each seed, the average reward per step over the environments run with it."""
    by_seed: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        by_seed[row["seed"]].append(row["reward"] / row["nsteps"])
    return {seed: float(np.mean(values)) for seed, values in sorted(by_seed.items())}


def self_reflection_measure(rows: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """Mean over seeds of the per-seed measure, and its standard error (0 for one seed)."""
    values = np.array(list(per_seed_measures(rows).values()))
    stderr = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0
    return float(values.mean()), stderr


def reward_per_step(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each environment's reward per step, averaged over seeds."""
    by_env: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_env[row["env"]].append(row["reward"] / row["nsteps"])
    return {env: float(np.mean(values)) for env, values in by_env.items()}


def base_names(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Names of the environments that are not negations, in the order they were run."""
    names = dict.fromkeys(row["env"] for row in rows)
    return [name for name in names if not name.startswith("minus_rewards(")]


def negated_name(name: str) -> str:
    return f"minus_rewards({name})"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """Reward per step of each environment and of its negation, then the measure."""
    per_env = reward_per_step(rows)
    agent = rows[0]["agent"]
    seeds = sorted({row["seed"] for row in rows})
    steps = sorted({row["nsteps"] for row in rows})
    measure, stderr = self_reflection_measure(rows)

    def cell(name: str) -> str:
        return f"{per_env[name]:+.3f}" if name in per_env else "-"

    lines = [
        f"Agent `{agent}`, {', '.join(map(str, steps))} steps, seeds {seeds}: "
        f"reward per step (mean over seeds).",
        "",
        "| environment | reward/step | minus_rewards |",
        "|---|---:|---:|",
        *(f"| {name} | {cell(name)} | {cell(negated_name(name))} |" for name in base_names(rows)),
        "",
        f"**Self-reflection measure: {measure:+.4f}** (± {stderr:.4f} standard error over "
        f"{len(seeds)} seed{'s' if len(seeds) > 1 else ''}, {len(per_env)} environments)",
    ]
    return "\n".join(lines) + "\n"


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Horizontal bars: each environment's reward per step, and its negation's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_env = reward_per_step(rows)
    names = base_names(rows)
    y = np.arange(len(names))
    plain = [per_env.get(name, np.nan) for name in names]
    negated = [per_env.get(negated_name(name), np.nan) for name in names]
    measure, _ = self_reflection_measure(rows)
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(names) + 1.8))
    ax.barh(y - 0.2, plain, height=0.4, label="environment")
    ax.barh(y + 0.2, negated, height=0.4, label="minus_rewards")
    ax.axvline(measure, color="black", linestyle="--", label=f"measure {measure:+.3f}")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    ax.set_title(f"Reward per step, {rows[0]['agent']}")
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, fontsize="small")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def write_results(rows: Sequence[dict[str, Any]], directory: Path) -> None:
    """``results.csv``, ``results.md`` and ``results.png`` in ``directory``."""
    write_text(directory / "results.csv", csv_text(rows))
    write_text(directory / "results.md", markdown_table(rows))
    plot(rows, directory / "results.png")


def environments_for(include_slow: bool, only: Sequence[str]) -> list[type[ExtendedEnvironment]]:
    """The battery, or just the named environments (each followed by its negation)."""
    if not only:
        return battery(include_slow=include_slow)
    unknown = sorted(set(only) - set(BY_NAME))
    if unknown:
        raise UserError(f"unknown environment(s) {unknown}; known: {sorted(BY_NAME)}")
    return [version for name in only for version in (BY_NAME[name], minus_rewards(BY_NAME[name]))]


@hydra.main(version_base=None, config_path="pkg://extended_envs.conf", config_name="benchmark")
def app(cfg: DictConfig) -> None:
    """Run the battery as configured, print the table and write the results."""
    with hydra_app_errors(PROG, HydraConfig.get().runtime.output_dir, REPORTED):
        settings = typed(BenchmarkConfig, cfg)
        agent = agent_class(settings.agent)
        resolve_hyperparams(agent, settings.hyperparams)  # checked before anything runs
        check_agent(agent, **settings.hyperparams)
        if settings.reality_check:
            agent = reality_check(agent)
        environments = environments_for(settings.include_slow, settings.only)
        rows = run_battery(
            agent, settings.steps, settings.seeds, environments,
            progress=settings.progress, **settings.hyperparams,
        )  # fmt: skip
        directory = Path(HydraConfig.get().runtime.output_dir)
        write_results(rows, directory)
    print(markdown_table(rows))
    print(f"Results written to {directory}")


def main(argv: Sequence[str] | None = None) -> int:
    """``extended-envs benchmark [OVERRIDE ...]``; the exit status."""
    return run_hydra_app(app, PROG, argv)
