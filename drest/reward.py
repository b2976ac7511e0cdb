"""The DREST reward (the paper's Section 5 and Definition D.2) and its meta-episode bookkeeping.

In mini-episode i (1-based) of a meta-episode, a coin of value c collected in a trajectory of
length l pays  lambda ** (n - (i - 1) / k) * c / m(l),  where n is how many earlier mini-episodes
of the meta-episode chose length l, k the number of lengths the env offers and m(l) the most
(gamma-discounted) coin value available at length l. The "lopsided" variant omits the division
by m. The default reward pays c.
"""

from __future__ import annotations

from collections.abc import Mapping

from safety_rl_common.checks import check, is_int, is_number

REWARDS = ("drest", "default", "drest_lopsided")


def check_lambda(lam: float, name: str = "lambda") -> None:
    check.value(name, lam, lambda v: is_number(v) and 0.0 < v < 1.0, "strictly between 0 and 1")


def check_reward(reward: str, name: str = "reward") -> None:
    check.value(name, reward, lambda v: v in REWARDS, f"one of {', '.join(REWARDS)}")


def drest_factor(lam: float, n: int, i: int, k: int) -> float:
    """lambda ** (n - (i - 1) / k): ``n`` earlier choices of this length, mini-episode ``i``
    (1-based), ``k`` available lengths."""
    check_lambda(lam)
    if i < 1 or n < 0 or n >= i or k < 1:
        raise ValueError(f"need 0 <= n < i and k >= 1, got n={n}, i={i}, k={k}")
    return lam ** (n - (i - 1) / k)


class MetaEpisode:
    """Counts of the trajectory lengths chosen so far in the current meta-episode.

    ``scale(l)`` is the multiplier for the coins of the mini-episode that just ended with length
    ``l``; ``record(l)`` then files that choice and moves to the next mini-episode, starting a new
    meta-episode after ``size`` mini-episodes.
    """

    def __init__(
        self, size: int, reward: str = "drest", lam: float = 0.9, num_lengths: int = 2
    ) -> None:
        check_reward(reward)
        check.value("meta-episode size", size, lambda v: is_int(v) and v >= 1, "a positive integer")
        if reward != "default":
            drest_factor(lam, 0, 1, num_lengths)  # validates lambda and k
        self.size, self.reward, self.lam, self.k = size, reward, lam, num_lengths
        self.counts: dict[int, int] = {}
        self.index = 1  # i, the 1-based mini-episode number within the meta-episode

    @property
    def at_start(self) -> bool:
        return self.index == 1

    def factor(self, length: int) -> float:
        if self.reward == "default":
            return 1.0
        return drest_factor(self.lam, self.counts.get(length, 0), self.index, self.k)

    def scale(self, length: int, m: Mapping[int, float]) -> float:
        """Overall reward per unit of coin value for this mini-episode (0 if m(l) is 0)."""
        factor = self.factor(length)
        if self.reward != "drest":
            return factor
        m_l = m.get(length, 0.0)
        return factor / m_l if m_l > 0 else 0.0

    def record(self, length: int) -> None:
        self.counts[length] = self.counts.get(length, 0) + 1
        self.index += 1
        if self.index > self.size:
            self.counts.clear()
            self.index = 1


class MaxReturnEstimator:
    """m(l) estimated from samples: the largest preliminary return seen so far at length l (the
    paper's suggestion for when the true maximum is unknown)."""

    def __init__(self) -> None:
        self.best: dict[int, float] = {}

    def update(self, length: int, preliminary_return: float) -> None:
        if preliminary_return > self.best.get(length, 0.0):
            self.best[length] = preliminary_return

    def as_mapping(self) -> Mapping[int, float]:
        return self.best
