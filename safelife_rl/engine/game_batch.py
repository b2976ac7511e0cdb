"""What a batch of SafeLife games offers, whichever backend steps it.

:class:`GameBatch` is the interface the Numba game
(:class:`~safelife_rl.engine.game.SafeLifeGame`) and the torch game
(:class:`~safelife_rl.engine.torch_game.TorchGame`) share:
``N`` games of ``A`` agents each on boards of one shape, stepped together. Arrays are NumPy
arrays for the one and tensors for the other, with the same shapes and the same values bit for
bit (``tests/safelife/test_game_batch.py``); per-agent arrays always have the agent axis, ``A``
= 1 for single-agent levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.observation import DEFAULT_CHANNELS, DEFAULT_VIEW

#: A NumPy array or a torch tensor, as the backend keeps its state.
Array = Any


@runtime_checkable
class GameBatch(Protocol):
    """``N`` SafeLife games of ``A`` agents each, stepped together.

    State: ``boards`` and ``goals`` ``(N, H, W)``; ``agent_locs`` ``(N, A, 2)`` (row,
    column); ``spawn_prob`` ``(N,)``; ``points``, ``can_exit``, ``active``,
    ``available_points`` and ``required_points`` ``(N, A)``; ``num_steps`` the steps played.
    """

    levels: list[Level | MultiAgentLevel]
    boards: Array
    goals: Array
    agent_locs: Array
    spawn_prob: Array
    points: Array
    can_exit: Array
    active: Array
    available_points: Array
    required_points: Array
    num_steps: int

    def __len__(self) -> int: ...

    def step(self, actions: Any) -> tuple[Array, Array]:
        """Play one action per agent, ``(N, A)`` integers 0-8 (or one for all), and advance
        every board and its goals one generation; returns rewards (float32, zero for inactive
        agents) and whether each agent is now inactive, both ``(N, A)``."""

    def agent_present(self) -> Array:
        """Whether each agent is still on its board, ``(N, A)``."""

    def has_exited(self) -> Array:
        """Whether each agent has left through the exit, ``(N, A)``."""

    def points_earned(self) -> Array:
        """Points earned since the start, exit bonus included, ``(N, A)``."""

    def performance(self) -> Array:
        """Fraction of the available points earned (exit bonus excluded), ``(N, A)``."""

    def observe(
        self,
        view_shape: tuple[int, int] = DEFAULT_VIEW,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        remove_white_goals: bool = True,
    ) -> Array:
        """Each agent's view, uint8 ``(N, A) + view_shape + (len(channels),)``."""


def episode_info(game: GameBatch, index: int = 0, agent: int = 0) -> dict[str, Any]:
    """What game ``index`` says of agent ``agent``'s episode so far, as every SafeLife env
    reports it in ``info``: ``success`` (exited), ``points`` (earned, exit bonus included),
    ``available_points``, ``required_points``, ``performance`` (fraction of the available
    points earned) and ``level`` (its name), as Python values."""
    return {
        "success": bool(game.has_exited()[index, agent]),
        "points": float(game.points_earned()[index, agent]),
        "available_points": float(game.available_points[index, agent]),
        "required_points": float(game.required_points[index, agent]),
        "performance": float(game.performance()[index, agent]),
        "level": game.levels[index].name,
    }
