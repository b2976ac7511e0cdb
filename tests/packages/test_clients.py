"""Other people's clients make the ids as they make any Gymnasium id, with their own calls.

Neither TorchRL nor CleanRL is needed: the tests make the calls those clients make. TorchRL's
``GymEnv`` tries ``gym.make(id, frameskip=1)`` and falls back only on ``TypeError``; CleanRL's
``ppo.py`` imports nothing of the project, so it names an id in Gymnasium's ``module:id`` form
and steps a ``SyncVectorEnv`` of ``RecordEpisodeStatistics(gym.make(env_id))``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import drest
import extended_envs
import safelife_rl

PACKAGES = (safelife_rl, drest, extended_envs)
IDS = sorted(
    env_id
    for env_id in gym.registry
    if env_id.split("/")[0] in {package.__name__ for package in PACKAGES}
)


def test_the_three_packages_ids_are_here():
    assert {env_id.split("/")[0] for env_id in IDS} == {"safelife_rl", "drest", "extended_envs"}


@pytest.mark.parametrize("env_id", IDS)
def test_an_unknown_keyword_is_a_type_error_when_made(env_id):
    """TorchRL's ``GymEnv`` tries ``frameskip=1`` and falls back to ``gym.make(id)`` only on a
    ``TypeError`` in Python's words; an env that took the keyword and refused it at ``reset()``
    broke it."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'frameskip'"):
        gym.make(env_id, frameskip=1)


# CleanRL's env factory and first steps, in a process that imported nothing of the project
CLEANRL = """
import json, sys
import gymnasium as gym
import numpy as np

env_id = sys.argv[1]
def make_env():
    return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))
envs = gym.vector.SyncVectorEnv([make_env for _ in range(2)])
obs, _ = envs.reset(seed=1)
for _ in range(60):
    obs, reward, terminations, truncations, infos = envs.step(envs.action_space.sample())
ended = "episode" in infos
envs.close()
ours = {"safelife_rl", "drest", "extended_envs"}
print(json.dumps({
    "loaded": sorted({m.split(".")[0] for m in sys.modules} & ours),
    "obs_shape": list(obs.shape),
    "inputs": int(np.array(envs.single_observation_space.shape).prod()),
    "episode_stats": ended,
}))
"""


def cleanrl_run(env_id: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CLEANRL, env_id], capture_output=True, text=True, timeout=300
    )


def test_cleanrl_makes_a_drest_id_in_module_id_form_from_a_bare_process():
    done = cleanrl_run("drest:drest/Example-v0")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["loaded"] == ["drest"]  # Gymnasium imported the module named before the colon
    assert result["obs_shape"][0] == 2 and result["inputs"] > 0


def test_the_bare_id_names_what_to_import():
    """Without the module, Gymnasium cannot know the namespace: the docs say to use
    ``module:id``."""
    done = cleanrl_run("drest/Example-v0")
    assert done.returncode != 0 and "NamespaceNotFound" in done.stderr


@pytest.mark.parametrize(
    "env_id",
    [
        "safelife_rl:safelife_rl/PruneStill-v1",
        "extended_envs:extended_envs/CartPole-IgnoreRewards-v0",
    ],
)
def test_every_package_makes_its_ids_in_module_id_form(env_id):
    done = subprocess.run(
        [sys.executable, "-c", f"import gymnasium as gym; gym.make({env_id!r}).reset(seed=0)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
