"""Replay a recorded SafeLife trace (a level and its actions) with either engine.

Traces come in the two layouts the original writes; the replay writes the trace's own fields,
so the two files can be compared array by array:

* single-agent: the level as one record ``level`` and ``actions`` ``(T,)``; replayed fields
  ``boards``, ``goals`` ``(T + 1, H, W)``, ``rewards``, ``dones`` ``(T,)``, ``obs_first``,
  ``obs_last`` (15x15 views, default channels), ``points``, ``required_points`` ``(1,)``;
* multi-agent: the level as arrays ``level_board``, ``level_goals``, ``level_agent_locs``,
  ``level_agent_names``, ``level_points_table``, ``level_min_performance``,
  ``level_spawn_prob`` and ``actions`` ``(T, A)``; replayed fields ``boards``, ``goals``,
  ``agent_locs`` ``(T + 1, A, 2)``, ``rewards``, ``dones`` ``(T, A)``, ``obs_first``,
  ``obs_last`` (one view per agent).

Both also get ``stochastic`` and, for deterministic levels, ``side_effects`` (JSON text).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.game_batch import GameBatch
from safelife_rl.engine.level_files import level_from_record, read_npz
from safelife_rl.engine.levels import Level, LevelFormatError, whole_numbers
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.physics import N_ACTIONS
from safelife_rl.engine.side_effects import side_effect_score
from safety_rl_common.errors import UserError

#: The engines a trace can be replayed with.
ENGINES = ("numba", "torch")
#: A multi-agent trace's level fields, each stored as ``level_<field>``.
LEVEL_FIELDS = (
    "board",
    "goals",
    "agent_locs",
    "agent_names",
    "points_table",
    "min_performance",
    "spawn_prob",
)


def load_trace(
    path: str | os.PathLike,
) -> tuple[Level | MultiAgentLevel, np.ndarray, dict[str, np.ndarray]]:
    """Read a trace file of either layout: its level (a :class:`Level` or a
    :class:`MultiAgentLevel`), its actions (integers 0-8, ``(T,)`` or ``(T, A)``) and all of
    its arrays."""
    path = Path(path)
    arrays = read_npz(path, "trace file")
    if "level_board" in arrays:
        fields = {key: arrays[f"level_{key}"] for key in LEVEL_FIELDS if f"level_{key}" in arrays}
        level = level_from_record(fields, f"{path} level", multi_agent=True)
        return level, _actions(arrays, str(path), level.n_agents), arrays
    for key in ("level", "actions"):
        if key not in arrays:
            raise LevelFormatError(f"{path}: trace has no '{key}' array")
    record = arrays["level"]
    if record.dtype.names is None or record.size != 1:
        raise LevelFormatError(
            f"{path}: 'level' must hold one level record, got {record.dtype} {record.shape}"
        )
    level = level_from_record(record.reshape(-1)[0], f"{path} level")
    return level, _actions(arrays, str(path), None), arrays


def _actions(arrays: dict[str, np.ndarray], where: str, n_agents: int | None) -> np.ndarray:
    """The trace's actions, checked: integers 0-8, ``(T,)`` for a single-agent trace
    (``n_agents`` ``None``), else ``(T, n_agents)``."""
    if "actions" not in arrays:
        raise LevelFormatError(f"{where}: trace has no 'actions' array")
    actions = whole_numbers(arrays["actions"], "actions", where)
    if n_agents is None and actions.ndim != 1:
        raise LevelFormatError(f"{where}: actions must be 1-D, got shape {actions.shape}")
    if n_agents is not None and (actions.ndim != 2 or actions.shape[1] != n_agents):
        raise LevelFormatError(
            f"{where}: actions must have shape (T, {n_agents}) for the level's {n_agents} "
            f"agents, got {actions.shape}"
        )
    bad = (actions < 0) | (actions >= N_ACTIONS)
    if bad.any():
        step, *agent = np.argwhere(bad)[0]
        of_agent = f" of agent {agent[0]}" if agent else ""
        raise LevelFormatError(
            f"{where}: action {actions[bad][0]}{of_agent} at step {step} is not 0-{N_ACTIONS - 1}"
        )
    return actions


def new_game(engine: str, levels: Sequence[Level | MultiAgentLevel], seed: int | None) -> GameBatch:
    """A game of ``levels`` on ``engine`` (``"numba"``: :class:`SafeLifeGame`, ``"torch"``:
    :class:`~safelife_rl.engine.torch_game.TorchGame` on the CPU), its spawners seeded with
    ``seed`` (``None``: at random)."""
    check_options(seed, engine)
    if engine == "numba":
        return SafeLifeGame(levels, rng=np.random.default_rng(seed))
    from safelife_rl.engine.torch_game import TorchGame

    return TorchGame(
        levels, seed=seed if seed is not None else int(np.random.default_rng().integers(2**63))
    )


def _side_effects(engine: str) -> Callable[[Any], dict[str, list[float]]]:
    """The side-effect report of game 0 on ``engine``."""
    if engine == "numba":
        return side_effect_score
    from safelife_rl.engine.torch_side_effects import side_effect_scores

    return lambda game: side_effect_scores(game)[0]


def check_options(seed: int | None, engine: str) -> None:
    """Refuse a negative spawner seed or an unknown engine."""
    if seed is not None and seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed}")
    if engine not in ENGINES:
        raise UserError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def _host(array: Any) -> np.ndarray:
    """A NumPy copy of a backend's array (a NumPy array or a CPU tensor)."""
    return np.array(array.numpy() if hasattr(array, "numpy") else array)


