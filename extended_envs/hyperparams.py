"""Allowed values of agents' hyperparameters (``Agent.hyperparam_ranges``).

Every hyperparameter of the library's agents has a range here, checked when an agent class is
bound or instantiated, so that ``learning_rate=nan`` or ``epsilon=-3`` is refused up front with
the hyperparameter, the value and the range, instead of training on nonsense.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from extended_envs.checks import check
from safety_rl_common.checks import is_int, is_number


class Allowed(Protocol):
    """A set of allowed values; ``str()`` says what they are."""

    def allows(self, value: Any) -> bool: ...


@dataclass(frozen=True)
class Interval:
    """Numbers from ``low`` to ``high`` (ends excluded when open); ints only if ``ints``.

    NaN and bools are never allowed; None only if ``none``.
    """

    low: float = -math.inf
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False
    ints: bool = False
    none: bool = False

    def allows(self, value: Any) -> bool:
        if value is None:
            return self.none
        if not (is_int(value) if self.ints else is_number(value)) or math.isnan(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return bool(above and below)

    def __str__(self) -> str:
        kind = "an int" if self.ints else "a finite number" if self.open_high else "a number"
        low, high = f"{self.low:g}", f"{self.high:g}"
        if self.high == math.inf:
            text = f"{kind} {'>' if self.open_low else '>='} {low}"
        else:
            left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
            text = f"{kind} in {left}{low}, {high}{right}"
        return f"None or {text}" if self.none else text


@dataclass(frozen=True)
class Flag:
    """``True`` or ``False``."""

    def allows(self, value: Any) -> bool:
        return isinstance(value, (bool, np.bool_))

    def __str__(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Keywords:
    """None or a dict of keyword arguments (string keys)."""

    def allows(self, value: Any) -> bool:
        return value is None or (isinstance(value, dict) and all(isinstance(k, str) for k in value))

    def __str__(self) -> str:
        return "None or a dict of keyword arguments"


POSITIVE = Interval(0, math.inf, open_low=True, open_high=True)
NON_NEGATIVE = Interval(0, math.inf, open_high=True)
UNIT = Interval(0, 1)
POSITIVE_UNIT = Interval(0, 1, open_low=True)
COUNT = Interval(1, ints=True)


def check_hyperparams(agent: str, ranges: dict[str, Allowed], values: dict[str, Any]) -> None:
    """A UserError ``AGENT hyperparameter NAME must be ALLOWED, got VALUE`` for the first of
    ``values`` outside its range (names without one pass; infinities where the range has them,
    as ``max_grad_norm``'s no clipping)."""
    for name, value in values.items():
        allowed = ranges.get(name)
        if allowed is not None and not allowed.allows(value):
            check.refuse(f"{agent} hyperparameter {name}", value, str(allowed))
