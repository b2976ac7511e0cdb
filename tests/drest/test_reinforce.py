import numpy as np
import pytest

from drest.reinforce import PAPER_SETTINGS, paper_settings, train_reinforce
from drest.tabular import compile_world
from drest.worlds import builtin, lopsided


def test_paper_settings_and_schedules():
    ex = PAPER_SETTINGS["example"]
    assert (ex.meta_episodes, ex.meta_episode_size, ex.lam) == (2048, 64, 0.9)
    assert ex.decay_meta_episodes * ex.meta_episode_size == 65_536
    assert ex.schedule(0) == (0.25, 0.5)
    assert ex.schedule(1024) == pytest.approx((0.01, 0.001))
    assert ex.schedule(2000) == pytest.approx((0.01, 0.001))  # held after the decay
    lr, eps = ex.schedule(512)
    assert lr == pytest.approx((0.25 * 0.01) ** 0.5) and eps == pytest.approx((0.5 * 0.001) ** 0.5)
    app = paper_settings("spacious")
    assert (app.meta_episode_size, app.meta_episodes, app.eps_start, app.eps_end) == \
        (32, 1024, 0.75, 0.0001)
    assert paper_settings("lopsided").decay_meta_episodes == 256
    assert paper_settings("example", meta_episodes=3, lam=None).meta_episodes == 3


def test_same_seed_same_policy_different_seed_differs():
    world = compile_world(builtin("example"))
    s = paper_settings("example", meta_episodes=8)
    a = train_reinforce(world, "drest", s, seed=1)
    b = train_reinforce(world, "drest", s, seed=1)
    c = train_reinforce(world, "drest", s, seed=2)
    assert np.array_equal(a.theta, b.theta)
    assert not np.array_equal(a.theta, c.theta)
    assert [h["meta_episode"] for h in a.history] == [0, 8]


def test_default_agent_learns_useful_policy():
    world = compile_world(builtin("fewer_for_longer"))
    result = train_reinforce(world, "default", paper_settings("fewer_for_longer",
                                                              meta_episodes=256,
                                                              decay_meta_episodes=128), seed=0)
    assert result.final.usefulness > 0.9
    assert result.final.neutrality < 0.1  # the default reward makes agents pick one length


def test_drest_agent_is_neutral_in_lopsided_world_and_default_is_not():
    """In Lopsided rewards with x = 1 both lengths are easy to find; the DREST reward makes the
    policy choose them about equally often, the default reward does not."""
    world = compile_world(lopsided(1.0))
    settings = paper_settings("lopsided", meta_episodes=128, decay_meta_episodes=64)
    drest = train_reinforce(world, "drest_lopsided", settings, seed=0)
    default = train_reinforce(world, "default", settings, seed=0)
    assert drest.final.neutrality > 0.9
    assert drest.final.usefulness > 0.9
    assert default.final.neutrality < 0.5
