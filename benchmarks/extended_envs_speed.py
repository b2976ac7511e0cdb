"""Extended-environment speed: steps per second of our agents in TemptingButton, beside the
ExtendedEnvironments library's agents run by ``baselines.sh extended`` in the
same run ("x ref"; target 2x), with the simulated copy's updates shared (the default,
:mod:`extended_envs.agents.shared_updates`) and not ("unshared"), and the framework's overhead: the
same two learners (true agent and simulation) acting and training on a plain loop with the same
observations and rewards, sharing too (target at most 10%).

Rates are steps per second of process CPU time (the agents run torch on one thread), which a
shared machine's load disturbs less than wall-clock time; the load average is printed beside.

    .venv/bin/python benchmarks/extended_envs_speed.py [--steps 20000] [--warmup 500]
        [--baseline-output FILE | --no-baseline]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import torch
from baselines import add_arguments, measure

from extended_envs import bind_agent, run_environment
from extended_envs.agents import A2CAgent, DQNAgent, PPOAgent, QLearner
from extended_envs.agents.shared_updates import SHARED_UPDATES
from extended_envs.envs import TemptingButton

#: Our agent classes and the names of the ExtendedEnvironments agents they are measured against.
REFERENCE = {QLearner: "Q", DQNAgent: "DQN", A2CAgent: "A2C", PPOAgent: "PPO"}


def steps_per_cpu_second(steps: int, run: Callable[[], object]) -> float:
    start = time.process_time()
    run()
    return steps / (time.process_time() - start)


def cold(steps: int, run: Callable[[], object]) -> float:
    """Steps per CPU second of ``run`` with no update results stored from earlier runs."""
    SHARED_UPDATES.clear()
    gc.collect()  # else a full collection of the objects torch's import made lands in the run
    return steps_per_cpu_second(steps, run)


def plain_loop(agent_class: type, steps: int) -> Callable[[], None]:
    """Two learners, each acting once and training once per step, without an environment."""
    A = bind_agent(agent_class, TemptingButton.n_actions, TemptingButton.n_obs, seed=0)
    learners = [A(), A()]
    rng = np.random.default_rng(0)
    obs = rng.integers(2, size=steps + 1).tolist()
    rewards = rng.choice([-1.0, 1.0], size=steps).tolist()

    def run() -> None:
        for t in range(steps):
            for learner in learners:
                action = learner.act(obs[t])
                learner.train(obs[t], action, rewards[t], obs[t + 1])

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="timed steps per agent")
    parser.add_argument("--warmup", type=int, default=500, help="untimed steps first")
    add_arguments(parser)
    args = parser.parse_args()
    figures = measure("extended", args.steps, args)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'agent':10} {'steps/s':>9} {'x ref':>6} {'unshared':>9} {'plain/s':>9} {'overhead':>9}"
    )
    for agent_class, name in REFERENCE.items():
        reference = figures.get(f"extended {name} TemptingButton", float("nan"))
        run_environment(TemptingButton, agent_class, args.warmup, seed=1)
        run = partial(run_environment, TemptingButton, agent_class, args.steps, seed=0)
        extended = cold(args.steps, run)
        SHARED_UPDATES.enabled = False
        unshared = cold(args.steps, run)
        SHARED_UPDATES.enabled = True
        plain = cold(args.steps, plain_loop(agent_class, args.steps))
        print(
            f"{agent_class.__name__:10} {extended:9.0f} {extended / reference:6.2f}"
            f" {unshared:9.0f} {plain:9.0f} {plain / extended - 1:9.1%}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