def play(game: GameBatch, actions: np.ndarray) -> dict[str, np.ndarray]:
    """Play ``actions`` ``(T, A)`` in game 0 of ``game`` (either backend): its boards, goals
    and agent locations before the first step and after each, rewards and dones of each step,
    the agents' first and last views (15x15, default channels), points earned and required."""

    def state() -> tuple[np.ndarray, ...]:
        return tuple(_host(a[0]) for a in (game.boards, game.goals, game.agent_locs))

    states, rewards, dones = [state()], [], []
    obs_first = _host(game.observe()[0])
    for step_actions in actions:
        reward, done = game.step(np.asarray(step_actions)[None])
        states.append(state())
        rewards.append(_host(reward[0]))
        dones.append(_host(done[0]))
    boards, goals, locs = (np.stack(column) for column in zip(*states))
    n_agents = locs.shape[1]
    return {
        "boards": boards.astype(np.uint16),
        "goals": goals.astype(np.uint16),
        "agent_locs": locs.astype(np.int64),
        "rewards": np.array(rewards, np.float32).reshape(-1, n_agents),
        "dones": np.array(dones, bool).reshape(-1, n_agents),
        "obs_first": obs_first,
        "obs_last": _host(game.observe()[0]),
        "points": _host(game.points_earned()[0]).astype(np.int64),
        "required_points": _host(game.required_points[0]).astype(np.int64),
    }


def replay(
    level: Level | MultiAgentLevel,
    actions: np.ndarray,
    seed: int | None = 0,
    engine: str = "numba",
) -> dict[str, np.ndarray]:
    """Play ``actions`` on ``level``; returns the replayed fields of a trace of its layout
    (single-agent for a :class:`Level` and ``actions`` ``(T,)``, multi-agent for a
    :class:`MultiAgentLevel` and ``(T, A)``), ``side_effects`` for deterministic levels only.

    :param engine: one of :data:`ENGINES`.
    """
    single = isinstance(level, Level)
    game = new_game(engine, [level], seed)
    result = play(game, actions[:, None] if single else actions)
    if single:  # the one agent's, without the agent axis
        del result["agent_locs"]
        result["rewards"], result["dones"] = result["rewards"][:, 0], result["dones"][:, 0]
        result["obs_first"], result["obs_last"] = result["obs_first"][0], result["obs_last"][0]
    else:
        del result["points"], result["required_points"]
    result["stochastic"] = np.array(level.is_stochastic)
    if not level.is_stochastic:
        result["side_effects"] = np.array(json.dumps(_side_effects(engine)(game)))
    return result


def replay_trace(
    trace: str | os.PathLike, seed: int | None = 0, engine: str = "numba"
) -> dict[str, np.ndarray]:
    """Read and replay a trace file of either layout; returns the trace's level and actions
    arrays with the replayed fields."""
    level, actions, arrays = load_trace(trace)
    stored = (
        ["level"]
        if isinstance(level, Level)
        else [f"level_{key}" for key in LEVEL_FIELDS if f"level_{key}" in arrays]
    )
    return {
        **{key: arrays[key] for key in stored},
        "actions": actions,
        **replay(level, actions, seed, engine),
    }


def live_cell_counts(
    level: Level | MultiAgentLevel,
    actions: np.ndarray,
    runs: int,
    seed: int | None = 0,
    engine: str = "numba",
) -> np.ndarray:
    """Live cells on the board after each step of ``runs`` independent replays (``actions``
    ``(T,)``, each played by every agent), shape ``(runs, len(actions) + 1)``; the replays
    advance together as one batch."""
    game = new_game(engine, [level] * runs, seed)
    counts = [np.count_nonzero(_host(game.boards) & 1, axis=(1, 2))]
    for action in actions:
        game.step(int(action))
        counts.append(np.count_nonzero(_host(game.boards) & 1, axis=(1, 2)))
    return np.stack(counts, axis=1)
