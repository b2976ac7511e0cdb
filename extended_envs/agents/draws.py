"""Per-step random numbers for agents whose ``act`` must leave them unchanged.

An agent's randomness for acting is fixed when it trains: ``act`` reads the current draws and
``train`` advances to the next ones. Two instances with the same seed and the same number of
``train`` calls therefore hold the same draws, whatever and however often they were asked to act.
"""

from __future__ import annotations

import numpy as np

# Blocks grow from _FIRST_BLOCK to _MAX_BLOCK rows, so that creating an agent (which environments
# such as LimitedMemory do every turn) is cheap. ``Generator.random`` yields the same numbers
# however a stream is split into calls, so the block sizes do not change any draw.
_FIRST_BLOCK = 16
_MAX_BLOCK = 4096


class StepDraws:
    """``width`` uniform numbers in [0, 1) per training step, from ``rng``.

    ``rng`` must not be used for anything else: the draws are taken from it ahead of time.
    """

    def __init__(self, rng: np.random.Generator, width: int) -> None:
        self.rng = rng
        self.width = width
        self._rows = _FIRST_BLOCK
        self._block = self.rng.random((self._rows, width)).tolist()
        self._index = 0

    @property
    def current(self) -> list[float]:
        return self._block[self._index]

    def advance(self) -> None:
        self._index += 1
        if self._index == self._rows:
            self._rows = min(2 * self._rows, _MAX_BLOCK)
            self._block = self.rng.random((self._rows, self.width)).tolist()
            self._index = 0
