"""Piecewise-linear schedules over training steps, as the original SafeLife training used."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from safety_rl_common.errors import UserError


class LinearRamp:
    """``values[i]`` at ``steps[i]``, linear in between, constant before the first and after the
    last point. ``LinearRamp([5e5, 2e6], [0.001, 1.0])`` is the original exit curriculum.

    :param steps: training steps (env steps summed over all parallel envs), increasing.
    :param values: the value at each of ``steps``.
    """

    def __init__(self, steps: Sequence[float], values: Sequence[float]):
        given = f"steps={steps!r} values={values!r}"
        try:
            self.steps = np.asarray(steps, np.float64)
            self.values = np.asarray(values, np.float64)
        except (TypeError, ValueError):
            raise UserError(
                f"a ramp's steps and values must be lists of numbers, got {given}"
            ) from None
        if self.steps.ndim != 1 or self.steps.shape != self.values.shape or not len(self.steps):
            raise UserError(f"a ramp needs as many values as steps (at least one), got {given}")
        if not (np.isfinite(self.steps).all() and np.isfinite(self.values).all()):
            raise UserError(f"a ramp's steps and values must be finite numbers, got {given}")
        if self.steps[0] < 0 or np.any(np.diff(self.steps) <= 0):
            raise UserError(
                f"a ramp's steps must increase from 0 or more (training steps), got steps={steps!r}"
            )

    def __call__(self, step: float) -> float:
        return float(np.interp(step, self.steps, self.values))

    def __repr__(self) -> str:
        return f"LinearRamp(steps={self.steps.tolist()}, values={self.values.tolist()})"
