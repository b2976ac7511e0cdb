"""User errors: problems with what a user gave (a file, a key, a value, a flag), and the
command-line machinery of all three packages that reports them.

Code that checks input raises :class:`UserError` (the one user error of all three packages), or
lets a missing file's ``OSError`` through, with a message naming the problem: the file or key, the
value, and what is allowed. Every command-line tool runs inside :func:`one_line_errors`, given the
error types it reports (its package's, plus :data:`OS_ERRORS`), which turns those into one line on
stderr and a non-zero exit; anything else is a bug and keeps its traceback. ``HYDRA_FULL_ERROR=1``
(the variable Hydra itself reads) or a tool's ``--traceback`` flag shows the traceback of a user
error too, for bug reports.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, Self


class UserError(ValueError):
    """Bad input; the message says what is wrong and what is allowed."""


class UnknownKeywords(UserError, TypeError):
    """Keywords a callable does not take: a ``TypeError`` in Python's words, so that clients
    that try a keyword and fall back on that error work (TorchRL's ``GymEnv`` tries
    ``gym.make(id, frameskip=1)`` and looks for "unexpected keyword argument 'frameskip'"), and
    a user error the commands report in one line."""

    @classmethod
    def of(cls, owner: str, what: str, unknown: Sequence[str], known: Iterable[str]) -> Self:
        """``owner`` got the ``unknown`` ``what``s (e.g. hyperparameters); ``known`` are
        those it takes."""
        names = sorted(unknown)
        return cls(
            f"{owner} got unknown {what}(s) {names}: unexpected keyword argument {names[0]!r}; "
            f"known: {', '.join(sorted(known)) or 'none'}"
        )


#: The file errors that describe the user's input (a path) rather than a fault in the code.
OS_ERRORS = (
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
    FileExistsError,
)
#: What every command reports as one line: a user error, or a file error of a bad path.
REPORTED = (UserError, *OS_ERRORS)
#: The ``errno`` of a full disk or quota: the machine's state, not a fault in the code, so
#: reported in one line by every command too (:func:`reported`).
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

Errors = tuple[type[BaseException], ...]


#: the user's own ``HYDRA_FULL_ERROR``, kept while :func:`~safety_rl_common.cli.run_hydra_app`
#: sets it to make Hydra raise (and inherited by the processes the app starts)
USER_FULL_ERROR = "SAFELIFE_USER_HYDRA_FULL_ERROR"


def tracebacks_wanted() -> bool:
    value = os.environ.get(USER_FULL_ERROR, os.environ.get("HYDRA_FULL_ERROR", ""))
    return value not in ("", "0")


def describe(error: BaseException) -> str:
    """The error as one line (an ``OSError`` names its file)."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.filename}: {error.strerror}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())


def reported(error: BaseException, errors: Errors) -> bool:
    """Whether ``error`` ends a command in one line: one of the types ``errors``, or a full
    disk (:data:`DISK_FULL`)."""
    return isinstance(error, errors) or (isinstance(error, OSError) and error.errno in DISK_FULL)


@contextmanager
def one_line_errors(prog: str, errors: Errors, traceback: bool = False) -> Iterator[None]:
    """Report an error of the types ``errors`` (or a full disk) raised inside as ``prog:
    error: ...`` and exit with status 2."""
    try:
        yield
    except Exception as error:
        if not reported(error, errors) or traceback or tracebacks_wanted():
            raise
        print(f"{prog}: error: {describe(error)}", file=sys.stderr)
        raise SystemExit(2) from None


_ROLE = re.compile(r":[\w:]+:`~?([^`]*?\.)?([^`.]+)`")


def plain_text(docs: str | None) -> str | None:
    """A docstring's reStructuredText markup as plain text: ````x```` as x, ``:mod:`a.b```` as
    a.b, ``:func:`~a.b```` as b, a literal block's ``::`` as ``:``."""
    if docs is None:
        return None
    docs = _ROLE.sub(lambda m: (m[1] or "") * (not m[0].count("`~")) + m[2], docs)
    return re.sub(r"::$", ":", docs.replace("``", ""), flags=re.M)


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors (a bad flag or value) end with one line like every other user
    error, and whose ``--help`` shows the description (often a docstring) as plain text.
    Subcommands' parsers are of this class too."""

    def __init__(
        self, *args, description: str | None = None, epilog: str | None = None, **kwargs
    ) -> None:
        super().__init__(
            *args, description=plain_text(description), epilog=plain_text(epilog), **kwargs
        )

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_traceback_flag(parser: argparse.ArgumentParser) -> None:
    """``--traceback``: show the traceback of a user error (pass ``args.traceback`` to
    :func:`one_line_errors`)."""
    parser.add_argument(
        "--traceback", action="store_true", help="show the traceback of a user error (bug reports)"
    )


@contextmanager
def hydra_app_errors(prog: str, folder: str | os.PathLike, errors: Errors) -> Iterator[None]:
    """The body of a ``@hydra.main`` app: :func:`one_line_errors`, and a run refused with a
    user error leaves no folder behind if the app wrote nothing into Hydra's (it holds only
    Hydra's own records), so a mistyped command leaves nothing to clean up.

    :param folder: Hydra's output folder of this run (``HydraConfig.get().runtime.output_dir``).
    :param errors: the error types reported as user errors (as :func:`one_line_errors`).
    """
    folder = Path(folder)
    with one_line_errors(prog, errors):
        try:
            yield
        except Exception as error:
            if not reported(error, errors):
                raise
            names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
            if names and all(n == ".hydra" or n.endswith(".log") for n in names):
                shutil.rmtree(folder, ignore_errors=True)
            raise
