"""Specs stay JSON-serialisable for every kwargs form the docs write (``env.spec.to_json()``,
and ``gym.make(spec)`` from it makes the same env)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.envs.registration import EnvSpec

import drest  # noqa: F401  (registers its ids)
import extended_envs  # noqa: F401
import safelife_rl  # noqa: F401
from safelife_rl.envs.registration import benchmark_file, suite_file

# (id, kwargs) as docs/safelife/index.md, docs/using/*.md and docs/drest/*.md write them.
FORMS = [
    ("safelife_rl/PruneStill-v1", lambda: {}),
    ("safelife_rl/PruneStill-v1", lambda: {"levels": suite_file("prune-still")}),
    ("safelife_rl/PruneStill-v1", lambda: {"levels": benchmark_file("prune-still")}),
    ("safelife_rl/PruneStill-v1", lambda: {"levels": str(suite_file("prune-still"))}),
    ("safelife_rl/PruneStill-v1", lambda: {"time_limit": 20}),
    ("safelife_rl/PruneStill-v1", lambda: {"render_mode": "rgb_array", "time_limit": 10}),
    ("safelife_rl/AppendStill-v1", lambda: {"render_mode": "ansi"}),
    ("safelife_rl/PruneStill-v1", lambda: {"time_limit": 1000, "max_episode_steps": 5}),
    ("drest/Example-v0", lambda: {}),
    ("drest/Example-v0", lambda: {"gridworld": "example", "obs_type": "image"}),
    ("extended_envs/CartPole-IgnoreRewards-v0", lambda: {"agent": "DQNAgent"}),
    ("extended_envs/CartPole-IgnoreRewards-v0", lambda: {"render_mode": "rgb_array"}),
]


@pytest.mark.parametrize("form", range(len(FORMS)))
def test_specs_are_json(form):
    env_id, kwargs = FORMS[form][0], FORMS[form][1]()
    env = gym.make(env_id, **kwargs)
    text = env.spec.to_json()
    again = EnvSpec.from_json(text)
    assert again.id == env_id
    if "levels" in kwargs:
        assert again.kwargs["levels"] == str(kwargs["levels"])
        assert gym.make(again).unwrapped.levels[0].shape == env.unwrapped.levels[0].shape
    env.close()


@pytest.mark.parametrize("device", [None, "cpu"], ids=["numpy", "device"])
def test_the_vector_envs_specs_are_json(device):
    kwargs = {} if device is None else {"device": device}
    envs = gym.make_vec("safelife_rl/PruneStill-v1", 2, levels=suite_file("prune-still"), **kwargs)
    assert EnvSpec.from_json(envs.spec.to_json()).kwargs["levels"] == str(suite_file("prune-still"))
