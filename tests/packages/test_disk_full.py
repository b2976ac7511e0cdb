"""A full disk ends every command in one line naming the folder, and leaves no half-written
file: the atomic writes of ``safety_rl_common.files`` remove their temporary file and say
where they were writing (measured for real with ``reproduce table1 --quick`` on a 600 KiB
tmpfs: ``python -m safelife_rl reproduce: error: OUT: No space left on device (writing
figure3.png)``, exit status 2, was a 40-line traceback)."""

from __future__ import annotations

import errno
import os

import pytest

from safety_rl_common.cli import run_hydra_app
from safety_rl_common.errors import REPORTED, hydra_app_errors, one_line_errors
from safety_rl_common.files import atomic_path, write_json, write_text


def full(*_, **__):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_an_atomic_write_names_the_full_folder_and_leaves_nothing(tmp_path, code):
    target = tmp_path / "out" / "table.md"
    with pytest.raises(OSError) as raised:
        with atomic_path(target) as tmp:
            with open(tmp, "w") as handle:
                handle.write("half")
            raise OSError(code, os.strerror(code))
    assert raised.value.errno == code and raised.value.filename == str(target.parent)
    assert "(writing table.md)" in raised.value.strerror
    assert os.listdir(target.parent) == []  # no temporary file, no half-written table


def test_an_old_file_stays_whole(tmp_path, monkeypatch):
    path = write_text(tmp_path / "results.json", "old")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left on device"):
        write_json(path, {"new": 1})
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["results.json"]


def test_every_command_reports_a_full_disk_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        with one_line_errors("prog", REPORTED):
            with atomic_path(tmp_path / "figure.png"):
                full()
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        f"prog: error: {tmp_path}: No space left on device (writing figure.png)\n"
    )
    with pytest.raises(SystemExit):  # a disk full where no file is named: still one line
        with one_line_errors("prog", REPORTED):
            full()
    assert capsys.readouterr().err == "prog: error: [Errno 28] No space left on device\n"


def test_a_hydra_app_reports_a_full_disk_in_one_line(tmp_path, capsys):
    def app() -> None:
        with hydra_app_errors("prog", tmp_path / "run", REPORTED):
            full()

    with pytest.raises(SystemExit):
        run_hydra_app(app, "prog", [])
    assert capsys.readouterr().err.count("\n") == 1


def test_other_os_errors_keep_their_traceback():
    with pytest.raises(OSError, match="Input/output error"):
        with one_line_errors("prog", REPORTED):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
