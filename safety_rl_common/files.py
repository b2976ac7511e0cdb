"""Writing files so that a crash never leaves a half-written one behind, and the bounds on
what is read (a file's kind and size, an archive's inflated members)."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from safety_rl_common.errors import DISK_FULL, UserError
from safety_rl_common.limits import READ_LIMIT


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary file name beside ``path``; on success, flush it to disk and rename it
    to ``path``, so that ``path`` is either the old file or the whole new one, even after a
    crash."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if path.exists() and not path.is_file():  # renaming over it would replace the device
        raise UserError(
            f"{path}: not a regular file (a device, FIFO or socket is never written over)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as error:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(error, OSError) and error.errno in DISK_FULL:  # name where it was full
            raise OSError(
                error.errno, f"{os.strerror(error.errno)} (writing {path.name})", str(path.parent)
            ) from None
        raise


def remove_in_folder(folder: str | os.PathLike, name: str) -> bool:
    """Delete the file ``name`` of ``folder``, never through a symbolic link: a ``folder`` that
    is a link is refused (``False``) and nothing deleted, and the file is unlinked relative to the
    folder opened without following links (a link swapped in meanwhile is not followed either).
    A missing file counts as deleted.

    A link named ``name`` is itself removed, not its target."""
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"{name!r} is not a file name")
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            return False
        raise
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)
    return True


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike, data: Any) -> Path:
    return write_text(path, json.dumps(data, indent=2) + "\n")


def _over_limit(path: str | os.PathLike, what: str, size: int, limit: int) -> UserError:
    return UserError(
        f"{path}: {what} {size / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB "
        f"read limit; if you trust the file, {READ_LIMIT.raise_hint()}"
    )


def check_readable_file(path: str | os.PathLike) -> None:
    """Refuse what is not a regular file (a FIFO or device would block or never end) or is
    larger than :data:`~safety_rl_common.limits.READ_LIMIT` (its size as stored, sparse files
    included)."""
    try:
        info = os.stat(path)  # a missing file raises FileNotFoundError naming it
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise UserError(f"{path}: a loop of symbolic links (no file at its end)") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: not a regular file (a FIFO, device or socket is never read)")
    limit = READ_LIMIT.get() << 20
    if info.st_size > limit:
        raise _over_limit(path, "holds", info.st_size, limit)


def check_archive(archive: zipfile.ZipFile, path: str | os.PathLike) -> None:
    """Refuse a zip (or ``.npz``) archive whose members inflate past
    :data:`~safety_rl_common.limits.READ_LIMIT`, each or together, before any member is read
    (the sizes come from its directory; zipfile stops reading a member at its stated size)."""
    limit = READ_LIMIT.get() << 20
    total = 0
    for info in archive.infolist():
        if info.file_size > limit:
            raise _over_limit(
                path, f"its member {info.filename} inflates to", info.file_size, limit
            )
        total += info.file_size
    if total > limit:
        raise _over_limit(path, "its members inflate to", total, limit)
