"""Terminal play driven by scripted key presses, and GIF recording."""

import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from PIL import Image, ImageSequence

from safelife_rl import SafeLifeEnv
from safelife_rl.play import play
from safelife_rl.replay import load_trace
from safelife_rl.video import record_episode

TRACE = Path(__file__).resolve().parents[3] / "shared/safelife/traces/exit-append-still-020.npz"
ACTION_KEYS = {1: "up", 2: "right", 3: "down", 4: "left", 0: "wait"}


def test_scripted_keys_walk_to_the_exit(tmp_path):
    level, actions, _ = load_trace(TRACE)
    env = SafeLifeEnv([level, level])
    keys = [ACTION_KEYS[int(a)] for a in actions] + ["right", "next", "toggle", "quit", "left"]
    out = io.StringIO()
    result = play(env, keys, out, gif=tmp_path / "session.gif")
    screen = out.getvalue()
    assert result["levels_completed"] == 1
    assert "Level complete!" in screen and "(2/2)" in screen  # moved on with n
    assert screen.count("\x1b[2J") == len(actions) + 4  # a frame per key until q
    frames = iio.imread(tmp_path / "session.gif")
    # Identical consecutive frames (the key pressed after the end) merge into one.
    assert len(actions) < frames.shape[0] <= len(actions) + 4 and frames.shape[-1] == 3


def test_toggle_creates_life_where_the_agent_faces(benchmarks):
    env = SafeLifeEnv(benchmarks / "append-still.npz")
    result = play(env, ["wait"], io.StringIO())
    before = env.game.boards[0].copy()
    play_env = SafeLifeEnv(benchmarks / "append-still.npz")
    play(play_env, ["toggle"], io.StringIO())
    assert result["length"] == 1 and not np.array_equal(play_env.game.boards[0], before)


def test_restart_resets_the_level(benchmarks):
    env = SafeLifeEnv(benchmarks / "append-still.npz")
    out = io.StringIO()
    play(env, ["down", "down", "restart"], out)
    assert env.game.num_steps == 0 and "step 0/1000" in out.getvalue().split("\x1b[2J")[-1]


def test_play_in_a_real_terminal(benchmarks):
    """The command line in a pseudo-terminal: arrow keys as escape sequences, then q."""
    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "safelife_rl", "play", str(benchmarks / "navigation.npz")],
        stdin=child_fd, stdout=child_fd, stderr=child_fd, close_fds=True,
    )
    os.close(child_fd)
    output = b""

    def read_until(marker: bytes, timeout: float = 60) -> None:
        nonlocal output
        deadline = time.time() + timeout
        while marker not in output and time.time() < deadline:
            try:
                output += os.read(main_fd, 65536)
            except OSError:
                break

    read_until(b"step 0/1000")
    os.write(main_fd, b"\x1b[C\x1b[B")
    read_until(b"step 2/1000")
    os.write(main_fd, b"q")
    read_until(b"levels completed")
    assert proc.wait(timeout=30) == 0
    os.close(main_fd)
    assert b"step 2/1000" in output and b"levels completed: 0" in output


def test_record_episode_gif(benchmarks, tmp_path):
    env = SafeLifeEnv(benchmarks / "prune-still.npz", time_limit=12)
    info = record_episode(env, lambda obs: 2, tmp_path / "ep.gif", seed=0)
    frames = iio.imread(tmp_path / "ep.gif")
    assert info["length"] == 12 and frames.shape[1:] == (26 * 12, 26 * 12, 3)
    with Image.open(tmp_path / "ep.gif") as gif:  # merged repeats keep the total duration
        total = sum(frame.info["duration"] for frame in ImageSequence.Iterator(gif))
    assert abs(total - 13 * 125) <= 13 * 5  # GIF stores centiseconds
