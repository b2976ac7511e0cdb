"""The device trainer (DevicePPO, PPO-Lagrangian's device algorithm: P = 1) without stopping: a
rollout step and a minibatch update make no host sync and no host<->device copy (what a rollout
or an update reads, it reads once, however many steps or minibatches it has), and the
statistics still arrive whole."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback

from safelife_rl.training.device import DevicePPO, GymnasiumTensorVecEnv
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.methods.aup import DeviceAUPPenalty
from safelife_rl.training.methods.ppo_lagrangian import DevicePPOLagrangian
from safety_rl_common.torch_counts import OpCounts, counting

from .test_device_step import vector_env

pytestmark = pytest.mark.usefixtures("torch_one_thread")

N_ENVS = 4


class ActionQ(torch.nn.Module):
    """An auxiliary Q-network for AUP's penalty: Q(s, a) = a."""

    def forward(self, obs):
        return torch.arange(9.0, device=obs.device).expand(len(obs), 9)


def model(
    algo: type, n_steps: int, callback=None, side_effects=False, aup: bool = False, **settings
):
    """A tiny device model on 3-step SafeLife episodes (so every rollout has restarts and
    timeouts to bootstrap), ready to collect rollouts; ``aup``: its rewards penalised by AUP."""
    env = GymnasiumTensorVecEnv(vector_env(N_ENVS, side_effects))
    if aup:
        env = DeviceAUPPenalty(env)
        env.q_network, env.coefficient = ActionQ(), 0.1
    settings.setdefault("batch_size", N_ENVS * n_steps)
    if algo is DevicePPOLagrangian:  # the costs arrive as the env's tensor; some episodes end
        settings.setdefault("cost_limit", 0.5)
    agent = algo(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [8]},
        **settings,
    )
    _, agent.test_callbacks = agent.trainer().setup(10**6, [callback])
    return agent


def collect(agent) -> None:
    assert agent.trainer().collect_rollouts(agent.test_callbacks)


def train(agent) -> None:
    agent.trainer().train()


#: what a rollout's end asks of the host, however many steps and members it has: one sync,
#: the env's invalid-action flag (``check_actions``), and one copy, the episodes' buffer
#: (:class:`~safelife_rl.training.device.episodes.EpisodeRecorder`); the time limits'
#: bootstraps read nothing
ROLLOUT_END = {"_local_scalar_dense": 1, "numpy": 1}


def rollout_counts(agent) -> OpCounts:
    collect(agent)
    with counting() as counts:
        collect(agent)
    return counts


@pytest.mark.parametrize("algo", [DevicePPO, DevicePPOLagrangian])
def test_a_rollout_step_makes_no_sync_and_no_copy(algo):
    """Twice the steps, the same syncs and copies: each step adds none (restarts included)."""
    short, long = (rollout_counts(model(algo, n)) for n in (3, 6))
    assert (long.syncs, long.copies) == (short.syncs, short.copies), (short.named, long.named)
    assert long.kernels > short.kernels
    assert short.named == ROLLOUT_END, short.named


def test_an_aup_rollout_step_makes_no_sync_and_no_copy():
    short, long = (rollout_counts(model(DevicePPO, n, aup=True)) for n in (3, 6))
    assert (long.syncs, long.copies) == (short.syncs, short.copies), (short.named, long.named)
    assert short.named == ROLLOUT_END, short.named


def train_counts(algo: type, batch_size: int) -> OpCounts:
    agent = model(algo, 6, batch_size=batch_size, n_epochs=1)
    collect(agent)
    with counting() as counts:
        train(agent)
    return counts


