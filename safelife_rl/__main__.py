"""Command line: ``python -m safelife_rl {play,play-multi,replay,random-run} ...``.

A user error (a bad file, flag or value) ends the command with one line ``prog: error: ...``
and exit status 2; ``--traceback`` (or ``HYDRA_FULL_ERROR=1``) shows its traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys

from safelife_rl.common.errors import ArgumentParser, add_traceback_flag, one_line_errors
from safelife_rl.engine.replay import ENGINES
from safelife_rl.envs.registration import TASKS


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m safelife_rl", description=__doc__)
    common = argparse.ArgumentParser(add_help=False)
    add_traceback_flag(common)
    commands = parser.add_subparsers(dest="command", required=True)

    replay = commands.add_parser("replay", parents=[common],
                                 help="replay a recorded trace with this engine")
    replay.add_argument("trace", help="trace .npz file (level + actions), single- or multi-agent")
    replay.add_argument("--out", required=True, help="where to write the replayed trace (.npz)")
    replay.add_argument("--seed", type=int, default=0, help="seed for spawner randomness (>= 0)")
    replay.add_argument("--gif", help="also render the replayed boards to this GIF")
    replay.add_argument("--engine", choices=ENGINES, default="numba",
                        help="the rules' backend: Numba, or torch on the CPU")

    play = commands.add_parser("play", parents=[common],
                               help="play in the terminal (arrow keys, space, q)")
    play.add_argument("source", nargs="?", default="append-still", help="task name or level path")
    play.add_argument("--gif", help="save the session as a GIF")
    play.add_argument("--time-limit", type=int, default=1000, help="steps per episode (>= 1)")

    multi = commands.add_parser("play-multi", parents=[common],
                                help="play one agent of a multi-agent level in the terminal")
    multi.add_argument("source", nargs="?", default="build-coop",
                       help="multi-agent task (its fixed suite) or level path")
    multi.add_argument("--agent", type=int, default=0, help="the agent you control (0, 1, ...)")
    multi.add_argument("--others", choices=("still", "random"), default="still",
                       help="what the other agents do")
    multi.add_argument("--gif", help="save the session as a GIF")
    multi.add_argument("--time-limit", type=int, default=1000, help="steps per episode (>= 1)")

    rand = commands.add_parser("random-run", parents=[common],
                               help="play random actions, log to TensorBoard")
    rand.add_argument("--task", default="append-still", choices=sorted(TASKS))
    rand.add_argument("--levels", help="level file or directory (default: the task's fixed suite)")
    rand.add_argument("--episodes", type=int, default=20, help="episodes to play (>= 1)")
    rand.add_argument("--time-limit", type=int, default=1000, help="steps per episode (>= 1)")
    rand.add_argument("--seed", type=int, default=0, help="random seed (>= 0)")
    rand.add_argument("--logdir", help="TensorBoard directory (default: outputs/random-run/...)")

    args = parser.parse_args(argv)
    with one_line_errors(f"{parser.prog} {args.command}", args.traceback):
        if args.command == "replay":
            from safelife_rl.apps.replay import replay_file

            replay_file(args.trace, args.out, seed=args.seed, gif=args.gif, engine=args.engine)
            print(f"wrote {args.out}" + (f" and {args.gif}" if args.gif else ""))
        elif args.command == "play":
            from safelife_rl.apps.play import main as play_main

            result = play_main(args.source, args.gif, args.time_limit)
            print(f"levels completed: {result['levels_completed']}")
        elif args.command == "play-multi":
            from safelife_rl.apps.multi_agent_play import main as play_multi_main

            result = play_multi_main(args.source, args.agent, args.others, args.gif,
                                     args.time_limit)
            print(f"levels completed: {result['levels_completed']}")
        else:
            from safelife_rl.apps.random_run import random_run

            summary = random_run(
                args.task, args.levels, args.episodes, args.time_limit, args.seed, args.logdir
            )
            print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
