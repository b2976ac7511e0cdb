"""SB3's VecEnv over a Gymnasium vector env steps exactly as SB3's DummyVecEnv of the same envs."""

import signal
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

from safelife_rl.envs.batch_slot import BatchSlot
from safelife_rl.envs.batched_vector_env import BatchedVectorEnv, batch_infos
from safelife_rl.envs.registration import make_task_env, suite_file
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.gymnasium_vec_env import (
    GymnasiumVecEnv,
    WideningAsyncVectorEnv,
    WideningSyncVectorEnv,
    reachable,
    unbatch_infos,
)


def cartpole() -> gym.Env:
    return Monitor(gym.make("CartPole-v1", max_episode_steps=15))


def play(venv, steps: int) -> list:
    venv.seed(3)
    history = [(venv.reset(), [dict(i) for i in venv.reset_infos])]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, rewards, dones, infos = venv.step(rng.integers(2, size=venv.num_envs))
        for info in infos:
            info.get("episode", {}).pop("t", None)  # Monitor's wall-clock time
        history.append((obs, rewards, dones, infos, [dict(i) for i in venv.reset_infos]))
    return history


def in_workers() -> AsyncVectorEnv:
    envs = [partial(reachable, cartpole, i) for i in range(3)]
    return AsyncVectorEnv(envs, context="fork", autoreset_mode=AutoresetMode.SAME_STEP)


@pytest.mark.parametrize(
    "make",
    [lambda: SyncVectorEnv([cartpole] * 3, autoreset_mode=AutoresetMode.SAME_STEP), in_workers],
    ids=["sync", "async"],
)
def test_steps_as_dummy_vec_env(make):
    venv = GymnasiumVecEnv(make())
    got, want = play(venv, 60), play(DummyVecEnv([cartpole] * 3), 60)
    assert sum(step[2].sum() for step in got[1:]) >= 6  # episodes ended, by failing and by time
    for step, expected in zip(got, want):
        assert repr(step) == repr(expected)  # arrays, dtypes, info keys, values and their types
    assert venv.env_is_wrapped(Monitor) == [True] * 3
    assert venv.env_is_wrapped(gym.wrappers.RecordVideo, indices=[1]) == [False]
    assert venv.get_attr("spec", [2])[0].id == "CartPole-v1"
    venv.set_attr("marker", 7, indices=[0])
    assert venv.env_method("get_wrapper_attr", "marker", indices=0) == [7]
    venv.close()


def test_needs_same_step_autoreset():
    with pytest.raises(ValueError, match="SAME_STEP"):
        GymnasiumVecEnv(SyncVectorEnv([cartpole] * 2))


