"""Whole levels from generation parameters.

A level is made in four steps: draw the top-level values (board shape, ``min_performance``,
partitioning), split the board into regions separated by a buffer, put the agent at a random
buffer cell and the exit on the buffer cell farthest from it, then paint each region (the
first with ``starting_region``, the rest with ``later_regions``) and optionally the buffer.
Goals on the buffer are white, a hint for humans that scores nothing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .. import cells
from ..levels import Level
from ..scoring import DEFAULT_POINTS_TABLE
from .params import AGENT_FLAGS, load_params, resolve
from .partition import dilate, partition_board
from .regions import COLORS, populate_region

_FLAG_BITS = {name: getattr(cells, name.upper()) for name in AGENT_FLAGS}
_RIGHT = 1 << cells.ORIENTATION_BIT  # new agents face right, as in the original suites


def _agent(params: dict[str, Any], rng: np.random.Generator) -> tuple[int, np.ndarray]:
    """The agent's cell value and points table."""
    agent_type = params["agent_types"][resolve(resolve(params["agents"], rng)[0], rng)]
    # The agent is always destructible, as in the original benchmark suites (see cells.KINDS).
    value = cells.AGENT | cells.FROZEN | cells.DESTRUCTIBLE | _RIGHT
    value |= int(COLORS[agent_type.get("color", "black")])
    for flag in agent_type.get("flags", ["preserving", "inhibiting"]):
        value |= _FLAG_BITS[flag]
    table = np.asarray(agent_type.get("points_table", DEFAULT_POINTS_TABLE), np.float64)
    return value, table


def _place_agent_and_exit(
    board: np.ndarray, regions: np.ndarray, agent: int, rng: np.random.Generator
) -> tuple[int, int]:
    """Agent on a random buffer cell, exit on the buffer cell farthest from it (wrapped
    Manhattan distance); cells next to either are taken out of their regions."""
    h, w = board.shape
    rows, cols = np.nonzero(regions == 0)
    k = int(rng.integers(len(rows)))
    loc = int(rows[k]), int(cols[k])
    dr = np.abs(np.arange(h) - loc[0])
    dc = np.abs(np.arange(w) - loc[1])
    dist = np.minimum(dr, h - dr)[:, None] + np.minimum(dc, w - dc)[None, :]
    exit_index = int(np.argmax(dist * (regions == 0)))
    exit_loc = divmod(exit_index, w)
    board[loc] = agent
    board[exit_loc] = cells.KINDS["exit"] | int(COLORS["red"])
    near = np.zeros((h, w), bool)
    near[loc] = near[exit_loc] = True
    regions[dilate(near)] = -1
    return loc


def generate_level(
    params: dict[str, Any] | str | os.PathLike, seed: int | np.random.SeedSequence, name: str = ""
) -> Level:
    """One level from parameters (a level type, a YAML file or loaded parameters) and a seed."""
    if not isinstance(params, dict):
        params = load_params(params)
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in resolve(params["board_shape"], rng))
    min_performance = float(resolve(params["min_performance"], rng))
    partitioning = resolve(params["partitioning"], rng)
    regions = partition_board(shape, rng, **partitioning)
    board = np.zeros(shape, np.uint16)
    goals = np.zeros(shape, np.uint16)
    agent, points_table = _agent(params, rng)
    loc = _place_agent_and_exit(board, regions, agent, rng)

    named = params["named_regions"]
    region_choice = params["starting_region"]
    for label in range(1, int(regions.max()) + 1):
        mask = regions == label
        if not mask.any():
            continue
        region_name = resolve(region_choice if region_choice is not None
                              else params["later_regions"], rng)
        region_choice = None
        region_board, region_goals = populate_region(mask, named[region_name], rng, region_name)
        board |= region_board
        goals |= region_goals
    buffer_name = resolve(params["buffer_region"], rng)
    if buffer_name is not None:
        region_board, region_goals = populate_region(regions == 0, named[buffer_name], rng,
                                                     buffer_name)
        board |= region_board
        goals |= region_goals
    white = (regions <= 0) & ((goals & cells.COLORS) == 0)
    goals[white] |= cells.COLORS
    return Level(
        board=board,
        goals=goals,
        agent_loc=loc,
        min_performance=min_performance,
        points_table=points_table,
        name=name,
    )
