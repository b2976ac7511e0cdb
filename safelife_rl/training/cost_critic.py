"""PPO-Lagrangian's cost critic, a network of its own beside the policy (here, below both the
method and the device path, which batches it with the members' policies)."""

from __future__ import annotations

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, create_mlp
from torch import nn


class CostCritic(nn.Module):
    """Estimates the discounted cost to come: a features extractor like the policy's, its
    value-branch layers and a linear output."""

    def __init__(
        self,
        observation_space: spaces.Space,
        features_extractor: BaseFeaturesExtractor,
        net_arch: list[int],
        activation_fn: type[nn.Module],
        normalize_images: bool,
    ):
        super().__init__()
        self.observation_space = observation_space
        self.normalize_images = normalize_images
        self.features_extractor = features_extractor
        self.head = nn.Sequential(
            *create_mlp(features_extractor.features_dim, 1, net_arch, activation_fn)
        )

    @classmethod
    def like(cls, policy: ActorCriticPolicy) -> CostCritic:
        """A critic shaped as ``policy``'s value side: a features extractor of its own like the
        policy's, and the policy's value-branch layers."""
        net_arch = policy.net_arch
        value_arch = list(net_arch["vf"] if isinstance(net_arch, dict) else net_arch)
        return cls(
            policy.observation_space,
            policy.make_features_extractor(),
            value_arch,
            policy.activation_fn,
            policy.normalize_images,
        )

    def forward(self, obs: th.Tensor) -> th.Tensor:
        features = self.features_extractor(
            preprocess_obs(obs, self.observation_space, normalize_images=self.normalize_images)
        )
        return self.head(features)
