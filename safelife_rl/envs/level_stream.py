"""The level stream: which level each episode of a SafeLife env plays.

Every env that plays SafeLife levels (single-agent, multi-agent, and any batch of envs)
draws its levels with these semantics:

* **A level list** (given as levels, or as a ``.npz`` file or folder to load) is played in
  order, wrapping round: level 0, 1, ..., then 0 again. :meth:`LevelStream.restart` (an env's
  seeded reset) starts the order again at level 0, so a seeded env is reproducible whatever it
  played before.
* **Shuffled** (``shuffle``): each level is drawn uniformly from the list, with replacement,
  by ``rng.integers(len(levels))`` on the env's generator.
* **A sampler** (procedural levels, a level bank: anything with ``sample(rng)``): each level
  is ``sampler.sample(rng)`` with the env's generator.
* :meth:`LevelStream.pick` ``(i)`` plays level ``i`` of a list (modulo its length, as an env's
  ``reset(options={"level": i})``) and the order goes on from ``i + 1``; a sampler has no
  index and refuses.
* :meth:`LevelStream.draw` ``(rng, count)`` gives ``count`` levels at once, the same levels
  that ``count`` draws one at a time give (as a batch of envs restarting together, in the
  order of their index, needs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from safelife_rl.engine.level_files import load_levels
from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safety_rl_common.errors import UserError


class LevelSampler(Protocol):
    """A source of new levels, such as :class:`safelife_rl.procgen.ProceduralLevels`."""

    def sample(self, rng: np.random.Generator) -> Any: ...


#: What an env takes as its levels: a ``.npz`` file or folder, a list of levels, or a sampler.
LevelSource = str | os.PathLike | Sequence[Level] | Sequence[MultiAgentLevel] | LevelSampler


class LevelStream:
    """The levels an env plays, one per episode (see the module description).

    :param source: a ``.npz`` level file or archive, a folder of them, a list of levels or a
        sampler.
    :param shuffle: draw from a list at random instead of in order.
    :param multi_agent: load files as multi-agent levels.
    :param owner: the env, named in the error for an empty list.
    """

    def __init__(
        self,
        source: LevelSource,
        shuffle: bool = False,
        multi_agent: bool = False,
        owner: str = "an env",
    ):
        if isinstance(source, (str, os.PathLike)):
            source = load_levels(source, multi_agent)
        self.sampler: LevelSampler | None = source if hasattr(source, "sample") else None
        self.levels: list[Any] = [] if self.sampler is not None else list(source)
        if self.sampler is None and not self.levels:
            raise UserError(f"{owner} needs at least one level")
        self.shuffle = shuffle
        self.next_index = 0

    def restart(self) -> None:
        """Start the list's order again at level 0."""
        self.next_index = 0

    def draw(self, rng: np.random.Generator, count: int = 1) -> list[Any]:
        """The next ``count`` levels."""
        if self.sampler is not None:
            return [self.sampler.sample(rng) for _ in range(count)]
        if self.shuffle:
            picks = rng.integers(len(self.levels), size=count)
        else:
            picks = (self.next_index + np.arange(count)) % len(self.levels)
        self.next_index = int(picks[-1]) + 1
        return [self.levels[int(k)] for k in picks]

    def pick(self, index: int) -> Any:
        """Level ``index`` of the list; the order goes on after it."""
        if self.sampler is not None:
            raise ValueError("options['level'] needs a list of levels, not a level sampler")
        index = int(index) % len(self.levels)
        self.next_index = index + 1
        return self.levels[index]

    def next(self, rng: np.random.Generator, options: dict[str, Any] | None = None) -> Any:
        """The level of an env's next episode: ``options["level"]`` if given, else the next
        drawn."""
        if options and "level" in options:
            return self.pick(options["level"])
        return self.draw(rng)[0]

    def close(self) -> None:
        """Stop the sampler's worker processes, if it has any."""
        if hasattr(self.sampler, "close"):
            self.sampler.close()
