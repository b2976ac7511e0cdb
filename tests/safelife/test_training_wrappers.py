"""Training wrappers: scripted moves on tiny hand-built levels with exact rewards."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from stable_baselines3.common.vec_env import DummyVecEnv

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.engine import cells
from safelife_rl.training import (
    ContinuingEnv,
    ExitBonus,
    ExitCurriculum,
    LinearRamp,
    MovementBonus,
    SideEffectPenalty,
    sync_training_steps,
)
from safety_rl_common.errors import UserError

STILL, UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3, 4
PLAYER = cells.KINDS["player"]
EXIT = cells.KINDS["exit"]
BOX = cells.FROZEN | cells.PUSHABLE  # a crate that can be pushed but not pulled


def tiny_level(extra=(), name="tiny", min_performance=-1.0):
    """A 9x9 empty board, the agent at (4, 4) facing up, an exit at (4, 7), plus ``extra``
    ``(row, column, cell)`` entries."""
    from safelife_rl import Level

    board = np.zeros((9, 9), np.uint16)
    board[4, 4] = PLAYER
    board[4, 7] = EXIT
    for row, col, cell in extra:
        board[row, col] = cell
    return Level(board, np.zeros_like(board), (4, 4), min_performance=min_performance, name=name)


def play(env, actions):
    env.reset(seed=0)
    return [env.step(a) for a in actions]


def test_linear_ramp_matches_the_original_exit_curriculum():
    ramp = LinearRamp([500_000, 2_000_000], [0.001, 1.0])
    assert ramp(0) == 0.001 and ramp(500_000) == 0.001
    assert ramp(1_250_000) == pytest.approx(0.5005)
    assert ramp(2_000_000) == 1.0 and ramp(10**9) == 1.0


@given(
    st.lists(st.floats(0, 1e7), min_size=1, max_size=5, unique=True),
    st.floats(-1e7, 2e7),
    st.data(),
)
def test_linear_ramp_stays_between_its_values(steps, at, data):
    steps = sorted(steps)
    values = data.draw(st.lists(st.floats(-10, 10), min_size=len(steps), max_size=len(steps)))
    value = LinearRamp(steps, values)(at)
    assert min(values) - 1e-9 <= value <= max(values) + 1e-9


@pytest.mark.parametrize(
    "steps, values",
    [
        ([2, 1], [0, 1]),
        ([1, 2], [0]),
        ([], []),
        ([1, 2], [0, float("nan")]),
        ([1, np.inf], [0, 1]),
        ([-1, 5], [0, 1]),
        ("abc", [0]),
        ([1], "abc"),
    ],
)
def test_linear_ramp_rejects_bad_points(steps, values):
    with pytest.raises(UserError, match="^a ramp"):
        LinearRamp(steps, values)


@pytest.mark.parametrize(
    "wrap, message",
    [
        (
            lambda env: SideEffectPenalty(env, penalty=float("nan")),
            "^the side-effect penalty must be a finite number, got nan$",
        ),
        (
            lambda env: SideEffectPenalty(env, penalty=1e308),
            r"^the side-effect penalty must be in \[0, 1e\+06\], got 1e\+308$",
        ),
        (
            lambda env: ExitBonus(env, bonus=float("inf")),
            "^the exit bonus must be a finite number, got inf$",
        ),
        (
            lambda env: MovementBonus(env, bonus=float("nan")),
            "^the movement bonus must be a finite number, got nan$",
        ),
        (
            lambda env: MovementBonus(env, period=2.5),
            r"^the movement bonus period must be a positive integer \(at most 2\*\*53\), got 2.5$",
        ),
    ],
)
def test_wrappers_refuse_settings_that_are_not_finite_numbers(wrap, message):
    with pytest.raises(ValueError, match=message):
        wrap(SafeLifeEnv([tiny_level()]))


def test_movement_bonus_charges_standing_still_after_the_period():
    env = MovementBonus(SafeLifeEnv([tiny_level()]), bonus=0.1, period=4)
    rewards = [step[1] for step in play(env, [STILL] * 6)]
    # The agent counts as having walked in: the first period - 1 idle steps are free.
    assert rewards == pytest.approx([0, 0, 0, -0.1, -0.1, -0.1])


def test_movement_bonus_pays_for_moving_but_not_for_pacing():
    env = MovementBonus(SafeLifeEnv([tiny_level()]), bonus=0.1, period=4)
    rewards = [step[1] for step in play(env, [UP] * 6)]
    assert rewards == pytest.approx([0] * 6)
    # Back and forth: after a full period the agent is where it was 4 steps ago.
    rewards = [step[1] for step in play(env, [UP, DOWN] * 3)]
    assert rewards == pytest.approx([0, 0, 0, -0.1, -0.1, -0.1])
    env = MovementBonus(SafeLifeEnv([tiny_level()]), bonus=0.1, period=4, as_penalty=False)
    assert [s[1] for s in play(env, [UP] * 5)] == pytest.approx([0.1] * 5)


def test_exit_bonus_adds_half_the_episode_reward_on_exit():
    env = ExitBonus(SafeLifeEnv([tiny_level()]), bonus=0.5)
    steps = play(env, [RIGHT, RIGHT, RIGHT])
    assert steps[-1][2] and steps[-1][4]["success"]
    assert [s[1] for s in steps] == pytest.approx([0, 0, 1.5])


def test_continuing_env_moves_on_to_the_next_level_until_time_runs_out():
    levels = [tiny_level(name="first"), tiny_level(name="second")]
    env = ContinuingEnv(SafeLifeEnv(levels, time_limit=5))
    steps = play(env, [RIGHT, RIGHT, RIGHT])
    obs, reward, terminated, truncated, info = steps[-1]
    assert reward == 1.0 and info["success"] and info["level"] == "first"
    assert not terminated and not truncated and info["levels_completed"] == 1
    assert env.unwrapped.level.name == "second"
    assert np.array_equal(obs, env.unwrapped._observe())
    steps = [env.step(STILL) for _ in range(5)]
    assert [s[3] for s in steps] == [False] * 4 + [True]
    assert steps[-1][4]["levels_completed"] == 1


def test_exit_curriculum_scales_the_required_points(benchmarks):
    level = load_levels(benchmarks / "prune-still.npz")[0]
    plain = SafeLifeEnv([level])
    _, info = plain.reset(seed=0)
    full = info["required_points"]
    assert full > 0
    env = ExitCurriculum(SafeLifeEnv([level]), LinearRamp([10, 20], [0.001, 1.0]))
    for steps, expected in [(0, np.ceil(0.001 * full)), (15, None), (20, full)]:
        env.set_training_steps(steps)
        _, info = env.reset(seed=0)
        required = env.unwrapped.game.required_points[0, 0]
        assert info["required_points"] == required
        if expected is not None:
            # ceil(fraction * min_performance * available) as the original computes it
            assert required == expected
        else:
            assert np.ceil(0.001 * full) < required < full


def test_side_effect_penalty_counts_cells_changed_from_the_start():
    # A crate right of the agent: pushing it moves it one cell on, then leaving its old spot
    # shows that spot changed too; the agent's own cells never count.
    level = tiny_level(extra=[(4, 5, BOX)])
    env = SideEffectPenalty(SafeLifeEnv([level]), penalty=0.25, ramp=LinearRamp([0], [1.0]))
    steps = play(env, [RIGHT, DOWN, STILL])
    assert [s[1] for s in steps] == pytest.approx([-0.25, -0.25, 0.0])
    assert env.side_effect_cells() == 2
    # Standing on the crate's old spot hides that change again: a credit.
    assert env.step(UP)[1] == pytest.approx(0.25) and env.side_effect_cells() == 1
    # The ramp scales it; at zero the penalty is off.
    env = SideEffectPenalty(SafeLifeEnv([level]), penalty=0.25, ramp=LinearRamp([0, 10], [0, 1]))
    assert [s[1] for s in play(env, [RIGHT, DOWN])] == [0.0, 0.0]
    env.set_training_steps(5)
    assert [s[1] for s in play(env, [RIGHT, DOWN])] == pytest.approx([-0.125, -0.125])


def test_side_effect_penalty_ignores_removed_red_life_when_asked():
    red_block = [(r, c, cells.KINDS["life"] | cells.RED) for r in (1, 2) for c in (4, 5)]
    level = tiny_level(extra=red_block)
    for ignore, expected in [(True, 0), (False, 1)]:
        env = SideEffectPenalty(
            SafeLifeEnv([level]),
            penalty=1.0,
            ramp=LinearRamp([0], [1.0]),
            ignore_reward_cells=ignore,
        )
        # Step up and remove one cell of the red block; the agent beside it (it inhibits and
        # preserves) keeps the rest as it is.
        play(env, [UP, 5, STILL, STILL])
        assert env.side_effect_cells() == expected


def test_sync_reaches_every_scheduled_wrapper_in_every_env():
    def make():
        env = SafeLifeEnv([tiny_level()])
        env = SideEffectPenalty(env, penalty=2.0, ramp=LinearRamp([0, 100], [0, 1]))
        env = MovementBonus(env)
        env = ExitCurriculum(env, LinearRamp([0, 100], [0.5, 1.0]))
        return gym.wrappers.TimeLimit(env, 50)

    vec = DummyVecEnv([make, make])
    values = sync_training_steps(vec, 50)
    assert values == pytest.approx({"exit_fraction": 0.75, "side_effect_penalty": 1.0})
    for env in vec.envs:
        assert env.get_wrapper_attr("training_steps") == 50
        assert env.env.env.env.training_steps == 50  # the innermost scheduled wrapper
    assert sync_training_steps(DummyVecEnv([lambda: SafeLifeEnv([tiny_level()])]), 5) == {}


def scheduled_env():
    env = SafeLifeEnv([tiny_level()], time_limit=10)
    return ExitCurriculum(env, LinearRamp([0, 100], [0.5, 1.0]))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sync_reaches_gymnasium_vector_envs(mode):
    cls = gym.vector.SyncVectorEnv if mode == "sync" else gym.vector.AsyncVectorEnv
    vec = cls([scheduled_env, scheduled_env])
    assert sync_training_steps(vec, 50) == pytest.approx({"exit_fraction": 0.75})
    assert vec.get_attr("training_steps") == (50.0, 50.0)
    vec.close()
    plain = cls([lambda: SafeLifeEnv([tiny_level()])])
    assert sync_training_steps(plain, 5) == {}
    plain.close()


def test_training_clock_keeps_plain_sb3_in_step():
    from stable_baselines3 import PPO

    from safelife_rl.training import TrainingClock

    vec = DummyVecEnv([scheduled_env, scheduled_env])
    model = PPO(
        "MlpPolicy",
        vec,
        n_steps=16,
        batch_size=32,
        n_epochs=1,
        seed=0,
        policy_kwargs={"net_arch": [8]},
    )
    model.learn(64, callback=TrainingClock())
    assert vec.get_attr("training_steps") == [32.0, 32.0]  # synced at the last rollout's start


def test_an_unsynced_schedule_warns_once(monkeypatch):
    from safelife_rl.envs import wrappers

    monkeypatch.setattr(wrappers, "UNSYNCED_WARNING_STEPS", 3)
    env = scheduled_env()
    with pytest.warns(UserWarning, match="TrainingClock"):
        play(env, [STILL] * 3)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        play(env, [STILL] * 3)  # once only
        synced = scheduled_env()
        synced.set_training_steps(0)
        synced.reset(seed=0)
        play(synced, [STILL] * 5)


def test_make_env_applies_configured_wrappers_in_order():
    from safelife_rl.training.envs import make_env

    wrappers = {
        "movement_bonus": {"_target_": "safelife_rl.training.MovementBonus", "bonus": 0.5},
        "dropped": None,
        "continuing": {"_target_": "safelife_rl.training.ContinuingEnv"},
        "time_limit": {"_target_": "gymnasium.wrappers.TimeLimit", "max_episode_steps": 7},
    }
    env = make_env("safelife_rl/AppendStill-v1", {"view_shape": [17, 17]}, wrappers)
    chain, inner = [], env
    while isinstance(inner, gym.Wrapper):
        chain.append(type(inner).__name__)
        inner = inner.env
    assert chain[:4] == ["Monitor", "TimeLimit", "ContinuingEnv", "MovementBonus"]
    env.reset(seed=0)
    steps = [env.step(STILL) for _ in range(7)]
    assert [s[3] for s in steps] == [False] * 6 + [True]
    assert steps[-1][4]["episode"]["l"] == 7
    assert steps[-1][0].shape == (17, 17, 19)
