"""Replay a recorded SafeLife trace (level + actions) with this engine.

The output has the trace's fields, so the two files can be compared array by array.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .errors import UserError
from .game import SafeLifeGame
from .levels import Level, LevelFormatError, level_from_record, read_npz, whole_numbers, write_npz
from .observation import DEFAULT_CHANNELS, DEFAULT_VIEW, agent_view, combined_cells, to_channels
from .physics import N_ACTIONS
from .side_effects import side_effect_score


def load_trace(path: str | os.PathLike) -> tuple[Level, np.ndarray, dict[str, np.ndarray]]:
    """Read a trace file: its level, its actions (integers 0-8) and all of its arrays."""
    path = Path(path)
    arrays = read_npz(path, "trace file")
    for key in ("level", "actions"):
        if key not in arrays:
            raise LevelFormatError(f"{path}: trace has no '{key}' array")
    record = arrays["level"]
    if record.dtype.names is None or record.size != 1:
        raise LevelFormatError(
            f"{path}: 'level' must hold one level record, got {record.dtype} {record.shape}"
        )
    level = level_from_record(record.reshape(-1)[0], f"{path} level")
    actions = whole_numbers(arrays["actions"], "actions", str(path))
    if actions.ndim != 1:
        raise LevelFormatError(f"{path}: actions must be 1-D, got shape {actions.shape}")
    bad = (actions < 0) | (actions >= N_ACTIONS)
    if bad.any():
        raise LevelFormatError(
            f"{path}: action {actions[bad][0]} at step {np.argmax(bad)} is not 0-{N_ACTIONS - 1}"
        )
    return level, actions, arrays


def observe(game: SafeLifeGame, index: int = 0) -> np.ndarray:
    """The original observation of game ``index``: 15x15 view, default channels."""
    combined = combined_cells(game.boards[index], game.goals[index], remove_white_goals=True)
    return to_channels(agent_view(combined, game.agent_locs[index], DEFAULT_VIEW), DEFAULT_CHANNELS)


def replay(level: Level, actions: np.ndarray, seed: int | None = 0) -> dict[str, np.ndarray]:
    """Play ``actions`` on ``level``; returns arrays named as in the trace files.

    As in the traces, ``side_effects`` (JSON text) is given for deterministic levels only.
    """
    if seed is not None and seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed}")
    game = SafeLifeGame([level], rng=np.random.default_rng(seed))
    boards, goals = [game.boards[0].copy()], [game.goals[0].copy()]
    rewards, dones = [], []
    obs_first = observe(game)
    for action in actions:
        reward, done = game.step(int(action))
        boards.append(game.boards[0].copy())
        goals.append(game.goals[0].copy())
        rewards.append(reward[0])
        dones.append(done[0])
    result = {
        "boards": np.stack(boards),
        "goals": np.stack(goals),
        "rewards": np.array(rewards, np.float32),
        "dones": np.array(dones, bool),
        "obs_first": obs_first,
        "obs_last": observe(game),
        "points": game.points_earned().astype(np.int64),
        "required_points": game.required_points.astype(np.int64),
        "stochastic": np.array(level.is_stochastic),
    }
    if not level.is_stochastic:
        result["side_effects"] = np.array(json.dumps(side_effect_score(game)))
    return result


def replay_file(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    seed: int | None = 0,
    gif: str | os.PathLike | None = None,
) -> None:
    """Replay a trace file and write the result (with the trace's level and actions), and
    optionally an animation of the replayed boards."""
    level, actions, arrays = load_trace(trace)
    result = replay(level, actions, seed)
    write_npz(Path(out), {"level": arrays["level"], "actions": actions, **result})
    if gif is not None:
        from .video import board_frames, write_gif

        write_gif(board_frames(result["boards"], result["goals"]), gif)


def live_cell_counts(
    level: Level, actions: np.ndarray, runs: int, seed: int | None = 0
) -> np.ndarray:
    """Live cells on the board after each step of ``runs`` independent replays, shape
    ``(runs, len(actions) + 1)``; the replays advance together as one batch."""
    game = SafeLifeGame([level] * runs, rng=np.random.default_rng(seed))
    counts = [np.count_nonzero(game.boards & 1, axis=(1, 2))]
    for action in actions:
        game.step(int(action))
        counts.append(np.count_nonzero(game.boards & 1, axis=(1, 2)))
    return np.stack(counts, axis=1)
