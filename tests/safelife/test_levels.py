"""Reading and writing levels in the original formats, and rejecting bad files."""

import numpy as np
import pytest

from safelife_rl import cells
from safelife_rl.levels import Level, LevelFormatError, load_levels, save_level, save_levels


def same_level(a: Level, b: Level) -> bool:
    return (
        np.array_equal(a.board, b.board)
        and np.array_equal(a.goals, b.goals)
        and a.agent_loc == b.agent_loc
        and a.spawn_prob == b.spawn_prob
        and a.min_performance == b.min_performance
        and np.array_equal(a.points_table, b.points_table)
    )


def test_benchmark_archive_loads(benchmarks):
    levels = load_levels(benchmarks / "append-still.npz")
    assert len(levels) == 100
    level = levels[0]
    assert level.shape == (26, 26) and level.min_performance == 0.5
    row, col = level.agent_loc
    assert level.board[row, col] & cells.AGENT
    # The record's orientation (1: right) is written into the agent's cell.
    assert (level.board[row, col] & cells.ORIENTATION) >> cells.ORIENTATION_BIT == 1


def test_directory_loads_every_file(benchmarks):
    assert len(load_levels(benchmarks)) == 800


def test_single_level_round_trip(benchmarks, tmp_path):
    level = load_levels(benchmarks / "prune-spawn.npz")[3]
    save_level(level, tmp_path / "one.npz")
    (loaded,) = load_levels(tmp_path / "one.npz")
    assert same_level(level, loaded)
    assert [p.name for p in tmp_path.iterdir()] == ["one.npz"]  # no temporary left behind


def test_archive_round_trip(benchmarks, tmp_path):
    levels = load_levels(benchmarks / "navigation.npz")[:5]
    save_levels(levels, tmp_path / "suite.npz")
    loaded = load_levels(tmp_path / "suite.npz")
    assert all(same_level(a, b) for a, b in zip(levels, loaded))


def test_truncated_file_is_rejected(benchmarks, tmp_path):
    data = (benchmarks / "append-still.npz").read_bytes()
    bad = tmp_path / "truncated.npz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(LevelFormatError, match="truncated.npz"):
        load_levels(bad)


def test_garbage_file_is_rejected(tmp_path):
    bad = tmp_path / "garbage.npz"
    bad.write_bytes(b"this is not a level")
    with pytest.raises(LevelFormatError, match="garbage.npz: not a level file"):
        load_levels(bad)


def board_with_agent(shape=(5, 5), dtype=np.uint16):
    board = np.zeros(shape, dtype)
    board[1, 2] = cells.KINDS["player"]
    return board


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"goals": np.zeros((5, 5), np.uint16), "agent_loc": [2, 1]}, "missing field.*board"),
        ({"board": board_with_agent(), "goals": np.zeros((5, 5), np.uint16)}, "agent_loc"),
        ({"board": board_with_agent(dtype=np.float32), "goals": np.zeros((5, 5), np.uint16),
          "agent_loc": [2, 1]}, "board must be a 2-D integer array"),
        ({"board": board_with_agent(), "goals": np.zeros((4, 5), np.uint16),
          "agent_loc": [2, 1]}, "differ"),
        ({"board": board_with_agent(), "goals": np.zeros((5, 5), np.uint16),
          "agent_loc": [9, 9]}, "off the board"),
        ({"board": board_with_agent(), "goals": np.zeros((5, 5), np.uint16),
          "agent_loc": [0, 0]}, "no agent"),
        ({"board": np.full((5, 5), 70000), "goals": np.zeros((5, 5), np.uint16),
          "agent_loc": [2, 1]}, "outside 0-65535"),
    ],
)
def test_malformed_levels_name_the_problem(tmp_path, fields, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **fields)
    with pytest.raises(LevelFormatError, match=message):
        load_levels(path)


def test_missing_file_and_empty_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_levels(tmp_path / "nope.npz")
    with pytest.raises(LevelFormatError, match="no .npz"):
        load_levels(tmp_path)
