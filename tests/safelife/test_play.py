"""Terminal play driven by scripted key presses, and GIF recording."""

import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from PIL import Image, ImageSequence

from safelife_rl import LevelFormatError, SafeLifeEnv
from safelife_rl.apps.cli import main
from safelife_rl.apps.play import play
from safelife_rl.engine.replay import load_trace
from safelife_rl.envs.video import record_episode
from safety_rl_common.errors import UserError

TRACE = Path(__file__).resolve().parents[1] / "data/safelife/traces/exit-append-still-020.npz"
ACTION_KEYS = {1: "up", 2: "right", 3: "down", 4: "left", 0: "wait"}


def test_scripted_keys_walk_to_the_exit(tmp_path):
    level, actions, _ = load_trace(TRACE)
    env = SafeLifeEnv([level, level])
    keys = [ACTION_KEYS[int(a)] for a in actions] + ["right", "next", "toggle", "quit", "left"]
    out = io.StringIO()
    result = play(env, keys, out, gif=tmp_path / "session.gif")
    screen = out.getvalue()
    assert result["levels_completed"] == 1
    assert "Level complete!" in screen and "(2/2)" in screen  # moved on with n
    assert screen.count("\x1b[2J") == len(actions) + 4  # a frame per key until q
    frames = iio.imread(tmp_path / "session.gif")
    # Identical consecutive frames (the key pressed after the end) merge into one.
    assert len(actions) < frames.shape[0] <= len(actions) + 4 and frames.shape[-1] == 3


def test_toggle_creates_life_where_the_agent_faces(benchmarks):
    env = SafeLifeEnv(benchmarks / "append-still.npz")
    result = play(env, ["wait"], io.StringIO())
    before = env.game.boards[0].copy()
    play_env = SafeLifeEnv(benchmarks / "append-still.npz")
    play(play_env, ["toggle"], io.StringIO())
    assert result["length"] == 1 and not np.array_equal(play_env.game.boards[0], before)


def test_restart_resets_the_level(benchmarks):
    env = SafeLifeEnv(benchmarks / "append-still.npz")
    out = io.StringIO()
    play(env, ["down", "down", "restart"], out)
    assert env.game.num_steps == 0 and "step 0/1000" in out.getvalue().split("\x1b[2J")[-1]


def test_play_in_a_real_terminal(benchmarks):
    """The command line in a pseudo-terminal: arrow keys as escape sequences, then q."""
    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "safelife_rl", "play", str(benchmarks / "navigation.npz")],
        stdin=child_fd,
        stdout=child_fd,
        stderr=child_fd,
        close_fds=True,
    )
    os.close(child_fd)
    output = b""

    def read_until(marker: bytes, timeout: float = 60) -> None:
        nonlocal output
        deadline = time.time() + timeout
        while marker not in output and time.time() < deadline:
            try:
                output += os.read(main_fd, 65536)
            except OSError:
                break

    read_until(b"step 0/1000")
    os.write(main_fd, b"\x1b[C\x1b[B")
    read_until(b"step 2/1000")
    os.write(main_fd, b"q")
    read_until(b"levels completed")
    assert proc.wait(timeout=30) == 0
    os.close(main_fd)
    assert b"step 2/1000" in output and b"levels completed: 0" in output


def test_record_episode_gif(benchmarks, tmp_path):
    env = SafeLifeEnv(benchmarks / "prune-still.npz", time_limit=12)
    info = record_episode(env, lambda obs: 2, tmp_path / "ep.gif", seed=0)
    frames = iio.imread(tmp_path / "ep.gif")
    assert info["length"] == 12 and frames.shape[1:] == (26 * 12, 26 * 12, 3)
    with Image.open(tmp_path / "ep.gif") as gif:  # merged repeats keep the total duration
        total = sum(frame.info["duration"] for frame in ImageSequence.Iterator(gif))
    assert abs(total - 13 * 125) <= 13 * 5  # GIF stores centiseconds


