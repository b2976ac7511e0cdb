"""A random agent playing SafeLife levels, logged to TensorBoard: the baseline every trained
agent must beat, and a check that an installation works end to end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.registration import suite_file
from safety_rl_common.checks import check
from safety_rl_common.errors import UserError
from safety_rl_common.files import write_json


def random_run(
    task: str = "append-still",
    levels: str | os.PathLike | None = None,
    episodes: int = 20,
    time_limit: int = 1000,
    seed: int = 0,
    logdir: str | os.PathLike | None = None,
) -> dict[str, float]:
    """Play ``episodes`` episodes with uniformly random actions; log each to TensorBoard.

    :returns: mean episode reward, length, performance and success rate (also written to
        ``summary.json`` in ``logdir``).
    """
    check.value("episodes", episodes, lambda v: v >= 1, "at least 1")
    check.value("seed", seed, lambda v: v >= 0, "a non-negative integer")
    logdir = Path(logdir or Path("outputs") / "random-run" / time.strftime("%Y-%m-%d_%H-%M-%S"))
    if logdir.exists() and not logdir.is_dir():
        raise UserError(f"{logdir}: logdir is a file, not a directory")
    env = SafeLifeEnv(levels if levels is not None else suite_file(task), time_limit=time_limit)
    rng = np.random.default_rng(seed)
    stats: dict[str, list[float]] = {"reward": [], "length": [], "performance": [], "success": []}
    total_steps = 0
    with SummaryWriter(str(logdir)) as writer:
        env.reset(seed=seed)
        for episode in tqdm(range(episodes), desc="random agent", unit="episode"):
            if episode:
                env.reset()
            done = False
            while not done:
                _, _, terminated, truncated, info = env.step(int(rng.integers(9)))
                done = terminated or truncated
            total_steps += info["length"]
            for key in stats:
                stats[key].append(float(info[key]))
                writer.add_scalar(f"episode/{key}", float(info[key]), total_steps)
    summary = {f"mean_{key}": float(np.mean(values)) for key, values in stats.items()}
    summary["episodes"] = episodes
    write_json(logdir / "summary.json", summary)
    return summary
