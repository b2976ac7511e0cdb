"""Fuzzing the level and trace readers: every mutated file either loads as a valid level (one
whose points stay finite when played) or raises ``LevelFormatError`` naming the file; never
any other exception.

Byte mutations flip bits anywhere, overwrite bytes of the zip and ``.npy`` headers, or cut the
file short; field mutations replace one field with NaN, inf, a negative, huge, fractional,
wrong-dtype or wrong-shape value.
"""

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safelife_rl import SafeLifeGame
from safelife_rl.engine.level_files import load_levels
from safelife_rl.engine.levels import Level, LevelFormatError
from safelife_rl.engine.replay import load_trace

ROOT = Path(__file__).resolve().parents[2]
LEVEL_FILES = sorted((ROOT / "safelife_rl/levels/benchmarks").glob("*.npz")) + sorted(
    (ROOT / "safelife_rl/levels/v1.0").glob("*.npz")
)
TRACE_FILES = sorted((ROOT / "tests/data/safelife/traces").glob("*.npz"))
FUZZ = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

BAD_VALUES = [
    np.nan,
    np.inf,
    -np.inf,
    -1,
    -(2**40),
    2**40,
    1e300,
    1.5,
    "x",
    b"x",
    True,
    1 + 2j,
    np.zeros(3),
    np.zeros((2, 2, 2)),
    np.array([], np.float64),
    np.array(["a", "b"]),
]


def valid_level(level: Level) -> bool:
    """A loaded level plays with finite points and rewards."""
    game = SafeLifeGame([level], rng=np.random.default_rng(0))
    rewards, _ = game.step(1)
    finite = np.isfinite([game.available_points[0, 0], game.required_points[0, 0], rewards[0, 0]])
    return bool(finite.all()) and game.required_points[0, 0] <= max(game.available_points[0, 0], 0)


def check_loads_or_names(load, path: Path) -> None:
    try:
        result = load(path)
    except LevelFormatError as error:
        assert str(path) in str(error)
        assert "\n" not in str(error) and len(str(error)) < len(str(path)) + 300
        return
    levels = [result[0]] if isinstance(result, tuple) else result
    assert all(valid_level(level) for level in levels[:5])


@st.composite
def byte_mutations(draw, files: list[Path]) -> bytes:
    data = bytearray(draw(st.sampled_from(files)).read_bytes())
    kind = draw(st.sampled_from(["flip", "header", "truncate"]))
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    end = len(data) if kind == "flip" else min(len(data), 200)
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, end - 1))
        data[index] = data[index] ^ draw(st.integers(1, 255))
    return bytes(data)


@FUZZ
@given(data=byte_mutations(LEVEL_FILES))
def test_byte_mutated_level_files(tmp_path, data):
    path = tmp_path / "mutated.npz"
    path.write_bytes(data)
    check_loads_or_names(load_levels, path)


@FUZZ
@given(data=byte_mutations(TRACE_FILES))
def test_byte_mutated_traces(tmp_path, data):
    path = tmp_path / "mutated.npz"
    path.write_bytes(data)
    check_loads_or_names(load_trace, path)


def is_number(value: object) -> bool:
    return np.ndim(value) == 0 and np.asarray(value).dtype.kind in "biufc"


SCALARS = [v for v in BAD_VALUES if is_number(v)]
SHAPES = [(), (3,), (2, 2, 2), (0,)]


def with_entry(array: np.ndarray, index: int, value: object) -> np.ndarray:
    """``array`` with its ``index``-th entry set to ``value`` (dtype widened to hold it)."""
    out = np.array(array, dtype=np.result_type(array, np.asarray(value)))
    out.reshape(-1)[index] = value
    return out


def single_level_fields() -> dict[str, np.ndarray]:
    level = load_levels(LEVEL_FILES[0])[0]
    return {
        "board": level.board,
        "goals": level.goals,
        "agent_locs": np.array([level.agent_loc]),
        "spawn_prob": np.float64(0.3),
        "min_performance": np.float64(0.5),
        "orientation": np.int64(1),
        "points_table": level.points_table[None],
        "name": np.array("one"),
    }


