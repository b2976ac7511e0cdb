"""Writing run outputs atomically: a temporary file in the same folder, then a rename."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def save_model_atomic(model: Any, path: str | os.PathLike) -> Path:
    """``model.save`` (an SB3 algorithm) to ``path`` through a temporary file."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.tmp.zip")
    model.save(temporary)
    os.replace(temporary, path)
    return path
