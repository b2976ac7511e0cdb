"""Does AUP's penalty single out the steps that cause side effects?

Usage: python benchmarks/aup_penalty_check.py AUP_RUN [AUP_RUN ...] --player RUN [--levels 100]

A trained agent (``--player``: a run folder with ``final_model.zip``, its actions sampled from
its policy) plays each of the first ``--levels`` levels of its task's benchmark suite once. At
every step each AUP run's saved auxiliary Q-network (``aup_auxiliary.pt``) gives the step's
``|Q(s, a) - Q(s, noop)|``, and the env gives its safety cost (``info["cost"]``). Printed per
AUP run: the mean ``|dQ|`` of the costly steps (cost above 0) and of the others, and the AUC,
the chance that a costly step's ``|dQ|`` exceeds a cost-free one's (0.5: no better than
chance). ``docs/safelife/methods.md`` has the figures for the prune-still-easy comparison.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from stable_baselines3 import DQN
from torch import nn

from safelife_rl.apps.benchmark import load_policy
from safelife_rl.engine.level_files import load_levels
from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.registration import suite_file
from safelife_rl.training.methods.aup import AUXILIARY_FILE
from safelife_rl.training.methods.aup.penalty import attainable_utility_penalty
from safelife_rl.training.resume import CONFIG_FILE


def auxiliary_q(run: Path, env: SafeLifeEnv) -> nn.Module:
    """The run's auxiliary Q-network, built as its config builds the DQN's."""
    config = OmegaConf.load(run / CONFIG_FILE)
    policy_kwargs = instantiate(config.policy.kwargs, _convert_="all")  # as the training app
    policy = DQN.policy_aliases[config.policy.name]
    q_net = policy(env.observation_space, env.action_space, lambda _: 0.0, **policy_kwargs).q_net
    q_net.load_state_dict(torch.load(run / AUXILIARY_FILE, weights_only=True)["q_network"])
    return q_net.eval()


def auc(positives: np.ndarray, negatives: np.ndarray) -> float:
    """P(a positive exceeds a negative), ties counting half (the Mann-Whitney statistic)."""
    values = np.concatenate([positives, negatives])
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):  # average ranks over ties
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    n = len(positives)
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * len(negatives)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("aup_runs", nargs="+", type=Path)
    parser.add_argument("--player", type=Path, required=True)
    parser.add_argument("--levels", type=int, default=100)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = OmegaConf.load(args.player / CONFIG_FILE)
    levels = load_levels(suite_file(config.env.eval_kwargs.levels.task))[: args.levels]
    policy, settings = load_policy(str(args.player / "final_model.zip"), levels)
    env = SafeLifeEnv(levels, **{**settings, "time_limit": config.env.kwargs.time_limit})
    networks = {run.name: auxiliary_q(run, env) for run in args.aup_runs}
    noop = env.noop_action
    differences: dict[str, list[float]] = {name: [] for name in networks}
    costs, actions = [], []
    for index in range(len(levels)):
        obs, _ = env.reset(seed=index, options={"level": index})
        done = False
        while not done:
            action = int(np.asarray(policy(obs[None])).reshape(-1)[0])
            with torch.no_grad():
                for name, q_net in networks.items():
                    q_values = q_net(torch.as_tensor(obs[None]))
                    differences[name].append(
                        float(attainable_utility_penalty(q_values, torch.tensor([action]), noop)[0])
                    )
            obs, _, terminated, truncated, info = env.step(action)
            costs.append(info["cost"])
            actions.append(action)
            done = terminated or truncated
    costly = np.array(costs) > 0
    moved = np.array(actions) != noop  # the no-op's difference is 0 by definition
    print(
        f"{args.player}: {len(costs)} steps on {len(levels)} levels, {costly.sum()} costly "
        f"({costly.mean():.1%})"
    )
    print("| auxiliary model | mean |dQ|, costly | mean |dQ|, cost-free | AUC |")
    print("|---|---|---|---|")
    for name, values in differences.items():
        values_ = np.array(values)
        on, off = values_[costly], values_[~costly & moved]
        print(f"| {name} | {on.mean():.3f} | {off.mean():.3f} | {auc(on, off):.2f} |")


if __name__ == "__main__":
    main()
