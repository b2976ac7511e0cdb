"""AUP's auxiliary rewards: a function of the observation learned (or drawn) once from
observations of random play, standardised over them, and a vec env that pays it instead of the
task's reward (for training the auxiliary agent).

Two kinds (``kind`` in :func:`fit_auxiliary_reward`): ``"cb_vae"``, the 1-D latent mean of a
:class:`~safelife_rl.training.methods.aup.cb_vae.ContinuousBernoulliVAE` (AUP), and
``"projection"``, a fixed random projection of the observation with weights uniform on [0, 1]
(AUP_proj).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn
from torch import nn

from safelife_rl.training.methods.aup.cb_vae import ContinuousBernoulliVAE, train_vae

KINDS = ("cb_vae", "projection")
_BATCH = 1024  # observations per forward pass when standardising


def observation_scale(space: spaces.Space) -> float:
    """What observations of ``space`` are divided by to lie in [0, 1] (its largest bound)."""
    if (
        not isinstance(space, spaces.Box)
        or not np.all(np.isfinite(space.high))
        or np.any(space.low < 0)
        or float(space.high.max()) <= 0
    ):
        raise ValueError(
            f"AUP's auxiliary reward reads bounded non-negative Box observations, not {space}"
        )
    return float(space.high.max())


class AuxiliaryReward(nn.Module):
    """``(raw(obs) - mean) / std``, with ``mean`` and ``std`` those of ``raw`` over the
    observations it was fitted on (:meth:`standardise`)."""

    def __init__(self, n_inputs: int, scale: float):
        super().__init__()
        self.n_inputs = n_inputs
        self.register_buffer("scale", torch.tensor(float(scale)))
        self.register_buffer("mean", torch.tensor(0.0))
        self.register_buffer("std", torch.tensor(1.0))

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        """The unstandardised reward of flat observations ``x`` in [0, 1], shape ``(n,)``."""
        raise NotImplementedError

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(len(obs), -1).float() / self.scale
        return (self.raw(x) - self.mean) / self.std

    @torch.no_grad()
    def standardise(self, data: np.ndarray) -> None:
        """Set ``mean`` and ``std`` to those of the raw reward over ``data`` (rows of flat
        observations); a constant reward keeps ``std`` 1."""
        self.mean.fill_(0.0)
        self.std.fill_(1.0)
        values = torch.cat(
            [self(torch.as_tensor(data[i : i + _BATCH])) for i in range(0, len(data), _BATCH)]
        ).double()
        self.mean.fill_(float(values.mean()))
        std = float(values.std(correction=0))
        self.std.fill_(std if std > 1e-6 else 1.0)


class RandomProjection(AuxiliaryReward):
    """AUP_proj: ``w . x`` with ``w`` uniform on [0, 1], drawn from ``seed``."""

    def __init__(self, n_inputs: int, scale: float, seed: int = 0):
        super().__init__(n_inputs, scale)
        generator = torch.Generator().manual_seed(seed)
        self.register_buffer("weight", torch.rand(n_inputs, generator=generator))

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class EncoderReward(AuxiliaryReward):
    """AUP: the latent mean of a continuous-Bernoulli VAE with a 1-D latent."""

    def __init__(self, n_inputs: int, scale: float, hidden: Sequence[int] = (512, 512, 256, 128)):
        super().__init__(n_inputs, scale)
        self.vae = ContinuousBernoulliVAE(n_inputs, 1, hidden)

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        return self.vae.encode(x)[0][:, 0]


def build_auxiliary_reward(
    kind: str, space: spaces.Space, seed: int = 0, hidden: Sequence[int] = (512, 512, 256, 128)
) -> AuxiliaryReward:
    """An untrained auxiliary reward of ``kind`` for observations of ``space`` (to load saved
    weights into)."""
    n_inputs, scale = int(np.prod(space.shape)), observation_scale(space)
    if kind == "projection":
        return RandomProjection(n_inputs, scale, seed)
    if kind == "cb_vae":
        return EncoderReward(n_inputs, scale, hidden)
    raise ValueError(f"auxiliary reward kind must be one of {KINDS}, got {kind!r}")


def fit_auxiliary_reward(
    kind: str,
    observations: np.ndarray,
    space: spaces.Space,
    seed: int = 0,
    vae: dict[str, Any] | None = None,
    progress: bool = False,
) -> tuple[AuxiliaryReward, dict[str, float]]:
    """The auxiliary reward of ``kind`` fitted to ``observations`` (of ``space``), standardised
    over them.

    :param vae: settings of :func:`~safelife_rl.training.methods.aup.cb_vae.train_vae` (``hidden``,
        ``epochs``, ``batch_size``, ``learning_rate``) for ``"cb_vae"``.
    :returns: the reward (eval mode) and numbers to log (the VAE's last epoch loss).
    """
    data = observations.reshape(len(observations), -1)
    vae = dict(vae or {})
    reward = build_auxiliary_reward(kind, space, seed, vae.get("hidden", (512, 512, 256, 128)))
    stats: dict[str, float] = {}
    if isinstance(reward, EncoderReward):
        trained, losses = train_vae(
            data, reward.scale.item(), z_dim=1, seed=seed, progress=progress, **vae
        )
        reward.vae.load_state_dict(trained.state_dict())
        stats["vae_loss"] = losses[-1] if losses else float("nan")
    reward.eval()
    reward.standardise(data)
    return reward, stats


class AuxiliaryRewardVecEnv(VecEnvWrapper):
    """Pays ``reward(s_t)``, the auxiliary reward of the observation an action was taken in,
    instead of the env's reward (as the authors' code pays it). Closing it leaves ``venv``
    open: it borrows the training envs for AUP's first phase."""

    def __init__(self, venv: VecEnv, reward: AuxiliaryReward):
        super().__init__(venv)
        self.reward = reward
        self._obs: np.ndarray | None = None

    def reset(self) -> Any:
        self._obs = self.venv.reset()
        return self._obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, _, dones, infos = self.venv.step_wait()
        with torch.no_grad():
            rewards = self.reward(torch.as_tensor(self._obs)).numpy().astype(np.float32)
        self._obs = obs
        return obs, rewards, dones, infos

    def close(self) -> None:
        pass
