"""The docs site builds with ``mkdocs build --strict``, its generated pages cover the registry,
and the README keeps its two commands first and links only to pages that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_site(out: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-5000:]


def test_the_site_builds_strictly(tmp_path):
    """One build (about 20 s), checked by the functions below: a build per test would repeat it
    in every pytest-xdist worker."""
    build_site(tmp_path)
    check_every_page_and_figure(tmp_path)
    check_the_ids_page_lists_every_registered_id(tmp_path)
    check_the_api_pages_are_rendered_from_the_docstrings(tmp_path)
    check_command_pages_show_the_current_help(tmp_path)


def check_every_page_and_figure(site: Path) -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        if "hooks" in page.parts:
            continue
        relative = page.relative_to(ROOT / "docs").with_suffix("")
        html = (
            site / relative / "index.html"
            if relative.name != "index"
            else site / relative.parent / "index.html"
        )
        assert html.is_file(), f"{page} was not built"
    for figure in (ROOT / "docs").glob("*.png"):
        assert (site / figure.name).is_file()


def check_the_ids_page_lists_every_registered_id(site: Path) -> None:
    import gymnasium as gym

    import drest  # noqa: F401
    import extended_envs  # noqa: F401
    import safelife_rl  # noqa: F401

    html = (site / "reference" / "ids" / "index.html").read_text()
    ids = [
        k
        for k, s in gym.registry.items()
        if s.namespace in ("safelife_rl", "drest", "extended_envs")
    ]
    assert len(ids) == 24
    for env_id in ids:
        assert f"<code>{env_id}</code>" in html
        env = gym.make(env_id)
        assert repr(env.action_space) in html
        env.close()


def check_the_api_pages_are_rendered_from_the_docstrings(site: Path) -> None:
    from safelife_rl.training import SafeLifeCNN

    html = (site / "api" / "safelife_rl" / "index.html").read_text()
    assert 'id="safelife_rl.training.features.SafeLifeCNN"' in html
    first_line = SafeLifeCNN.__doc__.split("\n")[0].split("(")[0]
    assert first_line in html
    for package in ("drest", "extended_envs"):
        assert (site / "api" / package / "index.html").is_file()


def check_command_pages_show_the_current_help(site: Path) -> None:
    html = (site / "commands" / "make_suites" / "index.html").read_text()
    assert "--check" in html and "usage: python -m safelife_rl make-suites" in html


def test_readme_starts_with_the_two_make_commands_and_links_to_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert lines[2:6] == [
        "```bash",
        (
            "make run    # set up .venv if needed, then run the main job on its defaults "
            "(TensorBoard logs in outputs/)"
        ),
        "make test   # set up .venv if needed, then run the whole test suite",
        "```",
    ]
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith("http")]
    assert len(local) >= 20
    for link in local:
        assert (ROOT / link).exists(), link
