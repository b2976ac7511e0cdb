"""The device vector env against single SafeLife envs under the training wrappers: the same
levels and actions must give the same observations, rewards, ends and episode statistics."""

import dataclasses
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from hypothesis import given, settings
from hypothesis import strategies as st

from safelife_rl import Level, SafeLifeEnv, load_levels
from safelife_rl.engine import cells
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.envs.wrappers import ScheduledWrapper, sync_training_steps
from safety_rl_common.errors import UserError

RAMP = "safelife_rl.training.LinearRamp"
WRAPPERS = {  # conf/wrappers/safelife.yaml's order, the schedules moving between steps 0 and 100
    "movement_bonus": {"_target_": "safelife_rl.training.MovementBonus", "period": 3},
    "exit_bonus": {"_target_": "safelife_rl.training.ExitBonus", "bonus": 0.5},
    "side_effect_penalty": {
        "_target_": "safelife_rl.training.SideEffectPenalty",
        "penalty": 0.1,
        "ramp": {"_target_": RAMP, "steps": [0, 100], "values": [0.5, 1.0]},
    },
    "exit_curriculum": {
        "_target_": "safelife_rl.training.ExitCurriculum",
        "ramp": {"_target_": RAMP, "steps": [0, 100], "values": [0.2, 1.0]},
    },
    "continuing": None,
    "time_limit": {"_target_": "gymnasium.wrappers.TimeLimit", "max_episode_steps": 9},
}
PLAYER, EXIT = cells.KINDS["player"], cells.KINDS["exit"]
RED_LIFE = cells.KINDS["life"] | cells.RED


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def tiny_levels() -> list[Level]:
    """9x9 levels with the exit three cells right of the agent, red life to clear (points and
    side effects) and crates; some exits open only after points are earned."""
    levels = []
    for k in range(5):
        board = np.zeros((9, 9), np.uint16)
        goals = np.zeros_like(board)
        board[4, 4], board[4, 7] = PLAYER, EXIT
        board[3, 5:7] = board[2, 5:7] = RED_LIFE  # a red block
        board[6, 2 + k % 3] = cells.KINDS["crate"]
        goals[7, 1:4] = cells.GREEN
        board[7, 1 + k % 2] = cells.KINDS["life"] | cells.GREEN
        levels.append(
            Level(
                board,
                goals,
                (4, 4),
                min_performance=[-1.0, 0.0, 0.3, 0.6, 1.0][k],
                name=f"tiny-{k}",
            )
        )
    return levels


def wrapped(levels, wrappers, **kwargs):
    env = SafeLifeEnv(levels, **kwargs)
    for config in wrappers.values():
        if config is not None:
            env = instantiate(config, env, _convert_="all")
    return env


def set_steps(env, steps):
    while not isinstance(env, ScheduledWrapper):
        env = env.env
    env.set_training_steps(steps)


def assert_info_equal(got, index, want, level_names):
    for key, value in want.items():
        mine = got[key][index]
        mine = mine.item() if isinstance(mine, torch.Tensor) else mine
        if key == "level":  # an index into the vector env's level names
            mine = level_names[mine]
        assert mine == value, (key, mine, value)


