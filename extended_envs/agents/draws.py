"""Per-step random numbers for agents whose ``act`` must leave them unchanged.

An agent's randomness for acting is fixed when it trains: ``act`` reads the current draws and
``train`` advances to the next ones. Two instances with the same seed and the same number of
``train`` calls therefore hold the same draws, whatever and however often they were asked to act.
"""

from __future__ import annotations

import numpy as np

_BLOCK = 4096


class StepDraws:
    """``width`` uniform numbers in [0, 1) per training step, from a private NumPy generator."""

    def __init__(self, rng: np.random.Generator, width: int) -> None:
        self.rng = rng
        self.width = width
        self._refill()

    def _refill(self) -> None:
        self._block = self.rng.random((_BLOCK, self.width)).tolist()
        self._index = 0

    @property
    def current(self) -> list[float]:
        return self._block[self._index]

    def advance(self) -> None:
        self._index += 1
        if self._index == _BLOCK:
            self._refill()
