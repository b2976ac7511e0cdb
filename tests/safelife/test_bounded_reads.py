"""What a file may make the toolkit read or allocate is bounded: a file's kind and size, an
archive's inflated members, board and view sides; each refusal names the limit and the
environment variable that raises it."""

import os
import zipfile

import gymnasium as gym
import numpy as np
import pytest

from safelife_rl import load_levels
from safelife_rl.engine.levels import LevelFormatError, check_board
from safelife_rl.training.files import CONFIG_ENTRY
from safelife_rl.training.model_files import read_model_file
from safelife_rl.training.resume import trained_config
from safety_rl_common.errors import UserError
from safety_rl_common.files import check_readable_file


def zip_of(path, members):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path


def test_an_embedded_config_that_inflates_past_a_config_size_is_refused_unread(tmp_path):
    model = zip_of(tmp_path / "model.zip", {"data": "{}", CONFIG_ENTRY: b"a: " + b"0" * 3_000_000})
    assert model.stat().st_size < 20_000
    said = f"model.zip: its {CONFIG_ENTRY}, inflated, is 2930 KiB, over the limit of 1024; .*KB"
    with pytest.raises(UserError, match=said):
        trained_config(model)


def test_a_member_inflating_past_the_read_limit_is_refused_naming_the_variable(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("SAFELIFE_MAX_READ_MB", "1")
    model = zip_of(tmp_path / "model.zip", {"data": "{}", "policy.pth": b"\0" * (2 << 20)})
    message = (
        r"its member policy.pth inflates to 2.0 MiB, over the 1 MiB read limit; .*"
        r"SAFELIFE_MAX_READ_MB=<MiB>"
    )
    with pytest.raises(UserError, match=message):
        read_model_file(model)
    with pytest.raises(UserError, match=message):
        trained_config(model)
    monkeypatch.setenv("SAFELIFE_MAX_READ_MB", "3")
    assert read_model_file(model)[1] == {}


def test_a_sparse_file_is_refused_by_its_size_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("SAFELIFE_MAX_READ_MB", "1")
    sparse = tmp_path / "sparse.zip"
    with open(sparse, "wb") as file:
        file.truncate(5 << 20)  # 5 MiB that take no disk
    with pytest.raises(UserError, match="sparse.zip: holds 5.0 MiB, over the 1 MiB read limit"):
        read_model_file(sparse)
    with pytest.raises(LevelFormatError, match="sparse.zip: holds 5.0 MiB"):
        load_levels(sparse)


@pytest.mark.parametrize("value", ["0", "-3", "lots"])
def test_a_bad_read_limit_is_refused(tmp_path, monkeypatch, value):
    monkeypatch.setenv("SAFELIFE_MAX_READ_MB", value)
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="SAFELIFE_MAX_READ_MB=.*positive number of MiB"):
        check_readable_file(tmp_path / "f")


def test_a_fifo_is_never_opened(tmp_path):
    fifo = tmp_path / "levels.npz"
    os.mkfifo(fifo)
    with pytest.raises(LevelFormatError, match="levels.npz: not a regular file"):
        load_levels(fifo)  # opening it would block until a writer came


def test_board_and_view_sides_are_bounded(monkeypatch):
    board = np.zeros((10, 1025), np.uint16)
    with pytest.raises(
        LevelFormatError,
        match="a side of the board is 1025 cells, over the "
        "limit of 1024; raise it with SAFELIFE_MAX_SIDE",
    ):
        check_board(board, board, "big.npz")
    with pytest.raises(UserError, match="a side of view_shape is 20001 cells"):
        gym.make("safelife_rl/PruneStill-v1", view_shape=(20001, 20001))
    monkeypatch.setenv("SAFELIFE_MAX_SIDE", "2000")
    check_board(board, board, "big.npz")
