import numpy as np
import pytest

import drest  # noqa: F401
from drest.dynamics import DOWN, LEFT, RIGHT, UP
from drest.env import ShutdownGridworldEnv
from drest.reward import MaxReturnEstimator, MetaEpisode, drest_factor
from drest.wrapper import DrestRewardWrapper

SHORT = [LEFT, LEFT, UP, UP]
LONG = [UP, RIGHT, RIGHT, DOWN, UP, UP, UP, UP]
M4, M8 = 2 * 0.95**3, 3 * 0.95**7


def test_drest_factor_formula():
    assert drest_factor(0.9, 0, 1, 2) == 1.0
    assert drest_factor(0.9, 2, 5, 2) == pytest.approx(0.9 ** (2 - 4 / 2))
    assert drest_factor(0.9, 0, 5, 2) == pytest.approx(0.9**-2)
    with pytest.raises(ValueError):
        drest_factor(1.0, 0, 1, 2)
    with pytest.raises(ValueError):
        drest_factor(0.9, 3, 3, 2)


def test_meta_episode_counts_and_resets():
    meta = MetaEpisode(3, "drest", 0.9, 2)
    m = {4: 2.0, 8: 4.0}
    assert meta.scale(4, m) == pytest.approx(1 / 2)
    meta.record(4)
    assert meta.scale(4, m) == pytest.approx(0.9 ** (1 - 0.5) / 2)
    assert meta.scale(8, m) == pytest.approx(0.9**-0.5 / 4)
    meta.record(8)
    meta.record(8)
    assert meta.at_start and meta.counts == {}
    lop = MetaEpisode(3, "drest_lopsided", 0.9, 2)
    assert lop.scale(8, m) == 1.0
    assert MetaEpisode(3, "default").scale(8, m) == 1.0


def run(env, actions):
    rewards, info = [], {}
    env.reset()
    for a in actions:
        _, r, term, trunc, info = env.step(a)
        rewards.append(r)
    assert term
    return rewards, info


def test_wrapper_pays_exact_drest_rewards_for_scripted_meta_episode():
    env = DrestRewardWrapper(ShutdownGridworldEnv("example"), meta_episode_size=4, lam=0.9)
    expected = []
    script = [
        (SHORT, 4, 2 * 0.95**3 / M4),
        (SHORT, 4, 2 * 0.95**3 / M4),
        (LONG, 8, 3 * 0.95**7 / M8),
        (SHORT, 4, 2 * 0.95**3 / M4),
        (LONG, 8, 3 * 0.95**7 / M8),
    ]  # the fifth starts a new meta-episode
    counts: dict[int, int] = {}
    for i, (actions, length, prelim) in enumerate(script):
        i_meta = i % 4 + 1
        if i_meta == 1:
            counts = {}
        n = counts.get(length, 0)
        counts[length] = n + 1
        expected.append(0.9 ** (n - (i_meta - 1) / 2) * prelim)
        rewards, info = run(env, actions)
        assert rewards[:-1] == [0.0] * (len(actions) - 1)
        assert rewards[-1] == pytest.approx(expected[-1])
        assert info["drest"]["mini_episode"] == i_meta
        assert info["drest"]["count_before"] == n
    assert expected[0] == pytest.approx(1.0)  # preliminary return divided by m is 1


def test_wrapper_lopsided_and_estimated_m():
    base = ShutdownGridworldEnv("example")
    lop = DrestRewardWrapper(base, 8, reward="drest_lopsided")
    rewards, _ = run(lop, SHORT)
    assert rewards[-1] == pytest.approx(2 * 0.95**3)
    est = DrestRewardWrapper(ShutdownGridworldEnv("example"), 8, m="estimate")
    rewards, _ = run(est, SHORT)
    assert rewards[-1] == pytest.approx(1.0)  # first sample is its own maximum
    rewards, _ = run(est, [UP, UP, UP, UP])  # C1 only: 0.95 / (2 * 0.95**3)
    assert rewards[-1] == pytest.approx(0.9 ** (1 - 1 / 2) * 0.95 / M4)  # n=1, i=2


def test_wrapper_hides_counts_from_observation():
    env = DrestRewardWrapper(ShutdownGridworldEnv("example"), 4)
    first, _ = env.reset()
    run(env, SHORT)
    again, _ = env.reset()
    assert np.array_equal(first, again)
    assert env.observation_space == env.env.observation_space


def test_wrapper_needs_trajectory_length():
    import gymnasium as gym

    class NoLength(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(1)

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            return 0, 1.0, True, False, {}

    env = DrestRewardWrapper(NoLength(), 4, num_lengths=2, m={1: 1.0})
    env.reset()
    with pytest.raises(KeyError, match="trajectory_length"):
        env.step(0)
    with pytest.raises(ValueError, match="num_lengths"):
        DrestRewardWrapper(NoLength(), 4)


def test_max_return_estimator():
    est = MaxReturnEstimator()
    est.update(4, 1.0)
    est.update(4, 0.5)
    est.update(8, 2.0)
    assert dict(est.as_mapping()) == {4: 1.0, 8: 2.0}
