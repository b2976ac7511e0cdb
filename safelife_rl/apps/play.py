"""Play SafeLife in a terminal: a single-agent level, or one agent of a multi-agent level
while the others follow a policy or stand still.

Keys: arrow keys (or w/a/s/d) move, space (or c) toggles the cell the agent faces, x waits a
step, r restarts the level, n and p go to the next and previous level, q quits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS, SafeLifeParallelEnv
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.render import render_ansi, render_rgb
from safelife_rl.envs.video import write_gif
from safety_rl_common.errors import UserError

MOVES = {"up": 1, "right": 2, "down": 3, "left": 4}
KEYS = {
    b"\x1b[A": "up",
    b"\x1b[B": "down",
    b"\x1b[C": "right",
    b"\x1b[D": "left",
    b"w": "up",
    b"s": "down",
    b"d": "right",
    b"a": "left",
    b" ": "toggle",
    b"c": "toggle",
    b"x": "wait",
    b".": "wait",
    b"r": "restart",
    b"n": "next",
    b"p": "prev",
    b"q": "quit",
    b"\x03": "quit",
    b"\x04": "quit",
}
HELP = "arrows/wasd move · space toggle · x wait · r restart · n/p next/prev level · q quit"
#: How the level-choosing keys move through the env's levels.
LEVEL_KEYS = {"restart": 0, "next": 1, "prev": -1}
#: What the agents a person does not control do: stand still, or act at random.
OTHERS = ("still", "random")
Policy = Callable[[np.ndarray], np.ndarray]


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


class Session(Protocol):
    """What the play loop needs of an env: the levels, a reset, a step from a key, and the
    status lines under the board."""

    env: Any

    def reset(self, level: int, seed: int | None = None) -> None: ...

    def act(self, action: Callable[[int], int]) -> tuple[str, bool]:
        """Step with ``action(facing)`` for the player; returns the line saying the episode
        is over (empty while it goes on) and whether the player finished the level."""

    def status(self, index: int, over: str) -> str: ...

    def result(self) -> dict[str, Any]: ...


def _run(
    session: Session,
    keys: Iterable[str],
    out: TextIO,
    gif: str | os.PathLike | None,
    seed: int | None,
) -> dict[str, Any]:
    """The game loop on key names, for any session; draws each frame to ``out``."""
    env = session.env
    index = 0
    session.reset(index, seed)
    completed, over = 0, ""
    screen = Screen(out, gif)
    screen.draw(env.game, session.status(index, over))
    for key in keys:
        if key == "quit":
            break
        if key in LEVEL_KEYS:
            index = (index + LEVEL_KEYS[key]) % len(env.levels)
            session.reset(index)
            over = ""
        elif not over:
            over, finished = session.act(
                lambda facing, key=key: MOVES.get(key, 5 + facing if key == "toggle" else 0)
            )
            completed += finished
        screen.draw(env.game, session.status(index, over))
    screen.close()
    return {**session.result(), "levels_completed": completed}


def _level_line(env: Any, index: int) -> str:
    return (
        f"level {env.level.name or index} ({index + 1}/{len(env.levels)})  "
        f"step {env.game.num_steps}/{env.time_limit}"
    )


def _points(info: dict[str, Any], can_exit: bool) -> str:
    return (
        f"points {info['points']:.0f} (exit needs {info['required_points']:.0f}, "
        f"{info['available_points']:.0f} available)  exit {'open' if can_exit else 'closed'}"
    )


class _SingleAgent:
    """A :class:`SafeLifeEnv` in the play loop."""

    def __init__(self, env: SafeLifeEnv):
        self.env = env

    def reset(self, level: int, seed: int | None = None) -> None:
        _, self.info = self.env.reset(seed=seed, options={"level": level})

    def act(self, action: Callable[[int], int]) -> tuple[str, bool]:
        facing = int(self.env.game.orientation[0, 0])
        _, _, terminated, truncated, self.info = self.env.step(action(facing))
        if terminated:
            return "Level complete! Press n for the next level.\n", self.info["success"]
        if truncated:
            return "Time's up. Press r to retry or n for the next level.\n", False
        return "", False

    def status(self, index: int, over: str) -> str:
        return (
            f"{_level_line(self.env, index)}  "
            f"{_points(self.info, self.env.game.can_exit[0, 0])}  "
            f"reward {self.info['reward']:.0f}\n{over}{HELP}\n"
        )

    def result(self) -> dict[str, Any]:
        return self.info


class _OneOfSeveral:
    """Agent ``agent`` of a :class:`SafeLifeParallelEnv` in the play loop; the other live
    agents take ``others(observations)`` (``None``: they stand still)."""

    def __init__(self, env: SafeLifeParallelEnv, agent: int, others: Policy | None):
        if not 0 <= agent < len(env.possible_agents):
            raise UserError(f"agent must be 0-{len(env.possible_agents) - 1}, got {agent}")
        if not env.levels:
            raise UserError("play needs a list of levels (a file, folder or task suite)")
        self.env, self.agent, self.others = env, agent, others
        self.me = env.possible_agents[agent]

    def reset(self, level: int, seed: int | None = None) -> None:
        self.observations, self.infos = self.env.reset(seed=seed, options={"level": level})

    def act(self, action: Callable[[int], int]) -> tuple[str, bool]:
        env, me = self.env, self.me
        others_live = [a for a in env.agents if a != me]
        actions = dict.fromkeys(others_live, 0)
        if self.others is not None and others_live:
            chosen = self.others(np.stack([self.observations[a] for a in others_live]))
            actions = {a: int(choice) for a, choice in zip(others_live, chosen)}
        if me in env.agents:
            actions[me] = action(int(env.game.orientation[0, self.agent]))
        self.observations, _, terminations, _, step_infos = env.step(actions)
        self.infos.update(step_infos)
        success = self.infos[me]["success"]
        finished = bool(terminations.get(me)) and success
        if env.agents:
            return "", finished
        if success:
            return "Level complete! Press n for the next level.\n", finished
        return "Episode over. Press r to retry or n for the next level.\n", finished

    def status(self, index: int, over: str) -> str:
        env = self.env
        lines = [f"{_level_line(env, index)}  you: {self.me}"]
        for i, agent in enumerate(env.possible_agents):
            info = self.infos[agent]
            state = "exited" if info["success"] else ("playing" if agent in env.agents else "gone")
            lines.append(
                f"  {agent} ({info['type']}{', you' if agent == self.me else ''}): "
                f"{_points(info, env.game.can_exit[0, i])}  {state}"
            )
        return "\n".join(lines) + f"\n{over}{HELP}\n"

    def result(self) -> dict[str, Any]:
        return {"infos": self.infos}


def play(
    env: SafeLifeEnv,
    keys: Iterable[str],
    out: TextIO,
    gif: str | os.PathLike | None = None,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Run the game loop on key names; draws each frame to ``out``.

    :returns: the last ``info`` plus ``levels_completed``.
    """
    return _run(_SingleAgent(env), keys, out, gif, seed)