@pytest.mark.parametrize("algo", [DevicePPO, DevicePPOLagrangian])
def test_a_minibatch_update_makes_no_sync_and_no_copy(algo):
    """Four minibatches read from the host what one reads: the losses once, at the end (and
    PPO-Lagrangian's multiplier update and cost-critic minibatches add one read in all)."""
    one, four = train_counts(algo, N_ENVS * 6), train_counts(algo, N_ENVS * 6 // 4)
    assert (four.syncs, four.copies) == (one.syncs, one.copies), (one.named, four.named)
    assert four.kernels > one.kernels
    assert one.syncs <= (2 if algo is DevicePPOLagrangian else 1), one.named


def test_the_multiplier_is_updated_and_logged_on_the_device_path():
    class Costs(BaseCallback):
        total = 0.0

        def _on_step(self) -> bool:
            self.total += self.locals["step"].costs.sum().item()
            return True

    seen = Costs()
    agent = model(DevicePPOLagrangian, 6, callback=seen, n_epochs=1, multiplier_init=0.3)
    collect(agent)  # 3-step episodes: every env's ends at steps 3 and 6
    assert agent._ended.tolist() == [seen.total, 2 * N_ENVS]
    train(agent)
    logged = agent.logger.name_to_value
    mean = seen.total / (2 * N_ENVS)
    assert logged["safety/episode_cost"] == pytest.approx(mean)
    assert logged["safety/multiplier"] == agent.multiplier
    assert agent.multiplier == pytest.approx(max(0.0, 0.3 + 0.01 * (mean - 0.5)))
    assert logged["safety/multiplier_update"] == pytest.approx(agent.multiplier - 0.3)
    assert isinstance(logged["safety/cost_value_loss"], float)


def test_the_losses_are_still_logged_as_numbers():
    agent = model(DevicePPO, 6, batch_size=8, n_epochs=2)
    collect(agent)
    train(agent)
    logged = agent.logger.name_to_value
    for key in (
        "train/policy_gradient_loss",
        "train/value_loss",
        "train/entropy_loss",
        "train/approx_kl",
        "train/clip_fraction",
        "train/loss",
    ):
        assert isinstance(logged[key], float) and np.isfinite(logged[key]), key


def test_episodes_reach_the_callbacks_at_the_rollout_end_with_their_steps():
    seen = []

    class Episodes(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            seen.extend(self.locals["episodes"])

    agent = model(DevicePPO, 6, callback=Episodes())
    collect(agent)
    # 3-step episodes of 4 envs over 6 steps: every env ends at steps 3 and 6
    assert [t for t, _ in seen] == [3 * N_ENVS] * N_ENVS + [6 * N_ENVS] * N_ENVS
    assert all(info["length"] == 3 and isinstance(info["level"], str) for _, info in seen)
    assert len(agent.ep_info_buffer) == 2 * N_ENVS
    assert torch.equal(agent.rollout_buffer.timeouts.sum(1), torch.tensor([0, 0, 4, 0, 0, 4]))


class Episodes(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.seen.extend(self.locals["episodes"])


def test_side_effects_are_scored_once_per_rollout_for_each_envs_last_episode():
    """Scoring on, a rollout step still makes no sync and no copy (twice the steps, the same
    counts: the scores are read with the episodes at the rollout's end), and each env's last
    measured episode of the rollout carries its report."""
    short, long = (rollout_counts(model(DevicePPO, n, side_effects=True)) for n in (3, 6))
    assert (long.syncs, long.copies) == (short.syncs, short.copies), (short.named, long.named)
    episodes = Episodes()
    agent = model(DevicePPO, 6, callback=episodes, side_effects=True)
    collect(agent)
    # every env ends at steps 3 and 6 (its env time limit: measured); the last one is scored
    scored = [(t, "side_effects" in info) for t, info in episodes.seen]
    assert scored == [(3 * N_ENVS, False)] * N_ENVS + [(6 * N_ENVS, True)] * N_ENVS
    for _, info in episodes.seen[N_ENVS:]:
        assert all(len(pair) == 2 and pair[0] >= 0 for pair in info["side_effects"].values())


def test_the_time_limits_cuts_are_bounded_by_the_episode_limit():
    """A time limit cuts an env's episodes at least ``episode_limit`` steps apart: a rollout of
    ``n`` steps has at most ``ceil(n / limit)`` cuts an env, the rounds the trainer bootstraps
    (separate envs, which state no limit: one a step)."""
    from safelife_rl.training.device import tensor_vec_env

    assert GymnasiumTensorVecEnv(vector_env(2)).episode_limit == 3
    assert [model(DevicePPO, n).trainer().cut_rounds for n in (2, 3, 6, 7)] == [1, 1, 2, 3]
    separate = tensor_vec_env([lambda: gym.make("CartPole-v1")] * 2)
    agent = DevicePPO("MlpPolicy", separate, n_steps=5, device="cpu")
    assert separate.episode_limit is None and agent.trainer().cut_rounds == 5


def test_the_buffer_gives_each_envs_cuts_in_fixed_rounds():
    space = gym.spaces.Box(0, 255, (1,), dtype=np.uint8)
    buffer = TensorRolloutBuffer(7, space, gym.spaces.Discrete(9), "cpu", n_envs=3)
    buffer.reset()
    buffer.timeouts[[0, 3, 6, 4], [0, 0, 0, 2]] = True  # env 0 cut 3 times, env 1 never
    buffer.final_observations[:, :, 0] = torch.arange(21, dtype=torch.uint8).view(7, 3)
    steps, cut, final = buffer.cuts(3)
    assert steps.tolist() == [[0, 0, 4], [3, 0, 0], [6, 0, 0]]
    assert cut.tolist() == [[True, False, True], [True, False, False], [True, False, False]]
    assert final[..., 0].tolist() == [[0, 1, 14], [9, 1, 2], [18, 1, 2]]


def test_every_cut_of_a_rollout_is_bootstrapped_once():
    """3-step episodes in 7-step rollouts: the third rollout cuts each env 3 times (its bound);
    each cut's reward gets ``gamma * V(final observation)``, bit for bit as a pass of every
    env's ``k``-th final observation computes it (a pass of other rows, e.g. one observation as
    SB3 passes it, or all rounds' at once, may round the last bit otherwise)."""

    class Rewards(BaseCallback):
        def _on_step(self) -> bool:
            self.rewards.append(self.locals["step"].rewards.clone())
            return True

    seen = Rewards()
    agent = model(DevicePPO, 7, callback=seen)
    for _ in range(3):
        seen.rewards = []
        collect(agent)
    buffer = agent.rollout_buffer
    assert agent.trainer().cut_rounds == 3
    assert buffer.timeouts.sum(0).tolist() == [3] * N_ENVS
    expected = torch.stack(seen.rewards)
    envs = torch.arange(N_ENVS)
    for k in range(3):
        steps = buffer.timeouts.T.nonzero()[:, 1].view(N_ENVS, 3)[:, k]  # each env's k-th cut
        with torch.no_grad():
            values = agent.policy.predict_values(buffer.final_observations[steps, envs])
        expected[steps, envs] += agent.gamma * values.flatten()
    assert torch.equal(buffer.rewards, expected)


def test_the_episode_buffer_reads_each_steps_ended_infos_in_one_copy():
    """A device env's episodes through the recorder's buffer (grown past the 2 steps it was
    made for) are what each step's ``final_info`` gives; a step adds them without a sync or a
    copy, the read makes one copy."""
    from safelife_rl.training.device.adapters import ended_infos
    from safelife_rl.training.device.episodes import EpisodeRecorder
    from safety_rl_common.torch_counts import count_ops

    env = GymnasiumTensorVecEnv(vector_env(N_ENVS))
    env.seed(0)
    env.reset()
    recorder, expected = EpisodeRecorder(env.level_names, steps=2), []
    for t in range(1, 8):
        step = env.step(torch.randint(0, 9, (N_ENVS,)))
        added = count_ops(recorder.add, t, step)
        assert (added.syncs, added.copies) == (0, 0), added.named
        for k, info in ended_infos(step.final_info, step.ended).items():
            info["level"] = env.level_names[info["level"]]
            expected.append((t, k, info))
    with counting() as read:
        episodes = recorder.read_by_env()
    assert read.named == {"numpy": 1}, read.named
    assert episodes == expected and len(episodes) == 2 * N_ENVS
    assert recorder.read_by_env() == []  # read once
