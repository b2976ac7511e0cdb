"""The SafeLife CNN as a Stable-Baselines3 features extractor."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

#: The smallest view the three convolutions take; smaller views are padded to it.
MIN_VIEW = 17


class SafeLifeCNN(BaseFeaturesExtractor):
    """Three convolutions (kernels 5, 3, 3; strides 2, 2, 1) and a dense layer, as in SafeLife.

    Takes the channel-last binary observation ``(height, width, channels)`` of
    :class:`~safelife_rl.SafeLifeEnv`; with ``net_arch=[]`` the policy and value heads (or the
    Q-values) are single linear layers on these features, as in the original networks. A view
    smaller than the convolutions need (17x17) is padded with empty cells around its edges (the
    default 15x15 view gains one cell on each side), so the CNN takes any view::

        PPO("CnnPolicy", env, policy_kwargs={"features_extractor_class": SafeLifeCNN,
                                             "net_arch": []})

    (SB3's own ``CnnPolicy`` extractor, NatureCNN, takes only 0-255 images of at least 36x36.)

    :param observation_space: a ``Box`` of shape ``(height, width, channels)``.
    :param features_dim: width of the dense layer (512 in the original).
    :param conv_channels: output channels of the three convolutions (32, 64, 64 in the original).

    ``compute_dtype`` (a run's ``precision=bf16`` sets it to ``torch.bfloat16``) runs the
    convolutions and the dense layer under autocast in that type and hands the features on in
    FP32; ``None`` (the default) computes in the weights' type.
    """

    compute_dtype: torch.dtype | None = None

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        features_dim: int = 512,
        conv_channels: Sequence[int] = (32, 64, 64),
    ):
        super().__init__(observation_space, features_dim)
        if len(observation_space.shape) != 3:
            raise ValueError(
                f"SafeLifeCNN needs (height, width, channels) observations, got shape "
                f"{observation_space.shape}"
            )
        if len(conv_channels) != 3:
            raise ValueError(f"conv_channels needs three sizes, got {tuple(conv_channels)}")
        height, width, n_channels = observation_space.shape
        # (left, right, top, bottom) empty cells up to the smallest view the convolutions take
        pad_h, pad_w = max(0, MIN_VIEW - height), max(0, MIN_VIEW - width)
        self.padding = (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2)
        height, width = height + pad_h, width + pad_w
        c1, c2, c3 = (int(c) for c in conv_channels)
        self.cnn = nn.Sequential(
            nn.Conv2d(n_channels, c1, kernel_size=5, stride=2),
            nn.ReLU(),
            nn.Conv2d(c1, c2, kernel_size=3, stride=2),
            nn.ReLU(),
            nn.Conv2d(c2, c3, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flat = self.cnn(torch.zeros(1, n_channels, height, width)).shape[1]
        self.dense = nn.Sequential(nn.Linear(n_flat, features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Features of a batch ``(N, H, W, C)``; integer or bool observations (a SafeLife
        observation's 0/1 cells stored as uint8) are taken as the same values in floats."""
        if not observations.is_floating_point():
            observations = observations.to(self.dense[0].weight.dtype)
        images = observations.permute(0, 3, 1, 2)
        if any(self.padding):
            images = nn.functional.pad(images, self.padding)
        if self.compute_dtype is None:
            return self.dense(self.cnn(images))
        with torch.autocast(images.device.type, dtype=self.compute_dtype, cache_enabled=False):
            features = self.dense(self.cnn(images))
        return features.float()
