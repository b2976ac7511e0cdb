"""What sb3-contrib's recurrent and masked agents need of the DREST envs: ``action_masks()``
marks exactly the actions that do something, ``MaskablePPO`` and ``RecurrentPPO`` train on
every id, and every space's shape is Python ints."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation
from hypothesis import given
from hypothesis import strategies as st
from sb3_contrib import MaskablePPO, RecurrentPPO

import drest  # noqa: F401  (registers the ids)
import extended_envs  # noqa: F401
import safelife_rl  # noqa: F401
from drest.dynamics import initial_state, step, useful_actions
from drest.spec import parse_spec
from drest.worlds import BUILTIN_WORLDS, builtin

DREST_IDS = sorted(i for i in gym.registry if i.startswith("drest/"))
#: The agents train on a vector-observation world, a lopsided one and the image-observation
#: procedural one (every id's spaces are checked below; the agents' code paths are these).
TRAINED_IDS = ["drest/Example-v0", "drest/Lopsided-v0", "drest/Procedural-v0"]
ALL_IDS = sorted(
    i for i in gym.registry if i.split("/")[0] in ("safelife_rl", "drest", "extended_envs")
)
CORNER = parse_spec("length: 3\ngrid:\n  A  .\n  W  C1\n")


def test_masks_by_hand():
    state = initial_state(CORNER)  # top-left, a wall below: only right does anything
    assert useful_actions(CORNER, state) == [False, False, False, True]
    spent = parse_spec("length: 3\nbumps_use_moves: true\ngrid:\n  A  .\n  W  C1\n")
    assert useful_actions(spent, initial_state(spent)) == [True] * 4
    walled = parse_spec("length: 3\ngrid:\n  W  C1 W\n  W  A  W\n  W  W  W\n")
    assert useful_actions(walled, initial_state(walled)) == [True, False, False, False]


@given(world=st.sampled_from(BUILTIN_WORLDS), walk=st.lists(st.integers(0, 3), max_size=12))
def test_a_masked_action_is_exactly_one_that_changes_nothing(world, walk):
    spec = builtin(world)
    state = initial_state(spec)
    for action in walk:
        masks = useful_actions(spec, state)
        for a in range(4):
            assert masks[a] == (step(spec, state, a) != (state, 0.0))
        state = step(spec, state, action)[0]


def test_the_trained_ids_are_registered():
    assert set(TRAINED_IDS) <= set(DREST_IDS)


@pytest.mark.parametrize("env_id", DREST_IDS)
def test_every_drest_id_offers_its_masks(env_id):
    env = gym.make(env_id)
    env.reset(seed=0)
    masks = env.get_wrapper_attr("action_masks")()
    assert masks.dtype == bool and masks.shape == (4,) and masks.any()


def test_the_env_offers_its_masks():
    env = gym.make("drest/Example-v0")
    with pytest.raises(RuntimeError, match="before reset"):
        env.get_wrapper_attr("action_masks")()
    env.reset(seed=0)
    masks = env.get_wrapper_attr("action_masks")()
    assert masks.dtype == bool and masks.shape == (4,) and masks.any()


@pytest.mark.parametrize("env_id", TRAINED_IDS)
def test_maskable_ppo_trains_and_never_takes_a_masked_action(env_id):
    env = gym.make(env_id)
    model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, verbose=0)
    model.learn(64)
    obs, _ = env.reset(seed=1)
    for _ in range(20):
        masks = env.get_wrapper_attr("action_masks")()
        action, _ = model.predict(obs, action_masks=masks)
        assert masks[int(action)]
        obs, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            obs, _ = env.reset()


@pytest.mark.parametrize("env_id", TRAINED_IDS)
def test_recurrent_ppo_trains_on_the_drest_ids(env_id):
    """SB3 sizes an MLP's input on a MultiDiscrete space as ``sum(nvec)``, a NumPy integer
    that torch's LSTM refuses; the one-hot ``FlattenObservation`` is the recipe (docs)."""
    env = gym.make(env_id)
    if isinstance(env.observation_space, spaces.MultiDiscrete):
        env = FlattenObservation(env)
    RecurrentPPO("MlpLstmPolicy", env, n_steps=16, batch_size=16, seed=0, verbose=0).learn(32)


def _shape_ints(space: spaces.Space) -> bool:
    if isinstance(space, spaces.Dict):
        return all(_shape_ints(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return all(_shape_ints(s) for s in space.spaces)
    return space.shape is None or all(type(d) is int for d in space.shape)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_every_space_shape_is_python_ints(env_id):
    kwargs = {"agent": "RandomAgent"} if env_id.startswith("extended_envs") else {}
    env = gym.make(env_id, **kwargs)
    assert _shape_ints(env.observation_space) and _shape_ints(env.action_space)
    np.testing.assert_array_equal(env.observation_space.shape, env.reset(seed=0)[0].shape)
