"""``python -m safelife_rl plots RUN ... [--out FILE] [--labels ...]``: the learning curves of
training runs in one figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from safelife_rl.apps.cli import PROG as CLI
from safelife_rl.training.plots import plot_runs
from safety_rl_common.errors import (
    REPORTED,
    ArgumentParser,
    UserError,
    add_traceback_flag,
    one_line_errors,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog=f"{CLI} plots", description="plot training runs' learning curves")
    parser.add_argument("runs", nargs="+", help="run directories (with tensorboard/)")
    parser.add_argument("--out", default="learning_curves.png", help="the PNG to write")
    parser.add_argument(
        "--labels",
        nargs="*",
        help="one label per run (default: each run's task, method and seed, from its config.yaml)",
    )
    add_traceback_flag(parser)
    args = parser.parse_args(argv)
    with one_line_errors(parser.prog, REPORTED, args.traceback):
        for run in args.runs:
            if not (Path(run) / "tensorboard").is_dir():
                raise UserError(f"{run}: not a training run (no tensorboard/ folder)")
        if args.labels is not None and len(args.labels) != len(args.runs):
            raise UserError(f"{len(args.labels)} labels for {len(args.runs)} runs")
        print(plot_runs(args.runs, args.out, args.labels))
    return 0
