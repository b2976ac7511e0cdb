"""Saving models atomically (see :func:`safelife_rl.common.files.atomic_path`), each with the config it
was trained with."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

from safelife_rl.common.files import atomic_path

#: The zip entry holding the resolved run config a model was trained with (plain YAML: data).
CONFIG_ENTRY = "run_config.yaml"


def save_model_atomic(
    model: Any, path: str | os.PathLike, run_config: str | None = None
) -> Path:
    """``model.save`` (an SB3 algorithm) to ``path`` through a temporary file, adding the run's
    resolved config (YAML text) as the zip entry :data:`CONFIG_ENTRY`."""
    with atomic_path(path) as temporary:
        model.save(temporary)
        if run_config is not None:
            with zipfile.ZipFile(temporary, "a", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(CONFIG_ENTRY, run_config)
    return Path(path)
