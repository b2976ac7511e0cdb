"""The departed cells and their cost weight on one NumPy board, which only look at the cells
whose kept bits changed, against the straightforward whole-board computation of the same rules
(and the torch backend's, which batches the whole boards)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from safelife_rl.engine import cells
from safelife_rl.engine.departures import (
    cell_weights,
    departed_cells,
    departed_weight,
    departs,
)
from safelife_rl.envs import torch_wrappers

pytestmark = pytest.mark.usefixtures("torch_one_thread")

COLORS = [c << cells.COLOR_BIT for c in range(8)]
#: Cells as levels hold them (a kind, a colour, maybe an orientation), or any 16 bits.
CELL = st.one_of(
    st.builds(
        lambda kind, color, orientation: kind | color | orientation,
        st.sampled_from(sorted(set(cells.KINDS.values()))),
        st.sampled_from(COLORS),
        st.sampled_from([0, 1 << cells.ORIENTATION_BIT, cells.ORIENTATION]),
    ),
    st.integers(0, 0xFFFF),
)
#: What oscillators and the agent flip on their own: no departure.
IGNORED_FLIP = st.sampled_from(
    [0, cells.AGENT, cells.FREEZING, cells.FROZEN, cells.DESTRUCTIBLE, cells.INHIBITING]
)
GOAL = st.one_of(st.sampled_from(COLORS), st.integers(0, 0xFFFF))


def whole_board_cells(board, start, goals, locs, start_locs, ignore_reward_cells):
    """:func:`departed_cells` the straightforward way: every cell of the board at once."""
    departed = departs(board, start, goals, ignore_reward_cells)
    for where in (locs, start_locs):
        departed[tuple(np.reshape(where, (-1, 2)).T)] = False
    return departed


def whole_board_weight(board, start, goals, locs, start_locs) -> float:
    departed = whole_board_cells(board, start, goals, locs, start_locs, True)
    return float(np.maximum(cell_weights(board[departed]), cell_weights(start[departed])).sum())


@st.composite
def positions(draw, shape, changed, count):
    """``count`` (row, column) positions, on changed cells where ``changed`` allows."""
    anywhere = st.tuples(st.integers(0, shape[0] - 1), st.integers(0, shape[1] - 1))
    on_changed = st.sampled_from([tuple(p) for p in changed]) if len(changed) else anywhere
    return [draw(st.one_of(anywhere, on_changed)) for _ in range(count)]


@st.composite
def departures(draw):
    """A board, its start, goals, and where the agents are (``(2,)`` or ``(A, 2)``) and
    started: most cells unchanged, some replaced, some with only ignored bits flipped."""
    shape = draw(st.tuples(st.integers(1, 7), st.integers(1, 7)))
    board = draw(arrays(np.uint16, shape, elements=CELL))
    replaced = draw(arrays(bool, shape))
    start = np.where(replaced, draw(arrays(np.uint16, shape, elements=CELL)), board)
    start ^= draw(arrays(np.uint16, shape, elements=IGNORED_FLIP))
    goals = draw(arrays(np.uint16, shape, elements=GOAL))
    changed = np.argwhere(board != start)
    agents = draw(st.integers(1, 3))
    locs, start_locs = (
        np.array(draw(positions(shape, changed, agents)), dtype=np.int64) for _ in range(2)
    )
    if agents == 1 and draw(st.booleans()):
        locs, start_locs = locs[0], start_locs[0]  # one agent's (2,)
    return board, start, goals, locs, start_locs


@settings(max_examples=300, deadline=None)
@given(departures())
def test_the_changed_cells_alone_give_the_whole_board_result(case):
    board, start, goals, locs, start_locs = case
    weight = departed_weight(*case)
    assert type(weight) is float and weight == whole_board_weight(*case)
    for ignore_reward_cells in (False, True):
        departed = departed_cells(*case, ignore_reward_cells)
        expected = whole_board_cells(*case, ignore_reward_cells)
        assert departed.dtype == bool and departed.shape == board.shape
        np.testing.assert_array_equal(departed, expected)
        if locs.shape == (2,):  # the torch backend: one agent per board
            batch = (torch.from_numpy(a[None].astype(np.int32)) for a in case)
            on_torch = torch_wrappers.departed_cells(*batch, ignore_reward_cells)
            np.testing.assert_array_equal(on_torch.view(board.shape).numpy(), expected)


def test_an_unchanged_board_weighs_nothing():
    board = np.full((4, 5), cells.KINDS["life"] | cells.GREEN, np.uint16)
    locs = np.array([[1, 1], [2, 3]])
    assert departed_weight(board, board.copy(), board, locs, locs) == 0.0
    assert not departed_cells(board, board.copy(), board, locs[0], locs[0], True).any()


def test_only_the_agents_cells_are_ignored():
    start = np.full((3, 3), cells.KINDS["life"] | cells.GREEN, np.uint16)
    board = np.zeros_like(start)  # all the green life gone
    goals = np.zeros_like(start)
    locs, start_locs = np.array([[0, 0], [2, 2]]), np.array([[0, 0], [1, 1]])
    assert departed_weight(board, start, goals, locs, start_locs) == 6.0
    assert departed_cells(board, start, goals, locs, start_locs, True).sum() == 6
