"""Animated GIFs of SafeLife boards (imageio and Pillow: no ffmpeg needed)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import gymnasium as gym
import imageio.v3 as iio
import numpy as np

from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.render import render_rgb
from safety_rl_common.errors import UserError
from safety_rl_common.files import atomic_path


def write_gif(frames: Sequence[np.ndarray], path: str | os.PathLike, fps: float = 8) -> None:
    """Write RGB frames as a looping GIF (to a temporary file first, then renamed)."""
    if len(frames) == 0:
        raise ValueError("no frames to write")
    with atomic_path(path) as tmp:
        iio.imwrite(tmp, np.stack(frames), extension=".gif", duration=1000 / fps, loop=0)


def board_frames(boards: np.ndarray, goals: np.ndarray, cell_px: int = 12) -> list[np.ndarray]:
    """One RGB frame per board of a ``(T, H, W)`` history."""
    return [render_rgb(b, g, cell_px) for b, g in zip(boards, goals)]


def record_episode(
    env: gym.Env,
    policy: Callable[[np.ndarray], int],
    path: str | os.PathLike,
    seed: int | None = None,
    fps: float = 8,
) -> dict:
    """Play one episode with ``policy`` (observation -> action) and save it as a GIF.

    :param env: a SafeLife env, bare or wrapped (``gym.make(...)``, training wrappers; its
        board is drawn whatever its ``render_mode``), or any env made with
        ``render_mode="rgb_array"``.
    :returns: the final step's ``info``.
    """
    if isinstance(env.unwrapped, SafeLifeEnv):
        base = env.unwrapped

        def frame() -> np.ndarray:
            return render_rgb(base.game.boards[0], base.game.goals[0])
    elif env.render_mode == "rgb_array":

        def frame() -> np.ndarray:
            return env.render()
    else:
        raise UserError(
            f"record_episode needs a SafeLife env or an env made with render_mode='rgb_array', "
            f"got {env} with render_mode={env.render_mode!r}"
        )
    obs, info = env.reset(seed=seed)
    frames = [frame()]
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(int(policy(obs)))
        frames.append(frame())
        done = terminated or truncated
    write_gif(frames, path, fps)
    return info
