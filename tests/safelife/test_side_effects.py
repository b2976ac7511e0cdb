"""Side-effect scores: the recorded originals, the distance on hand cases, and the sampler."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from safelife_rl import SafeLifeEnv, SafeLifeGame
from safelife_rl.engine import cells
from safelife_rl.engine.physics import advance_board, advance_steps
from safelife_rl.engine.replay import load_trace, replay
from safelife_rl.engine.side_effects import earth_mover_distance, side_effect_score

TRACES = sorted((Path(__file__).resolve().parents[1] / "data/safelife/traces").glob("*.npz"))
DETERMINISTIC = [t for t in TRACES if not np.load(t)["stochastic"]]


@pytest.mark.parametrize("trace", DETERMINISTIC, ids=lambda p: p.stem)
def test_side_effects_match_the_original(trace):
    level, actions, arrays_ = load_trace(trace)
    ours = json.loads(str(replay(level, actions)["side_effects"]))
    theirs = json.loads(str(arrays_["side_effects"]))
    assert ours.keys() == theirs.keys()
    for name, (effect, total) in theirs.items():
        assert ours[name][0] == pytest.approx(effect, abs=1e-6), name
        assert ours[name][1] == pytest.approx(total, abs=1e-6), name


def grid(points, shape=(10, 10)):
    a = np.zeros(shape)
    for (y, x), mass in points.items():
        a[y, x] = mass
    return a


def test_distance_hand_cases():
    one = grid({(2, 2): 1.0})
    assert earth_mover_distance(one, one) == 0.0
    assert earth_mover_distance(one, grid({(2, 3): 1.0})) == pytest.approx(np.tanh(1 / 5))
    assert earth_mover_distance(one, grid({(4, 5): 1.0})) == pytest.approx(np.tanh(5 / 5))
    # Across the wrapped edge, column 0 and column 9 are neighbours.
    assert earth_mover_distance(grid({(0, 9): 1.0}), grid({(0, 0): 1.0})) == pytest.approx(
        np.tanh(1 / 5)
    )
    # Created or destroyed mass costs 1 per unit.
    assert earth_mover_distance(one, grid({})) == pytest.approx(1.0)
    assert earth_mover_distance(grid({}), grid({(5, 5): 2.0})) == pytest.approx(2.0)
    assert earth_mover_distance(one, grid({(2, 3): 3.0})) == pytest.approx(np.tanh(0.2) + 2)


def brute_force_occupancy(board, steps):
    counts = np.zeros(board.shape + (8,), np.int32)
    skip = cells.AGENT | cells.EXIT | cells.FROZEN
    for _ in range(steps):
        board = advance_board(board)
        live = (board & cells.ALIVE > 0) & (board & skip == 0)
        for y, x in zip(*np.nonzero(live)):
            counts[y, x, cells.color_index(board[y, x])] += 1
    return board, counts


@settings(max_examples=60)
@given(
    board=arrays(
        np.uint16,
        st.tuples(st.integers(4, 10), st.integers(4, 10)),
        elements=st.integers(0, 0xFFFF),
    ),
    steps=st.integers(0, 40),
)
def test_periodic_shortcut_equals_full_simulation(board, steps):
    board = board & ~np.uint16(cells.SPAWNING) & ~np.uint16(cells.AGENT)
    ours_board, ours_counts = advance_steps(board, steps, count_life=True)
    want_board, want_counts = brute_force_occupancy(board, steps)
    assert np.array_equal(ours_board, want_board)
    assert np.array_equal(ours_counts, want_counts)


def test_doing_nothing_has_no_side_effects(benchmarks):
    env = SafeLifeEnv(benchmarks / "prune-still.npz", time_limit=30, side_effects=True)
    env.reset(seed=0)
    for _ in range(30):
        *_, terminated, truncated, info = env.step(0)
    assert truncated and info["side_effects"]
    assert all(effect == 0.0 for effect, _ in info["side_effects"].values())


def test_stochastic_levels_average_runs(benchmarks):
    from safelife_rl import load_levels

    level = load_levels(benchmarks / "append-spawn.npz")[0]
    game = SafeLifeGame([level], rng=np.random.default_rng(0))
    for _ in range(10):
        game.step(0)
    single = [side_effect_score(game, samples=200, rng=np.random.default_rng(s)) for s in range(4)]
    pooled = side_effect_score(game, samples=200, runs=8, rng=np.random.default_rng(9))
    name = max(pooled, key=lambda k: pooled[k][1])  # the most common live colour
    # Inaction totals agree across runs; noise in the distance shrinks when runs are pooled.
    assert all(abs(s[name][1] - pooled[name][1]) < 0.25 * pooled[name][1] for s in single)
    assert pooled[name][0] < np.mean([s[name][0] for s in single])
