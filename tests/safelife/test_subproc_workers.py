"""Env worker processes (``vec_env=subproc``) end with the process that made them: a script that
never closes its vector env, a worker that raises or is killed, Ctrl-C and SIGTERM of a training
run. Each case runs in a session of its own, with a timeout; no process of the session may be
left once it ends."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.reliability.runner import session_members

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
#: A module registering ``failing/CartPole-v0``: CartPole whose env raises at its 60th step.
FAILING_ENV = """
import gymnasium as gym

class Failing(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 60:
            raise ValueError("the env broke\\non two lines")
        return self.env.step(action)

def make(**kwargs):
    return Failing(gym.make("CartPole-v1"))

gym.register("failing/CartPole-v0", entry_point=make)
"""
#: DQN on CartPole in two env workers; no periodic checkpoint (a stopped run saves its own).
TRAIN = [
    "experiment=cartpole-ignore-rewards",
    "n_envs=2",
    "vec_env=subproc",
    "progress_bar=false",
    "callbacks.evaluation=null",
    "callbacks.checkpoint.save_every=1000000",
    "total_timesteps=100000000",
]


def start(args, cwd, env=None):
    return subprocess.Popen(
        args,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{cwd}", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(process):
    """The process's exit status, output and errors once it and every process of its session
    ended (killed at the timeout, and the test failed)."""
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"still running after {TIMEOUT} s: {err[-2000:]}")
    deadline = time.monotonic() + 5
    while session_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_members(process.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left: {left}"
    return process.returncode, out, err


def script(tmp_path, body):
    (tmp_path / "failing_env.py").write_text(FAILING_ENV)
    path = tmp_path / "script.py"
    path.write_text(
        "import os, signal, numpy as np\n"
        "from safelife_rl.training.envs import make_vec_env\n" + textwrap.dedent(body)
    )
    return start([sys.executable, str(path)], tmp_path)


@pytest.mark.parametrize("end", ["returns", "ctrl-c"])
def test_a_script_that_never_closes_its_vector_env_exits(tmp_path, end):
    """Python's exit ends (``terminate``) its daemonic children and waits for them: the workers
    end on that SIGTERM from their maker."""
    process = script(
        tmp_path,
        f"""
        v = make_vec_env("CartPole-v1", {{}}, None, 2, "subproc")
        v.reset()
        print("reset", flush=True)
        while "{end}" == "ctrl-c":
            v.step(np.zeros(2, np.int64))
        """,
    )
    assert process.stdout.readline() == "reset\n"
    if end == "ctrl-c":
        os.killpg(process.pid, signal.SIGINT)
    code, _, err = finish(process)
    assert code == (-signal.SIGINT if end == "ctrl-c" else 0), err


@pytest.mark.parametrize("failure", ["killed", "raises"])
def test_a_failing_worker_raises_one_line_and_the_script_exits(tmp_path, failure):
    process = script(
        tmp_path,
        f"""
        v = make_vec_env("failing_env:failing/CartPole-v0", {{}}, None, 2, "subproc")
        v.reset()
        if "{failure}" == "killed":
            os.kill(v.vector.processes[1].pid, signal.SIGKILL)
        try:
            for _ in range(100):
                v.step(np.zeros(2, np.int64))
        except Exception as failed:
            print(failed)
        """,
    )
    code, out, err = finish(process)
    assert code == 0, err
    assert out in (
        ["env worker 1 was killed by SIGKILL\n"]
        if failure == "killed"
        else ["env worker 0 failed: ValueError: the env broke on two lines\n"]
        + ["env worker 1 failed: ValueError: the env broke on two lines\n"]
    ), out
    assert "Traceback" not in err and "ERROR" not in err, err


def children(pid):
    """The child processes of ``pid`` that are not a ``multiprocessing`` resource tracker."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if ppid == pid and b"resource_tracker" not in command:
                found.append(int(entry.name))
    return found


def train(tmp_path, *overrides):
    """``safelife_rl train`` of :data:`TRAIN` into ``tmp_path/run``, once it has trained a
    while (a rollout logged)."""
    (tmp_path / "failing_env.py").write_text(FAILING_ENV)
    run = tmp_path / "run"
    process = start(
        [sys.executable, "-m", "safelife_rl", "train", *TRAIN, *overrides, f"hydra.run.dir={run}"],
        tmp_path,
    )
    deadline = time.monotonic() + TIMEOUT
    while not (run / "tensorboard" / "progress.csv").exists() and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return process, run


def stop_line(err):
    """The run's last line of errors, which must be its only one apart from warnings."""
    lines = [line for line in err.splitlines() if line.strip() and "Warning" not in line]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def saved_checkpoint(line, run):
    name = line.split("(saved checkpoints/", 1)[1].split(")", 1)[0]
    assert (run / "checkpoints" / name).is_file()


def test_training_with_a_killed_worker_ends_with_one_line_and_a_checkpoint(tmp_path):
    process, run = train(tmp_path)
    workers = children(process.pid)
    assert len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)
    code, _, err = finish(process)
    line = stop_line(err)
    assert code == 1 and "env worker 1 was killed by SIGKILL; stopped at " in line, err
    assert line.endswith(f"; continue with resume={run}")
    saved_checkpoint(line, run)


def test_training_with_a_worker_that_raises_ends_with_one_line_and_a_checkpoint(tmp_path):
    process, run = train(tmp_path, "env.id=failing_env:failing/CartPole-v0")
    code, _, err = finish(process)
    line = stop_line(err)
    assert code == 1 and "failed: ValueError: the env broke on two lines; stopped at " in line
    saved_checkpoint(line, run)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("to", ["trainer", "session"])
def test_a_signal_to_training_ends_every_worker_with_a_checkpoint(tmp_path, signum, to):
    """``session``: every process, as a terminal's Ctrl-C or SLURM's SIGTERM; ``trainer``:
    the training process alone, as ``kill`` does."""
    process, run = train(tmp_path)
    (os.killpg if to == "session" else os.kill)(process.pid, signum)
    code, _, err = finish(process)
    line = stop_line(err)
    assert code == 128 + signum and f"stopped by {signal.Signals(signum).name} at " in line
    saved_checkpoint(line, run)
