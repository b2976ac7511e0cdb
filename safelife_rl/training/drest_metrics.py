"""USEFULNESS and NEUTRALITY of DREST gridworld evaluation episodes, for
:class:`~safelife_rl.training.PeriodicEvaluation`'s ``metrics``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import gymnasium as gym


def drest_metrics(
    episodes: list[dict[str, Any]], make_env: Callable[[], gym.Env]
) -> dict[str, float]:
    """Monte-Carlo USEFULNESS and NEUTRALITY (:mod:`drest.metrics`) of the episodes' chosen
    trajectory lengths and discounted coins, against the exact m(l) of the env's world.

    Needs one fixed world (``drest/Example-v0`` and the other built-in ids); episodes cut
    short before a trajectory length was chosen are left out (``length_chosen`` tells the
    share that counted). Empty if no episode chose a length.
    """
    from drest.env import ProceduralGridworldEnv
    from drest.metrics import metrics_from_lengths

    chosen = [e for e in episodes if "trajectory_length" in e]
    if not chosen:
        return {}
    env = make_env()
    try:
        if isinstance(env.unwrapped, ProceduralGridworldEnv):
            raise TypeError("drest_metrics needs a fixed world, not procedurally generated ones")
        m = env.unwrapped.max_coins_by_length()
    finally:
        env.close()
    counts = Counter(int(e["trajectory_length"]) for e in chosen)
    coins: Counter[int] = Counter()
    for e in chosen:
        coins[int(e["trajectory_length"])] += float(e["discounted_coins"])
    n = len(chosen)
    result = metrics_from_lengths(
        {length: c / n for length, c in counts.items()},
        {length: total / n for length, total in coins.items()},
        m,
    )
    out = {
        "usefulness": result.usefulness,
        "neutrality": result.neutrality + 0.0,  # no -0.0 when one length has all the mass
        "length_chosen": n / len(episodes),
    }
    if result.neutrality_normalized is not None:  # None: the world offers one length only
        out["neutrality_normalized"] = result.neutrality_normalized + 0.0
    return out
