"""The replay command's body: a trace file, single- or multi-agent, replayed to a file (and a
GIF)."""

from __future__ import annotations

import os
from pathlib import Path

from safelife_rl.engine.level_files import write_npz
from safelife_rl.engine.replay import replay_trace
from safelife_rl.envs.video import board_frames, write_gif


def replay_file(
    trace: str | os.PathLike,
    out: str | os.PathLike,
    seed: int | None = 0,
    gif: str | os.PathLike | None = None,
    engine: str = "numba",
) -> None:
    """Replay a trace file, single- or multi-agent, and write the result (with the trace's
    level and actions), and optionally an animation of the replayed boards."""
    result = replay_trace(trace, seed, engine)
    write_npz(Path(out), result)
    if gif is not None:
        write_gif(board_frames(result["boards"], result["goals"]), gif)
