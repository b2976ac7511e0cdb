"""SB3 callbacks: per-episode TensorBoard logging, schedule syncing, periodic evaluation and
atomic checkpoints."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import gymnasium as gym
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import TensorBoardOutputFormat

from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.evaluation import (
    Policy,
    describe,
    episode_scalars,
    evaluate,
    mean_intervals,
    own_streams,
    summarize,
)
from safelife_rl.training.files import save_model_atomic
from safelife_rl.training.rollout_record import RolloutRecord
from safety_rl_common.checks import check
from safety_rl_common.errors import UserError
from safety_rl_common.files import remove_in_folder, write_json
from safety_rl_common.limits import EPISODE_LIMIT
from safety_rl_common.workers import note_stop_signal

CHECKPOINT_PATTERN = re.compile(r"model_(\d+)_steps\.zip")
Metrics = Callable[[list[dict[str, Any]], Callable[[], gym.Env]], dict[str, float]]
log = logging.getLogger(__name__)


def tensorboard_writer(logger: Any) -> Any:
    for output in logger.output_formats:
        if isinstance(output, TensorBoardOutputFormat):
            return output.writer
    raise RuntimeError("these callbacks need the model's logger to write TensorBoard")


def flush_tensorboard(logger: Any) -> None:
    """Write out the TensorBoard events the logger's writer holds (it flushes only every 2
    minutes by itself; a killed run would lose them)."""
    for output in logger.output_formats:
        if isinstance(output, TensorBoardOutputFormat):
            output.writer.flush()


class EpisodeLogger(BaseCallback):
    """Write every finished training episode to TensorBoard at the current step.

    Tags: ``episode/reward``, ``episode/length``, ``episode/shaped_reward``,
    ``episode/success``, ``episode/performance`` and, when the env reports side effects,
    ``side_effects/<cell type>``, ``side_effects/normalized/{green,yellow,total}`` and
    ``episode/score`` (see :func:`~safelife_rl.training.evaluation.episode_scalars`). An
    agent of a multi-agent env (an ``info`` naming its ``agent``) logs as
    ``episode/<agent>/<name>``; the board's side effects once per episode.
    """

    def _init_callback(self) -> None:
        self._writer = tensorboard_writer(self.logger)

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"]):
            if done:
                self._log(info, self.num_timesteps)
        return True

    def _on_rollout_end(self) -> None:
        """The device algorithms hand over a rollout's episodes at its end, each with the step
        count at which it ended (:mod:`safelife_rl.training.device.algorithms`)."""
        for timesteps, info in self.locals.get("episodes", ()):
            self._log(info, timesteps)

    def _log(self, info: dict[str, Any], timesteps: int) -> None:
        if info.get("dead_slot"):
            return
        prefix = f"episode/{info['agent']}" if "agent" in info else "episode"
        for key, value in episode_scalars(info).items():
            tag = key if key.startswith("side_effects/") else f"{prefix}/{key}"
            self._writer.add_scalar(tag, value, timesteps)


class RunStopped(Exception):
    """A signal ended the run; the message says where and how to continue."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum


