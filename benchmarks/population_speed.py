"""Population training speed: env steps per second of P PPO members trained as one population
(the SafeLife paper's setup: 16 envs x 20 steps a member, 3 epochs, 4 minibatches, 25x25 view,
the SafeLife CNN), beside single runs of the current paths measured in the same process: the
device path (DevicePPO on the device vector env: the same trainer at P = 1) and SB3's PPO on
the batched NumPy env.

    .venv/bin/python benchmarks/population_speed.py [--members 18] [--rollouts 4]
        [--single-rollouts 4] [--paths device batched] [--batching auto] [--precision fp32]
        [--ops] [--against REV [--repeats 3]]
        [OVERRIDE ...]

P separate runs spend P times one run's CPU time, so the population's env steps per CPU-second
(all members together) over one run's is the speed-up of training the grid as a population
on the same cores. Levels: the task's fixed suite, shuffled (no level generation timed).
Extra arguments are Hydra overrides of train.yaml over experiment=paper (e.g. device=cuda
env=append-still n_envs=16). Every run at ``--precision`` (``benchmarks/precision.py``), its
cuDNN kernels as a training run chooses them (autotuned, not deterministic: not the
deterministic ones SB3's seeding turns on). ``--ops`` counts instead what a rollout step asks
of the device at each population size (:mod:`safety_rl_common.torch_counts`, members batched
by each ``--batching``, ``auto`` as on CUDA): a rollout's ops per step, an env step's alone
and the difference.

``--against REV`` (e.g. ``4b4bb0d``, the last commit before issue 42's one trainer) checks
``REV`` out into a temporary git worktree (removed at the end) and measures its code and this
tree's taking turns, each turn a fresh process running this file (the old one with the old
checkout on ``PYTHONPATH``): at each ``--members`` size P (P = 1: one run, DevicePPO on
``vec_env=device``, over ``--single-rollouts``; P > 1: the population at ``--batching auto``,
over ``--rollouts``, 2 by default) env steps per CPU-second, ``--repeats`` times (old, new;
then new, old; ...), and the median ratio new/old; with ``--ops``, each code's rollout-step
ops outside the env step at each size (each at its own CUDA ``auto`` batching). Put the
overrides before ``--members``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as python -m safelife_rl train sets it

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict
from precision import flags_text, with_precision

import safelife_rl
from safelife_rl.envs.registration import suite_file
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.models import build_model
from safelife_rl.training.population.runs import build_population
from safelife_rl.training.precision import PRECISIONS, apply_precision
from safelife_rl.training.run import cudnn_kernels, plain
from safety_rl_common.torch_counts import count_ops, counting

try:
    from safelife_rl.training.device.stacked import BATCHING, CUDA_AUTO
except ImportError:  # the code before issue 42 (``--against``): the population's own batching
    from safelife_rl.training.population.stacked import BATCHING

    CUDA_AUTO = "vmap"  # its ``auto`` on CUDA

ROOT = Path(__file__).resolve().parents[1]
#: the configs of the package imported (``--against``'s old turns: the old checkout's)
CONF = Path(safelife_rl.__file__).resolve().parent / "conf"
#: how a turn's process (``--against``) hands its figures back: a line of JSON after this
TURN = "turn result: "
PENALTIES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: the ways of batching the members' networks kept to be measured (not ``auto``'s choice of
#: one of them, not ``loop``'s member by member)
KEPT_BATCHINGS = [batching for batching in BATCHING if batching not in ("auto", "loop")]
#: the trainer with its rollout and update each one CUDA graph, its env's step compiled and
#: captured inside (the overrides of the lease stages' captured rows and runs)
CAPTURED = ("graphs=all", "compile=true")
#: the paper's setup at a size that runs in seconds on a CPU (``--tiny``: CI)
TINY = ["n_envs=2", "algo.n_steps=4", "policy.kwargs.features_extractor_kwargs.features_dim=16"]


def config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", overrides=["experiment=paper", *overrides])
    with open_dict(cfg):
        cfg.env.kwargs.levels = suite_file(cfg.env.eval_kwargs.levels.task)
        cfg.env.kwargs.shuffle = True
    return cfg


def members(cfg: DictConfig, count: int) -> list[DictConfig]:
    """The grid of one task: penalties x seeds, ``count`` of them."""
    out = []
    for k in range(count):
        member = cfg.copy()
        with open_dict(member):
            member.seed = k // len(PENALTIES)
            member.wrappers.side_effect_penalty.penalty = PENALTIES[k % len(PENALTIES)]
        out.append(member)
    return out


def timed(learn, steps: int) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of ``learn(steps)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    learn(steps)
    return time.perf_counter() - wall, time.process_time() - cpu


def population_rates(
    cfg: DictConfig, count: int, rollouts: int, batching: str = "auto"
) -> tuple[float, float]:
    """All members' env steps per wall second and per CPU second (after a warm-up: the first
    allocations and kernels, and under ``graphs`` the capture too)."""
    population = build_population(members(cfg, count), batching)
    per_rollout = cfg.n_envs * cfg.algo.n_steps
    warm_up = 1 if cfg.get("graphs", "none") == "none" else 2
    try:
        population.learn(warm_up * per_rollout)
        wall, cpu = timed(
            lambda steps: population.learn(steps, reset_num_timesteps=False),
            per_rollout * rollouts,
        )
    finally:
        population.env.close()
    steps = count * per_rollout * rollouts
    return steps / wall, steps / cpu


def rollout_counts(cfg: DictConfig, count: int, batching: str = CUDA_AUTO) -> dict:
    """What a rollout step of ``count`` members (``batching``) asks of the device, counted over
    its second rollout (the first builds what is reused), beside one env step's: kernel ops a
    rollout step (``per_step``), an env step's alone (``env``), the difference (``outside``)
    and the rollout's counts in words (``rollout``)."""
    population = build_population(members(cfg, count), batching)
    try:
        population.learn(cfg.n_envs * cfg.algo.n_steps)
        # collect_rollouts: the one trainer's; _collect_rollouts: the population's before it
        collect = getattr(population, "collect_rollouts", None) or population._collect_rollouts
        with counting() as rollout:
            collect([])
        actions = population._last_obs.new_zeros(len(population._last_obs), dtype=torch.long)
        env = count_ops(population.venv.step, actions)
    finally:
        population.env.close()
    per_step = rollout.kernels / cfg.algo.n_steps
    return {
        "per_step": per_step,
        "env": env.kernels,
        "outside": per_step - env.kernels,
        "rollout": str(rollout),
    }