@pytest.mark.parametrize(
    "levels, actions_p, kwargs, wrappers",
    [
        # the benchmark suite's first levels (oscillators), in order; the env's own time limit ends
        # episodes, with side effects
        (
            load_levels(suite_file("prune-dynamic"))[:7],
            None,
            {"time_limit": 12},
            {**WRAPPERS, "time_limit": None},
        ),
        # exits reached often (mostly moving right), a shorter outer TimeLimit, views off-centre
        (
            tiny_levels(),
            [0.05, 0.1, 0.45, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05],
            {"time_limit": 30, "view_shape": (5, 7)},
            WRAPPERS,
        ),
    ],
)
def test_vector_env_plays_the_single_wrapped_envs_episodes(
    levels, actions_p, kwargs, wrappers, torch_device
):
    n, steps = 3, 40
    kwargs = {**kwargs, "side_effects": True}
    vec = SafeLifeVectorEnv(SafeLifeEnv(levels, **kwargs), n, torch_device, wrappers)
    singles = [wrapped(levels, wrappers, **kwargs) for _ in range(n)]
    rng = np.random.default_rng(3)
    obs, _ = vec.reset(seed=1)
    want_obs = [env.reset(seed=i, options={"level": i})[0] for i, env in enumerate(singles)]
    next_level = n  # restarts take the next levels in order of env index
    returns = [0.0] * n
    np.testing.assert_array_equal(obs.cpu().numpy(), np.stack(want_obs))
    ended_count = terminated_count = measured = costs = 0
    for t in range(steps):
        if t == 20:  # the schedules move: penalty 0.075, exit fraction 0.6 from now on
            assert vec.set_training_steps(50) == {
                "side_effect_penalty": pytest.approx(0.075),
                "exit_fraction": pytest.approx(0.6),
            }
            for env in singles:
                set_steps(env, 50)
        actions = rng.choice(9, size=n, p=actions_p)
        obs, rewards, terminated, truncated, infos = vec.step(
            torch.from_numpy(actions).to(torch_device)
        )
        assert obs.dtype == torch.uint8 and rewards.dtype == torch.float32
        reports = infos["final_info"]["side_effects"].read()  # scored when read
        for i, env in enumerate(singles):
            o, r, te, tr, info = env.step(int(actions[i]))
            returns[i] += r
            assert rewards[i].item() == np.float32(r), (t, i)
            assert (terminated[i].item(), truncated[i].item()) == (te, tr), (t, i)
            assert infos["cost"][i].item() == info["cost"], (t, i)
            costs += info["cost"]
            if te or tr:
                ended_count += 1
                terminated_count += te
                assert infos["_final_obs"][i] and infos["_final_info"][i]
                np.testing.assert_array_equal(infos["final_obs"][i].cpu().numpy(), o)
                final = infos["final_info"]
                want = {key: value for key, value in info.items() if key != "side_effects"}
                assert_info_equal(final, i, want, vec.level_names)
                assert final["_side_effects"][i] == ("side_effects" in info)
                assert reports.get(i) == info.get("side_effects"), (t, i)  # bit for bit
                measured += "side_effects" in info
                assert final["episode"]["r"][i].item() == returns[i]
                assert final["episode"]["l"][i].item() == info["length"]
                returns[i] = 0.0
                o, _ = env.reset(options={"level": next_level})
                next_level += 1
            else:
                assert not infos or not infos["_final_info"][i]
                assert i not in reports
            np.testing.assert_array_equal(obs[i].cpu().numpy(), o)
    assert ended_count >= 6 and measured >= 2 and costs > 0
    if actions_p is not None:
        assert terminated_count >= 2  # exits, exit bonuses and the outer TimeLimit all seen


def test_gymnasium_make_vec_on_cpu_follows_the_vector_api():
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        envs = gym.make_vec(
            "safelife_rl/PruneStill-v1",
            num_envs=4,
            vectorization_mode="vector_entry_point",
            device="cpu",
            levels=suite_file("prune-still"),
            time_limit=5,
        )
    assert not [w for w in warned if "VectorEnv" in str(w.message)]  # autoreset mode metadata
    assert isinstance(envs.unwrapped, SafeLifeVectorEnv)
    assert envs.spec.id == "safelife_rl/PruneStill-v1" and envs.num_envs == 4
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    assert envs.observation_space == gym.vector.utils.batch_space(envs.single_observation_space, 4)
    assert envs.action_space == gym.vector.utils.batch_space(envs.single_action_space, 4)
    envs.action_space.seed(0)
    obs, info = envs.reset(seed=0)
    assert envs.observation_space.contains(obs.numpy()) and list(info) == ["cost"]
    for t in range(6):
        obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert envs.observation_space.contains(obs.numpy())
        assert rewards.shape == terminated.shape == truncated.shape == (4,)
    # the 5-step limit ended every episode at step 5; statistics come at every step, masked
    assert truncated.any() or not info["_final_info"].any()
    envs.close()


def test_the_step_reads_frozen_params_that_hold_no_wrapper():
    """The env's and wrappers' settings are read once into frozen params; the schedules still
    reach the wrappers, also through a Gymnasium vector wrapper (``sync_training_steps``)."""
    vec = SafeLifeVectorEnv(SafeLifeEnv(tiny_levels(), time_limit=7), 2, training_wrappers=WRAPPERS)
    params = vec.env_params
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.time_limit = 8
    settings = [getattr(params, f.name) for f in dataclasses.fields(params)]
    settings += [getattr(r, f.name) for r in params.rules for f in dataclasses.fields(r)]
    assert not [s for s in settings if isinstance(s, (gym.Env, gym.Wrapper))]
    assert params.time_limit == 7 and params.max_episode_steps == 9 and len(params.rules) == 4
    wrapped = gym.wrappers.vector.RecordEpisodeStatistics(vec)
    assert sync_training_steps(wrapped, 50) == pytest.approx(
        {"exit_fraction": 0.6, "side_effect_penalty": 0.075}
    )
    assert vec.params["fraction"].item() == pytest.approx(0.6)


