"""The policy's network captured as one graph for rollouts whose env step is a CUDA graph
(:mod:`safelife_rl.training.device.captured_policy`). A CUDA graph needs a GPU; on the CPU the
same graph runs with the ``aot_eager`` backend, which replays the eager kernels as the
``cudagraphs`` backend does: the results must be the eager policy's bit for bit."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.policies import ActorCriticCnnPolicy
from torch._dynamo.utils import counters

from safelife_rl.training.device import DevicePPO, GymnasiumTensorVecEnv, tensor_vec_env, trainer
from safelife_rl.training.device.captured_policy import CapturedPolicy
from safelife_rl.training.device.stacked import PolicyHeads
from safelife_rl.training.features import SafeLifeCNN


class GraphedCartPoles(GymnasiumTensorVecEnv):
    """Reports a CUDA-graphed step, so that the algorithm captures its policy."""

    cuda_graphs = True


def cartpoles() -> GymnasiumTensorVecEnv:
    return tensor_vec_env([lambda: gym.make("CartPole-v1", max_episode_steps=20)] * 4)


def graphed_cartpoles() -> GraphedCartPoles:
    return GraphedCartPoles(cartpoles().venv)


def test_the_captured_cnn_policy_gives_the_eager_policys_distribution_bit_for_bit():
    """The SafeLife CNN: the same action logits and values as the eager policy's, in one graph
    that later batches of the same shape reuse."""
    space = gym.spaces.Box(0, 255, (25, 25, 15), np.uint8)
    policy = ActorCriticCnnPolicy(
        space,
        gym.spaces.Discrete(9),
        lambda _: 3e-4,
        features_extractor_class=SafeLifeCNN,
        normalize_images=False,
    )
    policy.set_training_mode(False)
    captured = CapturedPolicy(policy, backend="aot_eager")
    graphs = counters["stats"]["unique_graphs"]
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        obs = torch.randint(0, 256, (16, 25, 25, 15), dtype=torch.uint8, generator=generator)
        with torch.no_grad():
            ours, our_values = captured(obs)
            theirs, their_values = PolicyHeads(policy)(obs)
        pairs = [(ours, theirs), (our_values, their_values)]
        for a, b in pairs:
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert counters["stats"]["unique_graphs"] == graphs + 1


def test_a_rollout_with_the_captured_policy_makes_the_eager_updates(monkeypatch):
    """DevicePPO on an env that replays CUDA graphs captures its policy's network (on the CPU
    with aot_eager) and trains to the parameters of the eager rollouts bit for bit; the
    captured network is not saved with the model."""
    monkeypatch.setattr(
        trainer, "CapturedPolicy", lambda policy: CapturedPolicy(policy, backend="aot_eager")
    )
    settings = {
        "n_steps": 8,
        "batch_size": 16,
        "n_epochs": 2,
        "seed": 0,
        "policy_kwargs": {"net_arch": [16]},
    }
    eager = DevicePPO("MlpPolicy", cartpoles(), **settings)
    initial = copy.deepcopy(eager.policy.state_dict())
    eager.learn(96)
    graphed = DevicePPO("MlpPolicy", graphed_cartpoles(), **settings)
    graphed.policy.load_state_dict(initial)
    graphed.learn(96)
    captured = graphed.trainer()._captured
    assert eager.trainer()._captured is None and isinstance(captured, CapturedPolicy)
    assert any(not torch.equal(p, initial[k]) for k, p in graphed.policy.state_dict().items())
    for (name, p), q in zip(eager.policy.named_parameters(), graphed.policy.parameters()):
        assert torch.equal(p, q), name
    assert "_trainer" in graphed._excluded_save_params()


@pytest.mark.parametrize("env,expected", [(cartpoles, False), (graphed_cartpoles, True)])
def test_only_an_env_that_replays_cuda_graphs_has_the_policy_captured(env, expected, monkeypatch):
    monkeypatch.setattr(
        trainer, "CapturedPolicy", lambda policy: CapturedPolicy(policy, backend="aot_eager")
    )
    model = DevicePPO("MlpPolicy", env(), n_steps=8, batch_size=32, seed=0)
    captured = model.trainer()._captured
    assert isinstance(captured, CapturedPolicy) is expected
    assert model.trainer()._captured is captured  # captured once, with the trainer
