"""Worker processes (subprocess envs, level generators) leave signals to the main process.

Ctrl-C in a terminal and SLURM's SIGTERM reach every process of the job. The main process stops
the run cleanly and closes its workers itself; a worker that died first would break its pipe
mid-step and bury the stop under tracebacks. So a worker ignores SIGINT, and SIGTERM from any
process but the one that made it: that one's SIGTERM (``Process.terminate``, which
``multiprocessing`` sends its daemonic children when Python exits, and Gymnasium's
``AsyncVectorEnv`` when it closes or is collected unclosed) ends it, so the maker's exit never
waits on it. And a worker whose maker was killed outright (SIGKILL) would wait forever on a pipe
its siblings keep open, so on Linux it asks the kernel to end it with its parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

_PR_SET_PDEATHSIG = 1
_watching: set[int] = set()  # processes whose parent is being watched (one thread each)
_stopping = threading.Event()  # a signal asked this process to stop (see note_stop_signal)


def detach_from_signals(maker: int | None = None) -> None:
    """Run first in a worker process: ignore SIGINT, end on SIGTERM only from ``maker`` (the
    process that started this one: by default the parent), die with the parent.

    Where Python cannot wait for a signal in a thread (``signal.sigwaitinfo``: not on macOS
    or Windows), SIGTERM has its default action: it ends the worker, whoever sends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the maker's handler, copied by fork
    if hasattr(signal, "sigwaitinfo"):
        _end_on_sigterm_from(os.getppid() if maker is None else maker)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _end_on_sigterm_from(maker: int) -> None:
    """Hold SIGTERM in every thread of this process (threads started later inherit the mask);
    a daemon thread takes each one and ends the process if ``maker`` sent it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def take() -> None:
        while signal.sigwaitinfo({signal.SIGTERM}).si_pid != maker:
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)  # the default action here: the process ends

    threading.Thread(target=take, name="sigterm-from-maker", daemon=True).start()


@dataclass(frozen=True)
class InWorker:
    """``factory``, called after :func:`detach_from_signals` when called in another process than
    the one that made this (a worker), which may end it with SIGTERM. In the maker's own
    process it is only called: Gymnasium's ``AsyncVectorEnv`` makes one env there first, to
    read its spaces."""

    factory: Callable[[], Any]
    home: int = field(default_factory=os.getpid)

    def __call__(self) -> Any:
        if os.getpid() != self.home:
            detach_from_signals(self.home)
        return self.factory()


def exit_with_parent(grace: float = 60.0, poll: float = 0.2) -> None:
    """End this process when its parent ends, however the parent ended (SIGKILL included):
    a daemon thread watches the parent's pid; once the process has been handed to another
    parent it gets SIGTERM (a training run stops at its next rollout boundary and saves a
    checkpoint; none if a signal already asked it to stop, :func:`note_stop_signal`), and
    SIGKILL ``grace`` seconds later if it is still alive.

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
        if not _stopping.is_set():
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def note_stop_signal() -> None:
    """Say that a signal has asked this process to stop (its handler calls this): when its
    parent is gone, :func:`exit_with_parent` sends it no SIGTERM, which would be a second
    signal and cut the stop short (a signal that reaches every process, as SLURM's does, ends
    the parent too); its SIGKILL after the grace stays."""
    _stopping.set()


def end_by_signal(signum: int) -> NoReturn:
    """End this process by ``signum``'s default action, once the process has handled it (saved
    what it had): its parent sees it ended by the signal, and a pool's worker process (a
    launcher's) ends, rather than wait for more work that will never come."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a closed pipe: its reader is gone
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)  # the signal's default action ignores it (SIGCHLD, say)
