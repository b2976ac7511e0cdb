"""One training run from a composed config: build envs, model and callbacks, learn, save,
evaluate. :mod:`safelife_rl train` is the Hydra app around it."""

from __future__ import annotations

import inspect
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.callbacks import (
    PeriodicEvaluation,
    RunStopped,
    StopOnSignal,
    TrainingClock,
    flush_tensorboard,
)
from safelife_rl.training.config import (
    check_device,
    check_host_buffers,
    check_rollout_memory,
    check_settings,
    user_errors_of_instantiate,
)
from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.device.algorithms import DevicePPO
from safelife_rl.training.envs import make_env, make_vec_env, multi_agent_task
from safelife_rl.training.evaluation import INTERVALS, label, random_policy, with_interval
from safelife_rl.training.files import save_model_atomic
from safelife_rl.training.gymnasium_vec_env import WorkerFailed
from safelife_rl.training.hparams import record_hparams
from safelife_rl.training.logs import run_logger
from safelife_rl.training.methods import device_twins, method_of
from safelife_rl.training.model_files import load_model
from safelife_rl.training.models import build_model
from safelife_rl.training.plots import plot_runs
from safelife_rl.training.precision import PAPER, apply_precision
from safelife_rl.training.resume import (
    CONFIG_FILE,
    SavedModel,
    check_resumable,
    latest_model,
    load_run_config,
    remove_stale_temporaries,
)
from safelife_rl.training.rollout_record import RolloutRecord, read_rollouts, restore
from safety_rl_common.errors import UserError, tracebacks_wanted
from safety_rl_common.files import write_json, write_text
from safety_rl_common.locks import PidLock

__all__ = ["load_run_config", "train"]

CURVE_FILE = "learning_curve.png"
LOCK_FILE = "train.lock"
log = logging.getLogger(__name__)


def plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if node is not None else None


def _eval_env_factory(cfg: DictConfig) -> partial:
    eval_kwargs = plain(cfg.env.get("eval_kwargs")) or {}
    kwargs = {**plain(cfg.env.kwargs), **eval_kwargs}
    if "levels" in eval_kwargs and "workers" not in eval_kwargs:
        kwargs.pop("workers", None)  # the training envs' level workers: a fixed suite needs none
    return partial(make_env, cfg.env.id, kwargs, None)


def _method(cfg: DictConfig) -> DictConfig:
    return cfg.get("method") or OmegaConf.create({})


def run_callbacks(
    cfg: DictConfig, run_dir: Path, run_config: str, record: RolloutRecord
) -> list[BaseCallback]:
    """The method's callbacks (``method.callbacks``: first, as they may move the step count
    before the others read it, like AUP's first phase), the run's clock and rollout
    ``record`` (a population member's reads the population's), then the configured ones; each
    gets ``run_dir``, ``make_env`` (an evaluation env factory), ``run_config`` (the resolved config
    as YAML), ``progress_bar``, ``record`` and, for a multi-agent env, the ``evaluator`` that
    plays it, if its constructor takes them."""
    context = {
        "run_dir": run_dir,
        "make_env": _eval_env_factory(cfg),
        "run_config": run_config,
        "progress_bar": cfg.progress_bar,
        "record": record,
    }
    if multi_agent_task(cfg.env.id) is not None:
        from safelife_rl.training.multi_agent_evaluation import evaluate_multi_agent

        context["evaluator"] = evaluate_multi_agent
    method = _method(cfg).get("callbacks") or {}
    return [
        *_instantiate(method, context, "method.callbacks"),
        TrainingClock(),
        record,
        *_instantiate(cfg.callbacks or {}, context, "callbacks"),
    ]


def _instantiate(configs: Any, context: dict[str, Any], where: str) -> list[BaseCallback]:
    """The callbacks of the mapping ``configs`` (at ``where`` in the config; ``None`` skips
    one), each given the ``context`` entries its constructor takes."""
    built = []
    for name, config in configs.items():
        if config is None:
            continue
        if not isinstance(config, Mapping) or "_target_" not in config:
            raise UserError(
                f"{where}.{name} must be a callback's config with a _target_ (or "
                f"null), got {config!r}"
            )
        params = inspect.signature(get_class(config._target_)).parameters
        extra = {k: v for k, v in context.items() if k in params}
        built.append(_build(config, **extra))
    return built


def _build(config: Any, *args: Any, **kwargs: Any) -> Any:
    """``instantiate(config, *args, **kwargs)``; a user error the constructor raises comes out
    as itself, not wrapped in Hydra's error."""
    with user_errors_of_instantiate():
        return instantiate(config, *args, _convert_="all", **kwargs)


