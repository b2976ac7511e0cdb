"""The project stands on its own: the data its code and tests read is in the repository, the
shipped original suites are SafeLife 1.2.2's bytes, and nothing names a folder beside it."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from safelife_rl.envs.registration import ORIGINAL_SUITES, ORIGINAL_SUITES_DIR

ROOT = Path(__file__).resolve().parents[1]

#: SHA-256 of the original v1.0 suites as SafeLife 1.2.2 ships them.
ORIGINAL_CHECKSUMS = {
    "append-dynamic": "79c10b5f4bd3f35274ea8986643593f1052b93a07cc14a43151ac9d0ee63b0c4",
    "append-spawn": "273ff675da942c9dc77f708a775514b47dc3dcd88ece1da1ad6817b3d3ba69ab",
    "append-still": "9f76d9589e2b90c4df1d0f6cf0bc88313d515909944247973bb48e82c15b8a68",
    "navigation": "006686464fb8c50c57cb490fc282abf75492cb098070b8ffd1d523063c8f98e5",
    "prune-dynamic": "c0eb361d6a2f819be899e9a3adff82425d30999a5c05e808a7bc1248fb8d61c1",
    "prune-spawn": "476aae1f0ed0629fa2722a5008a6b574441491adaeb063bc84bfcacb3ef6db5f",
    "prune-still-hard": "87178db3584bef7de5484b77e746b85d5ead0202b7d4b2c1572593decefa3e88",
    "prune-still": "b619faaf3bb6ecf3aa49dff61123077ebe408bfaec6945af0c5fc576f69c5ada",
}

#: A path that leaves the repository: the development machine's reference folder beside it,
#: or a relative climb out of the root (``parents[N]`` past the root, ``ROOT.parent``).
OUTSIDE = re.compile(
    r"\.\./shared|[\"'/]shared/safelife|[\"'/]shared/reference|ROOT\.parent\b|REPO\.parent\b"
)


def test_the_original_suites_are_shipped_unchanged():
    assert sorted(ORIGINAL_CHECKSUMS) == sorted(ORIGINAL_SUITES)
    for task, digest in ORIGINAL_CHECKSUMS.items():
        data = (ORIGINAL_SUITES_DIR / f"{task}.npz").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, task
    assert (ORIGINAL_SUITES_DIR / "PROVENANCE.txt").is_file()


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode != 0:  # not a git checkout (a copied tree): every file
        names = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
        ]
    else:
        names = out.stdout.splitlines()
    keep = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".sh")
    return [ROOT / n for n in names if n.endswith(keep) or n in ("Makefile", ".ci/run")]


def _climbs_out(path: Path, text: str) -> list[str]:
    """Lines of ``text`` that name a place outside the repository."""
    depth = len(path.relative_to(ROOT).parts) - 1  # parents[depth] of the file is the root
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if OUTSIDE.search(line):
            found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
        for match in re.finditer(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]", line):
            if int(match.group(1)) > depth:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_nothing_reads_outside_the_repository():
    """No code, test, doc, benchmark or config names ``../shared`` or climbs above the root
    (except this test's own patterns)."""
    found = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve() or not path.is_file():
            continue
        found += _climbs_out(path, path.read_text(encoding="utf-8", errors="replace"))
    assert not found, "\n".join(found)


def test_every_test_file_named_exists():
    """A docstring, doc or note that names a test file names one that exists."""
    named = set()
    for path in _tracked_text_files():
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            named.update(re.findall(r"\btests/[\w/]+\.py\b", text))
    assert named and not sorted(n for n in named if not (ROOT / n).is_file())


@pytest.mark.parametrize(
    "line, bad",
    [
        ('TRACE = ROOT.parent / "shared" / "x.npz"', True),
        ('run("../shared/reference/baselines.sh")', True),
        ("X = Path(__file__).resolve().parents[3] / 'data'", True),
        ("X = Path(__file__).resolve().parents[1] / 'data'", False),
        ("SHARED_UPDATES.clear()", False),
    ],
)
def test_the_check_sees_a_climb(line, bad):
    assert bool(_climbs_out(ROOT / "tests" / "safelife" / "x.py", line)) == bad
