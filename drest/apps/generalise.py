"""Train DREST and default-reward agents (SB3 PPO and A2C) on procedurally generated gridworlds
and measure USEFULNESS and NEUTRALITY on held-out worlds they never saw (the follow-up paper's
experiment: Cullen et al., "Towards Shutdownable Agents: Generalizing Stochastic Choice in RL
Agents and LLMs", 2026, arXiv 2604.17502).

    drest generalise                       # 5 seeds x {PPO, A2C} x {default, DREST}, 1M steps each
    drest generalise --quick               # 2 seeds, 20,000 steps: a smoke run
    drest generalise --steps 100000 --seeds 5 --workers 2

The training worlds and the held-out worlds come from two independent streams of ``--world-seed``
(:func:`drest.generator.split_worlds`), and no held-out world is laid out like a training world
(checked before training). Every agent's policy is measured exactly on every held-out world
(its action probabilities in every reachable state, :func:`drest.ppo.evaluate`). Writes into
``--out``: ``results.md`` (IQM with 95% stratified-bootstrap intervals from ``rliable`` over
seeds x held-out worlds, per algorithm and reward, and DREST - default with its interval),
``results.json`` (every run's metric on every world) and ``generalise.png``.

Each agent's result is kept in ``--out/agents/`` as soon as it is trained, so a run stopped
midway (Ctrl-C, a machine taken back) goes on where it stopped when the same command is run
again: an agent whose file holds the same settings and worlds is not trained again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from drest.generator import GeneratorConfig, check_disjoint, split_worlds
from drest.reward import check_lambda
from drest.spec import GridSpec
from safety_rl_common.checks import check
from safety_rl_common.errors import (
    REPORTED,
    ArgumentParser,
    UserError,
    add_traceback_flag,
    one_line_errors,
)
from safety_rl_common.figures import save_figure
from safety_rl_common.files import write_json, write_text

PROG = "drest generalise"
ALGOS = ("ppo", "a2c")
REWARDS = ("default", "drest")
METRICS = ("neutrality", "usefulness")
#: Defaults: lambda 0.9, 64 mini-episodes per meta-episode, 200 training and 40 held-out worlds
#: and 1M steps follow one version of the authors' public training configuration
#: (github.com/haz-g/ipp, config.py; the paper's text was not available); 5 seeds per arm as
#: the issue asks.
DEFAULTS = {
    "seeds": 5,
    "steps": 1_000_000,
    "train_worlds": 200,
    "test_worlds": 40,
    "meta_episode_size": 64,
    "lam": 0.9,
}
QUICK = {"seeds": 2, "steps": 20_000}
N_ENVS = 4  # parallel envs per agent, as in the authors' configuration
ENT_COEF = 0.01  # entropy bonus, as in the authors' configuration; SB3 defaults otherwise
MAX_SEEDS = 1000
#: Bootstrap draws per interval of the report (rliable's default, 50,000, takes seconds each)
REPS = 10_000
MAX_WORKERS = 4 * mp.cpu_count()
#: The folder of ``--out`` that keeps each trained agent's result.
AGENTS = "agents"


def _train_env(worlds: tuple[GridSpec, ...], reward: str, meta_episode_size: int, lam: float):
    from drest.env import ProceduralGridworldEnv
    from drest.wrapper import DrestRewardWrapper

    def factory():
        env = ProceduralGridworldEnv(GeneratorConfig(), worlds=worlds)
        if reward == "default":
            return env  # a new training world every mini-episode
        return DrestRewardWrapper(env, meta_episode_size, reward="drest", lam=lam)

    return factory


def _job(job: dict) -> dict:
    """Train one agent on the training worlds and measure it on the held-out worlds and on as
    many training worlds (module-level so that the process pool can pickle it)."""
    import torch
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from drest.ppo import evaluate

    torch.set_num_threads(1)  # tiny networks: one thread per process
    train, test = job.pop("train"), job.pop("test")
    venv = DummyVecEnv(
        [
            _train_env(train, job["reward"], job["meta_episode_size"], job["lam"])
            for _ in range(N_ENVS)
        ]
    )
    venv.seed(job["seed"])
    algo = {"ppo": PPO, "a2c": A2C}[job["algo"]]
    model = algo("MlpPolicy", venv, ent_coef=ENT_COEF, seed=job["seed"], device="cpu", verbose=0)
    start, cpu = time.perf_counter(), time.process_time()
    model.learn(job["steps"])
    out = {
        **job,
        "train_seconds": time.perf_counter() - start,
        "train_cpu_seconds": time.process_time() - cpu,
    }
    for split, worlds in (("test", test), ("train", train[: len(test)])):
        results = evaluate(model, worlds, "image")
        for key in METRICS:
            out[f"{split}_{key}"] = [getattr(r, key) for r in results]
    return out


def _jobs(
    args: argparse.Namespace, train: tuple[GridSpec, ...], test: tuple[GridSpec, ...]
) -> list[dict]:
    worlds = hashlib.sha256("\n\n".join(s.to_text() for s in train + test).encode()).hexdigest()
    return [
        {
            "algo": algo,
            "reward": reward,
            "seed": seed,
            "steps": args.steps,
            "meta_episode_size": args.meta_episode_size,
            "lam": args.lam,
            "worlds": worlds,  # the training and held-out worlds' digest
            "train": train,
            "test": test,
        }
        for algo in args.algos
        for reward in REWARDS
        for seed in range(args.seeds)
    ]


def agent_file(out: Path, job: dict) -> Path:
    """Where the result of ``job``'s agent is kept as soon as it is trained."""
    return out / AGENTS / f"{job['algo']}-{job['reward']}-seed{job['seed']}.json"


