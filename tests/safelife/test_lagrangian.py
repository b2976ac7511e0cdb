"""PPO-Lagrangian: the constrained optimum of a tiny env computed by hand, the multiplier's PID
rule, saving and resuming, the training app's method, and bad input."""

import copy
import io
import math
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from omegaconf import OmegaConf
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from safelife_rl.apps.train import resume_config
from safelife_rl.training import PPOLagrangian
from safelife_rl.training.device import tensor_vec_env
from safelife_rl.training.methods.ppo_lagrangian import DevicePPOLagrangian
from safelife_rl.training.rollout_record import RolloutRecord, read_rollouts, restore
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError

from .test_device_training import DrawnAsOnTheDevice

pytestmark = pytest.mark.usefixtures("torch_one_thread")

T = 10
#: The reward of acting (action 1) at each of the T steps; acting costs 1, waiting (0) nothing.
GAINS = np.array([1.0] * 5 + [0.2] * 5)


class Schedule(gym.Env):
    """Ten steps, the step number one-hot in the observation: acting earns ``GAINS[t]`` and
    costs 1. With a budget of 5 the best policy acts exactly in the first five steps (the most
    reward per unit cost): reward 5, cost 5. Unconstrained it would act always (6 and 10).
    A multiplier between 0.2 and 1 makes that policy the Lagrangian's optimum."""

    observation_space = spaces.Box(0, 1, (T,), np.float32)
    action_space = spaces.Discrete(2)

    def _obs(self) -> np.ndarray:
        return np.eye(T, dtype=np.float32)[min(self.t, T - 1)]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = GAINS[self.t] * int(action)
        self.t += 1
        return self._obs(), float(reward), self.t >= T, False, {"cost": float(action)}


class NoCost(Schedule):
    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {}


SETTINGS = {
    "cost_limit": 5.0,
    "multiplier_lr": 0.02,
    "pid_kp": 0.1,
    "n_steps": 40,
    "batch_size": 40,
    "n_epochs": 4,
    "gamma": 1.0,
    "learning_rate": 3e-3,
    "ent_coef": 0.0,
    "seed": 0,
    "policy_kwargs": {"net_arch": [16]},
}


def model(env_class=Schedule, policy="MlpPolicy", **kwargs):
    return PPOLagrangian(
        policy, make_vec_env(env_class, n_envs=4, seed=0), **{**SETTINGS, **kwargs}
    )


def acting_probabilities(agent) -> np.ndarray:
    obs = agent.policy.obs_to_tensor(np.eye(T, dtype=np.float32))[0]
    return agent.policy.get_distribution(obs).distribution.probs[:, 1].detach().numpy()


def test_reaches_the_constrained_optimum_computed_by_hand():
    agent = model()
    agent.learn(6000)
    acting = acting_probabilities(agent)
    reward, cost = float(acting @ GAINS), float(acting.sum())  # the policy's expected totals
    assert reward == pytest.approx(5.0, abs=0.1) and cost == pytest.approx(5.0, abs=0.1)
    assert 0.2 < agent.multiplier < 1.0


def test_the_budget_binds():
    """With the multiplier held at 0 (no ascent), the same training spends the whole 10."""
    agent = model(multiplier_lr=0.0, pid_kp=0.0)
    agent.learn(6000)
    assert acting_probabilities(agent).sum() > 9.0 and agent.multiplier == 0.0


def steps(agent, *steps):
    """Count steps of 4 envs: each ``(costs, ended envs)``."""
    for costs, ended in steps:
        dones = torch.zeros(4, dtype=torch.bool)
        dones[list(ended)] = True
        agent._count_costs(torch.tensor(costs, dtype=torch.float64), dones)


