"""Reading and writing levels in the original formats, and rejecting bad files."""

import numpy as np
import pytest

from safelife_rl.engine import cells
from safelife_rl.engine.level_files import load_levels, save_level, save_levels
from safelife_rl.engine.levels import Level, LevelFormatError
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safety_rl_common.errors import UserError


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
        (
            {
                "board": board_with_agent(dtype=np.float32),
                "goals": np.zeros((5, 5), np.uint16),
                "agent_loc": [2, 1],
            },
            "board must be a 2-D integer array",
        ),
        (
            {
                "board": board_with_agent(),
                "goals": np.zeros((4, 5), np.uint16),
                "agent_loc": [2, 1],
            },
            "differ",
        ),
        (
            {
                "board": board_with_agent(),
                "goals": np.zeros((5, 5), np.uint16),
                "agent_loc": [9, 9],
            },
            "off the board",
        ),
        (
            {
                "board": board_with_agent(),
                "goals": np.zeros((5, 5), np.uint16),
                "agent_loc": [0, 0],
            },
            "no agent",
        ),
        (
            {
                "board": np.full((5, 5), 70000),
                "goals": np.zeros((5, 5), np.uint16),
                "agent_loc": [2, 1],
            },
            "outside 0-65535",
        ),
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


def level_fields(**changes):
    fields = {
        "board": board_with_agent(),
        "goals": np.zeros((5, 5), np.uint16),
        "agent_loc": np.array([2, 1]),
        "spawn_prob": 0.3,
        "min_performance": 0.5,
        "orientation": 1,
        "points_table": DEFAULT_POINTS_TABLE[None],
        "name": "five",
    }
    return {**fields, **changes}


def table_with(value):
    table = DEFAULT_POINTS_TABLE.astype(np.float64)
    table[2, 3] = value
    return table


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"points_table": table_with(np.nan)}, r"points_table holds nan; .*finite"),
        ({"points_table": table_with(np.inf)}, r"points_table holds inf"),
        ({"points_table": table_with(1e300)}, r"points_table holds 1e\+300"),
        ({"points_table": np.zeros((8, 8))}, r"points_table must be \(8, 9\) numbers"),
        ({"points_table": np.full((8, 9), "a")}, r"points_table must be numbers"),
        ({"min_performance": np.nan}, r"min_performance nan is not a finite number <= 1"),
        ({"min_performance": np.inf}, r"min_performance inf"),
        ({"min_performance": -np.inf}, r"min_performance -inf"),
        ({"min_performance": 1.5}, r"min_performance 1.5 is not a finite number <= 1"),
        ({"min_performance": [0.5, 0.5]}, r"min_performance must have shape \(\), got \(2,\)"),
        ({"spawn_prob": np.nan}, r"spawn_prob nan is not a number in \[0, 1\]"),
        ({"spawn_prob": -0.1}, r"spawn_prob -0.1"),
        ({"spawn_prob": np.zeros((2, 2))}, r"spawn_prob must have shape \(\)"),
        ({"spawn_prob": "high"}, r"spawn_prob must be numbers, got dtype <U4"),
        ({"orientation": [1, 2]}, r"orientation must have shape \(\)"),
        ({"orientation": 7}, r"orientation 7 is not 0-3"),
        ({"orientation": 1.5}, r"orientation must be whole numbers, got 1.5"),
        ({"agent_loc": np.array([2.5, 1.0])}, r"agent_loc must be whole numbers, got 2.5"),
        ({"agent_loc": np.array([np.nan, 1.0])}, r"agent_loc must be whole numbers, got nan"),
        ({"agent_loc": np.array([2, 1, 0])}, r"agent_loc must have shape \(2,\)"),
        ({"agent_loc": np.array([2**62, 1])}, r"agent location .* is off the board \(5, 5\)"),
        ({"board": board_with_agent() | np.uint16(1 << 14)}, r"board has cell 0x4... with bits"),
        ({"goals": np.full((5, 5), 1 << 14)}, r"goals has cell 0x4000"),
        ({"board": np.zeros((5, 0), np.uint16)}, r"board must be a non-empty 2-D array"),
        ({"board": board_with_agent() | np.uint16(cells.AGENT)}, r"exactly one agent.*found 25"),
        ({"name": np.array(["a", "b"])}, r"name must be one string"),
    ],
)
def test_bad_field_values_name_the_file_and_field(tmp_path, changes, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **level_fields(**changes))
    with pytest.raises(LevelFormatError, match=f"^{path}: {message}"):
        load_levels(path)


def test_a_good_single_level_loads(tmp_path):
    np.savez(tmp_path / "good.npz", **level_fields())
    (level,) = load_levels(tmp_path / "good.npz")
    assert level.agent_loc == (1, 2) and level.min_performance == 0.5 and level.name == "five"


def test_archive_errors_name_the_record(benchmarks, tmp_path):
    with np.load(benchmarks / "prune-still.npz") as data:
        records = data["levels"][:5].copy()
    records["min_performance"][3] = np.nan
    np.savez(tmp_path / "suite.npz", levels=records)
    with pytest.raises(LevelFormatError, match=r"suite.npz level 3: min_performance nan"):
        load_levels(tmp_path / "suite.npz")
    np.savez(tmp_path / "empty.npz", levels=records[:0])
    with pytest.raises(LevelFormatError, match=r"empty.npz: the archive holds no levels"):
        load_levels(tmp_path / "empty.npz")
    np.savez(tmp_path / "flat.npz", levels=np.zeros(3))
    with pytest.raises(LevelFormatError, match=r"flat.npz: 'levels' must be a 1-D array of level"):
        load_levels(tmp_path / "flat.npz")


def test_flipped_byte_in_compressed_data_names_the_file(benchmarks, tmp_path):
    data = bytearray((benchmarks / "append-still.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(LevelFormatError, match=r"flipped.npz: not a readable level file"):
        load_levels(bad)


def test_levels_paths_that_name_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    np.savez(tmp_path / "sub" / "stray.npz", x=np.zeros(1))  # '' must not find this
    with pytest.raises(LevelFormatError, match="levels path is empty"):
        load_levels("")
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_levels(tmp_path / "nope.npz")


def test_level_format_errors_are_user_errors():
    assert issubclass(LevelFormatError, UserError)
    with pytest.raises(LevelFormatError, match="level 'x': agent_loc must be two integers"):
        Level(board_with_agent(), np.zeros((5, 5), np.uint16), (1.0, 2), name="x")
    with pytest.raises(LevelFormatError, match="level 'x': points_table holds nan"):
        Level(
            board_with_agent(),
            np.zeros((5, 5), np.uint16),
            (1, 2),
            name="x",
            points_table=table_with(np.nan),
        )
