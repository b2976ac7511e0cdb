"""The reference systems' figures, measured on this machine in the same run as ours.

Machines here differ by up to 3x, so a speed ratio means something only when both sides ran on
the same machine: each benchmark runs the reference script ``baselines.sh`` of the development
machines (the original SafeLife and ExtendedEnvironments in scratch venvs, built on first use;
not part of this repository: ``--baseline-script PATH`` or ``$SAFETY_RL_BASELINES`` names it) or
reads a file holding its output (``--baseline-output``, for a machine where it already ran), and
prints ours beside the baseline and their ratio.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path

#: Where the reference script is when no flag names it.
SCRIPT_VARIABLE = "SAFETY_RL_BASELINES"
_LINE = re.compile(r"^baseline (?P<name>.+?): (?P<value>[\d,.]+) ", re.MULTILINE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--baseline-output",
        type=Path,
        help="a file with baselines.sh's output from this machine (else it runs)",
    )
    group.add_argument(
        "--baseline-script",
        type=Path,
        default=os.environ.get(SCRIPT_VARIABLE) or None,
        help=f"the reference baselines.sh to run (default ${SCRIPT_VARIABLE})",
    )
    group.add_argument(
        "--no-baseline", action="store_true", help="print our figures alone (no ratio)"
    )


def parse(text: str) -> dict[str, float]:
    """``{name: value}`` from baselines.sh's ``baseline <name>: <value> <unit>`` lines."""
    return {m["name"]: float(m["value"].replace(",", "")) for m in _LINE.finditer(text)}


def measure(which: str, steps: int, args: argparse.Namespace) -> dict[str, float]:
    """The baseline figures of ``which`` (``safelife-env``, ``safelife-ppo``, ``extended``)."""
    if args.no_baseline:
        return {}
    if args.baseline_output is not None:
        return parse(args.baseline_output.read_text())
    script = args.baseline_script
    if script is None or not Path(script).is_file():
        raise SystemExit(
            f"no reference script at {script} (--baseline-script PATH or "
            f"${SCRIPT_VARIABLE}): give it, --baseline-output FILE or --no-baseline"
        )
    print(
        f"running {Path(script).name} {which} --steps {steps} (builds its venvs the first time)...",
        flush=True,
    )
    done = subprocess.run(
        ["bash", str(script), which, "--steps", str(steps)],
        capture_output=True,
        text=True,
        check=False,
    )
    figures = parse(done.stdout)
    if done.returncode or not figures:
        raise SystemExit(
            f"baselines.sh {which} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return figures


def ratio_line(label: str, ours: float, unit: str, figures: dict[str, float], name: str) -> str:
    """``label: ours unit; baseline name: value; ratio``, or ours alone without the baseline."""
    if name not in figures:
        return f"{label}: {ours:,.0f} {unit} (no baseline {name!r} measured)"
    base = figures[name]
    return f"{label}: {ours:,.0f} {unit}; baseline {name}: {base:,.0f}; ratio {ours / base:.2f}x"
