"""Cost of one PPO minibatch update of the SafeLife CNN on the CPU, the arithmetic that bounds
training speed on few cores: forward, backward and Adam on a minibatch of the paper setting
(80 observations of the 25x25 view), in float32 and in the variants that might make it faster.

Usage: python benchmarks/cnn_update_speed.py [--batch 80] [--repeats 60] [--threads 1]
                                             [--compile]

``--compile`` adds ``torch.compile`` (about half a minute of compiling first). bfloat16
autocast is measured only to show what it would give: it changes the numbers the agents learn
from, and training does not use it.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from omegaconf import OmegaConf

from safelife_rl.training import SafeLifeCNN, env_configs

#: The paper setting's view and channels, as the task configs give them.
PAPER_ENV = OmegaConf.create(env_configs.COMMON["kwargs"])
VIEW = tuple(PAPER_ENV.view_shape)


def update_ms(
    batch: int,
    repeats: int,
    *,
    fused: bool = False,
    channels_last: bool = False,
    bf16: bool = False,
    compile: bool = False,
) -> float:
    """Milliseconds per update (mean of ``repeats`` after 5 untimed)."""
    space = gym.spaces.Box(0, 1, (*VIEW, len(PAPER_ENV.channels)), np.uint8)
    net = SafeLifeCNN(space)
    head = torch.nn.Linear(net.features_dim, 10)  # policy and value heads
    params = [*net.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-4, fused=fused or None)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    forward = torch.compile(lambda x: head(net(x))) if compile else (lambda x: head(net(x)))
    generator = torch.Generator().manual_seed(0)
    obs = (torch.rand(batch, *space.shape, generator=generator) < 0.1).float()

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = forward(obs).float().pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=80, help="observations per minibatch")
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--compile", action="store_true", help="also torch.compile")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    variants = {
        "float32": {},
        "fused Adam": {"fused": True},
        "channels-last weights": {"channels_last": True},
        "bfloat16 autocast (not used)": {"bf16": True},
    }
    if args.compile:
        variants["torch.compile"] = {"compile": True}
    print(
        f"SafeLife CNN, minibatch of {args.batch} {VIEW[0]}x{VIEW[1]}x"
        f"{len(PAPER_ENV.channels)} observations, "
        f"{args.threads} torch thread(s)"
    )
    for name, options in variants.items():
        print(f"{name:30s} {update_ms(args.batch, args.repeats, **options):6.1f} ms per update")


if __name__ == "__main__":
    main()