def test_pid_rule_by_hand():
    agent = model(cost_limit=4.0, multiplier_init=0.5, multiplier_lr=0.1, pid_kp=0.2, pid_kd=0.3)
    agent.set_logger(configure(None, []))
    # env 1's episode ends at 8, env 0's at 2 + 4 = 6; env 2's goes on with 1
    steps(agent, ([2, 8, 1, 0], [1]), ([4, 0, 0, 0], [0]))
    # mean 7: error 3, a rise of 7 from the 0 before
    assert agent.update_multiplier().tolist() == [2.0, 7.0, 0.2 * 3 + 0.8 + 0.3 * 7 - 0.5]
    integral = 0.5 + 0.1 * 3
    assert agent.multiplier == pytest.approx(0.2 * 3 + integral + 0.3 * 7)
    steps(agent, ([0, 0, 0, 0], [2]))  # env 2 ends at 1: error -3, no rise
    agent.update_multiplier()
    integral = integral - 0.1 * 3
    assert agent.multiplier == pytest.approx(max(0.0, 0.2 * -3 + integral))
    before = agent.lagrange_state.clone()
    steps(agent, ([5, 5, 5, 5], []))
    agent.update_multiplier()  # no episode ended: nothing changes
    assert torch.equal(agent.lagrange_state, before)


def test_before_the_constraint_starts_the_multiplier_is_held_and_the_costs_watched():
    agent = model(
        cost_limit=4.0,
        multiplier_init=0.5,
        multiplier_lr=0.1,
        pid_kp=0.2,
        pid_kd=0.3,
        constraint_start=100,
    )
    agent.set_logger(configure(None, []))
    agent.num_timesteps = 99
    steps(agent, ([7, 9, 0, 0], [0, 1]))  # mean 8: error 4, a rise of 8
    assert agent.update_multiplier().tolist() == [2.0, 8.0, 0.0]
    assert agent.lagrange_state.tolist() == [0.5, 0.5, 8.0]  # only the previous cost moved
    agent.num_timesteps = 100
    steps(agent, ([10, 0, 0, 0], [0]))  # error 6, a rise of 2 from the 8 watched
    agent.update_multiplier()
    assert agent.multiplier == pytest.approx(0.2 * 6 + 0.5 + 0.1 * 6 + 0.3 * 2)