def play_agent(
    env: SafeLifeParallelEnv,
    keys: Iterable[str],
    out: TextIO,
    agent: int = 0,
    others: Policy | None = None,
    gif: str | os.PathLike | None = None,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Run the game loop on key names for agent ``agent`` of a multi-agent env; the other live
    agents take ``others(observations)`` (``None``: they stand still). Draws each frame to
    ``out``.

    :returns: every agent's last ``info`` (``infos``) and ``levels_completed`` (levels the
        controlled agent exited).
    """
    return _run(_OneOfSeveral(env, agent, others), keys, out, gif, seed)


def _in_terminal(run: Callable[[Iterable[str]], dict[str, Any]]) -> dict[str, Any]:
    """``run`` on the key presses of this process's terminal."""
    fd = sys.stdin.fileno()
    with raw_terminal(fd):
        return run(read_keys(fd))


def play_env(source: str, time_limit: int = 1000) -> SafeLifeEnv:
    """The env ``play SOURCE`` plays: a task's fixed suite (the loop picks levels by number,
    to retry one or go to the next, as ``play-multi`` plays a multi-agent task's), or a level
    file or folder."""
    from safelife_rl.envs.registration import TASKS

    if source in TASKS:
        source = str(suite_file(source))
    elif not Path(source).exists():
        raise FileNotFoundError(f"{source!r} is neither a task ({', '.join(TASKS)}) nor a path")
    return SafeLifeEnv(source, time_limit=time_limit)


def run(source: str, gif: str | None = None, time_limit: int = 1000) -> dict[str, Any]:
    """``play SOURCE``: play a task's fixed suite or a level file or folder in this terminal;
    what :func:`play` returns."""
    env = play_env(source, time_limit)
    return _in_terminal(lambda keys: play(env, keys, sys.stdout, gif))


def run_multi(
    source: str,
    agent: int = 0,
    others: str = "still",
    gif: str | None = None,
    time_limit: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``play-multi SOURCE``: play agent ``agent`` of a multi-agent task's suite or of a level
    file or folder in this terminal; what :func:`play_agent` returns."""
    if others not in OTHERS:
        raise UserError(f"others must be one of {', '.join(OTHERS)}, got {others!r}")
    if source in MULTI_AGENT_TASKS:
        source = str(suite_file(source))
    elif not Path(source).exists():
        raise FileNotFoundError(
            f"{source!r} is neither a multi-agent task ({', '.join(MULTI_AGENT_TASKS)}) nor a path"
        )
    env = SafeLifeParallelEnv(source, time_limit=time_limit)
    rng = np.random.default_rng(seed)
    policy = (lambda obs: rng.integers(9, size=len(obs))) if others == "random" else None
    return _in_terminal(lambda keys: play_agent(env, keys, sys.stdout, agent, policy, gif, seed))
