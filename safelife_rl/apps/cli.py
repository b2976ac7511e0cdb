"""``safelife-rl COMMAND ...`` (the same as ``python -m safelife_rl COMMAND ...``): every
SafeLife command. ``train`` takes Hydra overrides; the others take flags (``COMMAND --help``).

A user error (a bad file, flag or value) ends the command with one line ``prog: error: ...``
and exit status 2; ``--traceback`` (or ``HYDRA_FULL_ERROR=1``) shows its traceback instead.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence

from safelife_rl.engine.replay import ENGINES
from safelife_rl.envs.registration import TASKS
from safety_rl_common.cli import Command, program_name, run_command_line
from safety_rl_common.errors import REPORTED, add_traceback_flag, one_line_errors

#: The name the user typed: ``safelife-rl``, or ``python -m safelife_rl``.
PROG = program_name("safelife_rl", "safelife-rl")

#: Commands with a parser (or Hydra app) of their own: ``main`` of their module.
DELEGATED = {
    "train": Command(
        "safelife_rl.apps.train", "train an agent with SB3 (Hydra overrides; -m sweeps)"
    ),
    "benchmark": Command(
        "safelife_rl.apps.benchmark", "run a policy on a benchmark suite (Table 1)"
    ),
    "reproduce": Command(
        "safelife_rl.apps.reproduce.cli", "the SafeLife paper's tables and figures"
    ),
    "compare": Command(
        "safelife_rl.apps.compare", "compare safety methods on tasks x seeds (IQM, intervals)"
    ),
    "make-suites": Command("safelife_rl.apps.make_suites", "regenerate the fixed benchmark suites"),
    "plots": Command("safelife_rl.apps.plots", "plot training runs' learning curves"),
}


#: Commands that SafeLife's commands start, not offered by ``--help``.
INTERNAL = {
    "reproduce-job": Command(
        "safelife_rl.apps.reproduce.job",
        "one job of a reproduction's sweep (started by reproduce)",
        "sweep_main",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_command_line(PROG, __doc__, DELEGATED, argv, _own_commands, INTERNAL)


def _own_commands(commands: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    """The commands parsed here: replay, play, play-multi, random-run."""
    common = argparse.ArgumentParser(add_help=False)
    add_traceback_flag(common)

    replay = commands.add_parser(
        "replay", parents=[common], help="replay a recorded trace with this engine"
    )
    replay.add_argument("trace", help="trace .npz file (level + actions), single- or multi-agent")
    replay.add_argument("--out", required=True, help="where to write the replayed trace (.npz)")
    replay.add_argument("--seed", type=int, default=0, help="seed for spawner randomness (>= 0)")
    replay.add_argument("--gif", help="also render the replayed boards to this GIF")
    replay.add_argument(
        "--engine",
        choices=ENGINES,
        default="numba",
        help="the rules' backend: Numba, or torch on the CPU",
    )

    play = commands.add_parser(
        "play", parents=[common], help="play in the terminal (arrow keys, space, q)"
    )
    play.add_argument("source", nargs="?", default="append-still", help="task name or level path")
    play.add_argument("--gif", help="save the session as a GIF")
    play.add_argument("--time-limit", type=int, default=1000, help="steps per episode (>= 1)")

    multi = commands.add_parser(
        "play-multi", parents=[common], help="play one agent of a multi-agent level in the terminal"
    )
    multi.add_argument(
        "source",
        nargs="?",
        default="build-coop",
        help="multi-agent task (its fixed suite) or level path",
    )
    multi.add_argument("--agent", type=int, default=0, help="the agent you control (0, 1, ...)")
    multi.add_argument(
        "--others", choices=("still", "random"), default="still", help="what the other agents do"
    )
    multi.add_argument("--gif", help="save the session as a GIF")
    multi.add_argument("--time-limit", type=int, default=1000, help="steps per episode (>= 1)")

    rand = commands.add_parser(
        "random-run", parents=[common], help="play random actions, log to TensorBoard"
    )
    rand.add_argument("--task", default="append-still", choices=sorted(TASKS))
    rand.add_argument("--levels", help="level file or directory (default: the task's fixed suite)")
    rand.add_argument("--episodes", type=int, default=20, help="episodes to play (>= 1)")
    rand.add_argument("--time-limit", type=int, default=1000, help="steps per episode (>= 1)")
    rand.add_argument("--seed", type=int, default=0, help="random seed (>= 0)")
    rand.add_argument("--logdir", help="TensorBoard directory (default: outputs/random-run/...)")

    return _run


def _run(args: argparse.Namespace) -> int:
    with one_line_errors(f"{PROG} {args.command}", REPORTED, args.traceback):
        if args.command == "replay":
            from safelife_rl.apps.replay import replay_file

            replay_file(args.trace, args.out, seed=args.seed, gif=args.gif, engine=args.engine)
            print(f"wrote {args.out}" + (f" and {args.gif}" if args.gif else ""))
        elif args.command == "play":
            from safelife_rl.apps.play import run

            result = run(args.source, args.gif, args.time_limit)
            print(f"levels completed: {result['levels_completed']}")
        elif args.command == "play-multi":
            from safelife_rl.apps.play import run_multi

            result = run_multi(args.source, args.agent, args.others, args.gif, args.time_limit)
            print(f"levels completed: {result['levels_completed']}")
        else:
            from safelife_rl.apps.random_run import random_run

            summary = random_run(
                args.task, args.levels, args.episodes, args.time_limit, args.seed, args.logdir
            )
            print(json.dumps(summary, indent=2))
    return 0
