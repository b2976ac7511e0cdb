"""A stand-in command line for the runner's tests: ``python -m tests.reliability.fake WHAT``
behaves as a command that does WHAT (one of :data:`BEHAVIOURS`)."""

import subprocess
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    what, *rest = sys.argv[1:] if argv is None else argv
    if what == "one-line":
        print("fake: error: n must be positive, got -1", file=sys.stderr)
        return 2
    if what == "two-lines":
        print("fake: something went wrong\nsee the log", file=sys.stderr)
        return 1
    if what == "traceback":
        raise RuntimeError("a bug")
    if what == "hang":
        time.sleep(600)
    if what == "marker":  # code from a file ran: it wrote the marker
        Path(rest[0], "ran").write_text("x")
        return 0
    if what == "half-written":
        Path(".out.json.abcd1234.tmp").write_text("{")
        return 0
    if what == "write-then-refuse":
        Path("run").mkdir()
        Path("run", "config.yaml").write_text("x")
        print("fake: error: refused", file=sys.stderr)
        return 2
    if what == "orphan":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        return 0
    if what == "memory":
        return len(bytearray(64 << 30))
    return 0


BEHAVIOURS = (
    "one-line",
    "two-lines",
    "traceback",
    "hang",
    "marker",
    "half-written",
    "write-then-refuse",
    "orphan",
    "memory",
    "ok",
)
