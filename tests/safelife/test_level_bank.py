"""Symmetries of levels (exact play, group laws) and level banks (cache, draws, options)."""

import copy
import errno
import itertools
import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import safelife_rl.procgen.bank as bank_module
from safelife_rl import load_levels
from safelife_rl.engine import cells
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.levels import Level
from safelife_rl.engine.symmetry import (
    IDENTITY,
    SYMMETRIES,
    Symmetry,
    transform_cells,
    transform_level,
    transform_point,
)
from safelife_rl.procgen import generate_level, load_params
from safelife_rl.procgen.bank import LevelBank
from safety_rl_common.errors import UserError

SUITES = Path(__file__).resolve().parents[2] / "safelife_rl" / "levels" / "benchmarks"
# One deterministic level of each shipped suite (spawners play alike only in distribution).
SUITE_LEVELS = [
    next(level for level in load_levels(path) if not level.is_stochastic)
    for path in sorted(SUITES.glob("*.npz"))
    if "spawn" not in path.stem
]
MOVES = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # direction -> (row, column) step
PLAY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def small(task, shape=(12, 12)):
    params = copy.deepcopy(load_params(task))
    params["board_shape"] = list(shape)
    return params


def same_level(a, b):
    return (
        np.array_equal(a.board, b.board)
        and np.array_equal(a.goals, b.goals)
        and a.agent_loc == b.agent_loc
        and a.spawn_prob == b.spawn_prob
        and a.min_performance == b.min_performance
        and np.array_equal(a.points_table, b.points_table)
    )


# --- the dihedral group ---------------------------------------------------------------------


def test_the_8_symmetries_form_the_dihedral_group():
    assert len(set(SYMMETRIES)) == 8 and SYMMETRIES[0] == IDENTITY
    for a, b, c in itertools.product(SYMMETRIES, repeat=3):
        assert a.then(b) in SYMMETRIES
        assert a.then(b).then(c) == a.then(b.then(c))
    for a in SYMMETRIES:
        assert a.then(IDENTITY) == IDENTITY.then(a) == a
        assert a.then(a.inverse()) == a.inverse().then(a) == IDENTITY
    assert Symmetry(1).then(Symmetry(0, True)) != Symmetry(0, True).then(Symmetry(1))


def test_symmetries_compose_on_boards_points_and_actions():
    board = np.arange(5 * 7).reshape(5, 7)
    for a, b in itertools.product(SYMMETRIES, repeat=2):
        assert np.array_equal(b.apply(a.apply(board)), a.then(b).apply(board))
        assert [b.action(a.action(k)) for k in range(9)] == [a.then(b).action(k) for k in range(9)]
    for s in SYMMETRIES:
        actions = [s.action(k) for k in range(9)]
        assert actions[0] == 0 and sorted(actions[1:5]) == [1, 2, 3, 4]
        assert actions[5:] == [k + 4 for k in actions[1:5]]
        assert s.keeps_shape((5, 7)) == (s.apply(board).shape == (5, 7))
        for row, col in itertools.product(range(5), range(7)):
            moved = s.point((row, col), board.shape)
            assert s.apply(board)[moved] == board[row, col]
            # A step in direction d lands where a step in the mapped direction does.
            for d, (dr, dc) in MOVES.items():
                after = s.point(((row + dr) % 5, (col + dc) % 7), board.shape)
                step = MOVES[s.direction(d)]
                height, width = s.apply(board).shape
                assert after == ((moved[0] + step[0]) % height, (moved[1] + step[1]) % width)


@pytest.mark.parametrize("level", SUITE_LEVELS[:3], ids=lambda level: level.name)
def test_a_transform_then_its_inverse_gives_the_level_back(level):
    for s, shift in itertools.product(SYMMETRIES, [(0, 0), (3, -5), (25, 1)]):
        moved = transform_level(level, s, shift)
        back = transform_level(
            transform_level(moved, IDENTITY, (-shift[0], -shift[1])), s.inverse()
        )
        assert same_level(back, level) and back.name == level.name
        assert transform_point(level.agent_loc, level.shape, s, shift) == moved.agent_loc
        for t in SYMMETRIES[::3]:
            assert same_level(
                transform_level(transform_level(level, s), t), transform_level(level, s.then(t))
            )


