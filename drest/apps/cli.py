"""``drest COMMAND ...`` (the same as ``python -m drest COMMAND ...``): every DREST command.
``train`` takes Hydra overrides (``-m`` sweeps); ``reproduce`` and ``generalise`` take flags
(``--help``).

A user error (a bad file, setting or value) ends the command with one line
``prog: error: ...`` and exit status 2.
"""

from __future__ import annotations

from collections.abc import Sequence

from safety_rl_common.cli import Command, program_name, run_command_line

#: The name the user typed: ``drest``, or ``python -m drest``.
PROG = program_name("drest", "drest")

COMMANDS = {
    "train": Command(
        "drest.apps.train",
        "train one agent (REINFORCE or SB3 PPO) on one gridworld "
        "and measure USEFULNESS and NEUTRALITY (Hydra overrides)",
    ),
    "reproduce": Command(
        "drest.apps.reproduce", "re-run the paper's tabular experiments beside its numbers"
    ),
    "generalise": Command(
        "drest.apps.generalise",
        "train DREST and default agents (PPO, A2C) on "
        "generated worlds; measure them on held-out ones",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_command_line(PROG, __doc__, COMMANDS, argv)
