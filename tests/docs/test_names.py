"""Every command, console script and import path the docs name exists: the code spans and
code blocks of ``docs/**/*.md`` and ``README.md`` are read for
``safelife-rl COMMAND``, ``drest COMMAND``, ``extended-envs COMMAND`` and ``python -m PACKAGE
[COMMAND]`` (the command must be a subcommand of that CLI), console scripts (each one of
``pyproject.toml``'s), and dotted paths into the three packages (each importable, as a module
or an attribute). A renamed or removed name goes to ``CHANGELOG.md`` (not read here), with
where it went."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
CLIS = {"safelife-rl": "safelife_rl", "drest": "drest", "extended-envs": "extended_envs"}
#: Names the docs give on purpose although nothing has them (a crafted config's target, in
#: the security page's example of what is refused).
NOT_NAMES = {
    "safelife_rl.x.os.system",
    "safelife-env",
    "safelife-ppo",
}  # the reference script's benchmarks (speed.md)
CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.DOTALL)
COMMAND = re.compile(
    r"^\s*(?:\$ )?(?:\.venv/bin/)?(?:(safelife-rl|drest|extended-envs)|"
    r"python3? -m (safelife_rl|drest|extended_envs)(\.[\w.]+)?)"
    r"(?: +([a-z][a-z0-9-]*))?",
    re.MULTILINE,
)
SCRIPT = re.compile(r"(?<![\w/.-])((?:safelife|drest|extended)-[a-z][a-z-]*)(?![\w.-])")
DOTTED = re.compile(r"(?<![\w./])((?:safelife_rl|drest|extended_envs)(?:\.[A-Za-z_]\w*)+)")


def code_of(page: Path) -> list[str]:
    return [m.group(1) or m.group(2) for m in CODE.finditer(page.read_text(encoding="utf-8"))]


@cache
def subcommands(package: str) -> frozenset[str]:
    usage = subprocess.run(
        [sys.executable, "-m", package, "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return frozenset(re.search(r"\{([a-z0-9,-]+)\}", usage).group(1).split(","))


def scripts() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])


def importable(dotted: str) -> bool:
    """A module (found without running it: ``__main__`` modules run when imported) or an
    attribute path below one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:cut]))
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if cut == len(parts):
            return True
        found = importlib.import_module(".".join(parts[:cut]))
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def names() -> tuple[
    list[tuple[str, str, str | None]], list[tuple[str, str]], list[tuple[str, str]]
]:
    """(page, package, command or None) of each command, (page, script), (page, dotted)."""
    commands, found_scripts, dotted = [], [], []
    for page in PAGES:
        where = str(page.relative_to(ROOT))
        for code in code_of(page):
            for match in COMMAND.finditer(code):
                script, package, module, command = match.groups()
                if module:  # python -m package.module: a module with its own main
                    dotted.append((where, package + module))
                    continue
                commands.append((where, package or CLIS[script], command))
            found_scripts += [(where, s) for s in SCRIPT.findall(code)]
            dotted += [
                (where, d.rstrip("."))
                for d in DOTTED.findall(code)
                if not d.endswith((".py", ".md", ".yaml"))
            ]
    return commands, found_scripts, dotted


COMMANDS, SCRIPTS, DOTTED_NAMES = names()


def test_the_docs_name_commands_scripts_and_modules():
    assert len(COMMANDS) > 50 and len(SCRIPTS) > 20 and len(DOTTED_NAMES) > 30


@pytest.mark.parametrize(("page", "package", "command"), sorted(set(COMMANDS), key=str))
def test_every_command_exists(page, package, command):
    if command is not None and not command.startswith("-"):
        assert command in subcommands(package), f"{page}: {package} has no command {command!r}"


@pytest.mark.parametrize(("page", "script"), sorted(set(SCRIPTS)))
def test_every_console_script_exists(page, script):
    if script not in NOT_NAMES:
        assert script in scripts(), f"{page}: no console script {script!r} is installed"


@pytest.mark.parametrize(("page", "dotted"), sorted(set(DOTTED_NAMES)))
def test_every_import_path_exists(page, dotted):
    if dotted not in NOT_NAMES:
        assert importable(dotted), f"{page}: {dotted} does not exist"
