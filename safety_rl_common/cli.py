"""One command line per package (``safelife-rl``, ``drest``, ``extended-envs``): a program
whose subcommands are the package's commands, ``--help`` listing them in plain text under the
name the user typed.

A command with a parser of its own lives in a module of its own whose ``main(argv)`` returns
the exit status; a Hydra app (training runs and sweeps) is run by :func:`run_hydra_app`, which
hands it ``argv`` as Hydra overrides.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from safety_rl_common.errors import (
    OS_ERRORS,
    USER_FULL_ERROR,
    ArgumentParser,
    UserError,
    describe,
    reported,
    tracebacks_wanted,
)


def program_name(package: str, script: str) -> str:
    """The name the user typed to start ``package``'s command line: ``python -m PACKAGE`` when
    Python runs the package's ``__main__`` module, else its console script ``script``."""
    started = Path(sys.argv[0])
    if started.name == "__main__.py" and started.parent.name == package:
        return f"python -m {package}"
    return script


def run_hydra_app(app: Callable[[], None], prog: str, argv: Sequence[str] | None) -> int:
    """Run the ``@hydra.main`` function ``app`` on the overrides ``argv`` (default: those of
    ``sys.argv``) as the program ``prog``; the exit status (a failure raises ``SystemExit``).

    Hydra prints a config it cannot compose (an override of the wrong type, an unknown key or
    group) in several lines and exits with status 1; here it raises instead (Hydra's
    ``HYDRA_FULL_ERROR=1``, the user's own setting kept for :func:`tracebacks_wanted`), and the
    error ends the command in one line ``prog: error: ...`` with status 2, as every user error;
    so does a file error of Hydra's own (its output folder under a file, say: the app reports
    its own file errors in one line already), and a user error raised while the configs are
    read.
    """
    sys.argv = [prog, *(sys.argv[1:] if argv is None else argv)]
    saved = {name: os.environ.get(name) for name in ("HYDRA_FULL_ERROR", USER_FULL_ERROR)}
    wanted = tracebacks_wanted()
    os.environ[USER_FULL_ERROR] = "1" if wanted else ""
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        app()
    except Exception as error:
        if wanted or not _config_or_file_error(error):
            raise
        text = config_error(error) if _from_config(error) else describe(error)
        print(f"{prog}: error: {text}", file=sys.stderr)
        return 2
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return 0


def _from_config(error: BaseException) -> bool:
    """An error of Hydra's or OmegaConf's (named by module: this floor imports neither)."""
    return type(error).__module__.split(".")[0] in ("hydra", "omegaconf")


def _config_or_file_error(error: BaseException) -> bool:
    """Hydra's and OmegaConf's errors, file errors, and a user error raised while Hydra reads
    the configs (a file of the user's ``conf/`` past the YAML reader's bounds)."""
    return _from_config(error) or reported(error, (UserError, *OS_ERRORS))


def config_error(error: BaseException) -> str:
    """A config error and its cause (Hydra's messages give the override, OmegaConf's the
    value and key) as one line."""
    parts = [str(error)]
    if error.__cause__ is not None and str(error.__cause__) not in parts[0]:
        parts.append(str(error.__cause__))
    lines = [line.strip() for part in parts for line in part.splitlines()]
    if "Config search path:" in lines:  # Hydra's list of where it looked for a config group
        lines = lines[: lines.index("Config search path:")]
    return "; ".join(line for line in lines if line and not line.startswith("object_type="))


#: A package's own subcommands: given its subparsers, adds them and returns the function that
#: runs the parsed arguments of one of them and returns the exit status.
OwnCommands = Callable[[argparse._SubParsersAction], Callable[[argparse.Namespace], int]]


@dataclass(frozen=True)
class Command:
    """A subcommand run by ``function`` (``main``) of ``module``."""

    module: str
    summary: str
    function: str = "main"

    def run(self, argv: Sequence[str]) -> int:
        return getattr(importlib.import_module(self.module), self.function)(list(argv))


def run_command_line(
    prog: str,
    description: str,
    commands: Mapping[str, Command],
    argv: Sequence[str] | None = None,
    own: OwnCommands | None = None,
    internal: Mapping[str, Command] | None = None,
) -> int:
    """Run the subcommand ``argv`` names (default: ``sys.argv[1:]``) and return its exit
    status; ``--help`` lists the subcommands, and no or an unknown subcommand is a one-line
    error (status 2).

    :param commands: the subcommands with a module of their own, given the rest of ``argv``.
    :param own: the subcommands parsed here (flags only, no module of their own).
    :param internal: subcommands that the package's own commands start (a sweep's jobs), run
        like ``commands`` but not offered by ``--help``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    dispatched = {**(internal or {}), **commands}
    if argv and argv[0] in dispatched:
        return dispatched[argv[0]].run(argv[1:])
    parser = ArgumentParser(prog=prog, description=description)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, command in commands.items():
        subparsers.add_parser(name, help=command.summary, add_help=False)
    run_own = own(subparsers) if own is not None else None
    args = parser.parse_args(argv)  # exits unless it names one of `own`'s subcommands
    assert run_own is not None
    return run_own(args)
