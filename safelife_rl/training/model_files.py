"""Loading SB3 model files without running code from them.

An SB3 ``.zip`` holds network weights (``*.pth``, read by ``torch.load(weights_only=True)``)
and a JSON ``data`` entry whose values marked ``":serialized:"`` (the policy class, spaces,
schedules, buffers) SB3 unpickles with cloudpickle: a crafted file runs code there.
:func:`load_model` rebuilds every saved value but the training progress from the run's config
and env instead, so it unpickles nothing; ``trusted=True`` is SB3's own full load, for files the
user trusts.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import zipfile
import zlib
from pathlib import Path
from typing import Any

import stable_baselines3
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm

from safelife_rl.training.models import build_model, training_target
from safety_rl_common.errors import UserError
from safety_rl_common.files import check_archive, check_readable_file

#: The saved values a safe load takes from the file (plain JSON numbers): how far training got.
#: Everything else (hyperparameters, spaces, schedules, buffers) comes from the rebuilt model.
PROGRESS = (
    "num_timesteps", "_total_timesteps", "_num_timesteps_at_start", "start_time", "_episode_num",
    "_current_progress_remaining", "_n_updates", "_n_calls", "exploration_rate",
)  # fmt: skip
#: The :data:`PROGRESS` values that count steps, episodes, updates or calls: whole numbers.
COUNTS = (
    "num_timesteps",
    "_total_timesteps",
    "_num_timesteps_at_start",
    "_episode_num",
    "_n_updates",
    "_n_calls",
)
#: The largest count a file may give (2**53: exact as a float, far past any run).
MAX_COUNT = 2**53
MAX_DATA_BYTES = 64 << 20
#: What SB3's load raises on a file that is corrupt or does not fit the model.
LOAD_ERRORS = (
    ValueError, TypeError, KeyError, RuntimeError, AssertionError, pickle.UnpicklingError,
    zipfile.BadZipFile, zlib.error, EOFError,
)  # fmt: skip


def read_model_file(path: str | Path) -> tuple[bytes, dict[str, Any]]:
    """The file's bytes and its ``data`` entry as plain JSON (nothing unpickled)."""
    check_readable_file(path)
    content = Path(path).read_bytes()
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            check_archive(archive, path)  # SB3 reads every member whole
            info = archive.getinfo("data")
            if info.file_size > MAX_DATA_BYTES:
                raise UserError(
                    f"{path}: its data entry has {info.file_size} bytes, over the "
                    f"{MAX_DATA_BYTES} an SB3 model's has"
                )
            data = json.loads(archive.read(info))
    except (zipfile.BadZipFile, KeyError, ValueError, EOFError) as error:
        if isinstance(error, UserError):
            raise
        raise UserError(
            f"{path}: not an SB3 model file (a zip with a JSON data entry): {error}"
        ) from error
    if not isinstance(data, dict):
        raise UserError(f"{path}: its data entry is not a JSON object")
    return content, data


def saved_algo(data: dict[str, Any], path: str | Path) -> str:
    """The algorithm (``PPO``, ``A2C`` or ``DQN``) whose ``save`` wrote ``data``, told by the
    values only it saves."""
    if "exploration_schedule" in data:
        return "DQN"
    if "clip_range" in data:
        return "PPO"
    if "rollout_buffer_class" in data:
        return "A2C"
    raise UserError(f"{path}: not a PPO, A2C or DQN model (its data has none of their values)")


def observation_shape(data: dict[str, Any]) -> tuple[int, ...] | None:
    """The shape of the model's observations, from the readable copy SB3 saves next to the
    pickled space (``None`` if it is missing or odd)."""
    space = data.get("observation_space")
    shape = space.get("_shape") if isinstance(space, dict) else None
    valid = isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape
    )
    return tuple(shape) if valid else None


def _rebuilt_values(data: dict[str, Any], fresh: BaseAlgorithm, path: Path) -> dict[str, Any]:
    """SB3's ``custom_objects``: every value of ``data`` but the :data:`PROGRESS` numbers, taken
    from ``fresh``. Values a fresh model does not save are refused."""
    saved = set(vars(fresh)) - set(fresh._excluded_save_params())
    unknown = sorted(set(data) - saved)
    if unknown:
        raise UserError(
            f"{path}: saved values {', '.join(unknown)} are not values of a "
            f"{type(fresh).__name__} model"
        )
    for key in PROGRESS:
        value = data.get(key, 0)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise UserError(f"{path}: saved value {key}={value!r} is not a finite number")
        if key in COUNTS and not (isinstance(value, int) and 0 <= value <= MAX_COUNT):
            raise UserError(
                f"{path}: saved count {key}={value!r} is not an integer in [0, {MAX_COUNT}]"
            )
    return {key: getattr(fresh, key) for key in data if key not in PROGRESS}


def load_model(
    path: str | Path,
    cfg: DictConfig | None,
    env: Any,
    device: str = "auto",
    trusted: bool = False,
) -> BaseAlgorithm:
    """The model saved at ``path``, to continue or run on ``env``.

    Without ``trusted`` nothing in the file is unpickled: a model built from ``cfg`` (the run's
    resolved config, its ``_target_`` s checked by
    :func:`~safelife_rl.training.config_targets.check_targets`) and ``env`` gives every saved
    value but the :data:`PROGRESS` counters, and SB3 loads those, the weights and the optimizer
    state as in its full load, so training continues exactly as after it (only the episode
    statistics behind ``rollout/ep_*_mean`` start afresh).

    :param cfg: needed unless ``trusted``; its algorithm must be the file's.
    :param trusted: SB3's full load, which runs code pickled in the file.
    :raises UserError: the file is not a model of the config's algorithm, or does not fit it.
    """
    path = Path(path)
    content, data = read_model_file(path)
    algo = saved_algo(data, path)
    if cfg is None and not trusted:
        raise UserError(f"{path}: loading it without unpickling needs its run's config")
    cls = get_class(cfg.algo._target_) if cfg is not None else getattr(stable_baselines3, algo)
    if not issubclass(cls, getattr(stable_baselines3, algo)):  # PPOLagrangian saves as a PPO
        raise UserError(f"{path}: a {algo} model, not {cls.__name__}")
    if cfg is not None:
        cls = get_class(training_target(cfg))  # e.g. PPO's device twin (same saved data)
    custom_objects = None
    if not trusted:
        fresh = build_model(OmegaConf.merge(cfg, {"device": device}), env)
        custom_objects = _rebuilt_values(data, fresh, path)
        del fresh
    try:
        model = cls.load(io.BytesIO(content), env=env, device=device, custom_objects=custom_objects)
    except LOAD_ERRORS as error:
        raise UserError(
            f"{path}: cannot be loaded as the {algo} model of this run: "
            f"{' '.join(str(error).split())[:300]}"
        ) from error
    check_loaded = getattr(model, "check_loaded", None)  # a method's own state, e.g. a multiplier
    if check_loaded is not None:
        check_loaded(str(path))
    return model