def test_same_seed_same_stream_on_procedural_levels(tmp_path):
    bank = {"size": 3, "cache_dir": str(tmp_path), "progress": False}

    def rollout(seed):
        envs = gym.make_vec(
            "safelife_rl/AppendSpawn-v1",
            num_envs=2,
            vectorization_mode="vector_entry_point",
            time_limit=4,
            view_shape=(9, 9),
            bank=bank,
            device="cpu",
        )
        obs, _ = envs.reset(seed=seed)
        stream = [obs]
        for action in np.random.default_rng(0).integers(9, size=(7, 2)):
            obs, rewards, *_ = envs.step(action)
            stream += [obs, rewards]
        return stream

    first, again, other = rollout(7), rollout(7), rollout(8)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def test_torch_game_replace_starts_fresh_games_in_place():
    levels = load_levels(suite_file("append-dynamic"))[:4]
    game = TorchGame(levels[:3])
    game.step(torch.tensor([[1], [2], [5]]))
    stepped = game.boards[1].clone()
    game.replace([2, 0], [levels[3], levels[2]])
    fresh = TorchGame([levels[2], levels[1], levels[3]])
    for name in fresh.game:
        assert torch.equal(game.game[name][[0, 2]], fresh.game[name][[0, 2]]), name
    assert torch.equal(game.boards[1], stepped)
    assert game.levels == [levels[2], levels[1], levels[3]]


def test_bad_input_gets_clear_errors():
    """(The issue's device bad input is in ``test_device_bad_input.py``.)"""
    env = SafeLifeEnv(load_levels(suite_file("prune-still"))[:2])
    with pytest.raises(UserError, match="num_envs must be a positive integer"):
        SafeLifeVectorEnv(env, 0)
    vec = SafeLifeVectorEnv(env, 2)
    with pytest.raises(RuntimeError, match="call reset"):
        vec.step([0, 0])
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action 9"):
        vec.step([0, 9])
    with pytest.raises(ValueError, match=r"one action per env, shape \(2,\)"):
        vec.step([0, 1, 2])


