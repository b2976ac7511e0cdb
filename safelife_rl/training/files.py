"""Writing run outputs atomically (see :func:`safelife_rl.files.atomic_path`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..files import atomic_path


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as temporary:
        Path(temporary).write_text(text)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def save_model_atomic(model: Any, path: str | os.PathLike) -> Path:
    """``model.save`` (an SB3 algorithm) to ``path`` through a temporary file."""
    with atomic_path(path) as temporary:
        model.save(temporary)
    return Path(path)