def test_envs_in_workers_must_be_reachable():
    vector = AsyncVectorEnv([cartpole] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    with pytest.raises(ValueError, match="reachable"):
        GymnasiumVecEnv(vector)
    vector.close()


def test_subproc_workers_leave_the_main_process_signals():
    """The main process makes one env of an AsyncVectorEnv itself (for its spaces): only the
    workers ignore Ctrl-C and SIGTERM."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    venv = make_vec_env("CartPole-v1", {}, {}, 2, "subproc")
    assert isinstance(venv.vector, AsyncVectorEnv)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    venv.close()


SOME_KEYS = [  # an episode ended in some envs: keys missing, values of other types
    {"n": 1, "x": 0.5, "ok": True, "name": "a", "flag": np.bool_(True), "episode": {"r": 1.0}},
    {"x": 2, "grid": np.ones((2, 3), np.uint8), "f32": np.float32(1.5), "final_obs": [1]},
    {"n": 2.7, "episode": {"r": 2.0, "l": 3}, "name": None, "final_info": {"n": 4}},
]
EVERY_KEY = [  # most steps: every env has the same keys
    {"n": i, "x": i / 2, "ok": i > 0, "name": f"l{i}", "grid": np.full(2, i), "d": {"r": -i}}
    for i in range(3)
]


@pytest.mark.parametrize("infos", [SOME_KEYS, EVERY_KEY])
def test_batch_infos_batches_as_gymnasium_add_info(infos):
    vector = SyncVectorEnv([cartpole] * 3)
    want: dict = {}
    for i, info in enumerate(infos):
        want = vector._add_info(want, info, i)
    got = batch_infos(infos)
    if infos is SOME_KEYS:  # Gymnasium casts env 2's n (2.7) to env 0's int; batch_infos widens
        assert got["n"].tolist() == [1.0, 0.0, 2.7] and want["n"].tolist() == [1, 0, 2]
        want["n"] = np.array([1.0, 0.0, 2.7])
    assert repr(got) == repr(want)
    masks = [value for key, value in got.items() if key.startswith("_")]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(masks) for b in masks[:i])


def test_unbatch_infos_gives_each_env_its_info():
    some = unbatch_infos(batch_infos(SOME_KEYS), 3)
    assert some[1]["x"] == 2 and some[2]["episode"] == {"r": 2.0, "l": 3}
    assert repr(unbatch_infos(batch_infos(EVERY_KEY), 3)) == repr(EVERY_KEY)


def test_a_request_that_raises_in_a_worker_raises_here_and_leaves_the_worker():
    venv = GymnasiumVecEnv(in_workers())
    assert not venv.has_attr("set_training_steps") and venv.has_attr("np_random")
    with pytest.raises(AttributeError, match="no_such_method"):
        venv.env_method("no_such_method", indices=[1])
    venv.reset()
    assert venv.step(np.zeros(3, np.int64))[0].shape == (3, 4)
    venv.close()


class Mixed(gym.Env):
    """Info values of one type in one env and another type in the next: an int cost here, a
    float one there; rewards that sum to an int in one env and a float in the other."""

    observation_space = gym.spaces.Box(0, 1, (1,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, whole: bool):
        self.whole, self.t = whole, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"note": 1 if self.whole else None}

    def step(self, action):
        self.t += 1
        cost = 1 if self.whole else 0.25
        reward = 1 if self.whole else 0.5
        return np.zeros(1, np.float32), reward, self.t == 3, False, {"cost": cost}


def mixed(whole: bool) -> gym.Env:
    return Monitor(Mixed(whole))


@pytest.mark.parametrize("vector", [WideningSyncVectorEnv, WideningAsyncVectorEnv])
def test_an_info_of_another_type_in_a_later_env_keeps_its_value(vector):
    fns = [partial(mixed, True), partial(mixed, False)]
    if vector is WideningAsyncVectorEnv:
        fns = [partial(reachable, fn, i) for i, fn in enumerate(fns)]
    got = play(GymnasiumVecEnv(vector(fns, autoreset_mode=AutoresetMode.SAME_STEP)), 7)
    want = play(DummyVecEnv([partial(mixed, True), partial(mixed, False)]), 7)
    for step, expected in zip(got, want):
        for mine, theirs in zip(step, expected):
            if isinstance(theirs, np.ndarray):
                assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
            else:
                assert mine == theirs  # equal values (an int beside a float comes as a float)
    assert [info["cost"] for info in got[1][3]] == [1, 0.25]
    assert [info["note"] for info in got[0][1]] == [1, None]


class Echo(gym.Wrapper):
    """Reports the reset options it was given (``x``) in its reset info."""

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        return obs, {**info, "option": (options or {}).get("x")}


def echo() -> gym.Env:
    return Echo(cartpole())


def batched_safelife() -> gym.vector.VectorEnv:
    def make() -> gym.Env:
        return Echo(BatchSlot(make_task_env("prune-still", levels=suite_file("prune-still"))))

    return BatchedVectorEnv([make] * 3, AutoresetMode.SAME_STEP)


def dummy_safelife() -> DummyVecEnv:
    return DummyVecEnv(
        [lambda: Echo(make_task_env("prune-still", levels=suite_file("prune-still")))] * 3
    )


VECTORS = {
    "sync": (lambda: SyncVectorEnv([echo] * 3, autoreset_mode=AutoresetMode.SAME_STEP), echo),
    "async": (
        lambda: AsyncVectorEnv(
            [partial(reachable, echo, i) for i in range(3)],
            context="fork",
            autoreset_mode=AutoresetMode.SAME_STEP,
        ),
        echo,
    ),
}


def resets_with_options(venv) -> list:
    """Two resets with SB3's per-env options (the first reset, and one after a step)."""
    history = []
    for seed in (3, 4):
        venv.seed(seed)
        venv.set_options([{"x": 1}, {"x": 2}, {"x": 1}])
        obs = venv.reset()
        history.append((obs, [info["option"] for info in venv.reset_infos]))
        venv.step(np.zeros(venv.num_envs, np.int64))
    return history


@pytest.mark.parametrize("make", ["sync", "async", "batched"])
def test_per_env_reset_options_as_dummy_vec_env(make):
    """SB3's ``set_options([...])`` gives each env its own options, as ``DummyVecEnv``."""
    if make == "batched":
        venv, dummy = GymnasiumVecEnv(batched_safelife()), dummy_safelife()
    else:
        vector, single = VECTORS[make]
        venv, dummy = GymnasiumVecEnv(vector()), DummyVecEnv([single] * 3)
    got, want = resets_with_options(venv), resets_with_options(dummy)
    for (obs, options), (expected_obs, expected_options) in zip(got, want):
        assert options == expected_options == [1, 2, 1]
        assert np.array_equal(obs, expected_obs)
    venv.close()


@pytest.mark.parametrize("make", ["sync", "async"])
def test_negative_indices_reach_the_envs_counted_from_the_end(make):
    """``indices=[-1]`` is the last env, as in SB3's own vec envs (a worker's env was asked for
    index -1 and answered ``None``)."""
    venv, dummy = GymnasiumVecEnv(VECTORS[make][0]()), DummyVecEnv([echo] * 3)
    for v in (venv, dummy):
        v.set_attr("marker", 9, indices=[-1])
        v.set_attr("marker", 5, indices=[0, 1])
    for v in (venv, dummy):
        assert v.get_attr("marker", indices=[-1]) == [9]
        assert v.get_attr("marker", indices=-2) == [5]
        assert v.env_method("get_wrapper_attr", "marker", indices=[-1, 0]) == [9, 5]
        assert v.env_is_wrapped(Echo, indices=[-3]) == [True]
    with pytest.raises(IndexError):
        venv.get_attr("marker", indices=[3])
    venv.close()