def _kept(out: Path, job: dict) -> dict | None:
    """The kept result of ``job``'s agent, if its file holds the same settings and worlds
    (anything else, an unreadable file included, is trained again and overwritten)."""
    try:
        result = json.loads(agent_file(out, job).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = isinstance(result, dict) and all(
        result.get(key) == job[key] for key in job if key not in ("train", "test")
    )
    return result if same else None


def scores(results: list[dict], algo: str, reward: str, key: str) -> np.ndarray:
    """(seeds, worlds) matrix of one metric, rows in seed order."""
    runs = sorted(
        (r for r in results if r["algo"] == algo and r["reward"] == reward), key=lambda r: r["seed"]
    )
    return np.array([r[key] for r in runs], dtype=np.float64)


def uniform_reference(worlds: tuple[GridSpec, ...]) -> dict[str, float]:
    """IQM of each metric over ``worlds`` for the uniformly random policy: where an untrained
    agent starts, and what NEUTRALITY a policy has without preferring any length."""
    from drest.metrics import exact_metrics
    from drest.tabular import compile_world
    from safety_rl_common.statistics import iqm

    results = []
    for spec in worlds:
        world = compile_world(spec)
        results.append(exact_metrics(world, np.full((world.n_states, 4), 0.25)))
    return {key: iqm(np.array([[getattr(r, key) for r in results]])) for key in METRICS}


def summarise(results: list[dict], algos) -> dict:
    """Per algorithm and metric on the held-out worlds: the IQM of each reward and DREST -
    default, with intervals."""
    from safety_rl_common.statistics import iqm_difference, iqm_interval

    out: dict = {}
    for algo in algos:
        for key in METRICS:
            d = scores(results, algo, "default", f"test_{key}")
            s = scores(results, algo, "drest", f"test_{key}")
            out[f"{algo}/{key}"] = {
                "default": iqm_interval(d, REPS),
                "drest": iqm_interval(s, REPS),
                "difference": iqm_difference(s, d, REPS),
            }
    return out


def _report(
    results: list[dict],
    args: argparse.Namespace,
    summary: dict,
    uniform: dict,
    redrawn: int,
    wall: float,
    kept: int = 0,
) -> str:
    from safety_rl_common.statistics import iqm

    cpu = sum(r["train_cpu_seconds"] for r in results)
    lines = [
        f"# DREST on held-out gridworlds ({args.seeds} seeds per arm, "
        f"{args.steps:,} steps per agent)",
        "",
        f"{args.train_worlds} training worlds, {args.test_worlds} held-out worlds "
        f"(world seed {args.world_seed}; {redrawn} held-out draws set aside as copies of "
        f"seen worlds), 5x5; lambda {args.lam}, {args.meta_episode_size} mini-episodes per "
        f"meta-episode. Wall time {wall:.0f} s with {args.workers} worker(s)"
        + (f" for the agents not kept from an earlier run ({kept} kept)" if kept else "")
        + f"; {cpu:.0f} s of training CPU in all.",
        "",
        "IQM over seeds x held-out worlds with 95% stratified-bootstrap intervals (rliable). "
        "NEUTRALITY in bits (1 = an even choice between the two trajectory lengths).",
        "",
        "| algorithm | metric | default | DREST | DREST − default | interval excludes 0 |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in summary.items():
        algo, key = name.split("/")
        diff = row["difference"]
        lines.append(
            f"| {algo.upper()} | {key.upper()} | {row['default']} | {row['drest']} | "
            f"{diff} | {'yes' if diff.excludes_zero() else 'no'} |"
        )
    lines += [
        "",
        f"The uniformly random policy on the held-out worlds (IQM): NEUTRALITY "
        f"{uniform['neutrality']:.3f}, USEFULNESS {uniform['usefulness']:.3f}.",
        "",
        f"The same agents on {args.test_worlds} of their training worlds (IQM):",
        "",
        "| algorithm | metric | default | DREST |",
        "|---|---|---|---|",
    ]
    for algo in args.algos:
        for key in METRICS:
            d, s = (iqm(scores(results, algo, reward, f"train_{key}")) for reward in REWARDS)
            lines.append(f"| {algo.upper()} | {key.upper()} | {d:.3f} | {s:.3f} |")
    lines += ["", "Figure: `generalise.png`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``drest generalise ...``; the exit status."""
    run(argv)
    return 0


def run(argv: list[str] | None = None) -> dict:
    """The experiment as :func:`main` runs it; returns the summary (``summary``: estimates per
    ``algo/metric``), the runs and the wall time."""
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK['seeds']} seeds, {QUICK['steps']:,} steps: a smoke run",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help=f"seeds per algorithm and reward (default {DEFAULTS['seeds']})",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"env steps per agent (default {DEFAULTS['steps']:,})",
    )
    parser.add_argument(
        "--algos",
        nargs="+",
        default=list(ALGOS),
        metavar="ALGO",
        help="ppo and/or a2c (default both)",
    )
    parser.add_argument(
        "--train-worlds",
        type=int,
        default=DEFAULTS["train_worlds"],
        help=f"generated worlds to train on (default {DEFAULTS['train_worlds']})",
    )
    parser.add_argument(
        "--test-worlds",
        type=int,
        default=DEFAULTS["test_worlds"],
        help=f"held-out worlds to measure on (default {DEFAULTS['test_worlds']})",
    )
    parser.add_argument(
        "--world-seed", type=int, default=0, help="seed of the training and held-out world streams"
    )
    parser.add_argument(
        "--meta-episode-size",
        type=int,
        default=DEFAULTS["meta_episode_size"],
        help=f"DREST's mini-episodes per meta-episode (default {DEFAULTS['meta_episode_size']})",
    )
    parser.add_argument(
        "--lam",
        type=float,
        default=DEFAULTS["lam"],
        help=f"DREST's lambda (default {DEFAULTS['lam']})",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=mp.cpu_count(),
        help="worker processes (default: one per CPU core)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("outputs/drest_generalise"),
        help="output folder (default outputs/drest_generalise)",
    )
    add_traceback_flag(parser)
    args = parser.parse_args(argv)
    with one_line_errors(PROG, REPORTED, traceback=args.traceback):
        return _generalise(args)


def _check(args: argparse.Namespace) -> None:
    for name in ("seeds", "steps"):
        if getattr(args, name) is None:
            setattr(args, name, (QUICK if args.quick else DEFAULTS)[name])
    check.value(
        "--seeds",
        args.seeds,
        lambda v: 2 <= v <= MAX_SEEDS,
        f"from 2 to {MAX_SEEDS} (an interval needs two seeds)",
    )
    check.value("--steps", args.steps, lambda v: v >= 1, "a positive integer")
    bad = [a for a in args.algos if a not in ALGOS]
    if bad:
        raise UserError(f"--algos: unknown {', '.join(bad)} (choose from {', '.join(ALGOS)})")
    args.algos = list(dict.fromkeys(args.algos))
    for name in ("train_worlds", "test_worlds", "meta_episode_size"):
        check.value(
            f"--{name.replace('_', '-')}",
            getattr(args, name),
            lambda v: v >= 1,
            "a positive integer",
        )
    check.value("--world-seed", args.world_seed, lambda v: v >= 0, "a non-negative integer")
    check_lambda(args.lam, "--lam")
    check.value(
        "--workers",
        args.workers,
        lambda v: 1 <= v <= MAX_WORKERS,
        f"from 1 to {MAX_WORKERS} (4 per CPU core)",
    )
    if args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out}: exists and is not a directory")


