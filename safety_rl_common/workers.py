"""Worker processes (subprocess envs, level generators) leave signals to the main process.

Ctrl-C in a terminal and SLURM's SIGTERM reach every process of the job. The main process stops
the run cleanly and closes its workers itself; a worker that died first would break its pipe
mid-step and bury the stop under tracebacks. And a worker whose parent was killed outright
(SIGKILL) would wait forever on a pipe its siblings keep open, so on Linux it asks the kernel to
end it with its parent.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_PR_SET_PDEATHSIG = 1
_watching: set[int] = set()  # processes whose parent is being watched (one thread each)


def detach_from_signals() -> None:
    """Run first in a worker process: ignore SIGINT and SIGTERM, die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass(frozen=True)
class InWorker:
    """``factory``, called after :func:`detach_from_signals` when called in another process than
    the one that made this (a worker). In the maker's own process it is only called: Gymnasium's
    ``AsyncVectorEnv`` makes one env there first, to read its spaces."""

    factory: Callable[[], Any]
    home: int = field(default_factory=os.getpid)

    def __call__(self) -> Any:
        if os.getpid() != self.home:
            detach_from_signals()
        return self.factory()


def exit_with_parent(grace: float = 60.0, poll: float = 0.2) -> None:
    """End this process when its parent ends, however the parent ended (SIGKILL included):
    a daemon thread watches the parent's pid; once the process has been handed to another
    parent it gets SIGTERM (a training run stops at its next rollout boundary and saves a
    checkpoint), and SIGKILL ``grace`` seconds later if it is still alive.

    For the processes of a sweep (Hydra's launcher and its job workers), which are started by
    libraries that give no hook to set ``PR_SET_PDEATHSIG`` (and that signal would come when the
    thread that started the process ends, not the process). Calling it again in the same
    process does nothing."""
    if os.getpid() in _watching:
        return
    _watching.add(os.getpid())
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