def ops_text(ops: dict) -> str:
    """:func:`rollout_counts`'s figures in words."""
    return (
        f"{ops['per_step']:,.0f} kernel ops a rollout step ({ops['rollout']}), "
        f"an env step alone {ops['env']:,}: {ops['outside']:,.0f} outside the env step"
    )


def rollout_ops(cfg: DictConfig, count: int, batching: str = CUDA_AUTO) -> str:
    """:func:`rollout_counts` in a line."""
    return f"population of {count:3d} ({batching}): " + ops_text(
        rollout_counts(cfg, count, batching)
    )


def single_rates(cfg: DictConfig, path: str, rollouts: int) -> tuple[float, float]:
    """One run's env steps per wall second and per CPU second on ``vec_env=path``."""
    env = make_vec_env(
        cfg.env.id,
        plain(cfg.env.kwargs),
        plain(cfg.wrappers),
        cfg.n_envs,
        path,
        device=cfg.device,
    )
    per_rollout = cfg.n_envs * cfg.algo.n_steps
    try:
        with open_dict(cfg):
            cfg.vec_env = path
        model = build_model(cfg, env)
        apply_precision(cfg.precision, model.policy)  # as a run
        cudnn_kernels(cfg.get("cudnn_deterministic", False))  # as a run: not SB3's seeding's
        model.learn(per_rollout)
        wall, cpu = timed(model.learn, per_rollout * rollouts)
    finally:
        env.close()
    steps = per_rollout * rollouts
    return steps / wall, steps / cpu


def turn(cfg: DictConfig, count: int, rollouts: int, single_rollouts: int, ops: bool) -> dict:
    """One turn of ``--against`` in this process: ``count`` members' env steps per CPU-second
    over ``rollouts`` (1: one run on ``vec_env=device`` over ``single_rollouts``), or with
    ``ops`` their rollout-step ops at this code's CUDA ``auto`` batching."""
    if ops:
        return {"batching": CUDA_AUTO, **rollout_counts(cfg, count)}
    if count == 1:
        return {"cpu": single_rates(cfg, "device", single_rollouts)[1]}
    return {"cpu": population_rates(cfg, count, rollouts)[1]}


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """``rev`` checked out in a temporary git worktree, removed at the end (also on error)."""
    parent = Path(tempfile.mkdtemp(prefix="population_speed_"))
    tree = parent / "tree"
    try:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(tree), rev],
            check=True,
        )
        yield tree
    finally:
        if tree.exists():
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
            )
        shutil.rmtree(parent, ignore_errors=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)


def run_turn(root: Path, count: int, args: argparse.Namespace) -> dict:
    """One turn: a fresh process running this file with ``root``'s package on the path."""
    command = [
        sys.executable, str(Path(__file__).resolve()), "--turn", "--members", str(count),
        "--rollouts", str(args.rollouts), "--single-rollouts", str(args.single_rollouts),
        "--precision", args.precision,
        *(["--ops"] if args.ops else []), *args.overrides,
    ]  # fmt: skip
    done = subprocess.run(
        command,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith(TURN))
    return json.loads(line[len(TURN) :])


