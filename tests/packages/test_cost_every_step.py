"""Every step a safe-RL consumer reads carries ``info["cost"]`` (Safety-Gymnasium's
convention), the step on which a vector env resets an ended env included: Gymnasium's
``NEXT_STEP`` autoreset returns the reset's info on that step, so an env's reset info holds
``cost`` 0.0.

Driven by the registry, over every vectorisation mode: the SafeLife ids report a cost on every
step of every mode; the DREST and extended-environment ids define no safety cost and report
none on any step (a consumer sees one convention per id, never a cost that comes and goes).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import drest  # noqa: F401  (registers its ids)
import extended_envs  # noqa: F401
import safelife_rl  # noqa: F401
from safelife_rl.envs.registration import TASKS, suite_file

IDS = sorted(
    i for i in gym.registry if i.split("/")[0] in ("safelife_rl", "drest", "extended_envs")
)
COSTED = set(TASKS.values())
N_ENVS, MAX_STEPS = 2, 400
KWARGS = {
    env_id: {"levels": str(suite_file(task)), "time_limit": 4} for task, env_id in TASKS.items()
}
KWARGS.update({env_id: {"agent": "RandomAgent"} for env_id in IDS if env_id.startswith("extended")})


def modes(env_id: str) -> list[str]:
    extra = ["vector_entry_point"] if gym.spec(env_id).vector_entry_point else []
    return ["sync", "async", *extra]


CASES = [(env_id, mode) for env_id in IDS for mode in modes(env_id)]


def test_every_safelife_id_is_costed_and_the_cases_cover_every_id():
    assert COSTED <= set(IDS) and {c[0] for c in CASES} == set(IDS)


@pytest.mark.parametrize(("env_id", "mode"), CASES, ids=lambda x: str(x))
def test_cost_is_on_every_step_or_on_none(env_id, mode):
    envs = gym.make_vec(env_id, N_ENVS, vectorization_mode=mode, **KWARGS.get(env_id, {}))
    envs.action_space.seed(0)
    try:
        _, info = envs.reset(seed=0)
        seen = ["cost" in info]
        ended = np.zeros(N_ENVS, bool)
        autoresets = 0
        for _ in range(MAX_STEPS):
            _, _, terminated, truncated, info = envs.step(envs.action_space.sample())
            autoresets += int(ended.sum())  # NEXT_STEP: this step reset those envs
            seen.append("cost" in info)
            if "cost" in info:
                cost = np.asarray(info["cost"], np.float64)
                assert cost.shape == (N_ENVS,) and np.isfinite(cost).all() and (cost >= 0).all()
                assert (cost[ended] == 0).all()  # a reset step costs nothing
                assert info["_cost"].all()  # every env has it, not only those that stepped
            ended = np.asarray(terminated | truncated)
            if autoresets >= 2:
                break
    finally:
        envs.close()
    assert autoresets >= 2, "no autoreset was crossed"
    assert all(seen) if env_id in COSTED else not any(seen), seen
