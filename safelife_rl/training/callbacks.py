"""SB3 callbacks: per-episode TensorBoard logging, schedule syncing, periodic evaluation and
atomic checkpoints."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import TensorBoardOutputFormat

from ..files import write_json
from .evaluation import Policy, episode_scalars, evaluate, summarize
from .files import save_model_atomic
from .wrappers import sync_training_steps

CHECKPOINT_PATTERN = re.compile(r"model_(\d+)_steps\.zip")
Metrics = Callable[[list[dict[str, Any]], Callable[[], gym.Env]], dict[str, float]]


def _tensorboard_writer(logger: Any) -> Any:
    for output in logger.output_formats:
        if isinstance(output, TensorBoardOutputFormat):
            return output.writer
    raise RuntimeError("these callbacks need the model's logger to write TensorBoard")


class EpisodeLogger(BaseCallback):
    """Write every finished training episode to TensorBoard at the current step.

    Tags: ``episode/reward``, ``episode/length``, ``episode/shaped_reward``,
    ``episode/success``, ``episode/performance`` and, when the env reports side effects,
    ``side_effects/<cell type>``, ``side_effects/normalized/{green,yellow,total}`` and
    ``episode/score`` (see :func:`~safelife_rl.training.evaluation.episode_scalars`).
    """

    def _init_callback(self) -> None:
        self._writer = _tensorboard_writer(self.logger)

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"]):
            if done:
                for key, value in episode_scalars(info).items():
                    tag = key if key.startswith("side_effects/") else f"episode/{key}"
                    self._writer.add_scalar(tag, value, self.num_timesteps)
        return True


class StopOnSignal(BaseCallback):
    """End training at the next step once SIGTERM or SIGINT arrives (``stopped`` tells).

    Stopping between steps, rather than raising inside one, lets the env workers close cleanly
    and the run save a checkpoint to resume from.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stopped = False

    def _init_callback(self) -> None:
        try:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, self._request_stop)
        except ValueError:  # not the main thread (some sweep launchers): leave signals alone
            pass

    def _request_stop(self, signum: int, frame: Any) -> None:
        self.stopped = True

    def _on_step(self) -> bool:
        return not self.stopped

    def _on_training_end(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT
                              else signal.SIG_DFL)
            except ValueError:
                pass


class TrainingClock(BaseCallback):
    """Tell the envs' scheduled wrappers the step count at every rollout and log the scheduled
    values (``schedule/exit_fraction``, ``schedule/side_effect_penalty``)."""

    def _on_rollout_start(self) -> None:
        values = sync_training_steps(self.training_env, self.num_timesteps)
        for key, value in values.items():
            self.logger.record(f"schedule/{key}", value)

    def _on_step(self) -> bool:
        return True


class PeriodicEvaluation(BaseCallback):
    """Every ``eval_every`` env steps, play ``n_episodes`` fixed evaluation episodes and log
    their means as ``eval/<metric>``; the history goes to ``<run_dir>/evaluations.json``.

    :param run_dir: the run's output folder.
    :param make_env: builds one evaluation env (no training wrappers).
    :param deterministic: act greedily (the original evaluated the sampling policy).
    :param pick_levels: episode ``i`` plays level ``i`` of the env's levels (SafeLife envs).
    :param metrics: ``metrics(episodes, make_env) -> {name: value}``, extra numbers over all
        the episodes (e.g. :func:`~safelife_rl.training.drest_metrics.drest_metrics`), logged
        as ``eval/<name>`` beside the episode means.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        make_env: Callable[[], gym.Env],
        eval_every: int = 100_000,
        n_episodes: int = 20,
        seed: int = 0,
        deterministic: bool = False,
        pick_levels: bool = True,
        metrics: Metrics | None = None,
    ):
        super().__init__()
        if eval_every < 1 or n_episodes < 1:
            raise ValueError("eval_every and n_episodes must be positive")
        self.make_env = make_env
        self.history_path = Path(run_dir) / "evaluations.json"
        self.eval_every, self.n_episodes, self.seed = eval_every, n_episodes, seed
        self.deterministic, self.pick_levels = deterministic, pick_levels
        self.metrics = metrics

    def _init_callback(self) -> None:
        self._writer = _tensorboard_writer(self.logger)
        self._history = (
            json.loads(self.history_path.read_text()) if self.history_path.exists() else []
        )
        # a resumed run starts from the checkpoint's step count
        self._next = (self.model.num_timesteps // self.eval_every + 1) * self.eval_every

    def play(self, policy: Policy) -> dict[str, float]:
        """Play the evaluation episodes with ``policy`` and summarise them: the mean of each
        episode scalar (``mean_<name>``) and the extra ``metrics``."""
        episodes = evaluate(
            policy, self.make_env, self.n_episodes, seed=self.seed, pick_levels=self.pick_levels
        )
        summary = summarize(episodes)
        if self.metrics is not None:
            summary.update(self.metrics(episodes, self.make_env))
        return summary

    def run(self) -> dict[str, float]:
        """Evaluate the model now, log and record the result."""
        summary = self.play(
            lambda obs: self.model.predict(obs, deterministic=self.deterministic)[0]
        )
        for key, value in summary.items():
            if key != "episodes":
                tag = key.removeprefix("mean_")
                self._writer.add_scalar(f"eval/{tag}", value, self.num_timesteps)
        self._history.append({"step": self.num_timesteps, **summary})
        write_json(self.history_path, self._history)
        return summary

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.eval_every + 1) * self.eval_every
            self.run()
        return True


class AtomicCheckpoint(BaseCallback):
    """Save the model every ``save_every`` env steps to ``model_<steps>_steps.zip`` in
    ``<run_dir>/checkpoints``, writing a temporary file first so a killed run never leaves half a
    checkpoint; keeps the newest ``keep`` checkpoints (all if ``keep`` is 0)."""

    def __init__(self, run_dir: str | os.PathLike, save_every: int = 50_000, keep: int = 0):
        super().__init__()
        if save_every < 1 or keep < 0:
            raise ValueError("save_every must be positive and keep non-negative")
        self.save_path = Path(run_dir) / "checkpoints"
        self.save_every, self.keep = save_every, keep

    def _init_callback(self) -> None:
        self.save_path.mkdir(parents=True, exist_ok=True)
        self._next = (self.model.num_timesteps // self.save_every + 1) * self.save_every

    def save(self) -> Path:
        name = f"model_{self.num_timesteps}_steps.zip"
        path = save_model_atomic(self.model, self.save_path / name)
        if self.keep:
            for old in checkpoints(self.save_path)[: -self.keep]:
                old.unlink()
        return path

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.save_every + 1) * self.save_every
            self.save()
        return True


def checkpoints(folder: str | os.PathLike) -> list[Path]:
    """The checkpoints in ``folder``, oldest (fewest steps) first."""
    found = []
    for path in Path(folder).glob("model_*_steps.zip"):
        match = CHECKPOINT_PATTERN.fullmatch(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]
