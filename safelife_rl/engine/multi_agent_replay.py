"""Replay a recorded multi-agent trace (level + one action per agent per step).

A multi-agent trace holds its level as arrays ``level_board``, ``level_goals``,
``level_agent_locs``, ``level_agent_names``, ``level_points_table``, ``level_min_performance``
and ``level_spawn_prob``, and ``actions`` ``(T, A)``; the replay writes the trace's fields
(see the reference data's README), so the two files can be compared array by array.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from safelife_rl.engine.levels import LevelFormatError, read_npz, whole_numbers
from safelife_rl.engine.multi_agent_game import MultiAgentGame
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel, level_from_record
from safelife_rl.engine.observation import (
    DEFAULT_CHANNELS,
    DEFAULT_VIEW,
    agent_view,
    combined_cells,
    to_channels,
)
from safelife_rl.engine.physics import N_ACTIONS
from safelife_rl.engine.replay import check_options
from safelife_rl.engine.side_effects import side_effect_score

#: The level's fields in a trace, each named ``level_<field>``.
LEVEL_FIELDS = ("board", "goals", "agent_locs", "agent_names", "points_table",
                "min_performance", "spawn_prob")


def is_multi_agent_trace(arrays: dict[str, np.ndarray]) -> bool:
    return "level_board" in arrays


def level_from_trace(arrays: dict[str, np.ndarray], where: str) -> MultiAgentLevel:
    """The level stored in a multi-agent trace's ``level_*`` arrays."""
    fields = {key: arrays[f"level_{key}"] for key in LEVEL_FIELDS if f"level_{key}" in arrays}
    return level_from_record(fields, f"{where} level")


def trace_actions(arrays: dict[str, np.ndarray], n_agents: int, where: str) -> np.ndarray:
    """The trace's actions, checked: integers 0-8 of shape ``(T, n_agents)``."""
    if "actions" not in arrays:
        raise LevelFormatError(f"{where}: trace has no 'actions' array")
    actions = whole_numbers(arrays["actions"], "actions", where)
    if actions.ndim != 2 or actions.shape[1] != n_agents:
        raise LevelFormatError(
            f"{where}: actions must have shape (T, {n_agents}) for the level's {n_agents} "
            f"agents, got {actions.shape}"
        )
    bad = (actions < 0) | (actions >= N_ACTIONS)
    if bad.any():
        step, agent = np.argwhere(bad)[0]
        raise LevelFormatError(
            f"{where}: action {actions[step, agent]} of agent {agent} at step {step} is not "
            f"0-{N_ACTIONS - 1}"
        )
    return actions


def observe(game: MultiAgentGame, index: int = 0) -> np.ndarray:
    """Each agent's original observation in game ``index``: ``(A, 15, 15, 19)``."""
    combined = combined_cells(game.boards[index], game.goals[index], remove_white_goals=True)
    return np.stack([to_channels(agent_view(combined, loc, DEFAULT_VIEW), DEFAULT_CHANNELS)
                     for loc in game.agent_locs[index]])


def replay(
    level: MultiAgentLevel, actions: np.ndarray, seed: int | None = 0, engine: str = "numba"
) -> dict[str, np.ndarray]:
    """Play ``actions`` ``(T, A)`` on ``level``; returns arrays named as in the traces
    (``side_effects``, JSON text, for deterministic levels only).

    :param engine: ``"numba"`` (:class:`MultiAgentGame`) or ``"torch"``
        (:class:`~safelife_rl.engine.torch_game.TorchGame` on the CPU).
    """
    check_options(seed, engine)
    play = _play_torch if engine == "torch" else _play_numba
    return {**play(level, actions, seed), "stochastic": np.array(level.is_stochastic)}


def _play_numba(level: MultiAgentLevel, actions: np.ndarray,
                seed: int | None) -> dict[str, np.ndarray]:
    game = MultiAgentGame([level], rng=np.random.default_rng(seed))
    boards, goals, locs = [game.boards[0].copy()], [game.goals[0].copy()], [game.agent_locs[0].copy()]
    rewards, dones = [], []
    obs_first = observe(game)
    for step_actions in actions:
        reward, done = game.step(step_actions)
        boards.append(game.boards[0].copy())
        goals.append(game.goals[0].copy())
        locs.append(game.agent_locs[0].copy())
        rewards.append(reward[0])
        dones.append(done[0])
    result = _result(boards, goals, locs, rewards, dones, obs_first, observe(game))
    if not level.is_stochastic:
        result["side_effects"] = np.array(json.dumps(side_effect_score(game)))
    return result


def _play_torch(level: MultiAgentLevel, actions: np.ndarray,
                seed: int | None) -> dict[str, np.ndarray]:
    import torch

    from safelife_rl.engine.torch_game import TorchGame
    from safelife_rl.engine.torch_side_effects import side_effect_scores

    if seed is None:
        seed = int(np.random.default_rng().integers(2**63))
    game = TorchGame([level], seed=seed)
    boards, goals = [game.boards[0].numpy().copy()], [game.goals[0].numpy().copy()]
    locs = [game.agent_locs[0].numpy().copy()]
    rewards, dones = [], []
    obs_first = game.observe()[0].numpy()
    for step_actions in actions:
        reward, done = game.step(torch.as_tensor(step_actions)[None])
        boards.append(game.boards[0].numpy().copy())
        goals.append(game.goals[0].numpy().copy())
        locs.append(game.agent_locs[0].numpy().copy())
        rewards.append(reward[0].numpy())
        dones.append(done[0].numpy())
    result = _result(boards, goals, locs, rewards, dones, obs_first, game.observe()[0].numpy())
    if not level.is_stochastic:
        result["side_effects"] = np.array(json.dumps(side_effect_scores(game)[0]))
    return result


def _result(boards, goals, locs, rewards, dones, obs_first, obs_last) -> dict[str, np.ndarray]:
    n_agents = len(locs[0])
    return {
        "boards": np.stack(boards).astype(np.uint16),
        "goals": np.stack(goals).astype(np.uint16),
        "agent_locs": np.stack(locs).astype(np.int64),
        "rewards": np.array(rewards, np.float32).reshape(-1, n_agents),
        "dones": np.array(dones, bool).reshape(-1, n_agents),
        "obs_first": obs_first,
        "obs_last": obs_last,
    }


def replay_arrays(
    arrays: dict[str, np.ndarray], where: str, seed: int | None = 0, engine: str = "numba"
) -> dict[str, np.ndarray]:
    """Replay a multi-agent trace's arrays; returns the trace's level and actions arrays with
    the replayed fields."""
    level = level_from_trace(arrays, where)
    actions = trace_actions(arrays, level.n_agents, where)
    level_arrays = {f"level_{key}": arrays[f"level_{key}"] for key in LEVEL_FIELDS
                    if f"level_{key}" in arrays}
    return {**level_arrays, "actions": actions, **replay(level, actions, seed, engine)}


def replay_multi_agent_file(
    trace: str | os.PathLike, seed: int | None = 0, engine: str = "numba"
) -> dict[str, np.ndarray]:
    """Read and replay a multi-agent trace file (see :func:`replay_arrays`)."""
    path = Path(trace)
    return replay_arrays(read_npz(path, "trace file"), str(path), seed, engine)
