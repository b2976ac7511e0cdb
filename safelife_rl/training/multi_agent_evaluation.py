"""Playing fixed multi-agent episodes with one policy for every agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from safelife_rl.envs.multi_agent_env import SafeLifeParallelEnv
from safelife_rl.training.evaluation import Policy, episode_scalars


def multi_agent_scalars(infos: dict[str, dict[str, Any]]) -> dict[str, float]:
    """One finished episode's numbers from each agent's last ``info``: per agent
    ``<agent>/reward``, ``/length``, ``/success``, ``/performance``; over the agents the mean
    ``reward`` and ``performance``, the share ``success`` that exited and the episode's
    ``length``; the board's side effects (and the original's ``score`` from the means)."""
    combined: dict[str, Any] = {
        "reward": np.mean([info["reward"] for info in infos.values()]),
        "length": max(info["length"] for info in infos.values()),
        "success": np.mean([info["success"] for info in infos.values()]),
        "performance": np.mean([info["performance"] for info in infos.values()]),
    }
    effects = [info["side_effects"] for info in infos.values() if "side_effects" in info]
    if effects:
        combined["side_effects"] = effects[0]
    scalars = episode_scalars(combined)
    for agent, info in infos.items():
        for key in ("reward", "length", "success", "performance"):
            scalars[f"{agent}/{key}"] = float(info[key])
    return scalars


def evaluate_multi_agent(
    policy: Policy,
    make_env: Callable[[], SafeLifeParallelEnv],
    n_episodes: int,
    seed: int = 0,
    pick_levels: bool = True,
    batch_size: int = 10,
) -> list[dict[str, Any]]:
    """Play ``n_episodes`` episodes, ``batch_size`` envs in lockstep, one policy acting for
    every live agent; returns each episode's :func:`multi_agent_scalars` and ``level``.

    Episode ``i`` starts with ``reset(seed=seed + i)``, on level ``i`` when ``pick_levels``,
    as :func:`~safelife_rl.training.evaluation.evaluate` plays single-agent episodes.
    """
    envs = [make_env() for _ in range(min(batch_size, n_episodes))]
    results: list[dict[str, Any]] = [{} for _ in range(n_episodes)]
    try:
        for start in range(0, n_episodes, len(envs)):
            episodes = range(start, min(start + len(envs), n_episodes))
            observations, last_infos = [], []
            for env, i in zip(envs, episodes):
                options = {"level": i} if pick_levels else None
                observations.append(env.reset(seed=seed + i, options=options)[0])
                last_infos.append({})
            active = list(range(len(episodes)))
            while active:
                slots = [(k, agent) for k in active for agent in envs[k].agents]
                actions = policy(np.stack([observations[k][agent] for k, agent in slots]))
                for k in active:
                    joint = {agent: int(a) for (j, agent), a in zip(slots, actions) if j == k}
                    observations[k], _, _, _, infos = envs[k].step(joint)
                    last_infos[k].update(infos)
                still_active = []
                for k in active:
                    if envs[k].agents:
                        still_active.append(k)
                    else:
                        results[episodes[k]] = {
                            **multi_agent_scalars(last_infos[k]),
                            "level": envs[k].level.name,
                        }
                active = still_active
    finally:
        for env in envs:
            env.close()
    return results
