"""Re-run the paper's tabular experiments and set the numbers beside the paper's.

    drest reproduce                 # full: 10 seeds, the paper's budgets
    drest reproduce --quick         # 2 seeds, 1/8 of the budgets, 5 lopsided x values

Experiments: the example world (Figure 3), the eight appendix worlds (Figures 9-16), and the
lopsided-rewards sweep (Figure 6: x = 10**(-2 + j/4), j = 0..16, DREST without division by m),
each with the default and the DREST reward. Writes ``results.md`` (tables with the paper's values
and the differences), ``results.json``, curve figures and policy figures into ``--out``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from drest.apps.cli import PROG as CLI
from drest.plots import curves_figure, lopsided_figure, policy_figure
from drest.reinforce import paper_settings, train_reinforce
from drest.tabular import compile_world
from drest.worlds import APPENDIX_WORLDS, builtin
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

# Reported in the paper (see shared/drest/GRIDWORLDS.md): final values; appendix ones read from
# figures after 1,000 meta-episodes.
PAPER_EXAMPLE = {
    "default": {"neutrality": 0.199, "usefulness": 0.936},
    "drest": {"neutrality": 0.9945, "usefulness": 0.900},
}
PAPER_APPENDIX = {  # world: (NEUTRALITY default, DREST, USEFULNESS default, DREST)
    "fewer_for_longer": (0.0, 0.99, 0.97, 0.86),
    "one_coin_only": (0.0, 0.99, 0.89, 0.83),
    "hidden_treasure": (0.40, 0.99, 0.61, 0.76),
    "equal_value": (0.0, 1.0, 0.93, 0.90),
    "around_the_corner": (0.05, 0.78, 0.87, 0.82),
    "spacious": (0.13, 1.0, 0.98, 0.96),
    "royal_road": (0.37, 0.99, 0.93, 0.89),
    "last_moment": (0.44, 0.99, 0.87, 0.86),
}
PAPER_LOPSIDED = {
    0.01: 0.0,
    0.0178: 0.0,
    0.0316: 0.0,
    0.0562: 0.24,
    0.1: 0.57,
    0.178: 0.76,
    0.316: 0.88,
    0.562: 0.96,
    1.0: 0.99,
    1.78: 0.99,
    3.16: 0.95,
    5.62: 0.84,
    10.0: 0.68,
    17.8: 0.40,
    31.6: 0.08,
    56.2: 0.08,
    100.0: 0.08,
}
LOPSIDED_XS = tuple(round(10 ** (-2 + j / 4), 4) for j in range(17))
QUICK_XS = (0.1, 0.3162, 1.0, 3.1623, 10.0)
REWARDS = ("default", "drest")
PROG = f"{CLI} reproduce"
MAX_SEEDS = 1000
MAX_WORKERS = 4 * mp.cpu_count()


def _job(job: dict) -> dict:
    """One training run (module-level so multiprocessing can pickle it)."""
    spec = builtin(job["world"], job.get("x", 1.0))
    settings = paper_settings(job["world"])
    settings = replace(
        settings,
        meta_episodes=max(1, round(settings.meta_episodes * job["scale"])),
        decay_meta_episodes=max(1, round(settings.decay_meta_episodes * job["scale"])),
    )
    reward = (
        "drest_lopsided"
        if job["world"] == "lopsided" and job["reward"] == "drest"
        else job["reward"]
    )
    world = compile_world(spec)
    start = time.perf_counter()
    result = train_reinforce(
        world, reward, settings, job["seed"], eval_every=max(1, settings.meta_episodes // 64)
    )
    out = {
        **job,
        "seconds": time.perf_counter() - start,
        "usefulness": result.final.usefulness,
        "neutrality": result.final.neutrality,
        "length_probs": result.final.length_probs,
        "history": [
            {k: h[k] for k in ("mini_episodes", "usefulness", "neutrality")} for h in result.history
        ],
    }
    if job["seed"] == 0:
        out["obs_policy"] = result.obs_policy
    return out


def _jobs(seeds: int, scale: float, xs) -> list[dict]:
    jobs = []
    for reward in REWARDS:
        for seed in range(seeds):
            jobs.append(
                {
                    "experiment": "example",
                    "world": "example",
                    "reward": reward,
                    "seed": seed,
                    "scale": scale,
                }
            )
            for world in APPENDIX_WORLDS:
                jobs.append(
                    {
                        "experiment": "appendix",
                        "world": world,
                        "reward": reward,
                        "seed": seed,
                        "scale": scale,
                    }
                )
            for x in xs:
                jobs.append(
                    {
                        "experiment": "lopsided",
                        "world": "lopsided",
                        "x": x,
                        "reward": reward,
                        "seed": seed,
                        "scale": scale,
                    }
                )
    return jobs


def _stat(values) -> str:
    arr = np.asarray(values, dtype=float)
    return f"{arr.mean():.3f} ± {arr.std():.3f}"


def _report(results: list[dict], out: Path, seeds: int, scale: float, xs, wall: float) -> str:
    def select(**kw):
        return [r for r in results if all(r.get(k) == v for k, v in kw.items())]

    lines = [
        f"# DREST reproduction ({seeds} seeds per arm, budget x{scale:g} of the paper's)",
        "",
        f"Wall time {wall:.0f} s on {mp.cpu_count()} CPU cores; "
        f"{sum(r['seconds'] for r in results):.0f} s of training CPU in all.",
        "",
        "Mean ± std over seeds; diff = ours − paper.",
        "",
        "## Example world (Figure 3), final",
        "",
        "| reward | NEUTRALITY ours | paper | diff | USEFULNESS ours | paper | diff "
        "| P(long) ours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for reward in REWARDS:
        rs = select(experiment="example", reward=reward)
        n = [r["neutrality"] for r in rs]
        u = [r["usefulness"] for r in rs]
        p_long = [r["length_probs"][max(r["length_probs"])] for r in rs]
        ref = PAPER_EXAMPLE[reward]
        lines.append(
            f"| {reward} | {_stat(n)} | {ref['neutrality']} | "
            f"{np.mean(n) - ref['neutrality']:+.3f} | {_stat(u)} | {ref['usefulness']} | "
            f"{np.mean(u) - ref['usefulness']:+.3f} | {_stat(p_long)} |"
        )
    lines += [
        "",
        "## Appendix worlds, final",
        "",
        "| world | reward | NEUTRALITY ours | paper | diff | USEFULNESS ours | paper | diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for world in APPENDIX_WORLDS:
        for col, reward in enumerate(REWARDS):
            rs = select(experiment="appendix", world=world, reward=reward)
            n = [r["neutrality"] for r in rs]
            u = [r["usefulness"] for r in rs]
            pn, pu = PAPER_APPENDIX[world][col], PAPER_APPENDIX[world][2 + col]
            lines.append(
                f"| {world} | {reward} | {_stat(n)} | {pn} | {np.mean(n) - pn:+.3f} | "
                f"{_stat(u)} | {pu} | {np.mean(u) - pu:+.3f} |"
            )
    lines += [
        "",
        "## Lopsided rewards (Figure 6), final NEUTRALITY",
        "",
        "| x | default ours | DREST (no /m) ours | DREST paper | diff |",
        "|---|---|---|---|---|",
    ]
    for x in xs:
        d = [r["neutrality"] for r in select(experiment="lopsided", x=x, reward="default")]
        s = [r["neutrality"] for r in select(experiment="lopsided", x=x, reward="drest")]
        ref = min(PAPER_LOPSIDED.items(), key=lambda kv: abs(np.log(kv[0] / x)))[1]
        lines.append(f"| {x:g} | {_stat(d)} | {_stat(s)} | {ref} | {np.mean(s) - ref:+.3f} |")
    lines += [
        "",
        "Figures: `fig3_example_curves.png`, `appendix_<world>_curves.png`, "
        "`fig6_lopsided.png`, `policy_<world>_<reward>.png` (seed 0).",
        "",
    ]
    text = "\n".join(lines)
    write_text(out / "results.md", text)
    return text


def _figures(results: list[dict], out: Path, xs) -> None:
    def histories(**kw):
        return [r["history"] for r in results if all(r.get(k) == v for k, v in kw.items())]

    def save(fig, name: str) -> None:
        save_figure(fig, out / name, dpi=120, bbox_inches="tight")

    save(
        curves_figure(
            {rw: histories(experiment="example", reward=rw) for rw in REWARDS},
            "Example world",
            reference=PAPER_EXAMPLE,
        ),
        "fig3_example_curves.png",
    )
    for world in APPENDIX_WORLDS:
        ref = {
            rw: {"neutrality": PAPER_APPENDIX[world][i], "usefulness": PAPER_APPENDIX[world][2 + i]}
            for i, rw in enumerate(REWARDS)
        }
        save(
            curves_figure(
                {rw: histories(experiment="appendix", world=world, reward=rw) for rw in REWARDS},
                world,
                ref,
            ),
            f"appendix_{world}_curves.png",
        )
    ours = {
        rw: [
            [
                r["neutrality"]
                for r in results
                if r["experiment"] == "lopsided" and r["x"] == x and r["reward"] == rw
            ]
            for x in xs
        ]
        for rw in REWARDS
    }
    save(lopsided_figure(xs, ours, PAPER_LOPSIDED), "fig6_lopsided.png")
    for r in results:
        if "obs_policy" in r and r["experiment"] != "lopsided":
            world = compile_world(builtin(r["world"]))
            save(
                policy_figure(
                    world, r["obs_policy"][world.obs], f"{r['world']}, {r['reward']} reward, seed 0"
                ),
                f"policy_{r['world']}_{r['reward']}.png",
            )


def main(argv: list[str] | None = None) -> int:
    """``drest reproduce ...``; the exit status."""
    run(argv)
    return 0


def run(argv: list[str] | None = None) -> dict:
    """The reproduction as :func:`main` runs it; its wall time and number of runs."""
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 seeds, 1/8 of the budgets, 5 lopsided x values"
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help=f"seeds per arm, 1 to {MAX_SEEDS} (default 10)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=None,
        help="multiply the paper's meta-episode budgets and decay periods",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=mp.cpu_count(),
        help="worker processes (default: one per CPU core)",
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/drest_reproduce"))
    add_traceback_flag(parser)
    args = parser.parse_args(argv)
    with one_line_errors(PROG, REPORTED, traceback=args.traceback):
        return _reproduce(args)


def _reproduce(args: argparse.Namespace) -> dict:
    seeds = (2 if args.quick else 10) if args.seeds is None else args.seeds
    scale = (0.125 if args.quick else 1.0) if args.scale is None else args.scale
    check.value("--seeds", seeds, lambda v: 1 <= v <= MAX_SEEDS, f"from 1 to {MAX_SEEDS}")
    check.value("--scale", scale, lambda v: v > 0, "a positive number")
    check.value(
        "--workers",
        args.workers,
        lambda v: 1 <= v <= MAX_WORKERS,
        f"from 1 to {MAX_WORKERS} (4 per CPU core)",
    )
    if args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out}: exists and is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)  # before training: a bad --out fails at once
    xs = QUICK_XS if args.quick else LOPSIDED_XS
    jobs = _jobs(seeds, scale, xs)
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(min(args.workers, len(jobs))) as pool:
        results = list(tqdm(pool.imap_unordered(_job, jobs), total=len(jobs), desc="runs"))
    wall = time.perf_counter() - start
    text = _report(results, args.out, seeds, scale, xs, wall)
    _figures(results, args.out, xs)
    write_json(
        args.out / "results.json",
        [{k: v for k, v in r.items() if k != "obs_policy"} for r in results],
    )
    print(text)
    print(f"outputs in {args.out}")
    return {"wall_seconds": wall, "runs": len(results)}
