"""Replay a recorded SafeLife trace (level + actions) with this engine (multi-agent traces:
:mod:`safelife_rl.engine.multi_agent_replay`).

The output has the trace's fields, so the two files can be compared array by array.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from safelife_rl.common.errors import UserError
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.levels import (
    Level,
    LevelFormatError,
    level_from_record,
    read_npz,
    whole_numbers,
)
from safelife_rl.engine.observation import (
    DEFAULT_CHANNELS,
    DEFAULT_VIEW,
    agent_view,
    combined_cells,
    to_channels,
)
from safelife_rl.engine.physics import N_ACTIONS
from safelife_rl.engine.side_effects import side_effect_score

#: The engines a trace can be replayed with.
ENGINES = ("numba", "torch")


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


def replay(
    level: Level, actions: np.ndarray, seed: int | None = 0, engine: str = "numba"
) -> dict[str, np.ndarray]:
    """Play ``actions`` on ``level``; returns arrays named as in the trace files.

    As in the traces, ``side_effects`` (JSON text) is given for deterministic levels only.

    :param engine: ``"numba"`` (:class:`SafeLifeGame`) or ``"torch"``
        (:class:`~safelife_rl.engine.torch_game.TorchGame` on the CPU).
    """
    check_options(seed, engine)
    play = _play_torch if engine == "torch" else _play_numba
    return {**play(level, actions, seed), "stochastic": np.array(level.is_stochastic)}


def check_options(seed: int | None, engine: str) -> None:
    """Refuse a negative spawner seed or an unknown engine (single- and multi-agent replays)."""
    if seed is not None and seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed}")
    if engine not in ENGINES:
        raise UserError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def _play_numba(level: Level, actions: np.ndarray, seed: int | None) -> dict[str, np.ndarray]:
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
    }
    if not level.is_stochastic:
        result["side_effects"] = np.array(json.dumps(side_effect_score(game)))
    return result


def _play_torch(level: Level, actions: np.ndarray, seed: int | None) -> dict[str, np.ndarray]:
    import torch

    from safelife_rl.engine.torch_game import TorchGame
    from safelife_rl.engine.torch_side_effects import side_effect_scores

    if seed is None:
        seed = int(np.random.default_rng().integers(2**63))
    game = TorchGame([level], seed=seed)
    boards, goals = [game.boards[0].clone()], [game.goals[0].clone()]
    rewards, dones = [], []
    obs_first = game.observe()[0, 0]
    for action in actions:
        reward, done = game.step(int(action))
        boards.append(game.boards[0].clone())
        goals.append(game.goals[0].clone())
        rewards.append(reward[0, 0])
        dones.append(done[0, 0])
    result = {
        "boards": torch.stack(boards).numpy().astype(np.uint16),
        "goals": torch.stack(goals).numpy().astype(np.uint16),
        "rewards": np.array([float(r) for r in rewards], np.float32),
        "dones": np.array([bool(d) for d in dones], bool),
        "obs_first": obs_first.numpy(),
        "obs_last": game.observe()[0, 0].numpy(),
        "points": game.points_earned()[:, 0].numpy().astype(np.int64),
        "required_points": game.required_points[:, 0].numpy().astype(np.int64),
    }
    if not level.is_stochastic:
        result["side_effects"] = np.array(json.dumps(side_effect_scores(game)[0]))
    return result


def live_cell_counts(
    level: Level, actions: np.ndarray, runs: int, seed: int | None = 0, engine: str = "numba"
) -> np.ndarray:
    """Live cells on the board after each step of ``runs`` independent replays, shape
    ``(runs, len(actions) + 1)``; the replays advance together as one batch."""
    if engine == "torch":
        from safelife_rl.engine.torch_game import TorchGame

        game = TorchGame([level] * runs, seed=seed if seed is not None else 0)
        torch_counts = [(game.boards & 1).sum((1, 2))]
        for action in actions:
            game.step(int(action))
            torch_counts.append((game.boards & 1).sum((1, 2)))
        return np.stack([c.cpu().numpy() for c in torch_counts], axis=1)
    game = SafeLifeGame([level] * runs, rng=np.random.default_rng(seed))
    counts = [np.count_nonzero(game.boards & 1, axis=(1, 2))]
    for action in actions:
        game.step(int(action))
        counts.append(np.count_nonzero(game.boards & 1, axis=(1, 2)))
    return np.stack(counts, axis=1)
