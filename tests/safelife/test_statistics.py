"""IQM, its stratified-bootstrap interval and the probability of improvement (rliable) on hand
cases, and seeded determinism."""

import numpy as np
import pytest

from safety_rl_common import statistics


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 scores: the lowest two and highest two are cut, the outlier 100 among them
    assert statistics.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(4.5)
    # runs x tasks are pooled: the middle half of 0..11 is 3..8
    assert statistics.iqm(np.arange(12).reshape(4, 3)) == pytest.approx(5.5)


def test_the_interval_of_two_runs_covers_every_resample():
    """Two runs 0 and 1: a resample is {0, 0}, {0, 1} or {1, 1}, so its IQM (the mean of two)
    is 0, 0.5 or 1, each of the extremes a quarter of the time: the 95% interval is [0, 1]."""
    found = statistics.iqm_interval([0.0, 1.0])
    assert (found.point, found.low, found.high) == (0.5, 0.0, 1.0)
    assert found.cell(2) == "0.50 [0.00, 1.00]"


def test_the_interval_contains_the_point_and_one_run_has_no_width():
    scores = np.random.default_rng(1).normal(size=(5, 3))
    found = statistics.iqm_interval(scores)
    assert found.point == pytest.approx(statistics.iqm(scores))
    assert found.low < found.point < found.high
    single = statistics.iqm_interval([[0.3, 0.7]])  # one run, two tasks
    assert single.low == single.point == single.high == pytest.approx(0.5)


def test_the_bootstrap_is_seeded_and_leaves_numpys_generator_alone():
    scores = np.random.default_rng(2).uniform(size=(4, 2))
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = statistics.iqm_interval(scores, seed=7)
    assert np.array_equal(np.random.get_state()[1], before)
    assert statistics.iqm_interval(scores, seed=7) == first
    assert statistics.iqm_interval(scores, seed=8) != first
    x, y = scores, scores[::-1] + 0.1
    assert statistics.probability_of_improvement(
        x, y, seed=3
    ) == statistics.probability_of_improvement(x, y, seed=3)


def test_probability_of_improvement_on_hand_cases():
    # x {3, 5, 7} vs y {2, 4}: 3 beats one, 5 and 7 beat both: 5 of 6 pairs
    assert statistics.probability_of_improvement([3, 5, 7], [2, 4]).point == pytest.approx(5 / 6)
    # a tie counts half: 2 vs 2 is 0.5, 3 vs 2 is 1
    assert statistics.probability_of_improvement([2, 3], [2]).point == pytest.approx(0.75)
    # averaged over tasks: 3/4 on the first, 0 on the second
    x, y = [[3, 1], [5, 1]], [[2, 2], [4, 2]]
    assert statistics.probability_of_improvement(x, y).point == pytest.approx(0.375)
    always = statistics.probability_of_improvement([5, 6, 7], [1, 2, 3])
    assert (always.point, always.low, always.high) == (1.0, 1.0, 1.0)
    same = statistics.probability_of_improvement([1, 2], [1, 2])
    assert same.low <= same.point == 0.5 <= same.high


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda: statistics.iqm([1.0, np.nan]), "scores must be finite"),
        (lambda: statistics.iqm_interval(np.zeros((0, 2))), "non-empty (runs, tasks) matrix"),
        (
            lambda: statistics.probability_of_improvement(np.zeros((2, 2)), np.zeros((2, 3))),
            "the same tasks, got 2 and 3",
        ),
    ],
)
def test_bad_scores_are_named(call, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_iqm_difference_on_hand_cases():
    # IQMs of three runs are their means: 6 - 2
    apart = statistics.iqm_difference([5, 6, 7], [1, 2, 3])
    assert apart.point == pytest.approx(4.0)
    # every resample of X is within [5, 7] and of Y within [1, 3]: the interval excludes 0
    assert 2.0 <= apart.low <= apart.point <= apart.high <= 6.0
    overlapping = statistics.iqm_difference([1, 2, 3], [1, 2, 3])
    assert overlapping.point == 0.0 and overlapping.low < 0.0 < overlapping.high
    # two tasks pooled: IQM of {1, 2, 3, 4} (middle two: 2.5) minus IQM of {0, 0, 0, 0}
    assert statistics.iqm_difference([[1, 3], [2, 4]], [[0, 0], [0, 0]]).point == pytest.approx(2.5)
    with pytest.raises(ValueError, match="the same tasks"):
        statistics.iqm_difference(np.zeros((2, 2)), np.zeros((2, 1)))


def test_the_mean_interval_of_episodes():
    """Two episodes 0 and 1: a resample's mean is 0, 0.5 or 1 (the extremes a quarter of the
    time each), so the 95% interval is [0, 1]; episodes that all agree have no width."""
    found = statistics.mean_interval([0.0, 1.0])
    assert (found.point, found.low, found.high) == (0.5, 0.0, 1.0)
    values = np.random.default_rng(3).uniform(size=20)
    found = statistics.mean_interval(values)
    assert found.point == pytest.approx(values.mean()) and found.low < found.point < found.high
    assert statistics.mean_interval(values) == found  # seeded
    zeros = statistics.mean_interval([0.0] * 20)
    assert zeros.low == zeros.point == zeros.high == 0.0
