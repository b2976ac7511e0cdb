"""The docs' Python examples run, and print what the docs show.

The rules (also on the site's Development page):

* Every ```` ```python ```` block of ``docs/**/*.md`` and ``README.md`` runs, on its own, in a
  fresh namespace, in an empty temporary folder.
* A block whose first line is ``# not run by the docs tests: <reason>`` is skipped, and the
  reason shows in pytest's summary. Use it only for examples too slow for CI (long training)
  or that need what CI lacks (a GPU, the user's own env).
* A block that prints must be followed directly by a ```` ```text title="Output" ```` block;
  what the block prints must match it line for line, where ``...`` stands for any text (as in
  doctest's ELLIPSIS).
* No comment in a Python block may state a decimal number (``# 0.55``): a result belongs in an
  Output block or an ``assert``, where this test checks it.
* A ```` ```bash ```` block of one ``.venv/bin/python -m ...`` command followed directly by an
  Output block is run too (with this interpreter, in an empty folder that shows the
  repository's data where the repository root does), and its standard output must match the
  Output block the same way.
* A ```` ```console ```` block is a terminal session: each ``$ .venv/bin/python ...`` line is
  run the same way, and what it prints (standard output and error together) must match the
  lines under it, up to the next ``$`` line.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
SKIP = "# not run by the docs tests:"
OUTPUT_INFO = 'text title="Output"'


@dataclass
class Example:
    page: Path
    line: int
    code: str
    output: str | None  # the Output block after it, if any
    language: str = "python"

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        first = self.code.splitlines()[0] if self.code.strip() else ""
        return first[len(SKIP) :].strip() if first.startswith(SKIP) else None


def fences(page: Path) -> list:
    return [t for t in MarkdownIt("commonmark").parse(page.read_text()) if t.type == "fence"]


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        tokens = MarkdownIt("commonmark").parse(page.read_text())
        for i, token in enumerate(tokens):
            language = token.info.strip().split(" ")[0] if token.type == "fence" else ""
            if language not in ("python", "bash", "console"):
                continue
            after = tokens[i + 1] if i + 1 < len(tokens) else None
            output = (
                after.content
                if after is not None and after.type == "fence" and after.info.strip() == OUTPUT_INFO
                else None
            )
            if language == "bash" and output is None:
                continue  # commands without a shown output are not run
            found.append(Example(page, token.map[0] + 1, token.content, output, language))
    return found


ALL = examples()
EXAMPLES = [e for e in ALL if e.language == "python"]
COMMANDS = [e for e in ALL if e.language == "bash"]
SESSIONS = [
    (e, i)
    for e in ALL
    if e.language == "console"
    for i in range(sum(line.startswith("$ ") for line in e.code.splitlines()))
]


#: What the docs' examples read, by its path from the repository root (where the docs run them).
DATA = ("tests/data", "safelife_rl/levels")


def work_folder(tmp_path: Path) -> Path:
    """An empty folder ``work`` in which :data:`DATA` lies where it lies in the repository, so
    an example's relative paths read as from the root (and nothing beside the root)."""
    work = tmp_path / "work"
    for name in DATA:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).symlink_to(ROOT / name)
    return work


def run_command(line: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """``.venv/bin/python ...`` with this interpreter, in :func:`work_folder`, the project
    importable."""
    assert line.startswith(".venv/bin/python "), line
    work_folder(tmp_path)
    return subprocess.run(
        [sys.executable, *shlex.split(line)[1:]],
        cwd=tmp_path / "work",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )


def matches(expected: str, printed: str) -> bool:
    """``printed`` equals ``expected`` line for line (trailing spaces ignored), ``...`` in
    ``expected`` matching any text."""

    def normal(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    pattern = ".*?".join(re.escape(part) for part in normal(expected).split("..."))
    return re.fullmatch(pattern, normal(printed), flags=re.DOTALL) is not None


@pytest.mark.parametrize("example", COMMANDS, ids=lambda e: e.name)
def test_command_prints_its_output(example, tmp_path):
    line = example.code.replace("\\\n", " ").strip()
    assert "\n" not in line and line.startswith(".venv/bin/python -m "), (
        f"{example.name}: a command with an Output block must be one `.venv/bin/python -m` line"
    )
    result = run_command(line, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert matches(example.output, result.stdout), (
        f"{example.name} printed:\n{result.stdout}\nthe docs show:\n{example.output}"
    )


@pytest.mark.parametrize(
    ("example", "index"), SESSIONS, ids=lambda x: str(x) if isinstance(x, int) else x.name
)
def test_console_session_prints_what_it_shows(example, index, tmp_path):
    commands = re.split(r"^\$ ", example.code, flags=re.MULTILINE)[1:]
    command, _, shown = commands[index].partition("\n")
    result = run_command(command.strip(), tmp_path)
    assert matches(shown, result.stdout + result.stderr), (
        f"{example.name} `{command}` printed:\n{result.stdout + result.stderr}\n"
        f"the docs show:\n{shown}"
    )


@pytest.fixture(scope="module", autouse=True)
def torch_one_thread():
    """Torch on one thread, as the app trains (tiny networks: on a shared 2-core machine more
    threads only wait)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def example_dir(tmp_path, monkeypatch):
    """:func:`work_folder`, the current folder while an example runs."""
    work = work_folder(tmp_path)
    monkeypatch.chdir(work)
    return work


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_example_runs_and_prints_its_output(example, example_dir, capsys):
    if example.skip_reason is not None:
        assert example.skip_reason, f"{example.name}: the skip marker needs a reason"
        pytest.skip(f"{example.name}: {example.skip_reason}")
    exec(compile(example.code, example.name, "exec"), {"__name__": "docs_example"})  # noqa: S102
    printed = capsys.readouterr().out
    if example.output is None:
        assert printed == "", f"{example.name} prints but has no Output block after it"
    else:
        assert matches(example.output, printed), (
            f"{example.name} printed:\n{printed}\nthe docs show:\n{example.output}"
        )


def test_the_docs_have_examples_and_their_rules_hold():
    assert len(EXAMPLES) >= 20 and len(COMMANDS) >= 2
    for page in PAGES:
        tokens = fences(page)
        for before, token in zip([None, *tokens], tokens):
            if token.info.strip() == OUTPUT_INFO:
                assert before is not None and before.info.strip() in ("python", "bash"), (
                    f"{page}:{token.map[0] + 1}: an Output block must follow a Python block "
                    "or a command"
                )
    for example in EXAMPLES:
        for line in example.code.splitlines():
            comment = line.split("#", 1)[1] if "#" in line else ""
            assert not re.search(r"\d\.\d", comment), (
                f"{example.name}: a number in a comment ({line.strip()!r}) is checked by "
                "nothing; print it (Output block) or assert it"
            )
        if example.skip_reason is None and "print(" in example.code:
            assert example.output is not None, f"{example.name} prints: add an Output block"


def test_matches_is_strict_outside_ellipses():
    assert matches("a 1.0\nb ...\n", "a 1.0\nb 2 3\n")
    assert not matches("a 0.55\n", "a 0.0987\n")
    assert not matches("a 1.0\n", "a 1.0\nextra line\n")
    assert matches("{'x': 1, ...}", "{'x': 1, 'y': 2}")
