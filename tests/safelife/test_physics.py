"""Game-of-Life invariants and SafeLife's extra cell rules, as properties over random boards."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.signal import convolve2d

from safelife_rl.engine import cells
from safelife_rl.engine.physics import advance_board, execute_actions

LIFE = cells.KINDS["life"]
STILL_LIFES = {
    "block": ["##", "##"],
    "beehive": [".##.", "#..#", ".##."],
    "loaf": [".##.", "#..#", ".#.#", "..#."],
    "boat": ["##.", "#.#", ".#."],
    "tub": [".#.", "#.#", ".#."],
}
GLIDER = [".#.", "..#", "###"]  # travels down and to the right


def pattern(rows: list[str], cell: int = LIFE) -> np.ndarray:
    return np.array([[cell if ch == "#" else 0 for ch in row] for row in rows], np.uint16)


def place(shape, pat, row, col) -> np.ndarray:
    board = np.zeros(shape, np.uint16)
    board[: pat.shape[0], : pat.shape[1]] = pat
    return np.roll(board, (row, col), axis=(0, 1))


def conway(alive: np.ndarray) -> np.ndarray:
    """Reference B3/S23 on a torus."""
    n = convolve2d(alive.astype(int), np.ones((3, 3), int), mode="same", boundary="wrap") - alive
    return (n == 3) | (alive & (n == 2))


positions = st.tuples(st.integers(0, 40), st.integers(0, 40))
sizes = st.tuples(st.integers(8, 20), st.integers(8, 20))


@given(name=st.sampled_from(sorted(STILL_LIFES)), size=sizes, at=positions)
def test_still_lifes_stay_still(name, size, at):
    board = place(size, pattern(STILL_LIFES[name]), *at)
    assert np.array_equal(advance_board(board), board)


@given(size=sizes, at=positions, vertical=st.booleans())
def test_blinker_has_period_two(size, at, vertical):
    pat = pattern(["###"])
    board = place(size, pat.T if vertical else pat, *at)
    once = advance_board(board)
    assert not np.array_equal(once, board)
    assert np.array_equal(advance_board(once), board)


@given(size=sizes, at=positions, turns=st.integers(0, 3))
def test_glider_moves_one_cell_diagonally_in_four_steps(size, at, turns):
    pat = np.rot90(pattern(GLIDER), turns)
    board = place(size, pat, *at)
    later = board
    for _ in range(4):
        later = advance_board(later)
    # Rotating the pattern rotates its heading: (down, right) turned counter-clockwise.
    heading = [(1, 1), (-1, 1), (-1, -1), (1, -1)][turns]
    assert np.array_equal(later, np.roll(board, heading, axis=(0, 1)))


plain_boards = arrays(np.bool_, st.tuples(st.integers(3, 16), st.integers(3, 16)))
any_boards = arrays(
    np.uint16, st.tuples(st.integers(3, 12), st.integers(3, 12)), elements=st.integers(0, 0xFFFF)
)


@given(alive=plain_boards)
def test_plain_life_follows_conway(alive):
    board = alive.astype(np.uint16) * np.uint16(LIFE)
    assert np.array_equal(advance_board(board) & 1, conway(alive).astype(np.uint16))


@settings(max_examples=200)
@given(board=any_boards, shift=st.tuples(st.integers(-20, 20), st.integers(-20, 20)))
def test_wrapping_is_seamless(board, shift):
    board = board & ~np.uint16(cells.SPAWNING)  # spawners are random
    rolled = np.roll(board, shift, axis=(0, 1))
    assert np.array_equal(advance_board(rolled), np.roll(advance_board(board), shift, axis=(0, 1)))


@settings(max_examples=200)
@given(board=any_boards, seed=st.integers(0, 2**32 - 1))
def test_frozen_cells_never_change(board, seed):
    frozen = (board & cells.FROZEN) > 0
    after = advance_board(board, 0.5, np.random.default_rng(seed))
    assert np.array_equal(after[frozen], board[frozen])


def test_preserving_keeps_neighbours_alive_and_inhibiting_stops_births():
    lone = place((7, 7), pattern(["#"]), 3, 3)
    fountain = lone.copy()
    fountain[3, 4] = cells.KINDS["fountain"]
    assert advance_board(lone)[3, 3] == 0
    assert advance_board(fountain)[3, 3] == LIFE
    row = place((7, 7), pattern(["###"]), 3, 2)  # blinker: births at (2,3) and (4,3)
    row[1, 3] = cells.KINDS["wall"] | cells.INHIBITING
    after = advance_board(row)
    assert after[2, 3] == 0 and after[4, 3] & cells.ALIVE


def test_new_cells_take_the_majority_colour_and_destructibility():
    red, green = LIFE | cells.RED, cells.ALIVE | cells.GREEN  # the green one is indestructible
    board = np.zeros((7, 7), np.uint16)
    board[3, 2], board[3, 3], board[3, 4] = red, red, green
    after = advance_board(board)
    assert after[2, 3] == LIFE | cells.RED  # two red, two destructible parents


def test_spawners_spawn_at_their_rate():
    board = np.zeros((30, 30), np.uint16)
    board[::3, ::3] = cells.KINDS["spawner"] | cells.BLUE
    rng = np.random.default_rng(0)
    after = advance_board(np.broadcast_to(board, (200, 30, 30)).copy(), 0.3, rng)
    born = (after & cells.ALIVE) > 0
    assert abs(born.mean() / (8 / 9) - 0.3) < 0.01  # 8 of 9 cells neighbour a spawner
    assert np.all(after[born] == LIFE | cells.BLUE)
    with pytest.raises(ValueError, match="random generator"):
        advance_board(board)


def test_batches_advance_like_single_boards():
    rng = np.random.default_rng(1)
    boards = (rng.random((5, 12, 12)) < 0.4).astype(np.uint16) * np.uint16(LIFE)
    batched = advance_board(boards)
    assert np.array_equal(batched, np.stack([advance_board(b) for b in boards]))


def agent_board(rows: list[str]) -> tuple[np.ndarray, np.ndarray]:
    legend = {
        ".": 0,
        "A": cells.KINDS["player"],
        "#": cells.KINDS["wall"],
        "%": cells.KINDS["crate"],
        "z": LIFE,
        "p": cells.PULLABLE | cells.FROZEN,
    }
    board = np.array([[legend[ch] for ch in row] for row in rows], np.uint16)
    loc = np.argwhere(board & cells.AGENT)[0].astype(np.int64)
    return board, loc


@pytest.mark.parametrize(
    "rows, action, expected",
    [
        ([".....", "..A..", "....."], 2, [".....", "...A.", "....."]),  # move right
        ([".#...", ".A...", "....."], 1, [".#...", ".A...", "....."]),  # wall blocks
        (["A%...", ".....", "....."], 2, [".A%..", ".....", "....."]),  # push crate
        (["A%#..", ".....", "....."], 2, ["A%#..", ".....", "....."]),  # crate blocked
        (["pA...", ".....", "....."], 2, [".pA..", ".....", "....."]),  # pull
        ([".A...", ".....", "....."], 4, ["A....", ".....", "....."]),  # left
        ([".A...", ".....", "....."], 1, [".....", ".....", ".A..."]),  # wraps up
        (["A....", ".....", "....."], 6, ["Az...", ".....", "....."]),  # toggle creates
        (["Az...", ".....", "....."], 6, ["A....", ".....", "....."]),  # toggle destroys
        (["A#...", ".....", "....."], 6, ["A#...", ".....", "....."]),  # wall survives
        (["A%...", ".....", "....."], 6, ["A.%..", ".....", "....."]),  # toggle shoves
    ],
)
def test_actions(rows, action, expected):
    board, loc = agent_board(rows)
    want, want_loc = agent_board(expected)
    execute_actions(board, loc, action)
    mask = ~np.uint16(cells.ORIENTATION)
    assert np.array_equal(board & mask, want & mask)
    assert np.array_equal(loc, want_loc)
    direction = (action - 1) % 4
    assert (board[tuple(loc)] & cells.ORIENTATION) >> cells.ORIENTATION_BIT == direction


def test_agent_steps_onto_open_exit_only():
    board, loc = agent_board(["A.", ".."])
    board[0, 1] = cells.KINDS["exit"]
    execute_actions(board, loc, 2)
    assert loc.tolist() == [0, 0]  # closed: the agent lacks the exit flag
    board[0, 0] |= cells.EXIT
    execute_actions(board, loc, 2)
    assert loc.tolist() == [0, 1] and board[0, 1] == cells.KINDS["exit"] and board[0, 0] == 0


@pytest.mark.parametrize("bad", [-1, 9, 100])
def test_invalid_actions_are_rejected(bad):
    board, loc = agent_board(["A."])
    with pytest.raises(ValueError, match="invalid action"):
        execute_actions(board, loc, bad)


def test_wrong_board_dtype_is_rejected():
    with pytest.raises(TypeError, match="uint16"):
        advance_board(np.zeros((4, 4), np.int32))
    with pytest.raises(ValueError, match="shape"):
        advance_board(np.zeros(4, np.uint16))
