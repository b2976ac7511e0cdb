"""A batch of multi-agent SafeLife games stepped together.

One step executes every agent's action, one after another in agent order (each agent sees
what the ones before it did: it cannot enter a cell another occupies, life it creates takes its
colour, it may destroy a destructible agent), then advances boards and goals one generation
and opens or closes the exits. Each agent scores the board with its own points table; its
reward is the change in its points while it is active, and it may exit once the points it has
earned reach its share ``ceil(min_performance * its available points)``. An agent that exits
(or is destroyed) leaves the board and is done. The rules themselves are the single-agent
engine's kernels (:mod:`safelife_rl.engine.physics`, :mod:`safelife_rl.engine.scoring`), which take an agent
axis; :class:`~safelife_rl.SafeLifeGame` is the same game without one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from safelife_rl.common.errors import UserError
from safelife_rl.engine.game import GameBatch
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel


class MultiAgentGame(GameBatch):
    """N games of A agents each on boards of one shape; per-game arrays lead with N, per-agent
    arrays with (N, A).

    :param levels: the starting levels, all of one board shape and agent count.
    :param rng: random source for spawners (required only if a level has spawners).
    """

    def __init__(self, levels: Sequence[MultiAgentLevel], rng: np.random.Generator | None = None):
        if len({level.n_agents for level in levels}) > 1:
            raise ValueError("levels played together must have as many agents each")
        super().__init__(levels, rng, lambda level: level.agent_locs,
                         lambda level: level.points_tables)

    @property
    def n_agents(self) -> int:
        return self.agent_locs.shape[1]

    def step(self, actions: np.ndarray | Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Play one action per agent, ``(N, A)`` integers 0-8 (``(A,)`` for a single game),
        and advance every board one generation.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive, both ``(N, A)``.
        """
        actions = np.asarray(actions)
        shape = (len(self), self.n_agents)
        if actions.shape != shape and not (len(self) == 1 and actions.shape == shape[1:]):
            raise UserError(
                f"{shape[0]} game(s) of {shape[1]} agents need one action per agent, shape "
                f"{shape}, got shape {actions.shape}"
            )
        if actions.dtype.kind not in "ui":
            raise UserError(f"actions must be integers 0-8, got dtype {actions.dtype}")
        return self._play(actions.reshape(shape))
