"""The run's SB3 logger: TensorBoard and ``progress.csv`` that a resumed run continues.

A run resumed from a checkpoint at step ``S`` drops what the killed run logged after ``S``:
TensorBoard discards those events itself once the new event file opens with a purge at
``S + 1`` (its documented restart mechanism), and ``progress.csv`` keeps only its rows up to
``S``. The CSV is rewritten whole through a temporary file at every dump, so a crash leaves the
previous complete file, never half a row.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from stable_baselines3.common.logger import KVWriter, Logger, TensorBoardOutputFormat
from torch.utils.tensorboard import SummaryWriter

from ..files import write_text

STEP_KEY = "time/total_timesteps"


class ResumableTensorBoard(TensorBoardOutputFormat):
    """SB3's TensorBoard output, opened with ``purge_step`` when a run resumes."""

    def __init__(self, folder: str | os.PathLike, purge_step: int | None = None) -> None:
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
        self._is_closed = False


class AtomicCSV(KVWriter):
    """``progress.csv`` rewritten atomically at every dump; rows with a step above
    ``keep_until`` (those a resumed run will log again) are dropped when it opens."""

    def __init__(self, path: str | os.PathLike, keep_until: int | None = None) -> None:
        self.path = Path(path)
        self.keys: list[str] = []
        self.rows: list[dict[str, str]] = []
        if keep_until is not None and self.path.exists():
            with open(self.path, newline="", encoding="utf-8") as file:
                reader = csv.DictReader(file)
                self.keys = list(reader.fieldnames or [])
                self.rows = [row for row in reader if _step(row) <= keep_until]
            self._write()

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0
    ) -> None:
        row = {}
        for key, value in key_values.items():
            excluded = key_excluded.get(key)
            if (excluded is not None and "csv" in excluded) or value is None:
                continue
            if not isinstance(value, (int, float, str)):
                continue  # figures, images, videos and hparams have no CSV form
            row[key] = str(value)
        self.keys.extend(key for key in row if key not in self.keys)
        self.rows.append(row)
        self._write()

    def _write(self) -> None:
        text = io.StringIO()
        writer = csv.DictWriter(text, self.keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        write_text(self.path, text.getvalue())

    def close(self) -> None:
        pass


def _step(row: dict[str, str]) -> float:
    try:
        return float(row.get(STEP_KEY) or "nan")
    except ValueError:
        return float("nan")  # a row without a readable step is dropped (nan <= x is false)


def run_logger(folder: str | os.PathLike, resumed_at: int | None = None) -> Logger:
    """TensorBoard and CSV output in ``folder``; ``resumed_at``: the checkpoint's step count
    when the run continues one."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    purge = None if resumed_at is None else resumed_at + 1
    formats = [
        ResumableTensorBoard(folder, purge),
        AtomicCSV(Path(folder) / "progress.csv", resumed_at),
    ]
    return Logger(folder=str(folder), output_formats=formats)
