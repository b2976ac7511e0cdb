"""The torch backend against the Numba engine: the same boards, actions and random numbers must
give the same result bit for bit."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from safelife_rl import Level, SafeLifeGame
from safelife_rl.engine import cells, physics, torch_rules
from safelife_rl.engine.observation import agent_view, combined_cells, to_channels
from safelife_rl.engine.scoring import available_points
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.engine.torch_observation import agent_views

# Any 16-bit cells (every kind, colour and orientation, and flag mixes no kind has), with many
# empty cells so that patterns live, die and get born; boards from 1x1 up.
_CELLS = st.one_of(
    st.just(0), st.sampled_from(sorted(cells.KINDS.values())), st.integers(0, 0xFFFF)
)
boards = arrays(
    np.uint16, st.tuples(st.integers(1, 4), st.integers(1, 10), st.integers(1, 10)), elements=_CELLS
)


class GivenUniforms:
    """Stands in for a NumPy generator so that the Numba engine uses our random numbers."""

    def __init__(self, uniforms: np.ndarray):
        self.uniforms = uniforms

    def random(self, shape, dtype):
        return self.uniforms.reshape(shape).astype(dtype)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def to_torch(board: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(board.astype(np.int32))


@settings(max_examples=300, deadline=None)
@given(board=boards, seed=st.integers(0, 2**32 - 1))
def test_advance_matches_numba(board, seed):
    rng = np.random.default_rng(seed)
    prob = rng.random(len(board)).astype(np.float32)
    uniforms = rng.random(board.shape, dtype=np.float32)
    want = physics.advance_board(board, prob, GivenUniforms(uniforms))
    got = torch_rules.advance(to_torch(board), torch.from_numpy(prob), torch.from_numpy(uniforms))
    assert np.array_equal(got.numpy(), want)


def test_large_batches_advance_in_chunks_alike():
    rng = np.random.default_rng(0)
    board = rng.choice(
        np.array(sorted(cells.KINDS.values()) * 3 + [0] * 40, np.uint16),
        (3 * torch_rules._CPU_CHUNK + 5, 6, 7),
    )
    board |= rng.choice(np.array([0, cells.RED, cells.GREEN, cells.BLUE], np.uint16), board.shape)
    prob = rng.random(len(board)).astype(np.float32)
    uniforms = rng.random(board.shape, dtype=np.float32)
    want = physics.advance_board(board, prob, GivenUniforms(uniforms))
    got = torch_rules.advance(to_torch(board), torch.from_numpy(prob), torch.from_numpy(uniforms))
    assert np.array_equal(got.numpy(), want)


@settings(max_examples=100, deadline=None)
@given(board=boards)
def test_advance_without_uniforms_never_spawns(board):
    no_spawn = GivenUniforms(np.ones(board.shape, np.float32))
    want = physics.advance_board(board, 1.0, no_spawn)
    assert np.array_equal(torch_rules.advance(to_torch(board), 1.0).numpy(), want)


@st.composite
def boards_with_agents(draw):
    """Boards with an agent (or, now and then, a cell that is no agent) at each location."""
    board = draw(boards)
    n, h, w = board.shape
    locs = np.array(
        [[draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))] for _ in range(n)], np.int64
    )
    for k, (y, x) in enumerate(locs):
        if draw(st.integers(0, 9)):
            board[k, y, x] |= cells.AGENT
    return board, locs


@settings(max_examples=300, deadline=None)
@given(state=boards_with_agents(), data=st.data())
def test_steps_match_numba(state, data):
    """Random actions, each followed by the board update, for a few steps."""
    board, locs = state
    tboard, tlocs = to_torch(board), torch.from_numpy(locs[:, None, :].copy())
    for _ in range(data.draw(st.integers(1, 4))):
        actions = np.array(
            data.draw(st.lists(st.integers(0, 8), min_size=len(board), max_size=len(board))),
            np.int64,
        )
        physics.execute_actions(board, locs, actions)
        torch_rules.execute_actions(tboard, tlocs, torch.from_numpy(actions[:, None]))
        assert np.array_equal(tboard.numpy(), board)
        assert np.array_equal(tlocs[:, 0].numpy(), locs)
        board = physics.advance_board(board, 1.0, GivenUniforms(np.ones(board.shape)))
        tboard = torch_rules.advance(tboard)
        assert np.array_equal(tboard.numpy(), board)


def test_agents_of_a_board_act_in_order():
    board = np.zeros((1, 1, 5), np.uint16)
    board[0, 0, 1] = board[0, 0, 2] = cells.KINDS["player"]
    locs = torch.tensor([[[0, 2], [0, 1]]])
    tboard = to_torch(board)
    torch_rules.execute_actions(tboard, locs, torch.tensor([[2, 2]]))  # both move right
    assert locs.tolist() == [[[0, 3], [0, 2]]]
    assert (tboard[0, 0] & cells.AGENT).tolist() == [0, 0, 2, 2, 0]


@pytest.mark.parametrize("bad", [-1, 9])
def test_invalid_actions_are_rejected(bad):
    with pytest.raises(ValueError, match="invalid action"):
        torch_rules.check_actions(torch.tensor([[0], [bad]]))


_LEVEL_CELLS = _CELLS.map(lambda c: c & ~(cells.AGENT | 1 << 14 | cells.SPAWNING))


@st.composite
def level_batches(draw):
    """1-3 random levels of one shape without spawners (their random numbers differ between
    the engines), each with one agent, and integer points tables (sums exact in any order)."""
    shape = (draw(st.integers(2, 9)), draw(st.integers(2, 9)))
    levels = []
    for _ in range(draw(st.integers(1, 3))):
        board = draw(arrays(np.uint16, shape, elements=_LEVEL_CELLS))
        goals = draw(
            arrays(
                np.uint16,
                shape,
                elements=st.one_of(
                    st.sampled_from([0, cells.RED, cells.GREEN, cells.BLUE, cells.COLORS]),
                    _LEVEL_CELLS,
                ),
            )
        )
        loc = (draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1)))
        board[loc] = cells.KINDS["player"] | (board[loc] & (cells.COLORS | cells.ORIENTATION))
        table = draw(arrays(np.int64, (8, 9), elements=st.integers(-5, 5))).astype(np.float64)
        min_perf = draw(st.sampled_from([-1.0, 0.0, 0.2, 0.5, 1.0]))
        levels.append(Level(board, goals, loc, min_performance=min_perf, points_table=table))
    return levels


def numba_observation(game: SafeLifeGame, view, channels) -> np.ndarray:
    return np.stack(
        [
            to_channels(agent_view(combined_cells(board, goals, True), loc, view), channels)
            for board, goals, loc in zip(game.boards, game.goals, game.agent_locs[:, 0])
        ]
    )


@settings(max_examples=150, deadline=None)
@given(levels=level_batches(), data=st.data())
def test_games_match_numba(levels, data):
    """Points, exits, rewards, dones and observations of whole games on random levels."""
    ours, theirs = TorchGame(levels), SafeLifeGame(levels)
    view = (data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12)))
    channels = data.draw(st.lists(st.integers(0, 31), min_size=1, max_size=6))

    def assert_same() -> None:
        assert np.array_equal(ours.boards.numpy(), theirs.boards)
        assert np.array_equal(ours.goals.numpy(), theirs.goals)
        assert np.array_equal(ours.agent_locs.numpy(), theirs.agent_locs)
        assert np.array_equal(ours.points.numpy(), theirs.points)
        assert np.array_equal(ours.can_exit.numpy(), theirs.can_exit)
        expected = numba_observation(theirs, view, channels)
        assert np.array_equal(ours.observe(view, channels)[:, 0].numpy(), expected)
        assert np.array_equal(theirs.observe(view, channels)[:, 0], expected)

    assert np.array_equal(ours.required_points.numpy(), theirs.required_points)
    assert np.array_equal(ours.available_points.numpy(), theirs.available_points)
    assert_same()
    for _ in range(data.draw(st.integers(1, 6))):
        actions = np.array(
            data.draw(st.lists(st.integers(0, 8), min_size=len(levels), max_size=len(levels)))
        )
        rewards, dones = ours.step(actions[:, None])
        want_rewards, want_dones = theirs.step(actions[:, None])
        assert np.array_equal(rewards.numpy(), want_rewards)
        assert np.array_equal(dones.numpy(), want_dones)
        assert_same()


MULTI_AGENT = sorted(
    (Path(__file__).resolve().parents[1] / "data/safelife/traces-multiagent").glob("*.npz")
)


def test_agent_axis_replays_the_original_multi_agent_traces():
    """The rules and views with an agent axis (A = 2, each agent its own points table) replay
    the original's multi-agent traces bit for bit, all as one batch: boards, goals, agent
    locations, rewards, dones and each agent's observations."""
    traces = [np.load(trace) for trace in MULTI_AGENT]
    assert len(traces) >= 25 and not any(t["stochastic"] for t in traces)

    def stack(key: str) -> torch.Tensor:
        return torch.as_tensor(np.stack([t[key] for t in traces]))

    boards, goals = stack("level_board").int(), stack("level_goals").int()
    locs, table = stack("level_agent_locs").clone(), stack("level_points_table").double()
    initial = torch_rules.alive_counts(boards, goals)
    available = torch.tensor(
        [
            [
                available_points(t["level_board"], counts, agent_table)
                for agent_table in t["level_points_table"]
            ]
            for t, counts in zip(traces, initial.numpy())
        ]
    )
    required = (stack("level_min_performance")[:, None] * available).ceil().clamp(min=0)
    prob = stack("level_spawn_prob").float()
    points, _ = torch_rules.update_exits(boards, goals, locs, table, initial, required)
    n, w = len(boards), boards.shape[2]

    def present() -> torch.Tensor:
        return (boards.view(n, -1).gather(1, locs[..., 0] * w + locs[..., 1]) & cells.AGENT) > 0

    def assert_equal(ours: torch.Tensor, key: str, step: int | None = None) -> None:
        theirs = stack(key) if step is None else stack(key)[:, step]
        assert np.array_equal(ours.numpy(), theirs.numpy()), (key, step)

    active = present()
    assert_equal(agent_views(boards, goals, locs), "obs_first")
    for step, actions in enumerate(stack("actions").unbind(1)):
        torch_rules.execute_actions(boards, locs, actions)
        boards, goals = torch_rules.advance(boards, prob), torch_rules.advance(goals, prob)
        now, _ = torch_rules.update_exits(boards, goals, locs, table, initial, required)
        rewards, points = ((now - points) * active).float(), now
        active &= present()
        assert_equal(boards, "boards", step + 1)
        assert_equal(goals, "goals", step + 1)
        assert_equal(locs, "agent_locs", step + 1)
        assert_equal(rewards, "rewards", step)
        assert_equal(~active, "dones", step)
    assert_equal(agent_views(boards, goals, locs), "obs_last")


def test_speed_benchmark_runs(monkeypatch, capsys):
    script = Path(__file__).resolve().parents[2] / "benchmarks/engine_speed.py"
    monkeypatch.syspath_prepend(str(script.parent))  # its sibling module baselines.py
    spec = importlib.util.spec_from_file_location("engine_speed", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(
        sys, "argv", ["engine_speed.py", "--sizes", "1", "3", "--seconds", "0", "--no-baseline"]
    )
    module.main()
    lines = capsys.readouterr().out.splitlines()
    rows, counts = lines[2:6:2], lines[3:7:2]
    assert [row.split()[0] for row in rows] == ["1", "3"]
    assert all(line.startswith("  torch cpu, one step: ") and "0 copies" in line for line in counts)
    assert lines[6].startswith("numba, best (N=") and "no baseline" in lines[6]
    assert all(float(rate.replace(",", "")) > 0 for row in rows for rate in row.split()[1:])