class Multipliers(BaseCallback):
    """The multiplier at the start of each rollout (after the update that preceded it)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def _on_rollout_start(self):
        self.seen.append(self.model.multiplier)

    def _on_step(self):
        return True


def test_the_device_and_numpy_paths_take_the_same_multiplier_trajectory():
    """DevicePPOLagrangian on the same envs (as separate envs on the device), seed, initial
    weights and action draws (the NumPy path's policy drawing as the device path draws): the
    same multiplier at every update, bit for bit, and the same policy."""
    fused = {"net_arch": [16], "optimizer_kwargs": {"fused": True}}
    numpy_agent = model(policy=DrawnAsOnTheDevice, policy_kwargs=fused)
    initial = [
        copy.deepcopy(numpy_agent.policy.state_dict()),
        copy.deepcopy(numpy_agent.cost_critic.state_dict()),
    ]
    numpy_path = Multipliers()
    numpy_agent.learn(2000, callback=numpy_path)
    device_agent = DevicePPOLagrangian(  # seeded as it is built, as the first was
        "MlpPolicy",
        make_vec_env(Schedule, n_envs=4, seed=0, vec_env_cls=tensor_vec_env),
        **{**SETTINGS, "policy_kwargs": fused},
    )
    device_agent.policy.load_state_dict(initial[0])
    device_agent.cost_critic.load_state_dict(initial[1])
    device_path = Multipliers()
    device_agent.learn(2000, callback=device_path)
    numpy_path, device_path = numpy_path.seen, device_path.seen
    assert len(numpy_path) == 13 and len(set(numpy_path)) > 5  # the multiplier moves
    assert device_path == numpy_path
    assert device_agent.multiplier == numpy_agent.multiplier
    np.testing.assert_allclose(
        acting_probabilities(device_agent), acting_probabilities(numpy_agent), rtol=1e-5
    )


@pytest.mark.parametrize("device", [False, True], ids=["numpy", "device"])
def test_an_exact_resume_counts_the_costs_of_the_episodes_in_progress(tmp_path, device):
    """Rollouts of 15 steps over 10-step episodes: at the checkpoint every env is 5 steps
    into an episode. Resumed from the checkpoint's record, the run takes the multipliers and
    ends with the weights the uninterrupted run has."""
    cls = DevicePPOLagrangian if device else PPOLagrangian

    def envs():
        return make_vec_env(
            Schedule, n_envs=4, seed=0, vec_env_cls=tensor_vec_env if device else None
        )

    agent = cls("MlpPolicy", envs(), **{**SETTINGS, "n_steps": 15, "batch_size": 60})
    record = RolloutRecord()
    agent.learn(60, callback=record)  # a rollout, then a boundary
    path = tmp_path / "checkpoint.zip"
    agent.save(path)
    with zipfile.ZipFile(path, "a") as archive:
        for name, content in record.entries(record.boundary).items():
            archive.writestr(name, content)
    assert agent._episode_costs.sum() > 0  # costs of the episodes in progress
    uninterrupted = Multipliers()
    agent.learn(480, callback=uninterrupted, reset_num_timesteps=False)  # 8 updates

    resumed = cls.load(path, env=envs())
    resumed.set_logger(configure(None, []))
    restore(resumed, resumed.env, read_rollouts(path, resumed), RolloutRecord(), path)
    again = Multipliers()
    resumed.learn(480, callback=again, reset_num_timesteps=False)
    assert again.seen == uninterrupted.seen and len(set(again.seen)) > 2
    assert torch.equal(resumed.lagrange_state, agent.lagrange_state)
    for mine, theirs in zip(agent.policy.parameters(), resumed.policy.parameters()):
        assert torch.equal(mine, theirs)


def test_saved_and_loaded_with_multiplier_and_cost_critic(tmp_path):
    agent = model()
    agent.learn(800)
    assert agent.multiplier > 0
    agent.save(tmp_path / "agent.zip")
    loaded = PPOLagrangian.load(tmp_path / "agent.zip", env=make_vec_env(Schedule, n_envs=4))
    assert torch.equal(loaded.lagrange_state, agent.lagrange_state)
    for mine, theirs in zip(
        agent.cost_critic.state_dict().values(), loaded.cost_critic.state_dict().values()
    ):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("cost_limit", [-1.0, math.nan, math.inf])
def test_bad_cost_limit_is_refused(cost_limit):
    with pytest.raises(UserError, match="cost_limit must be a finite non-negative number"):
        model(cost_limit=cost_limit)


def test_an_env_without_cost_is_refused_at_its_first_step():
    with pytest.raises(UserError, match=r"reports a per-step cost in info\['cost'\]"):
        model(NoCost).learn(40)


def test_an_env_without_cost_is_refused_on_the_device_path_naming_it():
    """The device trainer's PPO-Lagrangian parts refuse a step without costs, naming the env
    as the NumPy path does."""
    envs = make_vec_env(NoCost, n_envs=4, seed=0, vec_env_cls=tensor_vec_env)
    agent = DevicePPOLagrangian("MlpPolicy", envs, **SETTINGS)
    with pytest.raises(UserError, match=r"info\['cost'\] \(every SafeLife id does\); .* does not"):
        agent.learn(40)


# -- the training app: method=ppo_lagrangian ------------------------------------------------

LAGRANGIAN = ("method=ppo_lagrangian", "cost_limit=2")
DEVICE = ("vec_env=device", "env.kwargs.bank={size:4,progress:false}")


def test_app_trains_logs_and_resumes_a_finished_run_unchanged(tmp_path, train_config, tb_scalars):
    summary = train(train_config(*LAGRANGIAN, "total_timesteps=128"), tmp_path)
    assert "mean_cost" in summary["trained"]
    logged = tb_scalars(tmp_path / "tensorboard")
    for tag in ("safety/multiplier", "safety/cost_limit", "safety/cost_value_loss", "eval/cost"):
        assert tag in logged, tag
    assert logged["safety/cost_limit"][-1].value == 2.0
    final = (tmp_path / "final_model.zip").read_bytes()
    given = [f"resume={tmp_path}"]
    assert train(resume_config(train_config(*given), given), tmp_path, resume=True) == summary
    assert (tmp_path / "final_model.zip").read_bytes() == final


def test_app_trains_on_the_device_path(tmp_path, train_config, tb_scalars):
    """vec_env=device: DevicePPOLagrangian on the SafeLife vector env's cost tensor."""
    summary = train(train_config(*LAGRANGIAN, *DEVICE, "total_timesteps=128"), tmp_path)
    assert "mean_cost" in summary["trained"]
    logged = tb_scalars(tmp_path / "tensorboard")
    for tag in ("safety/multiplier", "safety/cost_limit", "safety/cost_value_loss"):
        assert [e.step for e in logged[tag]] == [64, 96, 128], tag  # each update's
    assert logged["safety/cost_limit"][-1].value == 2.0


@pytest.mark.parametrize(
    "state, message",
    [
        ([float("nan"), 0.0, 0.0], "is not a multiplier state"),
        ([float("inf"), 0.0, 0.0], "is not a multiplier state"),
        ([1e30, 1e30, 0.0], "is not a multiplier state"),
        ([-1.0, 0.0, 0.0], "is not a multiplier state"),
        ([0.0, 0.0], "must be 3 numbers"),
    ],
)
def test_a_damaged_multiplier_state_is_refused_at_resume(tmp_path, train_config, state, message):
    train(train_config(*LAGRANGIAN, "total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    final = tmp_path / "final_model.zip"
    with zipfile.ZipFile(final) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    variables = torch.load(io.BytesIO(entries["pytorch_variables.pth"]), weights_only=True)
    variables["lagrange_state"] = torch.tensor(state, dtype=torch.float64)
    buffer = io.BytesIO()
    torch.save(variables, buffer)
    entries["pytorch_variables.pth"] = buffer.getvalue()
    with zipfile.ZipFile(final, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    given = [f"resume={tmp_path}", "total_timesteps=128"]
    with pytest.raises(UserError, match=f"final_model.zip: its lagrange_state .*{message}"):
        train(resume_config(train_config(*given), given), tmp_path, resume=True)


@pytest.mark.parametrize(
    "override, named",
    [
        ("cost_limit=3", "cost_limit"),
        ("method=ppo", "method"),
    ],
)
def test_resume_refuses_a_changed_budget_or_method(tmp_path, train_config, override, named):
    train(train_config(*LAGRANGIAN, "total_timesteps=64", "callbacks.evaluation=null"), tmp_path)
    given = [f"resume={tmp_path}", override]
    with pytest.raises(UserError, match=f"not {named}"):
        resume_config(train_config(*given), given)
    # and a budget edited into the run's config.yaml
    saved = OmegaConf.load(tmp_path / "config.yaml")
    saved.cost_limit = 3.0
    saved.algo.cost_limit = 3.0
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    given = [f"resume={tmp_path}", "total_timesteps=128"]
    with pytest.raises(UserError, match=r"cost_limit \(2\.0 -> 3\.0\)"):
        train(resume_config(train_config(*given), given), tmp_path, resume=True)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (("method=ppo_lagrangian", "cost_limit=-1"), "cost_limit must be a finite non-negative"),
        (("method=ppo_lagrangian", "cost_limit=nan"), "cost_limit must be a finite number"),
        (
            ("cost_limit=2",),
            r"^cost_limit must be null \(unset\) with method=ppo \(a budget only "
            r"for method=ppo_lagrangian\), got 2.0$",
        ),
        (
            ("method=ppo_lagrangian", "method.multiplier_init=1e308"),
            r"^method.multiplier_init must be a finite non-negative number up to 1e\+06, "
            r"got 1e\+308$",
        ),
        (
            ("method=ppo_lagrangian", "method.multiplier_init=abc"),
            r"^method.multiplier_init must be a finite .*, got 'abc'$",
        ),
        (
            ("method=ppo_lagrangian", "method.multiplier_init=null"),
            r"^method.multiplier_init must be a finite .*, got None$",
        ),
        (("method=ppo_lagrangian", "method.pid_kp=true"), r"^method.pid_kp must be a finite"),
        (
            ("method=ppo_lagrangian", "method.standardize_advantages=maybe"),
            r"^method.standardize_advantages must be true or false, got 'maybe'$",
        ),
        (
            ("method=ppo_lagrangian", "cost_limit=1e300"),
            r"^cost_limit must be a finite non-negative",
        ),
        (("method=ppo_lagrangian", "cost_limit=-1", *DEVICE), "cost_limit must be a finite"),
        (
            ("method=ppo_lagrangian", "cost_limit=2", "method.multiplier_lr=-1", *DEVICE),
            "method.multiplier_lr must be a finite non-negative number",
        ),
        (
            ("method=ppo_lagrangian", "cost_limit=2", "method.constraint_start=-5"),
            r"method.constraint_start must be a non-negative integer \(a training step\), got -5",
        ),
        (
            (
                "method=ppo_lagrangian",
                "cost_limit=2",
                "method.constraint_start=1000",
                "total_timesteps=1000",
            ),
            r"^method.constraint_start \(1000\) must be below total_timesteps \(1000\): the budget "
            "would never be enforced$",
        ),
    ],
)
def test_bad_method_settings_are_refused_before_anything_is_written(
    tmp_path, train_config, overrides, message
):
    with pytest.raises(UserError, match=message):
        train(train_config(*overrides), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_env_without_cost_is_refused_before_anything_is_written(tmp_path, train_config):
    cfg = train_config(*LAGRANGIAN, "wrappers=none")
    cfg.env = {"id": "CartPole-v1", "kwargs": {}}
    with pytest.raises(
        UserError,
        match=r"info\['cost'\] \(every SafeLife id does\); "
        "CartPole-v1 does not",
    ):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("standardize", [False, True])
def test_the_penalised_advantages_by_hand_on_both_buffers(standardize):
    """``(A_r - lambda A_c) / (1 + lambda)``, with A_r and A_c first standardized over the
    rollout (population standard deviation) when asked; the device buffer's equal the NumPy
    buffer's."""
    from safelife_rl.training.methods.ppo_lagrangian import (
        CostRolloutBuffer,
        TensorCostRolloutBuffer,
    )

    rewards = np.array([[1.0, 3.0], [5.0, 7.0]], np.float32)  # mean 4, std sqrt(5)
    costs = np.array([[0.0, 0.0], [0.0, 2.0]], np.float32)  # mean 0.5, std sqrt(0.75)
    if standardize:
        expected_r, expected_c = (rewards - 4) / np.sqrt(5), (costs - 0.5) / np.sqrt(0.75)
    else:
        expected_r, expected_c = rewards, costs
    expected = (expected_r - 3 * expected_c) / 4
    space = spaces.Box(0, 1, (1,), np.float32)
    found = []
    for buffer_class in (CostRolloutBuffer, TensorCostRolloutBuffer):
        buffer = buffer_class(2, space, spaces.Discrete(2), "cpu", n_envs=2)
        if buffer_class is CostRolloutBuffer:
            buffer.advantages, buffer.cost_advantages = rewards.copy(), costs.copy()
        else:
            buffer.reset()
            buffer.advantages.copy_(torch.as_tensor(rewards))
            buffer.cost_advantages.copy_(torch.as_tensor(costs))
        buffer.penalise_advantages(torch.tensor(3.0, dtype=torch.float64), standardize)
        found.append(np.asarray(torch.as_tensor(buffer.advantages)))
    np.testing.assert_allclose(found[0], expected, rtol=1e-6)
    assert np.array_equal(found[0], found[1])


def test_safelifes_method_config_standardizes_the_advantages(train_config):
    assert train_config("method=ppo_lagrangian").algo.standardize_advantages is True
    assert model().standardize_advantages is False  # the class: the textbook Lagrangian
