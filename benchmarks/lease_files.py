"""What a GPU lease brings back of a reproduction (``benchmarks/gpu_table1.py``,
``benchmarks/gpu_results.py``): a call returns at most :data:`MAX_FILES` files of at most
:data:`MAX_BYTES` each, so the reproduction's tables come back as files (``tableN.md``,
``report_tableN.md``, ``tableN.csv``) and everything else in one archive: the figures the report
shows (``tableN.png``, ``figure3.png``, ...), its statements (``claims_tableN.csv``), and what
the tables are made of (``sweep.json`` and each run's config, evaluations and benchmark
episodes; not the models), from which ``safelife-rl reproduce`` with the same options writes
the tables again once unpacked into its ``--out``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
from pathlib import Path

import torch

#: What one device call brings back: files, and bytes a file.
MAX_FILES = 8
MAX_BYTES = 16 * 2**20
#: The runs' files that the tables are made of (configs, evaluations, benchmark episodes).
RUN_SUFFIXES = (".json", ".csv", ".yaml")


def machine(device: str) -> str:
    """The machine in a few words, for a report's title: the GPU's name (or ``CPU``), torch,
    Python and the cores."""
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    return (
        f"{name}, torch {torch.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores"
    )


def table_files(folder: Path, command: str) -> list[Path]:
    """The reproduction's files of ``command`` (``table1``, ``table2``) in its ``--out``
    ``folder`` that come back as files: its table (markdown, CSV) and report, those written."""
    names = (f"{command}.md", f"report_{command}.md", f"{command}.csv")
    return [folder / name for name in names if (folder / name).is_file()]


def figures(folder: Path, command: str) -> list[Path]:
    """The images ``report_<command>.md`` shows (``![...](table1.png)``), those written."""
    report = folder / f"report_{command}.md"
    if not report.is_file():
        return []
    names = dict.fromkeys(re.findall(r"!\[[^\]]*\]\(([^)/]+\.png)\)", report.read_text()))
    return [folder / name for name in names if (folder / name).is_file()]


def copy_tables(folder: Path, out: Path, command: str) -> list[Path]:
    """Copy :func:`table_files` into ``out`` (nothing when ``folder`` is ``out``); the copies."""
    copies = []
    for path in table_files(folder, command):
        if folder.resolve() != out.resolve():
            shutil.copyfile(path, out / path.name)
        copies.append(out / path.name)
    return copies


def add_reproduction(archive: tarfile.TarFile, folder: Path, prefix: str = "") -> None:
    """Add to ``archive`` under ``prefix`` what ``folder`` (a reproduction's ``--out``) holds
    besides the tables and models: its settings, its runs' files (:data:`RUN_SUFFIXES`), the
    figures and statements of every command whose report is written."""
    paths = sorted(folder.glob("sweep.json")) + sorted(folder.glob("runs/*/*/*/*.*"))
    paths = [p for p in paths if p.suffix in RUN_SUFFIXES]
    for report in sorted(folder.glob("report_*.md")):
        command = report.stem.removeprefix("report_")
        paths += figures(folder, command) + sorted(folder.glob(f"claims_{command}.csv"))
    for path in paths:
        archive.add(path, prefix + str(path.relative_to(folder)))


def pack(path: Path, folders: dict[str, Path]) -> str | None:
    """Write the archive ``path`` of :func:`add_reproduction` for each ``{prefix: folder}``;
    why it would not come back from a call (``None``: it would)."""
    with tarfile.open(path, "w:gz") as archive:
        for prefix, folder in folders.items():
            if folder.is_dir():
                add_reproduction(archive, folder, prefix)
    size = path.stat().st_size
    if size > MAX_BYTES:
        return f"{path.name} is {size / 2**20:.1f} MiB, over the {MAX_BYTES // 2**20} MiB a file"
    return None