def against(cfg: DictConfig, args: argparse.Namespace) -> None:
    """``--against``: ``args.against``'s code and this tree's taking turns."""
    counter = "safety_rl_common/torch_counts.py"
    same_counter = (
        subprocess.run(
            ["git", "-C", str(ROOT), "diff", "--quiet", args.against, "--", counter]
        ).returncode
        == 0
    )
    with checkout(args.against) as old:
        roots = {"old": old, "new": ROOT}
        print(
            f"old: {args.against} ({old}), new: {ROOT}; {cfg.env.id} on {cfg.device}, "
            f"{cfg.n_envs} envs x {cfg.algo.n_steps} steps a member, {os.cpu_count()} cores, "
            f"load {os.getloadavg()[0]:.1f}; {args.precision}; each turn a fresh process"
        )
        if args.ops:
            print(
                "ops counted by safety_rl_common.torch_counts, nested ops included (an op "
                "that runs others, e.g. a torch.multinomial, counts as the ops it runs, not as "
                "one, in the old code too: figures written at the old commit may have counted "
                f"it as one); each code's own counter, {'the same as' if same_counter else 'NOT'}"
                " this tree's"
            )
            for count in args.members:
                ops = {side: run_turn(root, count, args) for side, root in roots.items()}
                for side, counts in ops.items():
                    print(f"P = {count:3d} {side} ({counts['batching']}): {ops_text(counts)}")
                print(
                    f"P = {count:3d} outside the env step new/old: "
                    f"{ops['new']['outside'] / ops['old']['outside']:.3f}"
                )
            return
        for count in args.members:
            what = "one run, vec_env=device" if count == 1 else "population, batching auto"
            ratios = []
            for repeat in range(args.repeats):
                order = list(roots) if repeat % 2 == 0 else list(reversed(roots))
                rates = {side: run_turn(roots[side], count, args)["cpu"] for side in order}
                ratios.append(rates["new"] / rates["old"])
                print(
                    f"P = {count:3d} ({what}) repeat {repeat + 1} ({' then '.join(order)}): "
                    f"old {rates['old']:8,.0f}  new {rates['new']:8,.0f} env steps per CPU-s  "
                    f"new/old {ratios[-1]:.3f}"
                )
            print(
                f"P = {count:3d} median new/old over {args.repeats}: "
                f"{statistics.median(ratios):.3f}"
            )
    print(f"{args.precision}, {flags_text()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[18], help="population sizes")
    parser.add_argument(
        "--rollouts", type=int, help="timed rollouts a member (4; with --against 2)"
    )
    parser.add_argument("--single-rollouts", type=int, default=4, help="timed rollouts a run")
    parser.add_argument(
        "--paths", nargs="*", default=["device", "batched"], help="single-run paths to time"
    )
    parser.add_argument(
        "--batching",
        nargs="+",
        choices=BATCHING,
        default=["auto"],
        help="how the networks run (each timed)",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
    parser.add_argument("--ops", action="store_true", help="count a rollout step's ops instead")
    parser.add_argument(
        "--against", metavar="REV", help="measure REV's code and this tree's taking turns"
    )
    parser.add_argument("--repeats", type=int, default=3, help="--against: turns of each code")
    parser.add_argument("--turn", action="store_true", help=argparse.SUPPRESS)  # --against's
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    args = parser.parse_args()
    if args.rollouts is None:
        args.rollouts = 2 if args.against else 4
    cfg = with_precision(config(args.overrides), args.precision)
    torch.set_num_threads(cfg.torch_threads)
    if args.turn:
        (count,) = args.members
        print(
            TURN + json.dumps(turn(cfg, count, args.rollouts, args.single_rollouts, args.ops)),
            flush=True,
        )
        return
    if args.against:
        against(cfg, args)
        return
    if args.ops:
        for count in args.members:
            for batching in args.batching:  # auto: as on CUDA
                print(rollout_ops(cfg, count, CUDA_AUTO if batching == "auto" else batching))
        return
    print(
        f"{cfg.env.id} on {cfg.device}, {cfg.n_envs} envs x {cfg.algo.n_steps} steps a run, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.precision} "
        "(cuDNN: as a run sets it)"
    )
    singles = {}
    for path in args.paths:
        wall, cpu = single_rates(cfg, path, args.single_rollouts)
        singles[path] = cpu
        print(f"one run, vec_env={path:8s} {wall:10,.0f} env steps/s  {cpu:10,.0f} per CPU-s")
    for count in args.members:
        for batching in args.batching:
            wall, cpu = population_rates(cfg, count, args.rollouts, batching)
            ratios = "  ".join(f"{cpu / rate:.2f}x {path}" for path, rate in singles.items())
            print(
                f"population of {count:3d} ({batching:6s}) {wall:10,.0f} env steps/s  "
                f"{cpu:10,.0f} per CPU-s" + (f"  (per CPU-s: {ratios})" if ratios else "")
            )
    print(f"{args.precision}, {flags_text()}")


if __name__ == "__main__":
    main()
