"""Play one agent of a multi-agent SafeLife level in a terminal, the others following a policy
or standing still. The keys are single-agent play's (:mod:`safelife_rl.apps.play`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from safelife_rl.apps.play import HELP, LEVEL_KEYS, MOVES, Screen, raw_terminal, read_keys
from safelife_rl.common.errors import UserError
from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS, SafeLifeParallelEnv
from safelife_rl.envs.registration import suite_file

#: What the agents a person does not control do: stand still, or act at random.
OTHERS = ("still", "random")
Policy = Callable[[np.ndarray], np.ndarray]


def _status(env: SafeLifeParallelEnv, index: int, me: str, infos: dict, over: str) -> str:
    lines = [f"level {env.level.name or index} ({index + 1}/{len(env.levels)})  "
             f"step {env.game.num_steps}/{env.time_limit}  you: {me}"]
    for i, agent in enumerate(env.possible_agents):
        info = infos[agent]
        state = "exited" if info["success"] else ("playing" if agent in env.agents else "gone")
        exit_state = "open" if env.game.can_exit[0, i] else "closed"
        lines.append(f"  {agent} ({info['type']}{', you' if agent == me else ''}): points "
                     f"{info['points']:.0f} (exit needs {info['required_points']:.0f}, "
                     f"{info['available_points']:.0f} available)  exit {exit_state}  {state}")
    return "\n".join(lines) + f"\n{over}{HELP}\n"


def play_agent(
    env: SafeLifeParallelEnv,
    keys: Iterable[str],
    out: TextIO,
    agent: int = 0,
    others: Policy | None = None,
    gif: str | os.PathLike | None = None,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Run the game loop on key names for agent ``agent``; the other live agents take
    ``others(observations)`` (``None``: they stand still). Draws each frame to ``out``.

    :returns: every agent's last ``info`` and ``levels_completed`` (levels the controlled
        agent exited).
    """
    if not 0 <= agent < len(env.possible_agents):
        raise UserError(f"agent must be 0-{len(env.possible_agents) - 1}, got {agent}")
    if not env.levels:
        raise UserError("play needs a list of levels (a file, folder or task suite)")
    me = env.possible_agents[agent]
    index = 0
    observations, infos = env.reset(seed=seed, options={"level": index})
    completed, over = 0, ""
    screen = Screen(out, gif)
    screen.draw(env.game, _status(env, index, me, infos, over))
    for key in keys:
        if key == "quit":
            break
        if key in LEVEL_KEYS:
            index = (index + LEVEL_KEYS[key]) % len(env.levels)
            observations, infos = env.reset(options={"level": index})
            over = ""
        elif not over:
            others_live = [a for a in env.agents if a != me]
            actions = dict.fromkeys(others_live, 0)
            if others is not None and others_live:
                chosen = others(np.stack([observations[a] for a in others_live]))
                actions = {a: int(action) for a, action in zip(others_live, chosen)}
            if me in env.agents:
                toggle = 5 + int(env.game.orientation[0, agent])
                actions[me] = MOVES.get(key, toggle if key == "toggle" else 0)
            observations, _, terminations, _, step_infos = env.step(actions)
            infos.update(step_infos)
            if terminations.get(me) and infos[me]["success"]:
                completed += 1
            if not env.agents:
                over = ("Level complete! Press n for the next level.\n" if infos[me]["success"]
                        else "Episode over. Press r to retry or n for the next level.\n")
        screen.draw(env.game, _status(env, index, me, infos, over))
    screen.close()
    return {"infos": infos, "levels_completed": completed}


def main(source: str, agent: int = 0, others: str = "still", gif: str | None = None,
         time_limit: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Play agent ``agent`` of a multi-agent task's suite or of a level file or folder."""
    if others not in OTHERS:
        raise UserError(f"others must be one of {', '.join(OTHERS)}, got {others!r}")
    if source in MULTI_AGENT_TASKS:
        source = str(suite_file(source))
    elif not Path(source).exists():
        raise FileNotFoundError(f"{source!r} is neither a multi-agent task "
                                f"({', '.join(MULTI_AGENT_TASKS)}) nor a path")
    env = SafeLifeParallelEnv(source, time_limit=time_limit)
    rng = np.random.default_rng(seed)
    policy = (lambda obs: rng.integers(9, size=len(obs))) if others == "random" else None
    fd = sys.stdin.fileno()
    with raw_terminal(fd):
        return play_agent(env, read_keys(fd), sys.stdout, agent, policy, gif, seed)
