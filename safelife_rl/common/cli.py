"""One command line per package (``safelife-rl``, ``drest``, ``extended-envs``): a program
whose subcommands are the package's commands, ``--help`` listing them.

A command with a parser of its own lives in a module of its own: an argparse command's
``main(argv)`` returns the exit status; a Hydra app (training runs and sweeps) reads its
overrides from ``sys.argv``, and ends with status 0 unless it raises ``SystemExit``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from safelife_rl.common.errors import ArgumentParser

#: A package's own subcommands: given its subparsers, adds them and returns the function that
#: runs the parsed arguments of one of them and returns the exit status.
OwnCommands = Callable[[argparse._SubParsersAction], Callable[[argparse.Namespace], int]]


@dataclass(frozen=True)
class Command:
    """A subcommand run by ``main`` of ``module``."""

    module: str
    summary: str
    hydra: bool = False  # a Hydra app: its overrides reach it through sys.argv

    def run(self, prog: str, argv: Sequence[str]) -> int:
        module = importlib.import_module(self.module)
        if self.hydra:
            sys.argv = [prog, *argv]
            module.main()
            return 0
        return module.main(list(argv))


def run_command_line(prog: str, description: str, commands: Mapping[str, Command],
                     argv: Sequence[str] | None = None, own: OwnCommands | None = None) -> int:
    """Run the subcommand ``argv`` names (default: ``sys.argv[1:]``) and return its exit
    status; ``--help`` lists the subcommands, and no or an unknown subcommand is a one-line
    error (status 2).

    :param commands: the subcommands with a module of their own, given the rest of ``argv``.
    :param own: the subcommands parsed here (flags only, no module of their own).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in commands:
        return commands[argv[0]].run(f"{prog} {argv[0]}", argv[1:])
    parser = ArgumentParser(prog=prog, description=description)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, command in commands.items():
        subparsers.add_parser(name, help=command.summary, add_help=False)
    run_own = own(subparsers) if own is not None else None
    args = parser.parse_args(argv)  # exits unless it names one of `own`'s subcommands
    assert run_own is not None
    return run_own(args)
