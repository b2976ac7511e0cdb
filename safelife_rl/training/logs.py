"""The run's SB3 logger: TensorBoard and ``progress.csv`` that a resumed run continues.

A run resumed from a checkpoint at step ``S`` drops what the killed run logged after ``S``:
TensorBoard discards those events itself once the new event file opens with a purge at
``S + 1`` (its documented restart mechanism), and ``progress.csv`` keeps only its rows up to
``S``.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from stable_baselines3.common.logger import KVWriter, Logger, TensorBoardOutputFormat
from torch.utils.tensorboard import SummaryWriter

from safety_rl_common.errors import UserError
from safety_rl_common.files import remove_in_folder, write_text

STEP_KEY = "time/total_timesteps"


class ResumableTensorBoard(TensorBoardOutputFormat):
    """SB3's TensorBoard output, opened with ``purge_step`` when a run resumes."""

    def __init__(self, folder: str | os.PathLike, purge_step: int | None = None) -> None:
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
        self._is_closed = False


class ResumableCSV(KVWriter):
    """``progress.csv``: each dump appends a row, flushed and synced; the file is rewritten
    whole (through a temporary file) only when a column appears or a resumed run drops the rows
    logged after its checkpoint (``keep_until``). A crash can leave at most a partial last
    line, which the next resume drops. (Rewriting it at every dump would cost 40 ms per dump by
    the end of a 2M-step run.)"""

    def __init__(self, path: str | os.PathLike, keep_until: int | None = None) -> None:
        self.path = Path(path)
        self.keys: list[str] = []
        self._file: Any = None
        if keep_until is None:  # a new run starts a new log (never deleted through a link)
            remove_in_folder(self.path.parent, self.path.name)
        elif self.path.exists():
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
                if lines and not lines[-1].endswith("\n"):
                    lines.pop()  # a row cut short by a crash
                reader = csv.DictReader(lines)
                self.keys = list(reader.fieldnames or [])
                rows = [row for row in reader if _step(row) <= keep_until]
            except (UnicodeDecodeError, csv.Error) as error:
                raise UserError(
                    f"{self.path}: not a readable progress log ({error}); restore it, "
                    "or delete it to start the log afresh"
                ) from None
            if any(None in row or None in row.values() for row in rows):
                raise UserError(
                    f"{self.path}: a row does not match the header; restore it, or "
                    "delete it to start the log afresh"
                )
            self._rewrite(rows)

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
        new = [key for key in row if key not in self.keys]
        if new or not self.path.exists():
            rows = self._read() if self.path.exists() else []
            self.keys.extend(new)
            self._rewrite([*rows, row])
            return
        if self._file is None:
            # kept open between dumps: a row is appended per dump
            self._file = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115
        csv.DictWriter(self._file, self.keys, lineterminator="\n").writerow(row)
        self._file.flush()
        os.fsync(self._file.fileno())

    def _read(self) -> list[dict[str, str]]:
        self.close()
        with open(self.path, newline="", encoding="utf-8") as file:
            return list(csv.DictReader(file))

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        self.close()
        text = io.StringIO()
        writer = csv.DictWriter(text, self.keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        write_text(self.path, text.getvalue())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _step(row: dict[str, str]) -> float:
    try:
        return float(row.get(STEP_KEY) or "nan")
    except ValueError:
        return float("nan")  # a row without a readable step is dropped (nan <= x is false)


class ResumedLogger(Logger):
    """SB3's logger, counting ``time/iterations`` on from the rollouts a resumed run had done
    (SB3 counts them from 1 at every ``learn``)."""

    def __init__(self, folder: str, output_formats: list[KVWriter], iterations: int) -> None:
        super().__init__(folder, output_formats)
        self.iterations = iterations

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        if key == "time/iterations":
            value += self.iterations
        super().record(key, value, exclude)


def run_logger(
    folder: str | os.PathLike, resumed_at: int | None = None, iterations: int = 0
) -> Logger:
    """TensorBoard and CSV output in ``folder``; ``resumed_at``: the checkpoint's step count
    when the run continues one, after ``iterations`` rollouts."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    purge = None if resumed_at is None else resumed_at + 1
    progress = ResumableCSV(Path(folder) / "progress.csv", resumed_at)  # checked first
    formats = [ResumableTensorBoard(folder, purge), progress]
    return ResumedLogger(str(folder), formats, iterations)
