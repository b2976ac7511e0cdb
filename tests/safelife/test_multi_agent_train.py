"""Training multi-agent SafeLife with one shared policy: the vector env of agents, and tiny
real runs through the Hydra config (per-agent TensorBoard tags, evaluation on the suite)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

import safelife_rl.training  # noqa: F401  (config resolvers and schema)
from safelife_rl.engine import cells
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safelife_rl.envs.multi_agent_env import MULTI_AGENT_TASKS, SafeLifeParallelEnv
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.run import train
from safelife_rl.training.shared_policy_vec_env import SharedPolicyVecEnv
from safety_rl_common.errors import UserError

CONF = Path(__file__).resolve().parents[2] / "safelife_rl" / "conf"
TINY = [
    "experiment=multi",
    "env.kwargs.view_shape=[17,17]",
    "env.kwargs.time_limit=30",
    "policy.kwargs.features_extractor_kwargs.features_dim=16",
    "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
    "n_envs=2",
    "progress_bar=false",
    "algo.n_steps=16",
    "callbacks.evaluation.n_episodes=2",
    "callbacks.evaluation.eval_every=64",
    "callbacks.checkpoint.save_every=64",
    "callbacks.checkpoint.keep=0",
]


def config(*overrides):
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("train", overrides=[*TINY, *overrides])


def corridor() -> MultiAgentLevel:
    """Agent 0 at (2, 1), agent 1 at (2, 4) next to the open exit at (2, 5)."""
    board = np.zeros((5, 7), np.uint16)
    board[2, 1] = board[2, 4] = cells.KINDS["player"]
    board[2, 5] = cells.KINDS["exit"]
    return MultiAgentLevel(
        board,
        np.zeros_like(board),
        ((2, 1), (2, 4)),
        ("a", "b"),
        np.tile(DEFAULT_POINTS_TABLE, (2, 1, 1)),
    )


def test_an_agent_that_exits_early_waits_in_a_dead_slot():
    vec = SharedPolicyVecEnv(
        [lambda: SafeLifeParallelEnv([corridor()], view_shape=(3, 3), time_limit=3)] * 2
    )
    assert vec.num_envs == 4
    observations = vec.reset()
    assert observations.shape == (4, 3, 3, 19) and observations[:, 1, 1, 1].all()
    _, rewards, dones, infos = vec.step(np.array([0, 2, 0, 0]))  # env 0's agent 1 exits
    assert rewards.tolist() == [0, 1, 0, 0] and dones.tolist() == [False, True, False, False]
    assert infos[1]["agent"] == "agent_1" and infos[1]["episode"]["r"] == 1.0
    assert infos[1]["success"] and not infos[1]["TimeLimit.truncated"]
    observations, rewards, dones, infos = vec.step(np.array([2, 2, 0, 0]))
    assert not observations[1].any() and rewards[1] == 0 and not dones[1] and infos[1] == {}
    observations, rewards, dones, infos = vec.step(np.array([0, 0, 0, 0]))  # time is up
    assert dones.all() and infos[1]["dead_slot"] and "episode" not in infos[1]
    assert all(infos[i]["TimeLimit.truncated"] for i in (0, 2, 3))
    assert observations[:, 1, 1, 1].all()  # every env has started again


@pytest.mark.parametrize("env", ["build-compete", "asym1"])
def test_tiny_run_logs_per_agent_episodes_and_evaluates_on_the_suite(tmp_path, env, tb_scalars):
    summary = train(config(f"env={env}", "total_timesteps=128"), tmp_path)
    assert summary["timesteps"] == 128 and summary["env"] == MULTI_AGENT_TASKS[env]
    logged = tb_scalars(tmp_path / "tensorboard")
    for agent in ("agent_0", "agent_1"):
        assert len(logged[f"episode/{agent}/reward"]) == 2  # 2 envs, 64 steps, 30-step episodes
        assert all(0 <= e.value <= 1 for e in logged[f"episode/{agent}/success"])
        assert all(math.isfinite(e.value) for e in logged[f"episode/{agent}/performance"])
    assert [e.step for e in logged["eval/agent_1/performance"]] == [64, 128]
    assert any(tag.startswith("eval/side_effects/") for tag in logged)
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    for who in ("trained", "random"):
        assert evaluation[who]["episodes"] == 2 and evaluation[who]["mean_length"] == 30
        assert {
            "mean_agent_0/reward",
            "mean_agent_1/success",
            "mean_side_effects/normalized/total",
        } <= set(evaluation[who])


def test_same_seed_same_training(tmp_path):
    runs = [
        train(
            config(
                "env=build-parallel",
                "total_timesteps=64",
                "callbacks.checkpoint=null",
                "callbacks.evaluation.eval_every=1000000",
            ),
            tmp_path / str(i),
        )
        for i in range(2)
    ]
    assert runs[0]["trained"] == runs[1]["trained"]


def test_single_agent_settings_are_refused_for_multi_agent_envs():
    with pytest.raises(UserError, match="wrappers=none"):
        make_vec_env("build_coop_v0", {}, {"exit_bonus": {"bonus": 1}}, 1)
    with pytest.raises(UserError, match="vec_env=batched does not step multi-agent envs"):
        make_vec_env("build_coop_v0", {}, None, 1, kind="batched")
