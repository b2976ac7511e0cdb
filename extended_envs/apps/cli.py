"""``extended-envs COMMAND ...`` (the same as ``python -m extended_envs COMMAND ...``): every
command of the extended environments. ``benchmark`` and ``debate`` take Hydra overrides;
``reproduce`` takes flags (``reproduce --help``).

A user error (a bad agent, setting or value) ends the command with one line
``prog: error: ...`` and exit status 2.
"""

from __future__ import annotations

from collections.abc import Sequence

from safety_rl_common.cli import Command, program_name, run_command_line

#: The name the user typed: ``extended-envs``, or ``python -m extended_envs``.
PROG = program_name("extended_envs", "extended-envs")

COMMANDS = {
    "benchmark": Command(
        "extended_envs.apps.benchmark",
        "score an agent class on the battery of "
        "extended environments, or its reality check (Hydra overrides)",
    ),
    "debate": Command(
        "extended_envs.apps.debate",
        "train Alice against each Bob and score her answers to Hugh's questions (Hydra overrides)",
    ),
    "reproduce": Command("extended_envs.apps.reproduce", "the paper's Table 1 and figures"),
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_command_line(PROG, __doc__, COMMANDS, argv)
