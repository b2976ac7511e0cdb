"""Saving matplotlib figures so that a crash never leaves a half-written image behind: the
figures of every command of the three packages go through :func:`save_figure`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from safety_rl_common.errors import UserError
from safety_rl_common.files import atomic_path


def save_figure(fig: Figure, path: str | os.PathLike, **savefig: Any) -> Path:
    """Write ``fig`` to ``path`` (its format from the suffix, matplotlib's default without
    one) through a temporary file renamed into place, then close it; ``savefig`` goes to
    :meth:`Figure.savefig` (``dpi=...``)."""
    suffix = Path(path).suffix[1:].lower()
    supported = fig.canvas.get_supported_filetypes()
    if suffix and suffix not in supported:
        plt.close(fig)
        raise UserError(
            f"{path}: cannot save a figure as .{suffix}; give one of "
            f"{', '.join('.' + s for s in sorted(supported))}"
        )
    # the temporary file's name must not choose the format (without a suffix, it would)
    savefig.setdefault("format", suffix or plt.rcParams["savefig.format"])
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **savefig)
    plt.close(fig)
    return Path(path)
