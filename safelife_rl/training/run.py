"""One training run from a composed config: build envs, model and callbacks, learn, save,
evaluate. :mod:`safelife_rl.train` is the Hydra app around it."""

from __future__ import annotations

import inspect
import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import configure

from ..files import write_json, write_text
from .callbacks import PeriodicEvaluation, StopOnSignal, TrainingClock, checkpoints
from .envs import make_env, make_vec_env
from .evaluation import random_policy
from .files import save_model_atomic
from .plots import plot_runs
from .wrappers import sync_training_steps

CONFIG_FILE = "config.yaml"


def plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if node is not None else None


def _eval_env_factory(cfg: DictConfig) -> partial:
    eval_kwargs = plain(cfg.env.get("eval_kwargs")) or {}
    kwargs = {**plain(cfg.env.kwargs), **eval_kwargs}
    if "levels" in eval_kwargs and "workers" not in eval_kwargs:
        kwargs.pop("workers", None)  # the training envs' level workers: a fixed suite needs none
    return partial(make_env, cfg.env.id, kwargs, None)


def _callbacks(cfg: DictConfig, run_dir: Path) -> list[BaseCallback]:
    """The configured callbacks; each gets ``run_dir`` and ``make_env`` (an evaluation env
    factory) if its constructor takes them."""
    context = {"run_dir": run_dir, "make_env": _eval_env_factory(cfg)}
    built = [TrainingClock()]
    for config in (cfg.callbacks or {}).values():
        if config is None:
            continue
        params = inspect.signature(get_class(config._target_)).parameters
        extra = {k: v for k, v in context.items() if k in params}
        built.append(instantiate(config, _convert_="all", **extra))
    return built


def build_model(cfg: DictConfig, env: Any) -> BaseAlgorithm:
    return instantiate(
        cfg.algo,
        policy=cfg.policy.name,
        env=env,
        policy_kwargs=instantiate(cfg.policy.kwargs, _convert_="all"),
        seed=cfg.seed,
        device=cfg.device,
        verbose=0,
        _convert_="all",
    )


def train(cfg: DictConfig, run_dir: str | Path, resume: bool = False) -> dict[str, Any]:
    """Train as ``cfg`` says, writing everything into ``run_dir``:

    ``config.yaml`` (resolved config), ``tensorboard/``, ``checkpoints/``, ``final_model.zip``,
    ``evaluations.json`` (periodic evaluations), ``evaluation.json`` (the final policy and a
    random agent on the same evaluation episodes) and ``learning_curve.png``.

    :param resume: continue from the newest checkpoint in ``run_dir/checkpoints`` (keeping the
        step count, so TensorBoard curves carry on where they were).
    :returns: the final summary (also printed by the app).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.torch_threads)
    env = make_vec_env(
        cfg.env.id, plain(cfg.env.kwargs), plain(cfg.wrappers), cfg.n_envs, cfg.vec_env
    )
    try:
        if resume:
            found = checkpoints(run_dir / "checkpoints")
            if not found:
                raise FileNotFoundError(f"no checkpoint to resume from in {run_dir}/checkpoints")
            model = get_class(cfg.algo._target_).load(found[-1], env=env, device=cfg.device)
        else:
            model = build_model(cfg, env)
        write_text(run_dir / CONFIG_FILE, OmegaConf.to_yaml(cfg, resolve=True))
        model.set_logger(configure(str(run_dir / "tensorboard"), ["tensorboard", "csv"]))
        sync_training_steps(env, model.num_timesteps)
        callbacks = _callbacks(cfg, run_dir)
        stop = StopOnSignal()
        start_steps, start_time = model.num_timesteps, time.perf_counter()
        model.learn(
            total_timesteps=max(0, cfg.total_timesteps - model.num_timesteps),
            callback=CallbackList([stop, *callbacks]),
            log_interval=cfg.log_interval,
            reset_num_timesteps=not resume,
            progress_bar=cfg.progress_bar,
        )
        seconds = time.perf_counter() - start_time
        if stop.stopped:
            name = f"model_{model.num_timesteps}_steps.zip"
            save_model_atomic(model, run_dir / "checkpoints" / name)
        else:
            save_model_atomic(model, run_dir / "final_model.zip")
    finally:
        env.close()
    if stop.stopped:
        model.logger.close()
        raise SystemExit(
            f"stopped by a signal at {model.num_timesteps} steps; continue with "
            f"resume={run_dir}"
        )
    summary: dict[str, Any] = {
        "env": cfg.env.id,
        "algo": cfg.algo._target_.rsplit(".", 1)[-1],
        "timesteps": model.num_timesteps,
        "steps_per_second": (model.num_timesteps - start_steps) / max(seconds, 1e-9),
    }
    evaluation = next((c for c in callbacks if isinstance(c, PeriodicEvaluation)), None)
    if evaluation is not None:
        summary["trained"] = evaluation.run()
        summary["random"] = evaluation.play(random_policy(env.action_space.n, cfg.seed))
    model.logger.close()
    write_json(run_dir / "evaluation.json", summary)
    plot_runs([run_dir], run_dir / "learning_curve.png")
    return summary


def load_run_config(run_dir: str | Path) -> DictConfig:
    """The resolved config a run saved when it started."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a training run directory: no {CONFIG_FILE}")
    return OmegaConf.load(path)


def format_summary(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2)
