"""Saving models atomically (see :func:`safelife_rl.files.atomic_path`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..files import atomic_path


def save_model_atomic(model: Any, path: str | os.PathLike) -> Path:
    """``model.save`` (an SB3 algorithm) to ``path`` through a temporary file."""
    with atomic_path(path) as temporary:
        model.save(temporary)
    return Path(path)