def _set_graphs(model: BaseAlgorithm, graphs: str) -> None:
    """The device trainer's ``graphs`` setting, its trainer built now: what it cannot capture
    (a method's cost critics, a wrapper's penalty, an optimizer) is refused before the run
    writes anything."""
    if graphs == "none":
        return
    if not isinstance(model, DevicePPO):
        raise UserError(
            f"graphs={graphs} replays the device trainer's PPO; {type(model).__name__} trains "
            "otherwise: use graphs=none"
        )
    model.graphs = graphs
    model.trainer()


def cudnn_kernels(deterministic: bool) -> None:
    """Choose cuDNN's kernels after the model is built or loaded: SB3 turns on the deterministic
    ones and turns off the autotuner whenever it seeds a model on CUDA, which slows the CNN's
    convolutions; a run asks for them with ``cudnn_deterministic=true``. (Flags of the torch
    build: on a CPU they choose nothing.)"""
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic


def _finished_summary(run_dir: Path, saved: SavedModel) -> dict[str, Any] | None:
    """The saved summary of a run that finished at ``saved`` (``None`` if it has none yet)."""
    path = run_dir / "evaluation.json"
    if not (saved.final and path.is_file()):
        return None
    try:
        summary = json.loads(path.read_text())
    except ValueError:
        return None  # written atomically, so only a hand-edited file gets here: evaluate again
    if not isinstance(summary, dict) or summary.get("timesteps") != saved.steps:
        return None
    return summary


def train(
    cfg: DictConfig, run_dir: str | Path, resume: bool = False, trusted: bool = False
) -> dict[str, Any]:
    """Train as ``cfg`` says, writing everything into ``run_dir``, which one live process at a
    time may train (``train.lock`` names it; a second is refused):

    ``config.yaml`` (resolved config), ``tensorboard/`` (with ``progress.csv``),
    ``checkpoints/``, ``final_model.zip``, ``evaluations.json`` (periodic evaluations),
    ``evaluation.json`` (the final policy and a random agent on the same evaluation episodes)
    and ``learning_curve.png``.

    :param resume: continue from the newest saved model in ``run_dir`` (keeping the step count,
        so TensorBoard curves carry on where they were; what the killed run logged after that
        model is dropped). A finished run is only evaluated if its evaluation is missing; a run
        stopped before its first checkpoint starts over.
    :param trusted: load the checkpoint with SB3's full load, which unpickles code (for files
        the user trusts; see docs/security.md).
    :returns: the final summary (also printed by the app).
    :raises RunStopped: a signal ended the run; its message says how to continue.
    :raises WorkerFailed: an env worker process failed or was killed; the run saved a
        checkpoint at its last rollout boundary if it had passed one (the message says).
    """
    run_dir = Path(run_dir)
    lock = PidLock(run_dir / LOCK_FILE, "being trained")
    try:
        if resume:
            load_run_config(run_dir)  # a run directory at all? (before the lock creates one)
            lock.acquire()
        saved = _resumable_model(cfg, run_dir) if resume else None
        check_settings(cfg)
        method_of(cfg).check_env(cfg)
        if saved is not None and saved.steps >= cfg.total_timesteps:
            summary = _finished_summary(run_dir, saved)
            if summary is not None:  # finished, perhaps stopped while plotting
                if not (run_dir / CURVE_FILE).is_file():
                    plot_runs([run_dir], run_dir / CURVE_FILE)
                return summary
        run_config = OmegaConf.to_yaml(cfg, resolve=True)
        torch.set_num_threads(cfg.torch_threads)
        with StopOnSignal() as stop:
            learnt = _learn(cfg, run_dir, run_config, resume, saved, trusted, stop, lock)
            return evaluate_run(cfg, run_dir, learnt, stop)
    finally:
        lock.release()


def _device_twin(target: str) -> str:
    """The ``_target_`` of the tensor-env twin of the method's vec-env wrapper ``target``."""
    twins = device_twins("wrappers")
    if target in twins.values():
        return target
    if target not in twins:
        raise UserError(
            f"vec_env=device has no tensor twin of the vec-env wrapper {target}; "
            "use another vec_env"
        )
    return twins[target]


class Learnt(NamedTuple):
    """What training hands to the final evaluation."""

    model: BaseAlgorithm
    callbacks: list[BaseCallback]
    summary: dict[str, Any]  # env, algo, timesteps, steps_per_second
    n_actions: int
    trained: bool  # False: a finished run, resumed only to evaluate it


def _resumable_model(cfg: DictConfig, run_dir: Path) -> SavedModel | None:
    """The newest saved model of the run in ``run_dir``, checked against ``cfg`` (``None``:
    stopped before its first checkpoint), after removing a killed run's half-written files."""
    remove_stale_temporaries(run_dir)
    saved = latest_model(run_dir)
    if saved is not None:
        check_resumable(cfg, saved)
    return saved


