"""The agents' observations of torch games: views of the wrapped boards centred on each agent.

The same views as :mod:`safelife_rl.engine.observation` makes (its docstring describes them), for
every agent of every board at once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from safelife_rl.engine import cells
from safelife_rl.engine.observation import DEFAULT_CHANNELS, DEFAULT_VIEW


def agent_views(
    boards: torch.Tensor,
    goals: torch.Tensor,
    agent_locs: torch.Tensor,
    view_shape: tuple[int, int] = DEFAULT_VIEW,
    channels: Sequence[int] = DEFAULT_CHANNELS,
    remove_white_goals: bool = True,
    exits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Each agent's view, uint8 ``(N, A) + view_shape + (len(channels),)``: centred on the
    agent over its wrapped board, exits out of view drawn on its edge in their direction.

    :param boards: int32 ``(N, H, W)`` boards, and ``goals`` of the same shape.
    :param agent_locs: int64 ``(N, A, 2)`` agents' (row, column).
    :param channels: bits of the board (0-15) and goal colour (25-27) to show.
    :param exits: where the exits may be, as flat cell indices ``(N, E)`` (``-1``: none), e.g.
        a level's exit cells, which never move; ``None`` searches every cell of the board.
    """
    n, h, w = boards.shape
    vh, vw = view_shape
    device = boards.device
    goal_colors = goals & cells.COLORS
    if remove_white_goals:
        goal_colors = torch.where(goal_colors == cells.COLORS, 0, goal_colors)
    agents = agent_locs.shape[1]
    combined = (boards | (goal_colors << 16)).view(n, 1, h * w).expand(n, agents, h * w)
    y0, x0 = agent_locs[..., 0, None], agent_locs[..., 1, None]  # (N, A, 1)
    rows = (torch.arange(vh, device=device) + (y0 - vh // 2)) % h
    cols = (torch.arange(vw, device=device) + (x0 - vw // 2)) % w
    view = combined.gather(2, (rows[..., :, None] * w + cols[..., None, :]).flatten(2))
    # Exits: offsets wrapped into [-size/2, size/2), clipped to the view's edge; where several
    # land on one view cell, the last in row-major order shows, as in NumPy.
    if exits is None:
        cell = torch.arange(h * w, device=device).expand(n, agents, h * w)
    else:
        cell = exits[:, None].expand(n, agents, exits.shape[1])
    dy = (cell.clamp(min=0) // w - y0 + h // 2) % h - h // 2
    dx = (cell.clamp(min=0) % w - x0 + w // 2) % w - w // 2
    target = (dy + vh // 2).clamp(0, vh - 1) * vw + (dx + vw // 2).clamp(0, vw - 1)
    found = combined.gather(2, cell.clamp(min=0))
    is_exit = ((found & (cells.EXIT | cells.AGENT)) == cells.EXIT) & (cell >= 0)
    target = torch.where(is_exit, target, vh * vw)  # non-exits into a spare slot
    shown = torch.full((n, agents, vh * vw + 1), -1, dtype=torch.int64, device=device)
    shown.scatter_reduce_(2, target, torch.where(is_exit, cell, -1), "amax")
    shown = shown[..., :-1]
    exit_cells = combined.gather(2, shown.clamp(min=0))
    view = torch.where(shown >= 0, exit_cells, view).view(n, agents, vh, vw, 1)
    shifts = (
        torch.tensor(channels, dtype=torch.int32, device=device)  # a compiled constant
        if torch.compiler.is_compiling()
        else _shifts(tuple(channels), device)
    )
    return ((view >> shifts) & 1).to(torch.uint8)


@functools.cache
def _shifts(channels: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The channels as a tensor on ``device``, made once (not copied at every observation)."""
    return torch.tensor(channels, dtype=torch.int32, device=device)
