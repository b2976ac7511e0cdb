"""``PidLock``: one live holder, named to the next; the file goes with the lock's release, and
a process that locked the file as its holder removed it takes a new one."""

import os

import pytest

from safety_rl_common.errors import UserError
from safety_rl_common.locks import PidLock


def test_the_holder_is_named_and_release_removes_the_file(tmp_path):
    path = tmp_path / "train.lock"
    first = PidLock(path, "being trained")
    first.acquire()
    assert path.read_text() == f"{os.getpid()}\n"
    with pytest.raises(UserError, match=rf"being trained by process {os.getpid()} \(it holds"):
        PidLock(path, "being trained").acquire()
    first.release()
    assert not path.exists()  # a finished run leaves no lock behind
    second = PidLock(path, "being trained")
    second.acquire()
    assert path.read_text() == f"{os.getpid()}\n"
    second.release()
    assert not path.exists()


def test_a_lock_taken_on_a_file_its_holder_removed_starts_over(tmp_path):
    """The race the removal opens: the file is opened, its holder removes it and releases,
    and the lock is taken on the removed file. That lock guards nothing (a third process makes
    a new file of the name), so the acquirer takes one on the file at the path."""
    path = tmp_path / "train.lock"

    class Raced(PidLock):
        raced = False

        def _locked_fd(self) -> int:
            fd = super()._locked_fd()
            if not self.raced:
                self.raced = True
                path.unlink()  # the holder's release, between our open and our lock
            return fd

    lock = Raced(path, "being trained")
    lock.acquire()
    assert path.read_text() == f"{os.getpid()}\n"
    with pytest.raises(UserError, match="being trained by process"):
        PidLock(path, "being trained").acquire()
    lock.release()
    assert not path.exists()
