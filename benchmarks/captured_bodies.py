"""What the device trainer's captured bodies hold (``graphs=``, issue 43 steps 2-3), counted on
any device: the kernel ops, syncs and copies of one rollout body and one update body (each one
launch when replayed as a CUDA graph), and the time the callbacks' steps take after a replayed
rollout, in the paper's setup.

    .venv/bin/python benchmarks/captured_bodies.py [--members 2] [--batching unfold grouped]
        [--callback-members 72] [--callbacks 6] [OVERRIDE ...]

The bodies are counted at ``--members`` (their ops do not depend on it:
``tests/safelife/test_captured_bodies.py``), after one rollout and update (the warm-up). The
callbacks' steps are timed for ``--callback-members`` members of ``--callbacks`` callbacks that
do nothing (a run has 6), as many steps as a rollout has, as the trainer runs them after a
replay (its members built at the TINY size: the callbacks' cost does not depend on the network).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from population_speed import TINY, config, members
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from safelife_rl.training.device.trainer import Clip, MemberTrainer
from safelife_rl.training.population.runs import build_population
from safety_rl_common.torch_counts import OpCounts, counting


class Idle(BaseCallback):
    def _on_step(self) -> bool:
        return True


def body_counts(overrides: list[str], size: int, batching: str) -> tuple[OpCounts, OpCounts]:
    """One rollout body's and one update body's counts, after a warm-up."""
    cfg = config(overrides)
    population = build_population(members(cfg, size), batching)
    try:
        population.learn(cfg.n_envs * cfg.algo.n_steps)
        first = population.members[0]
        population._prepare_rollout()
        with counting() as rollout:
            population._rollout()
        population._set_training_mode(True)
        orders = torch.as_tensor(population.orders(), device=population.device)
        with counting() as update:
            population._update(orders, Clip.of(first.clip_range(1.0), None))
    finally:
        population.env.close()
    return rollout, update


def callback_steps_ms(trainer: MemberTrainer, callbacks: int, steps: int) -> float:
    """Milliseconds of ``steps`` steps of :meth:`MemberTrainer._on_step` for the trainer's
    members, ``callbacks`` idle callbacks each, as after a replayed rollout."""
    lists = []
    for member in trainer.members:
        callback = CallbackList([Idle() for _ in range(callbacks)])
        callback.init_callback(member)
        lists.append(callback)
    actions = torch.zeros((trainer.size, trainer.n_envs), dtype=torch.long)
    begun = time.perf_counter()
    for _ in range(steps):
        trainer._on_step(lists, actions, None)  # type: ignore[arg-type]
    return (time.perf_counter() - begun) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--batching", nargs="+", default=["unfold", "grouped"])
    parser.add_argument("--callback-members", type=int, default=72)
    parser.add_argument("--callbacks", type=int, default=6)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of train.yaml")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = ["device=cpu", *args.overrides]
    cfg = config(overrides)
    print(
        f"the paper's setup: {cfg.n_envs} envs x {cfg.algo.n_steps} steps a member, "
        f"{cfg.algo.n_epochs} epochs of minibatches of {cfg.algo.batch_size}"
    )
    for batching in args.batching:
        rollout, update = body_counts(overrides, args.members, batching)
        print(f"{batching:8s} rollout body: {rollout}; update body: {update}")
    # the callbacks' cost does not depend on the network: TINY's members build in seconds
    population = build_population(members(config([*overrides, *TINY]), args.callback_members))
    try:
        ms = np.median(
            [callback_steps_ms(population, args.callbacks, cfg.algo.n_steps) for _ in range(5)]
        )
    finally:
        population.env.close()
    print(
        f"callbacks' steps after a replayed rollout: {args.callback_members} members x "
        f"{args.callbacks} idle callbacks x {cfg.algo.n_steps} steps: {ms:.1f} ms (median of 5)"
    )


if __name__ == "__main__":
    main()
