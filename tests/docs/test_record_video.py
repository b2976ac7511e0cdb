"""The commands of docs/using/record_video.md, run as written: rl-zoo3 trains a drest model,
``record_video`` after importing drest writes its MP4, and without the import it fails as the
page says."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "using" / "record_video.md"
VIDEO = "logs/ppo/drest-Example-v0_1/videos/final-model-ppo-drest-Example-v0-step-0-to-step-200.mp4"


def page_blocks() -> list[tuple[str, str]]:
    """(info, content) of each fenced block of the page."""
    tokens = MarkdownIt("commonmark").parse(PAGE.read_text())
    return [(t.info.strip(), t.content) for t in tokens if t.type == "fence"]


def run(line: str, cwd: Path) -> subprocess.CompletedProcess:
    words = shlex.split(line)
    assert words[0] == ".venv/bin/python", line
    return subprocess.run(
        [sys.executable, *words[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )


def test_the_pages_commands_train_and_record_and_the_plain_one_fails_as_shown(tmp_path):
    import gymnasium as gym
    from moviepy import VideoFileClip

    import drest  # noqa: F401  (registers the ids)

    blocks = page_blocks()
    assert [info for info, _ in blocks] == ["bash", "text", "bash"]
    (_, failing), (_, error), (_, recipe) = blocks
    assert error == "KeyError: 'drest/Example-v0'\n"
    commands = recipe.replace("\\\n", " ").strip().splitlines()
    assert len(commands) == 2 and "rl_zoo3.train" in commands[0]
    for command in commands:
        result = run(command, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    assert VIDEO in PAGE.read_text().replace("\n", "")
    clip = VideoFileClip(str(tmp_path / VIDEO))
    frame = gym.make("drest/Example-v0", render_mode="rgb_array")
    frame.reset(seed=0)
    assert clip.n_frames == 201 and tuple(clip.size) == frame.render().shape[1::-1]
    clip.close()

    plain = run(failing.strip(), tmp_path)  # the same model is there: only the import is missing
    assert plain.returncode != 0 and plain.stderr.strip().endswith(error.strip())
