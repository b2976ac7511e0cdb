"""Scores over seeds as the field reports them (Agarwal et al., "Deep Reinforcement Learning at
the Edge of the Statistical Precipice", NeurIPS 2021), computed with their ``rliable`` library:
the interquartile mean (IQM) with a 95% stratified-bootstrap confidence interval (and the plain
mean with its interval, for a run's evaluation episodes), and, of one method over another, the
difference of their IQMs and the probability of improvement, each with its interval.

Scores are matrices of shape ``(runs, tasks)``: one row per run (seed), one column per task
(a stratum: the bootstrap resamples the runs of each task apart). Every bootstrap here is
seeded, so the same scores give the same interval.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from rliable import library, metrics

# rliable logs a line ("Calculating estimates for x ...") through absl at every interval
logging.getLogger("absl").setLevel(logging.WARNING)

#: Bootstrap resamples per interval (rliable's own default is 50,000; 2,000 moves the bounds
#: of a 3-seed interval by under 1% of its width and keeps a table of dozens of cells fast).
REPS = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its confidence interval."""

    point: float
    low: float
    high: float

    def cell(self, digits: int = 3) -> str:
        return f"{self.point:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    __str__ = cell

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of 0 (a difference, for a difference)."""
        return self.low > 0 or self.high < 0

    def as_dict(self) -> dict[str, float]:
        return {"point": self.point, "low": self.low, "high": self.high}


def _scores(scores: np.ndarray | list, name: str = "scores") -> np.ndarray:
    array = np.asarray(scores, np.float64)
    if array.ndim == 1:
        array = array[:, None]  # one task
    if array.ndim != 2 or array.size == 0:
        raise ValueError(
            f"{name} must be a non-empty (runs, tasks) matrix, got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite (leave out the tasks a run has no score on)")
    return array


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """rliable's stratified resampling draws from NumPy's global generator (its
    ``random_state`` does not reach ``np.random.choice`` there): seed that for the call and put
    the caller's state back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _interval(
    data: np.ndarray | tuple[np.ndarray, np.ndarray], func: Callable, reps: int, seed: int
) -> Estimate:
    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"x": data}, func, reps=reps, confidence_interval_size=CONFIDENCE
        )
    low, high = np.asarray(intervals["x"], np.float64).reshape(2)
    return Estimate(float(np.asarray(points["x"]).reshape(())), float(low), float(high))


def iqm(scores: np.ndarray | list) -> float:
    """Interquartile mean of all the scores (the mean of the middle 50%, runs and tasks
    pooled); 1-D scores are one task's runs."""
    return float(metrics.aggregate_iqm(_scores(scores)))


def iqm_interval(scores: np.ndarray | list, reps: int = REPS, seed: int = 0) -> Estimate:
    """IQM of ``scores`` ``(runs, tasks)`` with its 95% stratified-bootstrap interval (runs
    resampled within each task). One run gives an interval of no width."""
    array = _scores(scores)
    return _interval(array, lambda x: np.array([metrics.aggregate_iqm(x)]), reps, seed)


def mean_interval(values: np.ndarray | list, reps: int = REPS, seed: int = 0) -> Estimate:
    """The mean of ``values`` (one run's episodes, say) with its 95% percentile-bootstrap
    interval; one value gives an interval of no width."""
    array = _scores(values, "values")
    return _interval(array, lambda x: np.array([metrics.aggregate_mean(x)]), reps, seed)


def _pair(
    scores_x: np.ndarray | list, scores_y: np.ndarray | list
) -> tuple[np.ndarray, np.ndarray]:
    x, y = _scores(scores_x, "scores_x"), _scores(scores_y, "scores_y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"scores_x and scores_y must have the same tasks, got {x.shape[1]} and {y.shape[1]}"
        )
    return x, y


def iqm_difference(
    scores_x: np.ndarray | list, scores_y: np.ndarray | list, reps: int = REPS, seed: int = 0
) -> Estimate:
    """IQM(X) - IQM(Y) with its 95% stratified-bootstrap interval (the runs of X and of Y
    resampled apart, within each task): an interval that excludes 0 is a difference."""
    return _interval(
        _pair(scores_x, scores_y),
        lambda x, y: np.array([metrics.aggregate_iqm(x) - metrics.aggregate_iqm(y)]),
        reps,
        seed,
    )


def probability_of_improvement(
    scores_x: np.ndarray | list, scores_y: np.ndarray | list, reps: int = REPS, seed: int = 0
) -> Estimate:
    """P(X > Y): the chance that a run of X scores higher than a run of Y on the same task
    (ties count half), averaged over the tasks, with its 95% stratified-bootstrap interval (the
    runs of X and of Y resampled apart). For scores where lower is better, pass their
    negatives."""
    return _interval(_pair(scores_x, scores_y), metrics.probability_of_improvement, reps, seed)
