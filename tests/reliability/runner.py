"""Run one audit case as a process and classify what it did.

A case is a command line of one of the three packages (``("safelife_rl", "train", ...)``) run
in a folder of its own with a timeout. ``fork`` runs it in a child of a process that has
imported the packages already (as ``python -m PACKAGE`` would run it, at a fraction of the
start-up cost); ``spawn`` starts ``python -m PACKAGE`` itself. Outcomes, worst first:

- ``code run``: a file appeared in the marker folder (what crafted payloads write);
- ``hang``: still running at the timeout (killed, with its whole session);
- ``killed``: ended by a signal (the memory limit, for one);
- ``traceback``: a Python traceback on stderr;
- ``multi-line``: a failure that is neither a traceback nor one line;
- ``one-line``: exit status 2 and one line ``prog: error: ...``;
- ``accepted``: exit status 0.

Besides the outcome: temporary files left anywhere in the case's folder (``half-written``),
files written by a refused case where its ``watch`` paths were (``wrote on refusal``), and
processes of the case's session alive after it ended (``orphans``).
"""

from __future__ import annotations

import importlib
import os
import re
import resource
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
#: each package's command line (what ``python -m PACKAGE`` runs)
COMMAND_LINES = {
    "safelife_rl": "safelife_rl.apps.cli",
    "drest": "drest.apps.cli",
    "extended_envs": "extended_envs.apps.cli",
}
ONE_LINE = re.compile(r"^\S.*: error: \S.*$")
#: a progress bar's line (tqdm): progress, not a message
PROGRESS = re.compile(r"\d+%\|")
#: temporaries of atomic writes (``.NAME.XXXXXXXX.ext``) and other half-written leftovers
TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}(\.[^./]*)?$|.*\.(tmp|part|partial)$")
#: more address space than this over the parent's is refused (a MemoryError, not a swapping
#: machine): a case that needs it is a case that would have exhausted a user's memory
EXTRA_ADDRESS_SPACE = 6 << 30


@dataclass(frozen=True)
class Case:
    """One hostile input. ``argv`` and ``env`` values may hold ``{case}`` (the case's folder),
    ``{fx}`` (the shared fixtures) and ``{marker}`` (the marker folder)."""

    kind: str
    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    #: bad input that must be refused; False: an edge input either refused or run cleanly
    bad: bool = True
    #: prepares the case's folder (given it and the fixtures folder) before the run
    setup: Callable[[Path, Path], None] | None = None
    #: paths (patterns as in argv) that a refusal must leave as they were
    watch: tuple[str, ...] = ()
    timeout: float = 60.0


@dataclass
class Outcome:
    case: Case
    outcome: str
    code: int | None
    seconds: float
    stderr: str
    half_written: list[str] = field(default_factory=list)
    wrote_on_refusal: list[str] = field(default_factory=list)
    orphans: int = 0

    @property
    def failed(self) -> bool:
        return (
            self.outcome not in ("one-line", "accepted")
            or (self.outcome == "accepted" and self.case.bad)
            or bool(self.half_written or self.wrote_on_refusal or self.orphans)
        )

    @property
    def last_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""


def fill(text: str, places: dict[str, Path]) -> str:
    for name, path in places.items():
        text = text.replace("{" + name + "}", str(path))
    return text


def preload() -> None:
    """Import what the commands import, once, before forking cases."""
    for module in (
        "safelife_rl.apps.cli",
        "drest.apps.cli",
        "extended_envs.apps.cli",
        "safelife_rl.apps.train",
        "safelife_rl.training",
        "safelife_rl.apps.benchmark",
        "stable_baselines3",
        "hydra",
    ):
        importlib.import_module(module)


def _limit_memory(extra: int = EXTRA_ADDRESS_SPACE) -> None:
    used = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + extra, used + extra))


