"""A lock file that one live process holds and that names it: the second process to ask is
refused with the holder's PID instead of waiting.

The lock is an ``flock`` on the file, so the kernel frees it when the holder dies, however it
died: a lock file left by a dead process (a stale PID in it) is simply taken over. The holder
removes the file when it releases the lock, so a finished run leaves none; a process that locked
the file just as it was removed finds the name gone (or naming another file) and tries again,
so two processes never hold two files of one name.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from safety_rl_common.errors import UserError


class PidLock:
    """``lock.acquire()`` (again: nothing more), ``lock.release()`` (which removes the file);
    refused with a :class:`UserError` naming the holder's PID and ``what`` it is doing."""

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
        while True:
            fd = self._locked_fd()
            if self._is_our_file(fd):
                break
            os.close(fd)  # locked a file its holder removed as it released it: start over
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _locked_fd(self) -> int:
        """The lock file opened (created if missing) and locked; refused if another holds it."""
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
        return fd

    def _is_our_file(self, fd: int) -> bool:
        """Whether the file open as ``fd`` is still the one at the lock's path."""
        try:
            named = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        opened = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)

    def release(self) -> None:
        if self._fd is not None:
            if self._is_our_file(self._fd):
                # removed while still locked (see the module's docstring)
                self.path.unlink(missing_ok=True)
            os.close(self._fd)  # closing frees the flock
            self._fd = None
