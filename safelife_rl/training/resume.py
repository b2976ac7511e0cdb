"""What continuing a run needs: its newest saved model, the config each checkpoint was trained
with, and the checks that refuse a resume the run cannot honour.

Every checkpoint (and the final model) carries the resolved config it was trained with as a
YAML entry of its zip (see :func:`~safelife_rl.training.files.save_model_atomic`), so a resumed run
compares that with the run's ``config.yaml`` (which a user may have edited) plus the overrides
given, and refuses differences other than
:data:`RESUME_OVERRIDES`, naming them.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from safelife_rl.training.callbacks import checkpoint_steps, checkpoints
from safelife_rl.training.config_targets import check_targets
from safelife_rl.training.files import CONFIG_ENTRY
from safelife_rl.training.models import training_target
from safety_rl_common.errors import UserError
from safety_rl_common.files import check_archive, check_readable_file, remove_in_folder
from safety_rl_common.limits import YAML_SIZE_LIMIT
from safety_rl_common.yaml_files import load_yaml, read_yaml_text

CONFIG_FILE = "config.yaml"
FINAL_MODEL = "final_model.zip"

#: Settings a resumed run may change: none changes what the run learns (every host vec_env
#: plays the same episodes, level workers make the same levels, a device only changes where the
#: same computation runs, a compiled step is the eager step bit for bit, and a captured
#: rollout or update replays its eager body's kernels). A ``vec_env``
#: change that changes the class the run trains with (to or from ``device``, whose runs train
#: with the algorithm's device twin) is refused by :func:`check_resumable`.
RESUME_OVERRIDES = (
    "resume", "total_timesteps", "vec_env", "torch_threads", "progress_bar", "env.kwargs.workers",
    "device", "trust_pickle", "compile", "graphs",
)  # fmt: skip

#: A temporary file of :func:`safety_rl_common.files.atomic_path` (``.NAME.XXXXXXXX.SUFFIX``).
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}(?P<suffix>\.[^./]*)?")


@dataclass(frozen=True)
class SavedModel:
    path: Path
    steps: int
    final: bool


def check_run_files(run_dir: str | os.PathLike) -> None:
    """Refuse a run folder holding a FIFO, device or socket (through a link too), before a
    resume opens any of its files: reading a FIFO at ``evaluations.json`` or
    ``tensorboard/progress.csv`` would wait forever. Links to folders are not followed."""
    for folder, _, names in os.walk(run_dir):
        for name in names:
            path = Path(folder) / name
            try:
                mode = path.stat().st_mode
            except OSError:  # a dangling link or a loop: nothing is read through it
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise UserError(
                    f"{path}: not a regular file (a run folder holds none; a FIFO, "
                    "device or socket is never opened)"
                )


def load_run_config(run_dir: str | os.PathLike) -> DictConfig:
    """The resolved config a run saved when it started (or last resumed), refused if it names
    code outside :mod:`~safelife_rl.training.config_targets`' allowlist."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise UserError(f"{run_dir} is not a training run directory: no {CONFIG_FILE}")
    check_run_files(run_dir)
    try:
        config = OmegaConf.create(read_yaml_text(path))
    except (yaml.YAMLError, OmegaConfBaseException) as error:
        raise UserError(f"{path}: not a readable config ({error})") from None
    if not isinstance(config, DictConfig):
        raise UserError(f"{path}: not a config mapping")
    check_targets(config, str(path))  # it is instantiated: only allowlisted code may be named
    return config


