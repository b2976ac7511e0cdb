"""Saving models atomically (see :func:`safety_rl_common.files.atomic_path`), each with the
config it was trained with."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

from safety_rl_common.files import atomic_path

#: The zip entry holding the resolved run config a model was trained with (plain YAML: data).
CONFIG_ENTRY = "run_config.yaml"


def save_model_atomic(
    model: Any,
    path: str | os.PathLike,
    run_config: str | None = None,
    entries: dict[str, bytes] | None = None,
) -> Path:
    """``model.save`` (an SB3 algorithm) to ``path`` through a temporary file, adding the run's
    resolved config (YAML text) as the zip entry :data:`CONFIG_ENTRY` and any other
    ``entries`` (name: content; the run's rollout record, see
    :mod:`~safelife_rl.training.rollout_record`)."""
    added = dict(entries or {})
    if run_config is not None:
        added[CONFIG_ENTRY] = run_config.encode()
    with atomic_path(path) as temporary:
        model.save(temporary)
        if added:
            with zipfile.ZipFile(temporary, "a", compression=zipfile.ZIP_DEFLATED) as archive:
                for name, content in added.items():
                    archive.writestr(name, content)
    return Path(path)