class StopOnSignal(BaseCallback):
    """Catch SIGTERM and SIGINT for the whole run (``with StopOnSignal() as stop:``).

    While the model learns, a signal ends training at the next rollout boundary (the rollout
    under way is collected and trained on; ``stopped`` tells), so the env workers close cleanly
    and the run saves a checkpoint to resume from exactly. SB3 stops only from a step, so
    training ends at the first step of the next rollout, which the checkpoint leaves out (see
    :class:`~safelife_rl.training.rollout_record.RolloutRecord`). Before and after learning
    (building the envs, the final save, evaluation and plots), and at a second signal, it raises
    :class:`RunStopped` at once, naming ``phase``, so the run never ends silently.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        super().__init__()
        self.stopped = False
        self.signum: int | None = None
        self.phase = "setting up the run"
        self._learning = False
        self._first_step = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        try:
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        except ValueError:  # not the main thread (some sweep launchers): leave signals alone
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: Any) -> None:
        note_stop_signal()  # a sweep job's parent watch sends no second signal
        first = not self.stopped
        self.stopped, self.signum = True, signum
        if not (self._learning and first):
            raise RunStopped(signum, f"stopped by {signal.Signals(signum).name} while {self.phase}")

    def _on_training_start(self) -> None:
        self._learning = True

    def _on_training_end(self) -> None:
        self._learning = False

    def _on_rollout_start(self) -> None:
        self._first_step = True

    def _on_step(self) -> bool:
        first, self._first_step = self._first_step, False
        return not (self.stopped and first)


class TrainingClock(BaseCallback):
    """Tell the envs' scheduled wrappers the step count at every rollout and log the scheduled
    values (``schedule/exit_fraction``, ``schedule/side_effect_penalty``).

    The app adds it to every run; training with SB3 directly, pass it yourself so that
    :class:`~safelife_rl.training.ExitCurriculum` and
    :class:`~safelife_rl.training.SideEffectPenalty` follow their schedules (without it they
    stay at step 0 and warn)::

        model.learn(1_000_000, callback=TrainingClock())

    :param offset: steps the run took before this model's (a phase before it, as AUP's first).
    """

    def __init__(self, offset: int = 0):
        super().__init__()
        self.offset = offset

    def _on_rollout_start(self) -> None:
        values = sync_training_steps(self.training_env, self.offset + self.num_timesteps)
        for key, value in values.items():
            self.logger.record(f"schedule/{key}", value)

    def _on_step(self) -> bool:
        return True


class PeriodicEvaluation(BaseCallback):
    """Every ``eval_every`` env steps, play ``n_episodes`` fixed evaluation episodes and log
    their means as ``eval/<metric>`` (with the 95% intervals of the
    :data:`~safelife_rl.training.evaluation.INTERVALS` means: ``eval/<metric>_low`` and
    ``_high``) and as a line of the run's log; the history goes to
    ``<run_dir>/evaluations.json``.

    :param run_dir: the run's output folder.
    :param make_env: builds one evaluation env (no training wrappers).
    :param deterministic: act greedily (the original evaluated the sampling policy).
    :param pick_levels: episode ``i`` plays level ``i`` of the env's levels (SafeLife envs).
    :param metrics: ``metrics(episodes, make_env) -> {name: value}``, extra numbers over all
        the episodes (``callbacks.evaluation.metrics`` names one with
        ``hydra.utils.get_method``), logged as ``eval/<name>`` beside the episode means.
    :param evaluator: plays the episodes (:func:`~safelife_rl.training.evaluation.evaluate`;
        for multi-agent envs
        :func:`~safelife_rl.training.multi_agent_evaluation.evaluate_multi_agent`).
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
        evaluator: Callable[..., list[dict[str, Any]]] = evaluate,
    ):
        super().__init__()
        check.count("callbacks.evaluation.eval_every", eval_every)
        check.count("callbacks.evaluation.n_episodes", n_episodes)
        EPISODE_LIMIT.check(n_episodes, "callbacks.evaluation.n_episodes")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise UserError(f"callbacks.evaluation.seed must be a whole number >= 0, got {seed!r}")
        self.make_env = make_env
        self.history_path = Path(run_dir) / "evaluations.json"
        self.eval_every, self.n_episodes, self.seed = eval_every, n_episodes, seed
        self.deterministic, self.pick_levels = deterministic, pick_levels
        self.metrics = metrics
        self.evaluator = evaluator
        self._saved_history = self._read_history()  # a resumed run's, checked before it starts

    def _read_history(self) -> list[dict[str, Any]]:
        if not self.history_path.exists():
            return []
        try:
            history = json.loads(self.history_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            history = error
        if not (
            isinstance(history, list)
            and all(isinstance(h, dict) and isinstance(h.get("step"), int) for h in history)
        ):
            raise UserError(
                f"{self.history_path}: not a list of evaluations with their steps; "
                "restore it, or delete it to evaluate afresh"
            )
        return history

    def _init_callback(self) -> None:
        self._writer = tensorboard_writer(self.logger)
        # a resumed run starts from the checkpoint's step count: evaluations the killed run
        # made after it are made again
        self._history = [h for h in self._saved_history if h["step"] <= self.model.num_timesteps]
        self._next = (self.model.num_timesteps // self.eval_every + 1) * self.eval_every

    def play(self, policy: Policy) -> dict[str, float]:
        """Play the evaluation episodes with ``policy`` and summarise them: the mean of each
        episode scalar (``mean_<name>``), the intervals of
        :func:`~safelife_rl.training.evaluation.mean_intervals` and the extra ``metrics``.
        Everything random in them draws from streams seeded with ``seed`` (:func:`own_streams`):
        an evaluation depends on the weights alone, and the run's streams are left as they
        were."""
        with own_streams(self.seed, self.model.device, self.model.action_space):
            episodes = self.evaluator(
                policy, self.make_env, self.n_episodes, seed=self.seed, pick_levels=self.pick_levels
            )
            summary = {**summarize(episodes), **mean_intervals(episodes)}
            if self.metrics is not None:
                summary.update(self.metrics(episodes, self.make_env))
        return summary

    def run(self) -> dict[str, float]:
        """Evaluate the model now, record the result and log it (the record is written first:
        it is what a resumed run goes by)."""
        summary = self.play(
            lambda obs: self.model.predict(obs, deterministic=self.deterministic)[0]
        )
        self._history.append({"step": self.num_timesteps, **summary})
        write_json(self.history_path, self._history)
        for key, value in summary.items():
            if key != "episodes":
                tag = key.removeprefix("mean_")
                self._writer.add_scalar(f"eval/{tag}", value, self.num_timesteps)
        self._writer.flush()
        log.info("evaluation at %d steps: %s", self.num_timesteps, describe(summary))
        return summary

    def final(self) -> dict[str, float]:
        """The evaluation at the model's current step: the one already made there (a periodic
        one, or one a killed run recorded), else a new one."""
        if self._history and self._history[-1]["step"] == self.model.num_timesteps:
            return {k: v for k, v in self._history[-1].items() if k != "step"}
        return self.run()

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.eval_every + 1) * self.eval_every
            self.run()
        return True


class AtomicCheckpoint(BaseCallback):
    """Save the model every ``save_every`` env steps to ``model_<steps>_steps.zip`` in
    ``<run_dir>/checkpoints``, writing a temporary file first so a killed run never leaves half a
    checkpoint; keeps the newest ``keep`` checkpoints (all if ``keep`` is 0). ``run_config``
    (the run's resolved config as YAML) is saved in each checkpoint.

    Checkpoints are taken at rollout boundaries (the first boundary at or after each multiple of
    ``save_every``), when the model has trained on every step it counts; with the run's
    ``record`` (:class:`~safelife_rl.training.rollout_record.RolloutRecord`) each also holds
    what resuming from it exactly needs. Old checkpoints are never deleted through a symbolic
    link: a ``checkpoints`` folder that is a link is refused when ``keep`` is set."""

    def __init__(
        self,
        run_dir: str | os.PathLike,
        save_every: int = 50_000,
        keep: int = 0,
        run_config: str | None = None,
        record: RolloutRecord | None = None,
    ):
        super().__init__()
        check.count("callbacks.checkpoint.save_every", save_every)
        check.count("callbacks.checkpoint.keep", keep, minimum=0)
        self.save_path = Path(run_dir) / "checkpoints"
        self.save_every, self.keep, self.run_config = save_every, keep, run_config
        self.record = record
        self._in_rollout = False

    def _init_callback(self) -> None:
        if self.keep and self.save_path.is_symlink():
            raise UserError(
                f"{self.save_path} is a symbolic link: pruning old checkpoints would delete "
                "files where it points; make it a folder, or set callbacks.checkpoint.keep=0"
            )
        self.save_path.mkdir(parents=True, exist_ok=True)
        self._next = (self.model.num_timesteps // self.save_every + 1) * self.save_every

    def save(self) -> Path:
        flush_tensorboard(self.logger)  # what was logged up to the checkpoint is on disk
        name = f"model_{self.num_timesteps}_steps.zip"
        entries = None
        if self.record is not None and self.record.boundary is not None:
            entries = self.record.entries(self.record.boundary)
        path = save_model_atomic(self.model, self.save_path / name, self.run_config, entries)
        if self.keep:
            for old in checkpoints(self.save_path)[: -self.keep]:
                remove_in_folder(self.save_path, old.name)
        return path

    def _save_if_due(self) -> None:
        if self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.save_every + 1) * self.save_every
            self.save()

    def _on_rollout_start(self) -> None:
        self._in_rollout = True
        self._save_if_due()

    def _on_rollout_end(self) -> None:
        self._in_rollout = False

    def _on_training_end(self) -> None:
        if not self._in_rollout:  # ended after training on its last rollout: a boundary
            self._save_if_due()

    def _on_step(self) -> bool:
        return True


def checkpoint_steps(path: Path) -> int:
    """The step count a checkpoint of :func:`checkpoints` was saved at (from its name)."""
    match = CHECKPOINT_PATTERN.fullmatch(path.name)
    if match is None:
        raise ValueError(f"{path.name} is not a checkpoint's name")
    return int(match.group(1))


def checkpoints(folder: str | os.PathLike) -> list[Path]:
    """The checkpoints in ``folder``, oldest (fewest steps) first."""
    found = [
        (checkpoint_steps(path), path)
        for path in Path(folder).glob("model_*_steps.zip")
        if CHECKPOINT_PATTERN.fullmatch(path.name)
    ]
    return [path for _, path in sorted(found)]
