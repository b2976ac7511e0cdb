"""Saving matplotlib figures so that a crash never leaves a half-written image behind: the
figures of every command of the three packages go through :func:`save_figure`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from safelife_rl.common.files import atomic_path


def save_figure(fig: Figure, path: str | os.PathLike, **savefig: Any) -> Path:
    """Write ``fig`` to ``path`` (its format from the suffix) through a temporary file renamed
    into place, then close it; ``savefig`` goes to :meth:`Figure.savefig` (``dpi=...``)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **savefig)
    plt.close(fig)
    return Path(path)