def _child(argv: list[str], folder: Path, env: dict[str, str], out: Path, err: Path) -> None:
    """The forked case: its own session, folder, streams and memory limit; exits with the
    status ``python -m PACKAGE`` would (3 and a traceback: the runner itself failed)."""
    try:
        os.setsid()
        os.chdir(folder)
        os.environ.update(env)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, out), (2, err)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False, buffering=1)
        sys.stderr = open(2, "w", closefd=False, buffering=1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _limit_memory()
        package, *args = argv
        sys.argv = [str(ROOT / package / "__main__.py"), *args]
        main = importlib.import_module(COMMAND_LINES.get(package, f"{package}.cli")).main
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        os._exit(3)
    code: object = 1
    try:
        code = main()
    except SystemExit as done:
        code = done.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:  # noqa: BLE001  (as the interpreter reports an uncaught error)
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def session_members(session: int) -> list[int]:
    """The live processes of a session (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _kill_session(session: int) -> int:
    members = session_members(session)
    for pid in members:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(members)


def _run_fork(argv, folder, env, out, err, timeout) -> tuple[int, int | None, bool]:
    pid = os.fork()
    if pid == 0:
        _child(argv, folder, env, out, err)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return pid, os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            _kill_session(pid)
            os.waitpid(pid, 0)
            return pid, None, True
        time.sleep(0.02)


REPO = Path(__file__).resolve().parents[2]


def _run_spawn(argv, folder, env, out, err, timeout) -> tuple[int, int | None, bool]:
    package, *args = argv
    # the case runs in its own folder: the checkout's packages (``tests`` among them) are found
    # through the path, as the forked cases find those imported already
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**env, "PYTHONPATH": path}
    with open(out, "w") as stdout, open(err, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", package, *args],
            cwd=folder,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=lambda: _limit_memory(EXTRA_ADDRESS_SPACE + (2 << 30)),
        )
        try:
            return process.pid, process.wait(timeout), False
        except subprocess.TimeoutExpired:
            _kill_session(process.pid)
            process.wait()
            return process.pid, None, True


def _snapshot(paths: list[Path]) -> dict[str, tuple[int, int]]:
    """Size and time of every file under ``paths`` (a folder: present), but the runner's own."""
    seen = {}
    for root in paths:
        if root.is_symlink() or not root.exists():
            continue
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            try:
                info = path.lstat()
            except OSError:
                continue
            if path.name.endswith(".audit"):
                continue
            seen[str(path)] = (0, 0) if path.is_dir() else (info.st_size, info.st_mtime_ns)
    return seen


def _temporaries(folder: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + dirnames:
            if TEMPORARY.match(name) and name not in (".hydra",):
                found.append(os.path.relpath(os.path.join(dirpath, name), folder))
    return found


def classify(code: int | None, hung: bool, stderr: str, marked: bool) -> str:
    if marked:
        return "code run"
    if hung:
        return "hang"
    if code is not None and code < 0:
        return "killed"
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if code == 0:
        return "accepted"
    lines = [line for line in stderr.splitlines() if line.strip() and not PROGRESS.search(line)]
    if code == 2 and len(lines) == 1 and ONE_LINE.match(lines[0]):
        return "one-line"
    return "multi-line"


def run_case(
    case: Case, work: Path, fixtures: Path, markers: Path, mode: str = "fork", index: int = 0
) -> Outcome:
    """Run ``case`` in ``work/NNN_name`` and classify it."""
    folder = work / f"{index:03d}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', case.name)[:60]}"
    folder.mkdir(parents=True)
    places = {"case": folder, "fx": fixtures, "marker": markers}
    if case.setup is not None:
        case.setup(folder, fixtures)
    argv = [fill(arg, places) for arg in case.argv]
    env = {key: fill(value, places) for key, value in case.env.items()}
    watched = [Path(fill(path, places)) for path in case.watch]
    before = _snapshot(watched)
    markers_before = set(os.listdir(markers))
    out, err = folder / ".stdout.audit", folder / ".stderr.audit"
    start = time.perf_counter()
    run = _run_fork if mode == "fork" else _run_spawn
    session, code, hung = run(argv, folder, env, out, err, case.timeout)
    seconds = time.perf_counter() - start
    time.sleep(0.2)  # a worker that dies with its parent has a moment to go
    orphans = _kill_session(session)  # the case's session: every process it started
    stderr = err.read_text(errors="replace")
    marked = set(os.listdir(markers)) != markers_before
    for name in set(os.listdir(markers)) - markers_before:
        (markers / name).unlink()
    outcome = classify(code, hung, stderr, marked)
    result = Outcome(case, outcome, code, seconds, stderr, _temporaries(folder), [], orphans)
    if outcome in ("one-line", "multi-line", "traceback"):
        after = _snapshot(watched)
        result.wrote_on_refusal = sorted(
            os.path.relpath(p, folder)
            for p in set(after) | set(before)
            if after.get(p) != before.get(p)
        )
    return result