def resume_config(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The saved config of the run at ``cfg.resume``, with the :data:`RESUME_OVERRIDES` given on
    the command line applied; any other override is an error.

    ``trust_pickle`` is never read from the run folder: trust in a checkpoint comes only from
    the command line of this invocation (a saved ``trust_pickle: true`` would let whoever
    wrote the folder run code through the checkpoint it also wrote)."""
    given = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    unexpected = sorted(given - set(RESUME_OVERRIDES))
    if unexpected:
        raise UserError(
            f"resume={cfg.resume} continues that run with its saved config; only "
            f"{', '.join(RESUME_OVERRIDES[1:])} may be changed, not {', '.join(unexpected)}"
        )
    saved = load_run_config(cfg.resume)
    OmegaConf.update(saved, "trust_pickle", False, force_add=True)
    for key in given - {"resume"}:
        OmegaConf.update(saved, key, OmegaConf.select(cfg, key), force_add=True)
    return saved


def _open_model_zip(path: Path) -> zipfile.ZipFile:
    """The model file's archive, its size and its members' checked against the read limit."""
    check_readable_file(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise UserError(f"{path}: not a readable model file ({error})") from None
    try:
        check_archive(archive, path)
    except UserError:
        archive.close()
        raise
    return archive


def trained_config(path: Path) -> dict[str, Any] | None:
    """The config a saved model was trained with (``None`` for models saved without one)."""
    with _open_model_zip(path) as archive:
        if CONFIG_ENTRY not in archive.namelist():
            return None
        size = archive.getinfo(CONFIG_ENTRY).file_size
        YAML_SIZE_LIMIT.check(-(-size // 1024), f"{path}: its {CONFIG_ENTRY}, inflated,")
        try:
            config = load_yaml(archive.read(CONFIG_ENTRY), f"{path} ({CONFIG_ENTRY})")
        except (yaml.YAMLError, zipfile.BadZipFile, OSError) as error:
            raise UserError(f"{path}: damaged {CONFIG_ENTRY} ({error})") from None
    if not isinstance(config, dict):
        raise UserError(f"{path}: damaged {CONFIG_ENTRY} (not a mapping)")
    return config


def saved_steps(path: Path) -> int:
    """The step count a saved SB3 model reached, read from its JSON ``data`` entry alone."""
    with _open_model_zip(path) as archive:
        try:
            data = json.loads(archive.read("data"))
            steps = data["num_timesteps"]
        except (KeyError, ValueError, TypeError, zipfile.BadZipFile, OSError) as error:
            raise UserError(f"{path}: not an SB3 model file (no step count: {error})") from None
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise UserError(f"{path}: damaged step count {steps!r}")
    return steps


def latest_model(run_dir: Path) -> SavedModel | None:
    """The newest saved model of a run: its last checkpoint, or the final model if that has at
    least as many steps (a finished run, or one extended past its end); ``None`` if the run
    was stopped before its first checkpoint."""
    found = checkpoints(run_dir / "checkpoints")
    latest = None
    if found:
        path = found[-1]
        latest = SavedModel(path, checkpoint_steps(path), final=False)
    final = run_dir / FINAL_MODEL
    if final.is_file():
        steps = saved_steps(final)
        if latest is None or steps >= latest.steps:
            latest = SavedModel(final, steps, final=True)
    return latest


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        if not node and prefix:
            return {prefix: {}}
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: node}


def _same(old: Any, new: Any) -> bool:
    """Equal settings, NaN equal to NaN (a NaN is refused by the checks, never a change)."""
    nan = isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new)
    return nan or old == new


def config_differences(trained: dict[str, Any], resumed: DictConfig) -> list[str]:
    """Settings that differ between the config a model was trained with and the one a resume
    would use, as ``key (old -> new)``, apart from :data:`RESUME_OVERRIDES`."""
    old = _flat(trained)
    new = _flat(OmegaConf.to_container(resumed, resolve=True))
    changed = []
    for key in sorted(old.keys() | new.keys()):
        if any(key == k or key.startswith(k + ".") for k in RESUME_OVERRIDES):
            continue
        if not _same(old.get(key, "<unset>"), new.get(key, "<unset>")):
            changed.append(f"{key} ({old.get(key, '<unset>')!r} -> {new.get(key, '<unset>')!r})")
    return changed


def check_resumable(cfg: DictConfig, model: SavedModel) -> None:
    """Refuse a resume whose config differs from the one ``model`` was trained with, or that
    would train it with another class (:func:`~safelife_rl.training.models.training_target`:
    a ``vec_env`` changed to or from ``device``)."""
    trained = trained_config(model.path)
    if trained is None:
        return
    changed = config_differences(trained, cfg)
    if not changed:  # the same algorithm: the class trained with can differ by vec_env only
        before, now = training_target(OmegaConf.create(trained)), training_target(cfg)
        if before != now:
            vec_env = OmegaConf.select(cfg, "vec_env")
            changed = [
                f"vec_env ({trained.get('vec_env')!r} -> {getattr(vec_env, 'value', vec_env)!r}"
                f", which trains with {now} in place of {before})"
            ]
    if changed:
        raise UserError(
            f"cannot resume from {model.path.name}: the run's {CONFIG_FILE} differs from the "
            f"config it was trained with in {'; '.join(changed)}. Resume continues the same "
            f"run; restore these settings, or start a new run with them"
        )


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete temporary files that a killed run left half-written in the run's folders (never
    through a symbolic link: the temporaries of a linked folder are left, harmless)."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints", run_dir / "tensorboard"):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            match = _TEMPORARY.fullmatch(path.name)
            if (
                match
                and path.is_file()
                and match["name"].endswith(match["suffix"] or "")
                and remove_in_folder(folder, path.name)
            ):
                removed.append(path)
    return removed
