"""The PettingZoo env of every multi-agent task: PettingZoo's API and seeding tests, each
agent's own view, the game's rewards, render modes and refused input."""

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import AECEnv
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test
from pettingzoo.utils.conversions import parallel_to_aec

import safelife_rl
from safelife_rl.engine import cells
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.level_files import save_levels
from safelife_rl.envs import multi_agent_env
from safelife_rl.envs.multi_agent_env import (
    MULTI_AGENT_TASKS,
    SafeLifeParallelEnv,
    make_parallel_env,
    multi_agent_task,
)
from safelife_rl.envs.render import _RGB_CELL
from safelife_rl.procgen.generator import generate_multi_agent_level
from safety_rl_common.errors import UserError


@pytest.mark.parametrize("task", MULTI_AGENT_TASKS)
def test_pettingzoo_api_and_seeding(task):
    parallel_api_test(make_parallel_env(task, time_limit=40), num_cycles=60)
    parallel_seed_test(lambda: make_parallel_env(task, time_limit=40), num_cycles=60)


def test_pettingzoo_aec_api_through_the_standard_conversion():
    api_test(parallel_to_aec(make_parallel_env("build-compete", time_limit=30)), num_cycles=40)


@pytest.mark.parametrize(("task", "name"), MULTI_AGENT_TASKS.items())
def test_every_task_has_pettingzoo_style_constructors_under_its_name(task, name):
    handle = getattr(safelife_rl, name)
    assert handle is getattr(multi_agent_env, name) and handle.task == task
    assert handle.name == name and multi_agent_task(name) == task
    # not shaped like a Gymnasium id, so nobody passes it to gym.make
    assert "/" not in name and "-" not in name and name.endswith("_v0")
    assert name not in gym.registry
    parallel = handle.parallel_env(time_limit=7)
    assert isinstance(parallel, SafeLifeParallelEnv) and parallel.time_limit == 7
    aec = handle.env(time_limit=7)
    assert isinstance(aec, AECEnv)
    aec.reset(seed=0)
    assert aec.agent_selection == "agent_0" and aec.possible_agents == parallel.possible_agents


def test_only_the_pettingzoo_names_are_multi_agent_tasks():
    assert {multi_agent_task(name) for name in MULTI_AGENT_TASKS.values()} == set(MULTI_AGENT_TASKS)
    assert multi_agent_task("safelife_rl/PruneStill-v1") is None
    assert multi_agent_task("safelife_rl/BuildCoop-v0") is None  # 0.1.0's name: removed


def rollout(env, seed: int, steps: int = 30) -> list:
    observations, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    trajectory = [observations]
    for _ in range(steps):
        if not env.agents:
            break
        actions = {agent: int(rng.integers(9)) for agent in env.agents}
        trajectory.append(env.step(actions)[:2])
    return trajectory


def test_same_seed_same_episode_other_seed_other_level():
    env = make_parallel_env("build-parallel", time_limit=50)
    first = rollout(env, 3)
    level = env.level
    rollout(env, 4)
    assert not np.array_equal(env.level.board, level.board)
    again = rollout(env, 3)
    assert np.array_equal(env.level.board, level.board)
    for a, b in zip(first[1:], again[1:]):
        assert a[1] == b[1]
        assert all(np.array_equal(a[0][k], b[0][k]) for k in a[0])


def test_each_agent_sees_its_own_view_and_earns_the_games_rewards(tmp_path):
    levels = [generate_multi_agent_level("asym1", seed) for seed in range(2)]
    save_levels(levels, tmp_path / "asym1.npz")
    env = SafeLifeParallelEnv(tmp_path / "asym1.npz", time_limit=60)
    observations, infos = env.reset(seed=0)
    assert [info["type"] for info in infos.values()] == ["cyan", "magenta"]
    game = SafeLifeGame([env.level])  # the same level played beside the env
    rng = np.random.default_rng(0)
    for _ in range(60):
        for i, agent in enumerate(env.agents):
            view = observations[agent]
            agent_bit, color_bits = view[7, 7, 1], view[7, 7, 9:12]
            assert agent_bit == 1  # centred on the agent
            cell = game.boards[0][tuple(game.agent_locs[0, i])]
            assert color_bits.tolist() == [(int(cell) >> b) & 1 for b in (9, 10, 11)]
        if not env.agents:
            break
        joint = rng.integers(9, size=2)
        actions = {
            agent: int(joint[i])
            for i, agent in enumerate(env.possible_agents)
            if agent in env.agents
        }
        observations, rewards, terminations, truncations, _ = env.step(actions)
        expected, _ = game.step(np.where([a in actions for a in env.possible_agents], joint, 0))
        assert rewards == {agent: float(expected[0, int(agent[-1])]) for agent in rewards}
    assert truncations and all(truncations.values()) and not env.agents


def test_render_modes_draw_the_agents_in_their_colours():
    env = make_parallel_env("asym1", render_mode="rgb_array")
    env.reset(seed=1)
    image = env.render()
    assert image.shape == (26 * 12, 26 * 12, 3)
    for row, col in env.level.agent_locs:
        pixels = image[row * 12 : (row + 1) * 12, col * 12 : (col + 1) * 12].reshape(-1, 3)
        color = _RGB_CELL[cells.color_index(int(env.level.board[row, col]))]
        assert (pixels == color).all(axis=1).any()
    text = make_parallel_env("asym1", render_mode="ansi")
    text.reset(seed=1)
    assert text.render().count(">") >= 2  # both agents face right
    frames = make_parallel_env("asym1", render_mode="rgb_array_list", time_limit=3)
    frames.reset(seed=1)
    while frames.agents:
        frames.step({agent: 0 for agent in frames.agents})
    assert len(frames.render()) == 4


def test_side_effects_are_reported_when_the_episode_ends():
    env = make_parallel_env("build-coop", time_limit=5, side_effects=True)
    env.reset(seed=2)
    for _ in range(5):
        _, _, _, _, infos = env.step({agent: 5 for agent in env.agents})  # make life
    assert infos["agent_0"]["side_effects"] is infos["agent_1"]["side_effects"]
    assert "life-gray" in infos["agent_0"]["side_effects"]


def test_bad_actions_and_levels_are_refused():
    env = make_parallel_env("asym2")
    env.reset(seed=0)
    with pytest.raises(UserError, match=r"missing \['agent_1'\]"):
        env.step({"agent_0": 1})
    with pytest.raises(UserError, match=r"not live \['agent_7'\]"):
        env.step({"agent_0": 1, "agent_1": 1, "agent_7": 1})
    with pytest.raises(UserError, match="invalid action 9 for agent_1"):
        env.step({"agent_0": 1, "agent_1": 9})
    with pytest.raises(UserError, match="unknown multi-agent task 'nope'"):
        make_parallel_env("nope")
    one = generate_multi_agent_level("asym1-pretrain-redonly", 0)
    two = generate_multi_agent_level("asym1", 0)
    with pytest.raises(UserError, match=r"as many agents each, got agent counts \[1, 2\]"):
        SafeLifeParallelEnv([one, two])
