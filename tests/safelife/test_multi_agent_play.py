"""Terminal play of one agent of a multi-agent level, driven by scripted key presses."""

import io

import imageio.v3 as iio
import numpy as np
import pytest

from safelife_rl.apps.cli import main
from safelife_rl.apps.play import play_agent
from safelife_rl.engine import cells
from safelife_rl.engine.level_files import save_levels
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safelife_rl.envs.multi_agent_env import SafeLifeParallelEnv
from safety_rl_common.errors import UserError


def corridor() -> MultiAgentLevel:
    """Agent 0 at (2, 1), agent 1 at (2, 3), the open exit at (2, 5)."""
    board = np.zeros((5, 7), np.uint16)
    board[2, 1] = cells.KINDS["player"] | cells.BLUE
    board[2, 3] = cells.KINDS["player"] | cells.RED
    board[2, 5] = cells.KINDS["exit"]
    return MultiAgentLevel(
        board,
        np.zeros_like(board),
        ((2, 1), (2, 3)),
        ("blue", "red"),
        np.tile(DEFAULT_POINTS_TABLE, (2, 1, 1)),
    )


def test_the_controlled_agent_walks_out_while_the_other_stands_still(tmp_path):
    env = SafeLifeParallelEnv([corridor(), corridor()], time_limit=20)
    out = io.StringIO()
    result = play_agent(
        env, ["right", "right", "next", "quit"], out, agent=1, gif=tmp_path / "session.gif"
    )
    assert result["levels_completed"] == 1
    screens = out.getvalue().split("\x1b[2J")[1:]
    assert len(screens) == 4  # a frame per key until q
    assert "agent_1 (red, you)" in screens[2] and "exited" in screens[2]
    assert env.game.agent_locs[0].tolist() == [[2, 1], [2, 3]]  # level 2 has started
    assert "(2/2)" in screens[3]
    assert iio.imread(tmp_path / "session.gif").shape[-1] == 3


def test_the_others_follow_their_policy():
    env = SafeLifeParallelEnv([corridor()], time_limit=20)
    seen = []

    def others(observations):
        seen.append(observations.shape)
        return np.full(len(observations), 4)  # move left

    play_agent(env, ["wait", "wait"], io.StringIO(), agent=1, others=others)
    assert seen == [(1, 15, 15, 19)] * 2
    assert env.game.agent_locs[0, 0].tolist() == [2, 6]  # agent 0 went left, round the edge


def test_command_line_refuses_bad_input(tmp_path, capsys):
    save_levels([corridor()], tmp_path / "corridor.npz")
    with pytest.raises(UserError, match="agent must be 0-1, got 2"):
        play_agent(SafeLifeParallelEnv(tmp_path / "corridor.npz"), [], io.StringIO(), agent=2)
    with pytest.raises(SystemExit):
        main(["play-multi", "nowhere"])
    assert "is neither a multi-agent task" in capsys.readouterr().err
