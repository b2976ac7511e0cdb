"""A continuous-Bernoulli variational autoencoder (Loaiza-Ganem & Cunningham 2019) of
observations scaled to [0, 1]: AUP's learned auxiliary reward is its latent mean
(:class:`~safelife_rl.training.methods.aup.auxiliary_rewards.EncoderReward`).

The continuous Bernoulli with parameter ``p`` has density ``C(p) p^x (1-p)^(1-x)`` on [0, 1];
in terms of the decoder's logit ``l`` (``p = sigmoid(l)``) the normaliser is
``C = l / tanh(l / 2)``, which tends to 2 as ``l`` tends to 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

#: Below this |logit| the normaliser uses its Taylor series (``log 2 + l^2 / 12``).
_SMALL_LOGIT = 1e-3


def log_normaliser(logits: torch.Tensor) -> torch.Tensor:
    """``log C`` of the continuous Bernoulli with parameter ``sigmoid(logits)``, elementwise."""
    small = logits.abs() < _SMALL_LOGIT
    safe = torch.where(small, torch.ones_like(logits), logits)
    exact = torch.log(safe / torch.tanh(safe / 2))
    return torch.where(small, np.log(2.0) + logits**2 / 12, exact)


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ELU()]
    return nn.Sequential(*layers)


class ContinuousBernoulliVAE(nn.Module):
    """Fully connected encoder and decoder (ELU) of flat inputs in [0, 1].

    :param n_inputs: size of a flattened observation.
    :param z_dim: latent size (AUP: 1).
    :param hidden: widths of the encoder's hidden layers; the decoder mirrors them.
    """

    def __init__(self, n_inputs: int, z_dim: int = 1, hidden: Sequence[int] = (512, 512, 256, 128)):
        super().__init__()
        if n_inputs < 1 or z_dim < 1 or not hidden or min(hidden) < 1:
            raise ValueError(
                f"a VAE needs positive sizes, got inputs {n_inputs}, latent "
                f"{z_dim}, hidden {list(hidden)}"
            )
        hidden = list(hidden)
        self.encoder = _mlp([n_inputs, *hidden])
        self.mean = nn.Linear(hidden[-1], z_dim)
        self.scale = nn.Linear(hidden[-1], z_dim)
        self.decoder = nn.Sequential(_mlp([z_dim, *hidden[::-1]]), nn.Linear(hidden[0], n_inputs))

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The approximate posterior's mean and standard deviation of each input."""
        h = self.encoder(x)
        return self.mean(h), F.softplus(self.scale(h)) + 1e-6

    def loss(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """The negative evidence lower bound, averaged over the batch."""
        mean, std = self.encode(x)
        z = mean + std * torch.randn(mean.shape, generator=generator, device=mean.device)
        logits = self.decoder(z)
        nll = F.binary_cross_entropy_with_logits(logits, x, reduction="none") - log_normaliser(
            logits
        )
        kl = 0.5 * (mean**2 + std**2 - 1 - 2 * torch.log(std))
        return (nll.sum(1) + kl.sum(1)).mean()


def train_vae(
    data: np.ndarray,
    scale: float,
    z_dim: int = 1,
    hidden: Sequence[int] = (512, 512, 256, 128),
    epochs: int = 50,
    batch_size: int = 64,
    learning_rate: float = 1e-4,
    seed: int = 0,
    progress: bool = False,
) -> tuple[ContinuousBernoulliVAE, list[float]]:
    """Fit a :class:`ContinuousBernoulliVAE` to ``data`` (one flattened observation per row,
    divided by ``scale`` to lie in [0, 1]) with Adam, shuffled minibatches (the last partial
    one dropped) drawn from ``seed``.

    :returns: the model (in eval mode) and the mean loss of each epoch.
    """
    n = len(data)
    if n < batch_size:
        raise ValueError(f"the VAE's {n} observations do not fill one batch of {batch_size}")
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        vae = ContinuousBernoulliVAE(data.shape[1], z_dim, hidden)
    optimizer = torch.optim.Adam(vae.parameters(), lr=learning_rate)
    losses = []
    for _ in tqdm(range(epochs), desc="AUP: CB-VAE epochs", disable=not progress):
        order = torch.randperm(n, generator=generator).numpy()
        total = 0.0
        batches = n // batch_size
        for b in range(batches):
            x = (
                torch.as_tensor(
                    data[order[b * batch_size : (b + 1) * batch_size]], dtype=torch.float32
                )
                / scale
            )
            loss = vae.loss(x, generator)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        losses.append(total / batches)
    return vae.eval(), losses