# --- exact play -----------------------------------------------------------------------------


def check_play(level, symmetry, shift, actions):
    """Playing the moved level with mapped actions gives the moved boards, same rewards."""
    original = SafeLifeGame([level])
    moved = SafeLifeGame([transform_level(level, symmetry, shift)])
    for action in actions:
        reward, done = original.step(action)
        moved_reward, moved_done = moved.step(symmetry.action(action))
        assert np.array_equal(transform_cells(original.boards, symmetry, shift), moved.boards)
        assert np.array_equal(transform_cells(original.goals, symmetry, shift), moved.goals)
        assert np.array_equal(reward, moved_reward) and np.array_equal(done, moved_done)
        assert np.array_equal(original.points, moved.points)
        assert np.array_equal(original.can_exit, moved.can_exit)
        if original.agent_present()[0, 0]:
            loc = tuple(original.agent_locs[0, 0])
            assert transform_point(loc, level.shape, symmetry, shift) == tuple(
                moved.agent_locs[0, 0]
            )
        if done[0]:
            break


symmetries = st.sampled_from(SYMMETRIES)
shifts = st.tuples(st.integers(-30, 30), st.integers(-30, 30))
action_lists = st.lists(st.integers(0, 8), min_size=1, max_size=40)


@PLAY
@given(level=st.sampled_from(SUITE_LEVELS), symmetry=symmetries, shift=shifts, actions=action_lists)
def test_shipped_levels_play_exactly_alike_when_moved(level, symmetry, shift, actions):
    check_play(level, symmetry, shift, actions)


GENERATED = [
    generate_level(small(task, shape), seed)
    for task, shape, seed in [
        ("prune-still", (12, 12), 1),
        ("append-still", (10, 14), 2),
        ("prune-still-hard", (14, 11), 3),
    ]
]


@PLAY
@given(level=st.sampled_from(GENERATED), symmetry=symmetries, shift=shifts, actions=action_lists)
def test_generated_levels_play_exactly_alike_when_moved(level, symmetry, shift, actions):
    check_play(level, symmetry, shift, actions)


# Every kind but spawners (random by cell position) and the player, with any colour and
# sometimes stray orientation bits, which mean nothing off the agent.
KINDS = [v for k, v in cells.KINDS.items() if "spawner" not in k and k != "player"]
cell_values = st.builds(
    lambda kind, color, facing: (
        kind | color << cells.COLOR_BIT | facing << cells.ORIENTATION_BIT if kind else 0
    ),
    st.sampled_from(KINDS),
    st.integers(0, 7),
    st.integers(0, 3),
)


@st.composite
def crowded_levels(draw):
    """Small crowded boards: pushing, pulling, toggling and exits wrap around often."""
    height, width = draw(st.integers(2, 7)), draw(st.integers(2, 7))
    flat = draw(st.lists(cell_values, min_size=height * width, max_size=height * width))
    goals = draw(st.lists(st.integers(0, 7), min_size=height * width, max_size=height * width))
    board = np.array(flat, np.uint16).reshape(height, width)
    loc = (draw(st.integers(0, height - 1)), draw(st.integers(0, width - 1)))
    board[loc] = (
        cells.KINDS["player"]
        | draw(st.integers(0, 7)) << cells.COLOR_BIT
        | draw(st.integers(0, 3)) << cells.ORIENTATION_BIT
    )
    goals = (np.array(goals, np.uint16) << cells.COLOR_BIT).reshape(height, width)
    return Level(board, goals, loc, min_performance=draw(st.sampled_from([-1.0, 0.0, 0.3])))


@PLAY
@given(level=crowded_levels(), symmetry=symmetries, shift=shifts, actions=action_lists)
def test_crowded_random_levels_play_exactly_alike_when_moved(level, symmetry, shift, actions):
    check_play(level, symmetry, shift, actions)


# --- level banks ----------------------------------------------------------------------------


