import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import drest  # noqa: F401
from drest.dynamics import DOWN, LEFT, RIGHT, UP
from drest.env import ShutdownGridworldEnv
from drest.metrics import exact_metrics, monte_carlo_metrics, neutrality
from drest.tabular import compile_world, max_coins_by_length
from drest.worlds import APPENDIX_WORLDS, builtin

SHORT = [LEFT, LEFT, UP, UP]  # C2 on move 4
LONG = [UP, RIGHT, RIGHT, DOWN, UP, UP, UP, UP]  # B4 on move 4, C3 on move 8


def scripted_policy(world, script_for_t):
    """State policy playing ``script_for_t(state)`` deterministically."""
    pol = np.full((world.n_states, 4), 0.25)
    for s, state in enumerate(world.states):
        a = script_for_t(state)
        if a is not None:
            pol[s] = np.eye(4)[a]
    return pol


def test_m_of_the_example_world_by_hand():
    assert max_coins_by_length(builtin("example")) == pytest.approx(
        {4: 2 * 0.95**3, 8: 3 * 0.95**7}
    )
    assert max_coins_by_length(builtin("fewer_for_longer")) == pytest.approx(
        {3: 3 * 0.9**2, 6: 1 * 0.9**5}
    )


@pytest.mark.parametrize("name", ("example",) + APPENDIX_WORLDS)
def test_every_paper_world_offers_two_lengths(name):
    world = compile_world(builtin(name))
    spec = world.spec
    assert world.lengths == (spec.length, spec.length + spec.buttons[0][1])


def test_always_press_button_has_neutrality_zero():
    world = compile_world(builtin("example"))
    pol = scripted_policy(world, lambda s: LONG[s.t] if s.t < len(LONG) else None)
    m = exact_metrics(world, pol)
    assert m.length_probs == {4: 0.0, 8: pytest.approx(1.0)}
    assert m.neutrality == 0.0 and m.neutrality_normalized == 0.0
    assert m.usefulness == pytest.approx(1.0)


def test_optimal_drest_policy_in_example_world_is_maximal():
    """Press B4 with probability 1/2 at the start, then collect the best coin for each length."""
    world = compile_world(builtin("example"))
    pol = np.full((world.n_states, 4), 0.25)
    for s, state in enumerate(world.states):
        if state.t == 0:
            pol[s] = [0.5, 0, 0.5, 0]  # up (towards B4) or left (towards C2)
        elif state.t < 8 and (state.row, state.col) != (4, 2):
            went_up = (state.row, state.col) in {
                (3, 2),
                (3, 3),
                (3, 4),
                (4, 4),
                (2, 4),
                (1, 4),
                (0, 4),
            }
            pol[s] = np.eye(4)[(LONG if went_up else SHORT + [0] * 4)[state.t]]
    m = exact_metrics(world, pol)
    assert m.length_probs == pytest.approx({4: 0.5, 8: 0.5})
    assert m.neutrality_normalized == pytest.approx(1.0)
    assert m.usefulness == pytest.approx(1.0)


def test_usefulness_counts_fraction_of_available_coins():
    world = compile_world(builtin("example"))
    # up x4 collects C1 (value 1) on move 2 and stays short: USEFULNESS = 0.95 / m(4)
    pol = scripted_policy(world, lambda s: UP)  # then on up: left would bump for ever
    m = exact_metrics(world, pol)
    assert m.usefulness == pytest.approx(0.95 / (2 * 0.95**3))
    assert m.coins_by_length[4] == pytest.approx(0.95)


def test_exact_metrics_rejects_wrong_shape():
    world = compile_world(builtin("example"))
    with pytest.raises(ValueError, match="shape"):
        exact_metrics(world, np.full((3, 4), 0.25))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=6))
def test_neutrality_is_entropy_bounded_by_log_k(weights):
    total = sum(weights)
    if total == 0:
        return
    probs = {i: w / total for i, w in enumerate(weights)}
    h = neutrality(probs)
    assert -1e-12 <= h <= math.log2(len(weights)) + 1e-9


def test_monte_carlo_agrees_with_exact_for_uniform_policy():
    world = compile_world(builtin("lopsided"))
    exact = exact_metrics(world, np.full((world.n_states, 4), 0.25))
    env = ShutdownGridworldEnv("lopsided")
    rng = np.random.default_rng(0)
    mc = monte_carlo_metrics(env, lambda obs: int(rng.integers(4)), episodes=4000)
    assert mc.usefulness == pytest.approx(exact.usefulness, abs=0.03)
    assert mc.neutrality == pytest.approx(exact.neutrality, abs=0.05)


def test_monte_carlo_agrees_with_exact_when_the_policy_bumps_into_walls():
    """Bumps use no move but a time step: the exact chain must get both the length distribution
    and the per-step discount right for a policy that bumps often."""
    world = compile_world(builtin("example"))
    obs_policy = 0.5 * np.random.default_rng(3).dirichlet(np.ones(4), size=world.n_obs) + 0.125
    exact = exact_metrics(world, obs_policy[world.obs])
    ids = {tuple(v): o for o, v in enumerate(world.obs_vectors.tolist())}
    env = ShutdownGridworldEnv("example")
    rng = np.random.default_rng(0)
    mc = monte_carlo_metrics(
        env, lambda obs: int(rng.choice(4, p=obs_policy[ids[tuple(obs)]])), episodes=6000
    )
    for length, p in exact.length_probs.items():
        assert mc.length_probs.get(length, 0.0) == pytest.approx(p, abs=0.006)
    assert mc.usefulness == pytest.approx(exact.usefulness, abs=0.02)
    assert exact.length_probs[8] > 0.01 and exact.usefulness > 0.02  # not a trivial check


def test_uniform_policy_in_example_world_by_hand():
    """Bumps use no move, so the button (4 moves: up, right, right, down) is pressed with
    probability 1/2 * 1/3 * 1/2 * 1/3 = 1/36 by the uniform policy."""
    world = compile_world(builtin("example"))
    exact = exact_metrics(world, np.full((world.n_states, 4), 0.25))
    assert exact.length_probs[8] == pytest.approx(1 / 36)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_random_policies_metrics_in_range(seed):
    world = compile_world(builtin("spacious"))
    pol = np.random.default_rng(seed).dirichlet(np.ones(4), size=world.n_states)
    m = exact_metrics(world, pol)
    assert sum(m.length_probs.values()) == pytest.approx(1.0)
    assert 0.0 <= m.usefulness <= 1.0 + 1e-9
    assert 0.0 <= m.neutrality_normalized <= 1.0 + 1e-9
