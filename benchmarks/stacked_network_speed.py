"""The members' stacked networks alone, each way of batching them side by side: milliseconds of
a forward pass and of a forward and backward pass of P SafeLife-CNN policies (the paper's
25x25 view, its 32/64/64 convolutions and 512 dense units, linear heads) on ``--batch``
observations a member, with the kernel ops of a forward pass
(:mod:`safety_rl_common.torch_counts`).

    .venv/bin/python benchmarks/stacked_network_speed.py [--members 18 72] [--batch 8]
        [--repeats 5] [--threads 1] [--batchings loop vmap unfold grouped]

The batchings take turns within each repeat (their order rotating from one repeat to the
next) in one process, and each figure is the median of the repeats: on a shared machine a
neighbour's load then falls on all of them alike. One untimed pass of each first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from omegaconf import OmegaConf
from stable_baselines3.common.policies import ActorCriticPolicy

from safelife_rl.training import SafeLifeCNN, env_configs
from safelife_rl.training.device.stacked import BATCHING, PolicyHeads, StackedNetworks
from safety_rl_common.torch_counts import count_ops

#: The paper setting's view and channels, as the task configs give them.
PAPER_ENV = OmegaConf.create(env_configs.COMMON["kwargs"])
SPACE = gym.spaces.Box(0, 1, (*PAPER_ENV.view_shape, len(PAPER_ENV.channels)), np.uint8)
ACTIONS = gym.spaces.Discrete(9)


def networks(count: int) -> list[PolicyHeads]:
    """``count`` policies of the paper's network, each with its own initial weights."""
    torch.manual_seed(0)
    kwargs = {"features_extractor_class": SafeLifeCNN, "net_arch": []}
    return [
        PolicyHeads(ActorCriticPolicy(SPACE, ACTIONS, lambda _: 3e-4, **kwargs))  # type: ignore[arg-type]
        for _ in range(count)
    ]


def bodies(stacked: StackedNetworks, obs: torch.Tensor) -> dict[str, Callable[[], None]]:
    """The passes timed: a rollout's forward (no gradients) and a minibatch's forward and
    backward (a stand-in loss of both heads)."""

    def forward() -> None:
        with torch.no_grad():
            stacked(obs)

    def forward_backward() -> None:
        logits, values = stacked(obs)
        (logits.logsumexp(-1).sum() + values.square().sum()).backward()
        for param in stacked.parameters():
            param.grad = None

    return {"forward": forward, "forward+backward": forward_backward}


def measure(count: int, batch: int, repeats: int, batchings: list[str]) -> list[str]:
    """One table row a batching and pass: the median milliseconds and the ratio to the first
    batching's."""
    members = networks(count)
    generator = torch.Generator().manual_seed(1)
    obs = torch.rand((count, batch, *SPACE.shape), generator=generator).lt(0.1).to(torch.uint8)
    timed = {b: bodies(StackedNetworks(members, b), obs) for b in batchings}
    ops = {b: count_ops(timed[b]["forward"]).kernels for b in batchings}
    times: dict[tuple[str, str], list[float]] = {}
    for repeat in range(repeats + 1):
        turn = repeat % len(batchings)
        for batching in batchings[turn:] + batchings[:turn]:
            for what, body in timed[batching].items():
                start = time.perf_counter()
                body()
                if repeat:  # the first round is untimed
                    times.setdefault((batching, what), []).append(time.perf_counter() - start)
    rows = []
    for what in ("forward", "forward+backward"):
        first = statistics.median(times[(batchings[0], what)])
        for batching in batchings:
            ms = statistics.median(times[(batching, what)])
            rows.append(
                f"| {count} | {what} | {batching} | {ms * 1e3:,.1f} | "
                f"{first / ms:.2f}x | {ops[batching]} |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[18, 72])
    parser.add_argument("--batch", type=int, default=8, help="observations a member")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    kept = [b for b in BATCHING if b != "auto"]
    parser.add_argument("--batchings", nargs="+", choices=kept, default=kept[::-1])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{args.batch} observations {SPACE.shape} a member, {args.threads} torch thread(s), "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, median of {args.repeats}, "
        f"speed-up over {args.batchings[0]}\n"
    )
    print("| members | pass | batching | ms | speed-up | forward ops |\n|---|---|---|---|---|---|")
    for count in args.members:
        print("\n".join(measure(count, args.batch, args.repeats, args.batchings)), flush=True)


if __name__ == "__main__":
    main()