@pytest.fixture
def generations(monkeypatch):
    """The number of times a bank was generated."""
    calls = []
    generate = bank_module.generate_levels

    def counted(*args, **kwargs):
        calls.append(args)
        return generate(*args, **kwargs)

    monkeypatch.setattr(bank_module, "generate_levels", counted)
    return calls


def tiny_bank(cache_dir, params=None, **kwargs):
    return LevelBank(
        params or small("prune-still", (10, 10)),
        size=3,
        cache_dir=cache_dir,
        progress=False,
        **kwargs,
    )


def test_a_bank_is_generated_once_and_reused(tmp_path, generations):
    first = tiny_bank(tmp_path)
    second = tiny_bank(tmp_path)
    assert len(generations) == 1 and first.path == second.path and first.path.exists()
    assert all(same_level(a, b) and a.name == b.name for a, b in zip(first.levels, second.levels))
    assert len(load_levels(first.path)) == 3  # a plain level archive as well
    tiny_bank(tmp_path, seed=1)
    tiny_bank(tmp_path, params=small("prune-still", (11, 11)))
    assert len(generations) == 3 and len(list(tmp_path.glob("*.npz"))) == 3


def test_a_bank_of_other_parameters_is_regenerated(tmp_path, generations, caplog):
    mine = tiny_bank(tmp_path)
    other = tiny_bank(tmp_path, seed=7)
    shutil.copy(other.path, mine.path)  # a file under the wrong key
    with caplog.at_level(logging.WARNING):
        again = tiny_bank(tmp_path)
    assert "other generator parameters" in caplog.text and str(mine.path) in caplog.text
    assert len(generations) == 3
    assert all(same_level(a, b) for a, b in zip(mine.levels, again.levels))
    caplog.clear()
    tiny_bank(tmp_path)  # fixed on disk
    assert len(generations) == 3 and not caplog.text