@FUZZ
@given(
    key=st.sampled_from(list(single_level_fields())),
    value=st.sampled_from(BAD_VALUES),
    index=st.integers(0, 70),
    whole=st.booleans(),
)
def test_field_mutated_single_levels(tmp_path, key, value, index, whole):
    fields = single_level_fields()
    if whole or not is_number(value) or not is_number(fields[key].flat[0]):
        fields[key] = np.asarray(value)
    else:
        fields[key] = with_entry(fields[key], index % fields[key].size, value)
    path = tmp_path / "one.npz"
    np.savez(path, **fields)
    check_loads_or_names(load_levels, path)


def save_records(path: Path, fields: dict[str, np.ndarray]) -> None:
    """An archive of records with the given fields (each field's array: one row a record)."""
    dtype = np.dtype([(name, a.dtype, a.shape[1:]) for name, a in fields.items()])
    records = np.zeros(len(fields["board"]), dtype)
    for name, value in fields.items():
        records[name] = value
    np.savez(path, levels=records)


@FUZZ
@given(
    key=st.sampled_from(
        [
            "spawn_prob",
            "orientation",
            "agent_loc",
            "min_performance",
            "points_table",
            "board",
            "goals",
        ]
    ),
    value=st.sampled_from(SCALARS),
    shape=st.sampled_from([None] + SHAPES),
    index=st.integers(0, 70),
)
def test_field_mutated_archive_records(tmp_path, key, value, shape, index):
    """Record 1 of an archive gets a bad value in one entry, or every record a bad shape."""
    with np.load(LEVEL_FILES[0]) as data:
        records = data["levels"][:2]
    fields = {name: records[name] for name in records.dtype.names}
    fields["points_table"] = np.broadcast_to(
        load_levels(LEVEL_FILES[0])[0].points_table, (2, 1, 8, 9)
    )
    if shape is None:
        row = with_entry(fields[key][1], index % max(fields[key][1].size, 1), value)
        fields[key] = np.stack([fields[key][0].astype(row.dtype), row])
    else:
        fields[key] = np.full((2,) + shape, value)
    path = tmp_path / "archive.npz"
    save_records(path, fields)
    check_loads_or_names(load_levels, path)


@FUZZ
@given(
    value=st.sampled_from(BAD_VALUES + [9, np.array([[1, 2]]), np.array([0.0, 1.0])]),
    index=st.integers(0, 119),
)
def test_field_mutated_trace_actions(tmp_path, value, index):
    """One bad action (or a bad actions array) is refused, naming the file and the actions."""
    with np.load(TRACE_FILES[0]) as data:
        arrays = {key: data[key] for key in data.files}
    actions = with_entry(arrays["actions"], index, value) if is_number(value) else np.asarray(value)
    valid = actions.dtype.kind in "uif" and actions.ndim == 1 and np.isin(actions, range(9)).all()
    path = tmp_path / "trace.npz"
    np.savez(path, actions=actions, level=arrays["level"])
    if valid:
        assert np.array_equal(load_trace(path)[1], actions)
    else:
        with pytest.raises(LevelFormatError, match=f"{path}: actions|{path}: action "):
            load_trace(path)


def test_pickled_objects_are_never_loaded(tmp_path):
    """An object array is refused unread; nothing in the file is unpickled."""
    path = tmp_path / "pickled.npz"
    fields = single_level_fields()
    fields["spawn_prob"] = np.array([{"boom": 1}], dtype=object)
    np.savez(path, **fields)
    with pytest.raises(LevelFormatError, match="pickled.npz: holds pickled Python objects"):
        load_levels(path)


def test_empty_zip_and_npy_files(tmp_path):
    empty = tmp_path / "empty.npz"
    with zipfile.ZipFile(empty, "w"):
        pass
    with pytest.raises(LevelFormatError, match="empty.npz: missing field"):
        load_levels(empty)
    npy = tmp_path / "array.npz"
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    npy.write_bytes(buffer.getvalue())
    with pytest.raises(LevelFormatError, match="array.npz: not a level file"):
        load_levels(npy)


def test_read_errors_stay_one_short_line(tmp_path):
    """A corrupt name length in the zip header makes zipfile quote the rest of the file."""
    data = bytearray(LEVEL_FILES[0].read_bytes())
    data[27] = 0xFF  # high byte of the first member's file name length
    path = tmp_path / "long-name.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(LevelFormatError, match="long-name.npz: not a readable level file") as error:
        load_levels(path)
    assert len(str(error.value)) < len(str(path)) + 300
