"""Whole levels from generation parameters.

A level is made in four steps: draw the top-level values (board shape, ``min_performance``,
partitioning), split the board into regions separated by a buffer, put the agents at random
buffer cells and the exit on the buffer cell farthest from them, then paint each region (the
first with ``starting_region``, the rest with ``later_regions``) and optionally the buffer.
Goals on the buffer are white, a hint for humans that scores nothing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from safelife_rl.engine import cells
from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safelife_rl.procgen.params import AGENT_FLAGS, load_params, resolve
from safelife_rl.procgen.partition import dilate, partition_board
from safelife_rl.procgen.regions import COLORS, populate_region

_FLAG_BITS = {name: getattr(cells, name.upper()) for name in AGENT_FLAGS}
_RIGHT = 1 << cells.ORIENTATION_BIT  # new agents face right, as in the original suites


def _agents(
    params: dict[str, Any], rng: np.random.Generator, multi_agent: bool
) -> list[tuple[str, int, np.ndarray]]:
    """Each agent's type name, cell value and points table, in agent order.

    Single-agent levels' agents are destructible, as in the original benchmark suites (see
    cells.KINDS); the original multi-agent generator makes them destructible only if their
    type's flags say so, so that agents cannot destroy one another unless asked.
    """
    names = resolve(params["agents"], rng)
    agents = []
    for name in names[: None if multi_agent else 1]:
        name = resolve(name, rng)
        agent_type = params["agent_types"][name]
        value = cells.AGENT | cells.FROZEN | _RIGHT | (0 if multi_agent else cells.DESTRUCTIBLE)
        value |= int(COLORS[agent_type.get("color", "black")])
        for flag in agent_type.get("flags", ["preserving", "inhibiting"]):
            value |= _FLAG_BITS[flag]
        table = np.asarray(agent_type.get("points_table", DEFAULT_POINTS_TABLE), np.float64)
        agents.append((name, value, table))
    return agents


def _place_agents_and_exit(
    board: np.ndarray, regions: np.ndarray, agents: list[int], rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Agents on distinct random buffer cells, the exit on the buffer cell farthest from them
    (summed wrapped Manhattan distance); cells next to any are taken out of their regions."""
    h, w = board.shape
    rows, cols = np.nonzero(regions == 0)
    if len(agents) > len(rows):
        raise ValueError(f"{len(agents)} agents but only {len(rows)} buffer cells to put them")
    # One agent: one integer draw, which keeps the single-agent levels of a seed unchanged.
    picks = (
        [int(rng.integers(len(rows)))]
        if len(agents) == 1
        else rng.choice(len(rows), len(agents), replace=False).tolist()
    )
    locs = [(int(rows[k]), int(cols[k])) for k in picks]
    dist = np.zeros((h, w), np.int64)
    for loc in locs:
        dr = np.abs(np.arange(h) - loc[0])
        dc = np.abs(np.arange(w) - loc[1])
        dist += np.minimum(dr, h - dr)[:, None] + np.minimum(dc, w - dc)[None, :]
    exit_index = int(np.argmax(dist * (regions == 0)))
    exit_loc = divmod(exit_index, w)
    for loc, agent in zip(locs, agents):
        board[loc] = agent
    board[exit_loc] = cells.KINDS["exit"] | int(COLORS["red"])
    near = np.zeros((h, w), bool)
    for loc in locs + [exit_loc]:
        near[loc] = True
    regions[dilate(near)] = -1
    return locs


def _generate(
    params: dict[str, Any], seed: int | np.random.SeedSequence, multi_agent: bool
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]], list[tuple[str, int, np.ndarray]], float]:
    """Board, goals, agent locations, agents (see :func:`_agents`) and min_performance."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in resolve(params["board_shape"], rng))
    min_performance = float(resolve(params["min_performance"], rng))
    partitioning = resolve(params["partitioning"], rng)
    regions = partition_board(shape, rng, **partitioning)
    board = np.zeros(shape, np.uint16)
    goals = np.zeros(shape, np.uint16)
    agents = _agents(params, rng, multi_agent)
    locs = _place_agents_and_exit(board, regions, [value for _, value, _ in agents], rng)

    named = params["named_regions"]
    region_choice = params["starting_region"]
    for label in range(1, int(regions.max()) + 1):
        mask = regions == label
        if not mask.any():
            continue
        region_name = resolve(
            region_choice if region_choice is not None else params["later_regions"], rng
        )
        region_choice = None
        region_board, region_goals = populate_region(mask, named[region_name], rng, region_name)
        board |= region_board
        goals |= region_goals
    buffer_name = resolve(params["buffer_region"], rng)
    if buffer_name is not None:
        region_board, region_goals = populate_region(
            regions == 0, named[buffer_name], rng, buffer_name
        )
        board |= region_board
        goals |= region_goals
    white = (regions <= 0) & ((goals & cells.COLORS) == 0)
    goals[white] |= cells.COLORS
    return board, goals, locs, agents, min_performance


def generate_level(
    params: dict[str, Any] | str | os.PathLike, seed: int | np.random.SeedSequence, name: str = ""
) -> Level:
    """One level from parameters (a level type, a YAML file or loaded parameters) and a seed."""
    if not isinstance(params, dict):
        params = load_params(params)
    board, goals, (loc,), ((_, _, table),), min_performance = _generate(params, seed, False)
    return Level(
        board=board,
        goals=goals,
        agent_loc=loc,
        min_performance=min_performance,
        points_table=table,
        name=name,
    )


def generate_multi_agent_level(
    params: dict[str, Any] | str | os.PathLike, seed: int | np.random.SeedSequence, name: str = ""
) -> MultiAgentLevel:
    """One multi-agent level from parameters (a multi-agent level type such as
    ``"build-coop"``, a YAML file or parameters loaded with ``multi_agent=True``) and a seed."""
    if not isinstance(params, dict):
        params = load_params(params, multi_agent=True)
    board, goals, locs, agents, min_performance = _generate(params, seed, True)
    return MultiAgentLevel(
        board=board,
        goals=goals,
        agent_locs=tuple(locs),
        agent_names=tuple(name for name, _, _ in agents),
        points_tables=np.stack([table for _, _, table in agents]),
        min_performance=min_performance,
        name=name,
    )
