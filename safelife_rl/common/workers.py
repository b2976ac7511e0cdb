"""Worker processes (subprocess envs, level generators) leave signals to the main process.

Ctrl-C in a terminal and SLURM's SIGTERM reach every process of the job. The main process stops
the run cleanly and closes its workers itself; a worker that died first would break its pipe
mid-step and bury the stop under tracebacks. And a worker whose parent was killed outright
(SIGKILL) would wait forever on a pipe its siblings keep open, so on Linux it asks the kernel to
end it with its parent.
"""

from __future__ import annotations

import ctypes
import signal
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


def detach_from_signals() -> None:
    """Run first in a worker process: ignore SIGINT and SIGTERM, die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def in_worker(factory: Callable[[], Any]) -> Any:
    """Call ``factory`` in a worker after :func:`detach_from_signals`."""
    detach_from_signals()
    return factory()