def _learn(
    cfg: DictConfig,
    run_dir: Path,
    run_config: str,
    resume: bool,
    saved: SavedModel | None,
    trusted: bool,
    stop: StopOnSignal,
    lock: PidLock,
) -> Learnt:
    """Build (or load) the model and train it to ``cfg.total_timesteps``, saving the final
    model. A signal saves a checkpoint and raises :class:`RunStopped`."""
    # a run resumed before its first checkpoint starts over, dropping what it had logged
    resumed_at = None if not resume else saved.steps if saved is not None else 0
    with user_errors_of_instantiate():
        env = make_vec_env(
            cfg.env.id,
            plain(cfg.env.kwargs),
            plain(cfg.wrappers),
            cfg.n_envs,
            cfg.vec_env,
            device=check_device(cfg.device),
            compile=cfg.get("compile", False),
        )
    record = RolloutRecord()
    try:
        # the method's vec-env wrapper and the callbacks check their settings as they are
        # built, so a refused setting leaves nothing behind either
        wrapper = _method(cfg).get("vec_env_wrapper")
        if wrapper is not None:
            if isinstance(env, TensorVecEnv):  # vec_env=device: the wrapper's tensor twin
                wrapper = OmegaConf.merge(wrapper, {"_target_": _device_twin(wrapper._target_)})
            env = _build(wrapper, env)
        check_rollout_memory(cfg, env)
        check_host_buffers(cfg, env)
        with user_errors_of_instantiate():
            if saved is None:
                model = build_model(cfg, env)
            else:
                model = load_model(saved.path, cfg, env, cfg.device, trusted)
            apply_precision(cfg.get("precision", PAPER), model.policy)
            cudnn_kernels(cfg.get("cudnn_deterministic", False))
            _set_graphs(model, cfg.get("graphs", "none"))
            callbacks = run_callbacks(cfg, run_dir, run_config, record)
        # Once the envs, model and callbacks are built (a refused setting leaves nothing
        # behind), the run can be resumed from here on.
        lock.acquire()
        write_text(run_dir / CONFIG_FILE, run_config)
        if saved is None:
            model.set_logger(run_logger(run_dir / "tensorboard", resumed_at))
            sync_training_steps(env, 0)
        else:
            _continue(model, env, saved, record, run_dir, cfg.total_timesteps)
        start_steps, start_time = model.num_timesteps, time.perf_counter()
        if model.num_timesteps < cfg.total_timesteps:
            stop.phase = "training"
            log.info(
                "training %s on %s from %d to %d steps (%d envs, vec_env=%s) in %s",
                type(model).__name__,
                cfg.env.id,
                model.num_timesteps,
                cfg.total_timesteps,
                cfg.n_envs,
                getattr(cfg.vec_env, "value", cfg.vec_env),  # VecEnvKind.auto -> auto
                run_dir,
            )
            try:
                model.learn(
                    total_timesteps=cfg.total_timesteps - model.num_timesteps,
                    callback=CallbackList([stop, *callbacks]),
                    log_interval=cfg.log_interval,
                    reset_num_timesteps=saved is None,
                    progress_bar=cfg.progress_bar,
                )
            except WorkerFailed as failed:
                flush_tensorboard(model.logger)
                _stop_for_worker(model, run_dir, run_config, failed, record)
            flush_tensorboard(model.logger)  # on disk before the model that ends it
            if stop.stopped:
                _save_stop_checkpoint(model, run_dir, run_config, stop, record)
        if saved is None or not saved.final or model.num_timesteps > saved.steps:
            stop.phase = "saving the final model"
            entries = record.entries(record.boundary) if record.boundary is not None else None
            save_model_atomic(model, run_dir / "final_model.zip", run_config, entries)
        seconds = time.perf_counter() - start_time
        n_actions = int(env.action_space.n)
        if model.num_timesteps > start_steps:
            log.info(
                "trained to %d steps in %.0f s, saved final_model.zip", model.num_timesteps, seconds
            )
    finally:
        env.close()
    summary: dict[str, Any] = {
        "env": cfg.env.id,
        "algo": cfg.algo._target_.rsplit(".", 1)[-1],
        "timesteps": model.num_timesteps,
        "steps_per_second": (model.num_timesteps - start_steps) / max(seconds, 1e-9),
    }
    return Learnt(model, callbacks, summary, n_actions, model.num_timesteps > start_steps)


def _continue(
    model: BaseAlgorithm,
    env: Any,
    saved: SavedModel,
    record: RolloutRecord,
    run_dir: Path,
    total_timesteps: int,
) -> None:
    """Set the loaded ``model`` and fresh ``env`` where the run was when it saved ``saved``:
    exactly, from the checkpoint's rollout record (:mod:`~safelife_rl.training.rollout_record`),
    when the run will train on; else (an earlier version's checkpoint) the envs start new
    episodes at the saved step count."""
    rollouts = None
    if model.num_timesteps < total_timesteps:
        rollouts = read_rollouts(saved.path, model)
    iterations = rollouts.state.get("rollouts", 0) if rollouts is not None else 0
    if not isinstance(iterations, int) or iterations < 0:
        raise UserError(f"{saved.path}: damaged rollout state (rollouts {iterations!r})")
    model.set_logger(run_logger(run_dir / "tensorboard", saved.steps, iterations))
    if rollouts is None:
        sync_training_steps(env, model.num_timesteps)
    else:
        restore(model, env, rollouts, record, saved.path)


