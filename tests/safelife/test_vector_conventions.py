"""The SafeLife vector envs follow Gymnasium's vector-env conventions, as ``SyncVectorEnv``.

``gymnasium.make_vec`` of a SafeLife id gives the batched NumPy env
(:class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv`) or, with a ``device``, the
device env (:class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`): one seed per env in
``np_random_seed``, ``get_attr``/``set_attr``/``call``, a ``TypeError`` for a single action
where a batch is due, and the batched env's partial reset (``options["reset_mask"]``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import safelife_rl  # noqa: F401  (registers the ids)
from safelife_rl.envs.batched_vector_env import BatchedVectorEnv
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safety_rl_common.errors import UserError

ID = "safelife_rl/PruneStill-v1"
KWARGS = {"levels": suite_file("prune-still"), "time_limit": 5}


def batched(n: int = 3) -> gym.vector.VectorEnv:
    return gym.make_vec(ID, n, **KWARGS)


def sync(n: int = 3) -> gym.vector.VectorEnv:
    return gym.make_vec(ID, n, vectorization_mode="sync", **KWARGS)


def device(n: int = 3, **kwargs) -> gym.vector.VectorEnv:
    return gym.make_vec(ID, n, device="cpu", **KWARGS, **kwargs)


def test_make_vec_gives_the_batched_and_the_device_env():
    assert isinstance(batched(), BatchedVectorEnv)
    assert isinstance(device(), SafeLifeVectorEnv)


def test_batched_seeds_one_per_env_as_sync_vector_env():
    envs, reference = batched(), sync()
    envs.reset(seed=42)
    reference.reset(seed=42)
    assert envs.np_random_seed == reference.np_random_seed == (42, 43, 44)
    assert len(envs.np_random) == 3
    assert envs.np_random[1].random() == reference.np_random[1].random()


def test_device_seeds_one_per_env():
    envs = device(4, groups=2)
    envs.reset(seed=42)
    assert envs.np_random_seed == (42,) * 4  # one stream for all: env k draws by k
    envs.reset(seed=[7, 8])
    assert envs.np_random_seed == (7, 7, 8, 8)  # each group its own seed


def test_batched_get_set_attr_and_call_as_sync_vector_env():
    for envs in (batched(), sync()):
        assert envs.get_attr("time_limit") == (5, 5, 5)
        envs.set_attr("marker", [1, 2, 3])
        assert envs.get_attr("marker") == (1, 2, 3)
        envs.set_attr("marker", 9)
        assert envs.call("marker") == (9, 9, 9)
        envs.reset(seed=0)
        assert envs.call("has_wrapper_attr", "time_limit") == (True,) * 3
        with pytest.raises(ValueError):
            envs.set_attr("marker", [1, 2])


def test_device_get_and_set_attr_for_all_envs_at_once():
    envs = device()
    assert envs.get_attr("num_envs") == (3, 3, 3)
    envs.set_attr("marker", 7)
    assert envs.get_attr("marker") == (7, 7, 7)
    envs.set_attr("marker", [8, 8, 8])
    assert envs.call("marker") == (8, 8, 8)
    with pytest.raises(UserError, match="one batch"):
        envs.set_attr("marker", [1, 2, 3])


@pytest.mark.parametrize("make", [batched, sync, device], ids=["batched", "sync", "device"])
@pytest.mark.parametrize("action", [0, np.int64(0), np.array(0)], ids=["int", "np.int64", "0-d"])
def test_a_single_action_is_a_type_error(make, action):
    envs = make()
    envs.reset(seed=0)
    with pytest.raises(TypeError):
        envs.step(action)


def test_a_single_tensor_action_is_a_type_error_on_the_device():
    envs = device()
    envs.reset(seed=0)
    with pytest.raises(TypeError):
        envs.step(torch.tensor(0))
    with pytest.raises(ValueError, match="one action per env"):
        envs.step(torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("make", [batched, sync], ids=["batched", "sync"])
def test_a_batch_of_the_wrong_length_is_a_value_error(make):
    envs = make()
    envs.reset(seed=0)
    with pytest.raises(ValueError):
        envs.step(np.zeros(2, np.int64))


def partial_reset(envs: gym.vector.VectorEnv) -> tuple:
    envs.reset(seed=0)
    stepped, *_ = envs.step(np.array([1, 2, 3]))
    mask = np.array([False, True, False])
    obs, info = envs.reset(seed=[None, 5, None], options={"reset_mask": mask})
    return stepped.copy(), obs, info


def test_batched_resets_the_envs_of_reset_mask_as_sync_vector_env():
    (stepped, obs, info), (_, want_obs, want_info) = partial_reset(batched()), partial_reset(sync())
    assert np.array_equal(obs, want_obs)
    assert np.array_equal(obs[[0, 2]], stepped[[0, 2]]) and not np.array_equal(obs[1], stepped[1])
    assert info["_length"].tolist() == want_info["_length"].tolist() == [False, True, False]


@pytest.mark.parametrize("mask", [[False, True, False], np.zeros(3, bool), np.ones(2, bool)])
def test_batched_refuses_a_bad_reset_mask_as_sync_vector_env(mask):
    for envs in (batched(), sync()):
        with pytest.raises((TypeError, ValueError)):
            envs.reset(options={"reset_mask": mask})