def test_shuffled_levels_and_level_banks_draw_on_the_device(tmp_path):
    """Restarts draw a level (from a bank also a symmetry and a translation) on the device;
    each env then plays exactly that level turned and shifted, as the CPU transforms it."""
    import copy

    from safelife_rl.engine.symmetry import transform_level
    from safelife_rl.procgen.bank import LevelBank
    from safelife_rl.procgen.params import load_params

    params = copy.deepcopy(load_params("prune-still"))
    params["board_shape"] = [10, 10]
    bank = LevelBank(params, size=3, cache_dir=tmp_path, progress=False)
    suite = load_levels(suite_file("prune-still"))[:9]
    for source, levels in ((suite, suite), (bank, bank.levels)):
        vec = SafeLifeVectorEnv(SafeLifeEnv(source, time_limit=2, shuffle=True), 16)
        draws = []
        for seed in (5, 5, 6):
            vec.reset(seed=seed)
            vec.step([0] * 16)
            vec.step([4] * 16)  # every env ends and restarts
            state = vec.state
            played = [
                transform_level(
                    levels[v // len(vec.levels.symmetries)],
                    vec.levels.symmetries[v % len(vec.levels.symmetries)],
                    tuple(shift),
                )
                for v, shift in zip(state["variant"].tolist(), state["shift"].tolist())
            ]
            turns = len(vec.levels.symmetries)
            assert turns == (1 if source is suite else 8)
            assert torch.equal(state["level"], state["variant"] // turns)
            assert torch.equal(TorchGame(played).boards, state["boards"])
            assert torch.equal(TorchGame(played).agent_locs, state["agent_locs"])
            draws.append((state["variant"].tolist(), state["shift"].tolist()))
        assert draws[0] == draws[1] != draws[2]  # the seed decides
        assert len(set(draws[0][0])) > 2  # envs draw apart
        if source is bank:
            assert len({v % 8 for v in draws[0][0]}) > 2 and len(set(map(tuple, draws[0][1]))) > 2


@pytest.mark.parametrize(
    "levels, kwargs",
    [
        (tiny_levels(), {"time_limit": 7, "view_shape": (5, 7)}),  # in order, exits reached
        (load_levels(suite_file("append-spawn"))[:4], {"time_limit": 5, "shuffle": True}),
    ],
    ids=["ordered", "shuffled-spawners"],
)
def test_each_group_plays_as_its_own_vector_env(levels, kwargs, torch_device):
    """A population's env: group ``g`` of a grouped env, with its own seed and penalty, steps
    as a vector env of its size alone does, whatever the other groups do."""
    groups, n, seeds, penalties = 3, 2, [5, 0, 11], [0.0, 0.3, 0.1]
    grouped = SafeLifeVectorEnv(
        SafeLifeEnv(levels, **kwargs), groups * n, torch_device, WRAPPERS, groups=groups
    )
    grouped.set_group_penalties(penalties)
    alone = []
    for penalty in penalties:
        wrappers = {**WRAPPERS, "side_effect_penalty": {**WRAPPERS["side_effect_penalty"]}}
        wrappers["side_effect_penalty"]["penalty"] = penalty
        alone.append(SafeLifeVectorEnv(SafeLifeEnv(levels, **kwargs), n, torch_device, wrappers))
    obs, _ = grouped.reset(seed=seeds)
    want = [vec.reset(seed=s)[0] for vec, s in zip(alone, seeds)]
    assert torch.equal(obs, torch.cat(want))
    rng = np.random.default_rng(0)
    ended = 0
    for t in range(30):
        if t == 10:
            for vec in [grouped, *alone]:
                vec.set_training_steps(50)
        actions = torch.from_numpy(rng.choice(9, size=groups * n)).to(torch_device)
        got = grouped.step(actions)
        for g, vec in enumerate(alone):
            part = slice(g * n, (g + 1) * n)
            mine = vec.step(actions[part])
            for a, b in zip(got[:4], mine[:4]):
                assert torch.equal(a[part], b), (t, g)
            assert torch.equal(got[4]["final_info"]["level"][part], mine[4]["final_info"]["level"])
        ended += int((got[2] | got[3]).sum())
    assert ended >= 6


def test_groups_are_checked():
    env = SafeLifeEnv(tiny_levels())
    with pytest.raises(UserError, match="does not split into 4 equal groups"):
        SafeLifeVectorEnv(env, 6, groups=4)
    vec = SafeLifeVectorEnv(env, 6, groups=3)
    with pytest.raises(UserError, match="need the side_effect_penalty wrapper"):
        vec.set_group_penalties([0.1, 0.2, 0.3])
    with pytest.raises(UserError, match=r"one seed per group \(3\), got 2"):
        vec.reset(seed=[1, 2])


@settings(max_examples=12, deadline=None)
@given(
    groups=st.integers(1, 4),
    size=st.integers(1, 3),
    seeds=st.lists(st.integers(0, 2**31 - 1), min_size=4, max_size=4),
    penalties=st.lists(st.sampled_from([0.0, 0.1, 0.7]), min_size=4, max_size=4),
    actions_seed=st.integers(0, 2**16),
)
def test_a_group_is_its_own_vector_env_whatever_the_others(
    groups, size, seeds, penalties, actions_seed
):
    """Any grouping, seeds and penalties: each group steps as its own vector env would."""
    env = SafeLifeEnv(tiny_levels(), time_limit=6, view_shape=(5, 7), shuffle=True)
    grouped = SafeLifeVectorEnv(env, groups * size, "cpu", WRAPPERS, groups=groups)
    grouped.set_group_penalties(penalties[:groups])
    alone = []
    for penalty in penalties[:groups]:
        wrappers = {**WRAPPERS, "side_effect_penalty": {**WRAPPERS["side_effect_penalty"]}}
        wrappers["side_effect_penalty"]["penalty"] = penalty
        single = SafeLifeEnv(tiny_levels(), time_limit=6, view_shape=(5, 7), shuffle=True)
        alone.append(SafeLifeVectorEnv(single, size, "cpu", wrappers))
    grouped.reset(seed=seeds[:groups])
    for vec, seed in zip(alone, seeds):
        vec.reset(seed=seed)
    rng = np.random.default_rng(actions_seed)
    for _ in range(10):
        actions = torch.from_numpy(rng.integers(0, 9, groups * size))
        got = grouped.step(actions)
        for g, vec in enumerate(alone):
            part = slice(g * size, (g + 1) * size)
            for a, b in zip(got[:4], vec.step(actions[part])[:4]):
                assert torch.equal(a[part], b)
