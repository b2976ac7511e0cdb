"""Play SafeLife in a terminal.

Keys: arrow keys (or w/a/s/d) move, space (or c) toggles the cell the agent faces, x waits a
step, r restarts the level, n and p go to the next and previous level, q quits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.render import render_ansi, render_rgb
from safelife_rl.envs.video import write_gif

MOVES = {"up": 1, "right": 2, "down": 3, "left": 4}
KEYS = {
    b"\x1b[A": "up", b"\x1b[B": "down", b"\x1b[C": "right", b"\x1b[D": "left",
    b"w": "up", b"s": "down", b"d": "right", b"a": "left",
    b" ": "toggle", b"c": "toggle", b"x": "wait", b".": "wait",
    b"r": "restart", b"n": "next", b"p": "prev", b"q": "quit", b"\x03": "quit", b"\x04": "quit",
}
HELP = "arrows/wasd move · space toggle · x wait · r restart · n/p next/prev level · q quit"
#: How the level-choosing keys move through the env's levels.
LEVEL_KEYS = {"restart": 0, "next": 1, "prev": -1}


class Screen:
    """Draws a game's first board to a terminal (and keeps the frames when making a GIF)."""

    def __init__(self, out: TextIO, gif: str | os.PathLike | None):
        self.out, self.gif, self.frames = out, gif, []

    def draw(self, game: Any, status: str) -> None:
        board, goals = game.boards[0], game.goals[0]
        self.out.write("\x1b[H\x1b[2J" + render_ansi(board, goals) + status)
        self.out.flush()
        if self.gif is not None:
            self.frames.append(render_rgb(board, goals))

    def close(self) -> None:
        """Write the GIF, if one was asked for."""
        if self.gif is not None:
            write_gif(self.frames, self.gif)


def read_keys(fd: int) -> Iterator[str]:
    """Key names from a file descriptor of raw key presses (arrow keys are escape sequences)."""
    while True:
        byte = os.read(fd, 1)
        if not byte:
            return
        if byte == b"\x1b":
            byte += os.read(fd, 2)
        if byte in KEYS:
            yield KEYS[byte]


@contextmanager
def raw_terminal(fd: int):
    """Unbuffered key presses without echo while playing, when ``fd`` is a terminal."""
    if not os.isatty(fd):
        yield
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _status(env: SafeLifeEnv, index: int, info: dict, over: str) -> str:
    game = env.game
    exit_state = "open" if game.can_exit[0] else "closed"
    return (
        f"level {env.level.name or index} ({index + 1}/{len(env.levels)})  "
        f"step {game.num_steps}/{env.time_limit}  "
        f"points {info['points']:.0f} (exit needs {info['required_points']:.0f}, "
        f"{info['available_points']:.0f} available)  exit {exit_state}  "
        f"reward {info['reward']:.0f}\n{over}{HELP}\n"
    )


def play(
    env: SafeLifeEnv,
    keys: Iterable[str],
    out: TextIO,
    gif: str | os.PathLike | None = None,
    seed: int | None = 0,
) -> dict:
    """Run the game loop on key names; draws each frame to ``out``.

    :returns: the last ``info`` plus ``levels_completed``.
    """
    index = 0
    _, info = env.reset(seed=seed, options={"level": index})
    completed, over = 0, ""
    screen = Screen(out, gif)
    screen.draw(env.game, _status(env, index, info, over))
    for key in keys:
        if key == "quit":
            break
        if key in LEVEL_KEYS:
            index = (index + LEVEL_KEYS[key]) % len(env.levels)
            _, info = env.reset(options={"level": index})
            over = ""
        elif not over:
            toggle = 5 + int(env.game.orientation[0])
            action = MOVES.get(key, toggle if key == "toggle" else 0)
            _, _, terminated, truncated, info = env.step(action)
            if terminated:
                completed += info["success"]
                over = "Level complete! Press n for the next level.\n"
            elif truncated:
                over = "Time's up. Press r to retry or n for the next level.\n"
        screen.draw(env.game, _status(env, index, info, over))
    screen.close()
    return {**info, "levels_completed": completed}


def main(source: str, gif: str | None = None, time_limit: int = 1000) -> dict:
    from safelife_rl.envs.registration import TASKS, make_task_env

    if source in TASKS:
        env = make_task_env(source, time_limit=time_limit)
    elif Path(source).exists():
        env = SafeLifeEnv(source, time_limit=time_limit)
    else:
        raise FileNotFoundError(f"{source!r} is neither a task ({', '.join(TASKS)}) nor a path")
    fd = sys.stdin.fileno()
    with raw_terminal(fd):
        return play(env, read_keys(fd), sys.stdout, gif)