def _save_stop_checkpoint(
    model: BaseAlgorithm,
    run_dir: Path,
    run_config: str,
    stop: StopOnSignal,
    record: RolloutRecord,
) -> None:
    """Save the run as it was at its last rollout boundary (training stops one step into the
    next rollout; that step is left out) and raise :class:`RunStopped`."""
    stop.phase = "saving the stop checkpoint"
    name = _save_at_boundary(model, run_dir, run_config, record)
    signame = signal.Signals(stop.signum or signal.SIGTERM).name
    raise RunStopped(
        stop.signum or signal.SIGTERM,
        f"stopped by {signame} at {model.num_timesteps} steps (saved checkpoints/{name})",
    )


def _stop_for_worker(
    model: BaseAlgorithm,
    run_dir: Path,
    run_config: str,
    failed: WorkerFailed,
    record: RolloutRecord,
) -> None:
    """An env worker failed while the model learnt: save the run as it was at its last rollout
    boundary (where one was passed), as a signal does, and raise :class:`WorkerFailed` saying
    so."""
    if record.boundary is None:
        raise failed
    name = _save_at_boundary(model, run_dir, run_config, record)
    raise WorkerFailed(
        f"{failed}; stopped at {model.num_timesteps} steps (saved checkpoints/{name})",
        failed.trace,
    ) from failed


def report_worker_failure(prog: str, failed: WorkerFailed, advice: str) -> NoReturn:
    """End an app whose run ``failed`` with one line (and the worker's traceback before it,
    where tracebacks are wanted: ``HYDRA_FULL_ERROR=1``), exit status 1."""
    if failed.trace is not None and tracebacks_wanted():
        print(failed.trace, file=sys.stderr, end="")
    print(f"{prog}: {failed}; {advice}", file=sys.stderr)
    raise SystemExit(1)


def _save_at_boundary(
    model: BaseAlgorithm, run_dir: Path, run_config: str, record: RolloutRecord
) -> str:
    """Save the run as it was at its last rollout boundary (the weights are those it had
    there until the rollout under way is trained on); the checkpoint's name."""
    boundary = record.boundary
    assert boundary is not None, "a run that learnt has passed a rollout boundary"
    model.num_timesteps = boundary.steps
    name = f"model_{model.num_timesteps}_steps.zip"
    save_model_atomic(model, run_dir / "checkpoints" / name, run_config, record.entries(boundary))
    return name


def evaluate_run(
    cfg: DictConfig, run_dir: Path, learnt: Learnt, stop: StopOnSignal
) -> dict[str, Any]:
    """The final policy and a random agent on the evaluation episodes, written to
    ``evaluation.json``, and the learning curve plotted."""
    stop.phase = "evaluating the final model"
    summary = learnt.summary
    evaluation = next((c for c in learnt.callbacks if isinstance(c, PeriodicEvaluation)), None)
    if evaluation is not None:
        if not learnt.trained:  # a finished run resumed to evaluate it
            evaluation.init_callback(learnt.model)
        summary["trained"] = evaluation.final()
        summary["random"] = evaluation.play(random_policy(learnt.n_actions, cfg.seed))
        log.info(
            "the trained and a random agent on the same %d evaluation episodes (mean [95%% "
            "interval]):\n%s",
            summary["random"]["episodes"],
            comparison(summary),
        )
    record_hparams(learnt.model.logger, cfg, summary, learnt.model.num_timesteps)
    learnt.model.logger.close()
    stop.phase = "writing the evaluation"
    write_json(run_dir / "evaluation.json", summary)
    stop.phase = "plotting the learning curve"
    plot_runs([run_dir], run_dir / CURVE_FILE)
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as the app prints it: JSON."""
    return json.dumps(summary, indent=2)


def comparison(summary: dict[str, Any]) -> str:
    """A table of the ``trained`` and ``random`` agents' means with their 95% intervals over
    the evaluation episodes (:data:`~safelife_rl.training.evaluation.INTERVALS`)."""
    agents = {f"trained ({summary['algo']})": summary["trained"], "random": summary["random"]}
    names = [n for n in INTERVALS if all(f"mean_{n}" in a for a in agents.values())]
    rows = [["", *map(label, names)]]
    rows += [[agent, *(with_interval(means, n) for n in names)] for agent, means in agents.items()]
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows
    )
