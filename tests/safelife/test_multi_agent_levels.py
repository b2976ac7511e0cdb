"""Multi-agent levels: the original's file formats both ways, and clear errors for bad ones."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from safelife_rl.engine import cells
from safelife_rl.engine.level_files import load_levels, save_level, save_levels
from safelife_rl.engine.levels import LevelFormatError
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.replay import load_trace
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE

TRACES = sorted(
    (Path(__file__).resolve().parents[1] / "data/safelife/traces-multiagent").glob("*.npz")
)


def trace_level(index: int = 0) -> MultiAgentLevel:
    trace = TRACES[index]
    return load_trace(trace)[0]


def same_level(a: MultiAgentLevel, b: MultiAgentLevel) -> bool:
    return (
        np.array_equal(a.board, b.board)
        and np.array_equal(a.goals, b.goals)
        and a.agent_locs == b.agent_locs
        and a.agent_names == b.agent_names
        and np.array_equal(a.points_tables, b.points_tables)
        and a.spawn_prob == b.spawn_prob
        and a.min_performance == b.min_performance
    )


def test_trace_levels_load_with_their_agents():
    level = trace_level(0)  # asym1: cyan and magenta
    assert level.n_agents == 2 and level.agent_names == ("cyan", "magenta")
    assert level.points_tables.shape == (2, 8, 9)
    for (row, col), color in zip(
        level.agent_locs, (cells.GREEN | cells.BLUE, cells.RED | cells.BLUE)
    ):
        assert level.board[row, col] & cells.AGENT
        assert level.board[row, col] & cells.COLORS == color


def test_single_level_round_trip(tmp_path):
    level = replace(trace_level(7), name="one")
    save_level(level, tmp_path / "one.npz")
    (loaded,) = load_levels(tmp_path / "one.npz", multi_agent=True)
    assert same_level(level, loaded) and loaded.name == "one"
    # The file is the original's: every field it writes for a multi-agent game.
    with np.load(tmp_path / "one.npz") as data:
        assert data["agent_locs"].shape == (2, 2) and data["points_table"].shape == (2, 8, 9)
        assert list(data["agent_names"]) == list(level.agent_names)


def test_archive_round_trip(tmp_path):
    levels = [trace_level(i) for i in range(0, 25, 5)]
    save_levels(levels, tmp_path / "suite.npz")
    loaded = load_levels(tmp_path / "suite.npz", multi_agent=True)
    assert len(loaded) == 5 and all(same_level(a, b) for a, b in zip(levels, loaded))


def test_single_agent_files_load_as_one_agent_levels(benchmarks):
    single = load_levels(benchmarks / "navigation.npz")[:3]
    multi = load_levels(benchmarks / "navigation.npz", multi_agent=True)[:3]
    for a, b in zip(single, multi):
        assert b.agent_locs == (a.agent_loc,) and b.agent_names == ("agent0",)
        assert np.array_equal(a.board, b.board)  # orientation written into the agent's cell
        assert np.array_equal(b.points_tables, DEFAULT_POINTS_TABLE[None])


def test_single_agent_loader_points_to_the_multi_agent_one(tmp_path):
    save_level(trace_level(3), tmp_path / "two.npz")
    with pytest.raises(
        LevelFormatError,
        match=r"exactly one agent is supported, found 2 "
        r"\(levels of several agents load with "
        r"load_levels\(path, multi_agent=True\)\)",
    ):
        load_levels(tmp_path / "two.npz")


def fields(**changes) -> dict[str, np.ndarray]:
    level = trace_level(0)
    record = {
        "board": level.board,
        "goals": level.goals,
        "agent_locs": np.array(level.agent_locs),
        "agent_names": np.array(level.agent_names),
        "points_table": level.points_tables,
    }
    return {**record, **changes}


def board_with_third_agent() -> np.ndarray:
    board = trace_level(0).board.copy()
    board[0, 0] = cells.KINDS["player"]
    return board


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"agent_names": np.array(["cyan", "magenta", "red"])},
            "agent arrays differ in length: 2 agent_locs, 3 agent_names, 2 points tables",
        ),
        (
            {"points_table": np.zeros((1, 8, 9))},
            "agent arrays differ in length: 2 agent_locs, 2 agent_names, 1 points tables",
        ),
        (
            {"points_table": np.zeros((2, 8, 8))},
            r"points_table must be \(2, 8, 9\) numbers, got float64 \(2, 8, 8\)",
        ),
        ({"points_table": np.full((2, 8, 9), np.inf)}, "points_table holds inf"),
        (
            {"agent_locs": np.array([[10, 25], [18, 26]])},
            r"agent 1 \(magenta\) location \(row 18, col 26\) is off the board \(26, 26\)",
        ),
        (
            {"agent_locs": np.array([[10, 25], [0, 0]])},
            r"no agent 1 \(magenta\) at its location \(row 0, col 0\)",
        ),
        ({"agent_locs": np.array([[10, 25], [10, 25]])}, "two agents share a location"),
        (
            {"board": board_with_third_agent()},
            "the board holds 3 agent cells but agent_locs lists 2",
        ),
        (
            {"agent_locs": np.zeros((2, 3), np.int64)},
            r"agent_locs must be \(row, column\) pairs, got shape \(2, 3\)",
        ),
        ({"agent_names": np.array([1, 2])}, "agent_names must be a 1-D array of strings"),
    ],
)
def test_bad_levels_are_refused_naming_the_problem(tmp_path, changes, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **fields(**changes))
    with pytest.raises(LevelFormatError, match=rf"^{path}: {message}"):
        load_levels(path, multi_agent=True)


def test_bad_levels_are_refused_when_built_in_code():
    level = trace_level(0)
    with pytest.raises(
        LevelFormatError,
        match="agent arrays differ in length: 2 agent_locs, 1 agent_names, 2 points tables",
    ):
        replace(level, agent_names=("cyan",))
    with pytest.raises(LevelFormatError, match="a level needs at least one agent"):
        replace(level, agent_locs=())
