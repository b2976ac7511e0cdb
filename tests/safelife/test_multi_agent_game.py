"""Games of several agents: the interactions the traces do not reach (exits, destroyed agents),
the two engines against each other, and single-agent levels as the one-agent case."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from safelife_rl import SafeLifeGame, load_levels
from safelife_rl.engine import cells
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel, from_level
from safelife_rl.engine.physics import execute_actions
from safelife_rl.engine.replay import load_trace
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE, EXIT_POINTS
from safelife_rl.engine.torch_game import TorchGame
from safety_rl_common.errors import UserError

TRACES = sorted(
    (Path(__file__).resolve().parents[1] / "data/safelife/traces-multiagent").glob("*.npz")
)
PLAYER = cells.KINDS["player"]
RIGHT = 2
TOGGLE_RIGHT, TOGGLE_LEFT = 6, 8

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def corridor(colors=(cells.BLUE, cells.RED), min_performance=-1.0) -> MultiAgentLevel:
    """A 5x7 board: agent 0 at (2, 1), agent 1 at (2, 3), the exit at (2, 5)."""
    board = np.zeros((5, 7), np.uint16)
    board[2, 1] = PLAYER | colors[0]
    board[2, 3] = PLAYER | colors[1]
    board[2, 5] = cells.KINDS["exit"]
    return MultiAgentLevel(
        board,
        np.zeros_like(board),
        ((2, 1), (2, 3)),
        ("a", "b"),
        np.tile(DEFAULT_POINTS_TABLE, (2, 1, 1)),
        min_performance=min_performance,
    )


def test_an_agent_cannot_enter_a_cell_another_occupies():
    game = SafeLifeGame([corridor()])
    game.step([[RIGHT, 0]])
    assert game.agent_locs[0].tolist() == [[2, 2], [2, 3]]
    game.step([[RIGHT, 0]])  # blocked by agent 1
    assert game.agent_locs[0].tolist() == [[2, 2], [2, 3]]
    game.step([[RIGHT, RIGHT]])  # agent 0 acts first, so it is still blocked
    assert game.agent_locs[0].tolist() == [[2, 2], [2, 4]]
    game.step([[RIGHT, 0]])  # now the cell is free
    assert game.agent_locs[0].tolist() == [[2, 3], [2, 4]]


def test_agents_exit_one_by_one_and_the_game_goes_on():
    game = SafeLifeGame([corridor()])
    assert game.can_exit.tolist() == [[True, True]]
    rewards, dones = game.step([[0, RIGHT]])
    assert dones.tolist() == [[False, False]]
    rewards, dones = game.step([[0, RIGHT]])  # agent 1 steps onto the exit
    assert rewards.tolist() == [[0.0, EXIT_POINTS]] and dones.tolist() == [[False, True]]
    assert game.has_exited().tolist() == [[False, True]]
    assert np.count_nonzero(game.boards[0] & cells.AGENT) == 1  # it left the board
    for _ in range(4):  # agent 0 walks from (2, 1) to the exit at (2, 5)
        rewards, dones = game.step([[RIGHT, 0]])
    assert rewards.tolist() == [[EXIT_POINTS, 0.0]] and dones.tolist() == [[True, True]]
    rewards, _ = game.step([[0, 0]])
    assert rewards.tolist() == [[0.0, 0.0]]  # done agents earn nothing more


def test_life_takes_its_makers_colour_and_agents_destroy_agents():
    game = SafeLifeGame([corridor()])
    game.step([[0, TOGGLE_LEFT]])  # agent 1 (red) makes life between the agents
    assert game.boards[0, 2, 2] == cells.KINDS["life"] | cells.RED  # the agents preserve it
    game.step([[TOGGLE_RIGHT, 0]])  # agent 0 removes it
    game.step([[RIGHT, 0]])
    rewards, dones = game.step([[TOGGLE_RIGHT, 0]])  # and destroys agent 1
    assert dones.tolist() == [[False, True]]
    block = int(game.boards[0, 2, 3])
    assert block & cells.FROZEN and not block & (cells.AGENT | cells.DESTRUCTIBLE)
    assert block & cells.COLORS == cells.RED
    # As in the original, the block keeps the open-exit flag the agent carried, so the agent
    # counts as exited and earns the exit bonus.
    assert game.has_exited().tolist() == [[False, True]] and rewards[0, 1] == EXIT_POINTS


def test_each_agent_scores_with_its_own_table():
    level = corridor(min_performance=0.5)
    goals = level.goals.copy()
    goals[0, :] = cells.BLUE  # blue goals: the blue agent can fill them
    tables = np.zeros((2, 8, 9))
    tables[0, 4, 4] = 3  # agent 0: blue on blue
    tables[1, 4, 1] = 2  # agent 1: red on blue
    game = SafeLifeGame([replace(level, goals=goals, points_tables=tables)])
    assert game.available_points.tolist() == [[21.0, 14.0]]
    assert game.required_points.tolist() == [[11.0, 7.0]]
    assert game.can_exit.tolist() == [[False, False]]


def random_play(game, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.choice(
            9, size=(len(game), game.agent_locs.shape[1]), p=[0.1] + [0.15] * 4 + [0.075] * 4
        )
        for _ in range(steps)
    ]


def test_numba_and_torch_engines_agree_with_open_exits():
    """Random play on every trace level with the exits always open (so that agents exit,
    which the traces never reach), all as one batch in each engine."""
    levels = [replace(load_trace(t)[0], min_performance=-1.0) for t in TRACES] * 4
    numba_game, torch_game = SafeLifeGame(levels), TorchGame(levels)
    exited = np.zeros((len(levels), 2), bool)
    for actions in random_play(numba_game, 400, seed=1):
        numba_rewards, numba_dones = numba_game.step(actions)
        torch_rewards, torch_dones = torch_game.step(torch.as_tensor(actions))
        assert np.array_equal(numba_game.boards, torch_game.boards.numpy())
        assert np.array_equal(numba_game.goals, torch_game.goals.numpy())
        assert np.array_equal(numba_game.agent_locs, torch_game.agent_locs.numpy())
        assert np.array_equal(numba_rewards, torch_rewards.numpy())
        assert np.array_equal(numba_dones, torch_dones.numpy())
        exited |= numba_game.has_exited()
    assert exited.sum() >= 10  # exits were exercised


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), index=st.integers(0, 99))
def test_a_single_agent_level_plays_as_a_level_of_one_agent(benchmarks, seed, index):
    level = load_levels(benchmarks / "append-still.npz")[index]
    level = replace(level, min_performance=-1.0) if seed % 2 else level
    single, multi = SafeLifeGame([level]), SafeLifeGame([from_level(level)])
    assert single.agent_locs.shape == multi.agent_locs.shape == (1, 1, 2)
    for actions in random_play(multi, 60, seed):
        rewards, dones = single.step(actions)
        multi_rewards, multi_dones = multi.step(actions)
        assert np.array_equal(single.boards, multi.boards)
        assert np.array_equal(single.agent_locs, multi.agent_locs)
        assert np.array_equal(rewards, multi_rewards)
        assert np.array_equal(dones, multi_dones)
    assert np.array_equal(single.points, multi.points)
    assert np.array_equal(single.performance(), multi.performance())


@settings(max_examples=50, deadline=None)
@given(
    board=arrays(
        np.uint16,
        (6, 6),
        elements=st.sampled_from(
            [
                0,
                cells.KINDS["life"],
                cells.KINDS["crate"],
                cells.KINDS["exit"],
                cells.KINDS["weed"],
                cells.KINDS["plant"],
                PLAYER | cells.EXIT,
            ]
        ),
    ),
    locs=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=4, unique=True
    ),
    actions=st.lists(st.integers(0, 8), min_size=4, max_size=4),
)
def test_agents_act_in_order_as_separate_calls_would(board, locs, actions):
    """One call with an agent axis equals one single-agent call per agent, in agent order."""
    for row, col in locs:
        board[row, col] |= PLAYER
    together, apart = board[None].copy(), board[None].copy()
    locs_together = np.array([locs], np.int64)
    locs_apart = locs_together.copy()
    execute_actions(together, locs_together, np.array([actions[: len(locs)]]))
    for a in range(len(locs)):
        loc = np.ascontiguousarray(locs_apart[:, a])
        execute_actions(apart, loc, np.array([actions[a]]))
        locs_apart[:, a] = loc
    assert np.array_equal(together, apart)
    assert np.array_equal(locs_together, locs_apart)


@pytest.mark.parametrize(
    "actions, shape",
    [
        ([[1]], (1, 1)),
        ([1, 2, 3], (3,)),
        ([[1, 2], [3, 4]], (2, 2)),
    ],
)
def test_actions_of_the_wrong_shape_are_refused(actions, shape):
    game = SafeLifeGame([corridor()])
    with pytest.raises(
        UserError,
        match=rf"1 game\(s\) of 2 agents need one action per agent, "
        rf"shape \(1, 2\), got shape {re_shape(shape)}",
    ):
        game.step(actions)
    with pytest.raises(ValueError, match="1 boards of 2 agent\\(s\\) need one action per agent"):
        execute_actions(game.boards, game.agent_locs, np.array(actions).ravel()[:1])


def re_shape(shape: tuple[int, ...]) -> str:
    return str(shape).replace("(", r"\(").replace(")", r"\)")


def test_float_actions_are_refused():
    with pytest.raises(UserError, match="actions must be integers 0-8, got dtype float64"):
        SafeLifeGame([corridor()]).step([[1.5, 0.0]])
