"""A lock file that one live process holds and that names it: the second process to ask is
refused with the holder's PID instead of waiting.

The lock is an ``flock`` on the file, so the kernel frees it when the holder dies, however it
died: a lock file left by a dead process (a stale PID in it) is simply taken over. The file
stays in place (removing it would let two processes lock two different files of one name).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from safety_rl_common.errors import UserError


class PidLock:
    """``lock.acquire()`` (again: nothing more), ``lock.release()``; refused with a
    :class:`UserError` naming the holder's PID and ``what`` it is doing."""

    def __init__(self, path: str | os.PathLike, what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.path.is_file():  # never open a FIFO or device
            raise UserError(f"{self.path}: not a regular file, so not a lock file; remove it")
        # O_NOFOLLOW: a link put in the lock's place is not written through
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise UserError(
                    f"{self.path.parent} is {self.what} by process {holder} (it "
                    f"holds {self.path.name}); stop it or wait for it to end"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing frees the flock
            self._fd = None