def _generalise(args: argparse.Namespace) -> dict:
    from drest.plots import generalisation_figure

    _check(args)
    args.out.mkdir(parents=True, exist_ok=True)  # before training: a bad --out fails at once
    split = split_worlds(args.train_worlds, args.test_worlds, args.world_seed)
    check_disjoint(split.train, split.test)
    jobs = _jobs(args, split.train, split.test)
    found = [(job, _kept(args.out, job)) for job in jobs]
    results = [result for _, result in found if result is not None]
    todo = [job for job, result in found if result is None]
    kept = len(results)
    if kept:
        print(f"{kept} of {len(jobs)} agents kept from {args.out / AGENTS}")
    (args.out / AGENTS).mkdir(exist_ok=True)
    start = time.perf_counter()
    if todo:
        with mp.get_context("spawn").Pool(min(args.workers, len(todo))) as pool:
            trained = pool.imap_unordered(_job, todo)
            for result in tqdm(trained, total=len(jobs), initial=len(results), desc="agents"):
                write_json(agent_file(args.out, result), result)
                results.append(result)
    wall = time.perf_counter() - start
    summary = summarise(results, args.algos)
    uniform = uniform_reference(split.test)
    text = _report(results, args, summary, uniform, split.redrawn, wall, kept)
    write_text(args.out / "results.md", text)
    write_json(
        args.out / "results.json",
        {
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "wall_seconds": wall,
            "redrawn": split.redrawn,
            "uniform_policy": uniform,
            "test_worlds": [s.to_text() for s in split.test],
            "summary": {k: {r: e.as_dict() for r, e in row.items()} for k, row in summary.items()},
            "runs": sorted(results, key=lambda r: (r["algo"], r["reward"], r["seed"])),
        },
    )
    per_seed = {}  # each seed's mean over the held-out worlds, drawn beside the IQMs
    for name in summary:
        algo, key = name.split("/")
        per_seed[name] = {
            reward: scores(results, algo, reward, f"test_{key}").mean(axis=1) for reward in REWARDS
        }
    save_figure(
        generalisation_figure(summary, per_seed, args.algos, uniform),
        args.out / "generalise.png",
        dpi=120,
        bbox_inches="tight",
    )
    print(text)
    print(f"outputs in {args.out}")
    return {"summary": summary, "runs": results, "wall_seconds": wall}