@pytest.mark.parametrize("damage", [lambda data: data[: len(data) // 2], lambda data: b"junk"])
def test_a_corrupt_bank_is_regenerated(tmp_path, generations, caplog, damage):
    bank = tiny_bank(tmp_path)
    bank.path.write_bytes(damage(bank.path.read_bytes()))
    with caplog.at_level(logging.WARNING):
        again = tiny_bank(tmp_path)
    assert "is corrupt" in caplog.text and len(generations) == 2
    assert all(same_level(a, b) for a, b in zip(bank.levels, again.levels))


def test_banks_made_at_once_are_generated_once(tmp_path, generations):
    # Subprocess envs start together; the lock (per open file, so threads show it too) makes
    # all but one wait for the file.
    with ThreadPoolExecutor(3) as pool:
        banks = list(pool.map(lambda _: tiny_bank(tmp_path), range(3)))
    assert len(generations) == 1
    assert all(same_level(a, b) for bank in banks[1:] for a, b in zip(banks[0].levels, bank.levels))


def test_a_failed_generation_leaves_no_file(tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bank_module, "generate_levels", crash)
    with pytest.raises(KeyboardInterrupt):
        tiny_bank(tmp_path)
    assert not list(tmp_path.glob("*.npz")) and not list(tmp_path.glob(".*.npz"))


def test_a_read_only_cache_serves_its_bank_and_refuses_to_make_one(tmp_path, generations):
    bank = tiny_bank(tmp_path)
    lock = bank.path.with_name(f".{bank.path.name}.lock")
    lock.unlink()
    lock.mkdir()  # the lock file cannot be made: as in a read-only folder (tests run as root)
    assert all(same_level(a, b) for a, b in zip(bank.levels, tiny_bank(tmp_path).levels))
    other = tiny_bank(tmp_path, seed=1).path  # another bank: generated, its lock made
    other.with_name(f".{other.name}.lock").unlink()
    other.with_name(f".{other.name}.lock").mkdir()
    other.unlink()
    with pytest.raises(UserError, match=f"cannot write the level bank {other}: .*cache_dir"):
        tiny_bank(tmp_path, seed=1)
    assert len(generations) == 2


def test_a_full_disk_is_a_one_line_error_leaving_no_file(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(bank_module, "save_levels", full)
    with pytest.raises(UserError, match="cannot write the level bank .*No space left on device"):
        tiny_bank(tmp_path)
    assert not list(tmp_path.glob("*.npz")) and not list(tmp_path.glob(".*.npz"))


def test_an_empty_safelife_cache_is_refused(monkeypatch):
    monkeypatch.setenv("SAFELIFE_CACHE", "")
    with pytest.raises(UserError, match="SAFELIFE_CACHE is set but empty"):
        bank_module.default_cache_dir()


def test_a_fifo_at_the_bank_path_is_replaced_not_read(tmp_path, generations, caplog):
    bank = tiny_bank(tmp_path)
    bank.path.unlink()
    os.mkfifo(bank.path)
    with caplog.at_level(logging.WARNING):
        again = tiny_bank(tmp_path)  # reading the FIFO would block for ever
    assert "not a regular file" in caplog.text and len(generations) == 2
    assert bank.path.is_file() and len(again.levels) == 3


def test_same_seed_same_draws_and_every_symmetry_drawn(tmp_path):
    bank = tiny_bank(tmp_path)
    draws = [bank.sample(np.random.default_rng(5)) for _ in range(2)]
    assert same_level(*draws)
    rng = np.random.default_rng(0)
    boards = {tuple(bank.sample(rng).board.ravel()) for _ in range(200)}
    assert len(boards) > 100
    plain = tiny_bank(tmp_path, symmetries=False, translations=False)
    for draw in (plain.sample(rng) for _ in range(10)):
        assert any(same_level(draw, level) for level in bank.levels)


def test_non_square_banks_keep_their_shape(tmp_path):
    bank = tiny_bank(tmp_path, params=small("prune-still", (10, 13)))
    rng = np.random.default_rng(0)
    assert {bank.sample(rng).shape for _ in range(30)} == {(10, 13)}


def test_bad_bank_options_are_refused(tmp_path):
    for bad in [
        {"size": 0},
        {"size": 2.5},
        {"seed": -1},
        {"symmetries": "yes"},
        {"workers": float("nan")},
        {"workers": -1},
    ]:
        with pytest.raises(UserError, match=f"level bank's {next(iter(bad))}"):
            LevelBank("prune-still", **bad, cache_dir=tmp_path)
    with pytest.raises(UserError, match="unknown option.*sise.*known: size"):
        gym.make("safelife_rl/PruneStill-v1", bank={"sise": 3})
    with pytest.raises(UserError, match="only apply to procedural levels"):
        gym.make("safelife_rl/PruneStill-v1", bank={"size": 3}, levels=SUITES / "prune-still.npz")


def test_registered_envs_draw_from_a_bank(tmp_path, monkeypatch):
    monkeypatch.setenv("SAFELIFE_CACHE", str(tmp_path))
    env = gym.make("safelife_rl/PruneStill-v1", bank={"size": 2, "progress": False})
    names = [env.reset(seed=3)[1]["level"] for _ in range(2)]
    assert names[0] == names[1] and names[0].startswith("prune-still-s")
    assert len(list((tmp_path / "banks").glob("prune-still-2-*.npz"))) == 1
    env.close()


def test_training_configs_leave_banks_off_and_evaluation_on_its_suite(train_config):
    cfg = train_config("env=prune-still")
    assert cfg.env.kwargs.bank is None and cfg.env.eval_kwargs.bank is None
    cfg = train_config("env=prune-still", "env.kwargs.bank={size:1000}")
    assert cfg.env.kwargs.bank.size == 1000 and cfg.env.eval_kwargs.bank is None


def test_a_game_plays_levels_whose_arrays_are_not_row_major():
    import dataclasses

    from safelife_rl.engine.game import SafeLifeGame
    from safelife_rl.envs.registration import suite_file

    level = load_levels(suite_file("append-still"))[0]
    columns = dataclasses.replace(
        level, board=np.asfortranarray(level.board), goals=np.asfortranarray(level.goals)
    )
    game, reference = SafeLifeGame([columns]), SafeLifeGame([level])
    for action in (1, 2, 5, 3):
        game.step(np.array([action]))
        reference.step(np.array([action]))
    assert np.array_equal(game.boards, reference.boards)
