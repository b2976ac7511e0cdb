import numpy as np
import pytest

from drest.reinforce import PAPER_SETTINGS, paper_settings, softmax, train_reinforce
from drest.reinforce_kernel import REWARD_MODES, run_meta_episodes
from drest.reward import MetaEpisode
from drest.tabular import compile_world, max_coins_by_length
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
    assert (app.meta_episode_size, app.meta_episodes, app.eps_start, app.eps_end) == (
        32,
        1024,
        0.75,
        0.0001,
    )
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
    result = train_reinforce(
        world,
        "default",
        paper_settings("fewer_for_longer", meta_episodes=256, decay_meta_episodes=128),
        seed=0,
    )
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


def _reference_reinforce(world, reward, lam, lrs, epss, uniforms):
    """Plain-Python REINFORCE on the same random numbers, using drest.reward's MetaEpisode."""
    theta = np.zeros((world.n_obs, 4))
    m = max_coins_by_length(world.spec)
    n_meta, size, max_steps, _ = uniforms.shape
    for j in range(n_meta):
        meta = MetaEpisode(size, reward, lam, len(world.lengths))
        for q in range(size):
            s, visited = 0, []
            while not world.terminal[s] and len(visited) < max_steps:
                u, r = uniforms[j, q, len(visited)]
                p = softmax(theta[world.obs[s]])
                a = (
                    min(int(r * 4), 3)
                    if u < epss[j]
                    else int(np.searchsorted(np.cumsum(p), r, side="right"))
                )
                visited.append((world.obs[s], a, world.coin[s, a], p))
                s = world.next[s, a]
            if not world.terminal[s]:
                continue
            scale = meta.scale(int(world.t[s]), m)
            meta.record(int(world.t[s]))
            g, updates = 0.0, []
            for o, a, c, p in reversed(visited):
                g = scale * c + world.spec.gamma * g
                updates.append((o, lrs[j] * g * (np.eye(4)[a] - p)))
            for o, delta in updates:
                theta[o] += delta
    return theta


@pytest.mark.parametrize("reward", ["drest", "default", "drest_lopsided"])
def test_compiled_kernel_matches_plain_python(reward):
    world = compile_world(builtin("example"))
    rng = np.random.default_rng(7)
    uniforms = rng.random((3, 16, 128, 2))
    lrs, epss = np.array([0.25, 0.2, 0.15]), np.array([0.5, 0.3, 0.1])
    m_by_length = max_coins_by_length(world.spec)
    m = np.array([m_by_length[length] for length in world.lengths])
    length_index = np.full(world.n_states, -1)
    length_index[world.terminal] = np.searchsorted(world.lengths, world.t[world.terminal])
    theta, probs = np.zeros((world.n_obs, 4)), np.full((world.n_obs, 4), 0.25)
    run_meta_episodes(
        theta,
        probs,
        world.next,
        world.coin,
        world.obs,
        length_index,
        m,
        REWARD_MODES[reward],
        0.9,
        world.spec.gamma,
        lrs,
        epss,
        uniforms,
    )
    expected = _reference_reinforce(world, reward, 0.9, lrs, epss, uniforms)
    assert np.abs(expected).max() > 0.01  # it learned something
    np.testing.assert_allclose(theta, expected, atol=1e-12)
    np.testing.assert_allclose(probs, softmax(theta), atol=1e-12)
