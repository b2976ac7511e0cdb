"""The pattern generator (SafeLife paper, Appendix A), partition and fences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safelife_rl.engine import cells
from safelife_rl.engine.physics import advance_board
from safelife_rl.procgen.partition import build_fence, dilate, partition_board
from safelife_rl.procgen.patterns import (
    CAN_OSCILLATE,
    INCLUDE_VIOLATIONS,
    NEW_CELL,
    grow_pattern,
)

ALL = NEW_CELL | CAN_OSCILLATE | INCLUDE_VIOLATIONS


def square_mask(size=16, inner=(3, 13), oscillate=True):
    """A square area the generator may fill, ringed by cells where nothing may be born."""
    inside = np.zeros((size, size), bool)
    inside[inner[0] : inner[1], inner[0] : inner[1]] = True
    mask = np.where(inside, ALL if oscillate else ALL & ~CAN_OSCILLATE, 0)
    mask[dilate(inside) & ~inside] = INCLUDE_VIOLATIONS
    return mask, inside


def period_of(board, longest=4):
    state = board
    for t in range(1, longest + 1):
        state = advance_board(state)
        if np.array_equal(state, board):
            return t
    return None


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("temperature,min_fill", [(0.4, 0.1), (0.8, 0.25)])
def test_still_life_does_not_change(seed, temperature, min_fill):
    mask, inside = square_mask(oscillate=False)
    board, converged = grow_pattern(
        np.zeros(mask.shape, np.uint16),
        mask,
        np.random.default_rng(seed),
        period=1,
        min_fill=min_fill,
        temperature=temperature,
    )
    assert converged
    assert np.count_nonzero(board[inside]) >= min_fill * inside.sum()
    assert not board[~inside].any()  # nothing outside the area it may change
    assert set(np.unique(board)) <= {0, cells.KINDS["life"]}  # walls and trees cost 100
    assert period_of(board) == 1


def test_oscillator_returns_after_two_steps_and_not_before():
    mask, inside = square_mask(size=14, inner=(2, 12))
    oscillating = []
    for seed in range(3):
        board, converged = grow_pattern(
            np.zeros(mask.shape, np.uint16),
            mask,
            np.random.default_rng(seed),
            period=2,
            min_fill=0.1,
            temperature=1.0,
        )
        assert converged
        once, twice = advance_board(board), advance_board(advance_board(board))
        assert np.array_equal(twice, board)
        assert not (once | twice)[~inside].any()  # oscillating cells stay inside their area
        oscillating.append(not np.array_equal(once, board))
    # Still lifes also repeat after two steps; the oscillation bonus makes them rare.
    assert sum(oscillating) >= 2


def test_penalties_and_seeds_shape_the_pattern():
    mask, inside = square_mask(oscillate=False)
    empty = np.zeros(mask.shape, np.uint16)
    walls, converged = grow_pattern(
        empty, mask, np.random.default_rng(0), min_fill=0.3, wall=(-10, -10)
    )
    assert converged and np.count_nonzero(walls == cells.KINDS["wall"]) > 0.25 * inside.sum()
    # Building onto an existing board keeps what the mask protects.
    base = empty.copy()
    base[0, 0] = cells.KINDS["wall"]
    out, _ = grow_pattern(base, mask, np.random.default_rng(1), min_fill=0.1)
    assert out[0, 0] == cells.KINDS["wall"]


def test_generator_is_reproducible_and_seed_dependent():
    mask, _ = square_mask(oscillate=False)
    empty = np.zeros(mask.shape, np.uint16)
    a = grow_pattern(empty, mask, np.random.default_rng(5), min_fill=0.2)[0]
    b = grow_pattern(empty, mask, np.random.default_rng(5), min_fill=0.2)[0]
    c = grow_pattern(empty, mask, np.random.default_rng(6), min_fill=0.2)[0]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_iteration_cap_reports_failure():
    mask, _ = square_mask(oscillate=False)
    _, converged = grow_pattern(
        np.zeros(mask.shape, np.uint16), mask, np.random.default_rng(0), min_fill=0.9, max_iter=0.5
    )
    assert not converged


@pytest.mark.parametrize("bad", [{"period": 0}, {"temperature": 0.0}])
def test_bad_generator_arguments(bad):
    mask, _ = square_mask()
    with pytest.raises(ValueError, match=next(iter(bad))):
        grow_pattern(np.zeros(mask.shape, np.uint16), mask, np.random.default_rng(0), **bad)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), low=st.integers(1, 3), extra=st.integers(0, 2))
def test_partition_keeps_regions_apart(seed, low, extra):
    regions = partition_board((26, 26), np.random.default_rng(seed), low, low + extra)
    labels = set(np.unique(regions)) - {0}
    assert low <= len(labels) <= low + extra
    for label in labels:  # no cell of one region touches another region
        assert not (dilate(regions == label) & (regions > 0) & (regions != label)).any()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_fence_stops_every_birth_outside(seed):
    rng = np.random.default_rng(seed)
    region = partition_board((20, 20), rng, 1, 1) == 1
    fence = build_fence(region, rng)
    assert not (fence & ~region).any()
    open_inside = (region & ~fence).astype(int)
    neighbours = sum(
        np.roll(np.roll(open_inside, dr, 0), dc, 1) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
    )
    assert (neighbours[~region] < 3).all()