def test_record_episode_takes_the_envs_the_docs_make(tmp_path):
    import gymnasium as gym

    import drest  # noqa: F401  (registers its ids)
    from safelife_rl.envs.registration import benchmark_file
    from safelife_rl.training import ExitBonus, MovementBonus

    env = gym.make("safelife_rl/PruneStill-v1", levels=benchmark_file("prune-still"), time_limit=5)
    info = record_episode(MovementBonus(ExitBonus(env)), lambda obs: 2, tmp_path / "a.gif", 0)
    assert info["length"] == 5 and iio.imread(tmp_path / "a.gif").shape[1:] == (312, 312, 3)
    other = gym.make("drest/Example-v0", render_mode="rgb_array")
    record_episode(other, lambda obs: 2, tmp_path / "b.gif", seed=0)
    assert len(iio.imread(tmp_path / "b.gif")) > 1
    with pytest.raises(UserError, match="render_mode='rgb_array'"):
        record_episode(gym.make("drest/Example-v0"), lambda obs: 2, tmp_path / "c.gif")


def test_gymnasium_record_video(tmp_path):
    pytest.importorskip("moviepy", reason="RecordVideo needs the [video] extra")
    import gymnasium as gym

    env = gym.make(
        "safelife_rl/AppendStill-v1",
        levels=[load_trace(TRACE)[0]],
        render_mode="rgb_array",
        time_limit=8,
    )
    env = gym.wrappers.RecordVideo(env, str(tmp_path), episode_trigger=lambda i: True)
    env.reset(seed=0)
    while not any(env.step(0)[2:4]):
        pass
    env.close()
    assert [p.suffix for p in tmp_path.iterdir()] == [".mp4"]


def bad_trace(tmp_path: Path, **changes) -> Path:
    with np.load(TRACE) as data:
        arrays = {key: data[key] for key in data.files}
    path = tmp_path / "bad-trace.npz"
    np.savez(path, **{**arrays, **changes})
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        (["replay", "missing.npz"], "missing.npz: No such file or directory"),
        (["replay", "garbage.npz"], "garbage.npz: not a trace file"),
        (["replay", "trace.npz", "--seed", "-1"], "seed must be a non-negative integer, got -1"),
        (["play", "nowhere"], "'nowhere' is neither a task"),
        (["play", "append-still", "--time-limit", "0"], "time_limit must be a positive integer"),
        (["play", "--time-limit", "1.5"], "argument --time-limit: invalid int value: '1.5'"),
    ],
)
def test_command_errors_end_with_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.npz").write_bytes(b"not a trace")
    (tmp_path / "trace.npz").write_bytes(TRACE.read_bytes())
    argv = args + (["--out", "out.npz"] if args[0] == "replay" else [])
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"safelife-rl {args[0]}: error: ") and message in err
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize(
    "actions, message",
    [
        (np.array([1.0, np.nan]), "actions must be whole numbers, got nan"),
        (np.array([1.0, 1.5]), "actions must be whole numbers, got 1.5"),
        (np.array([1, 9]), "action 9 at step 1 is not 0-8"),
        (np.array([[1, 2]]), "actions must be 1-D"),
        (np.array(["up"]), "actions must be numbers"),
    ],
)
def test_replay_refuses_bad_actions(tmp_path, actions, message):
    path = bad_trace(tmp_path, actions=actions)
    with pytest.raises(LevelFormatError, match=f"{path}: {message}"):
        load_trace(path)


def test_replay_refuses_bad_levels(tmp_path):
    with pytest.raises(LevelFormatError, match="bad-trace.npz: 'level' must hold one level record"):
        load_trace(bad_trace(tmp_path, level=np.zeros(3)))
    with pytest.raises(LevelFormatError, match="bad-trace.npz: trace has no 'actions' array"):
        np.savez(tmp_path / "bad-trace.npz", level=np.load(TRACE)["level"])
        load_trace(tmp_path / "bad-trace.npz")
    with np.load(TRACE) as data:
        level = data["level"].copy()
    level["spawn_prob"] = np.inf
    with pytest.raises(LevelFormatError, match=r"bad-trace.npz level: spawn_prob inf"):
        load_trace(bad_trace(tmp_path, level=level))


def test_command_line_user_error_exit_status(tmp_path):
    """The real command: one line and status 2; --traceback shows the traceback."""
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"PK\x03\x04 not really")
    command = [sys.executable, "-m", "safelife_rl", "replay", str(garbage), "--out", "o.npz"]
    quiet = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert quiet.returncode == 2
    assert quiet.stderr.splitlines() == [
        (
            f"python -m safelife_rl replay: error: {garbage}: not a readable trace file: "
            "BadZipFile: File is not a zip file"
        )
    ]
    loud = subprocess.run(
        command + ["--traceback"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert loud.returncode == 1 and "Traceback" in loud.stderr and "LevelFormatError" in loud.stderr
