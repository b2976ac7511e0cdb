"""Discrete actions drawn on the device without a generator: Gumbel-max over a counter-based
hash, for one run or P runs at once.

A run's action at env ``e`` and step count ``t`` is ``argmax_a(logits[a] + G_a)`` with
``G_a = -log(-log(U_a))``, ``U_a`` the hash of (run seed, ``t``, ``e``, ``a``) in the scheme of
:mod:`safelife_rl.engine.torch_random` (stream ``ACTION_DRAWS``): a categorical draw with the
probabilities ``softmax(logits)``. A hash has no state: the draws of a run are the same alone
and as a member of a population (P = 1 is a single run), at any batch size, in eager or
captured code, and on any device (the noise is computed in float64, where a CPU's and a GPU's
logarithms differ by an ulp at most: an argmax changes only if two perturbed logits come
within about 1e-15 of each other). A run's step count is its ``num_timesteps``, which its
checkpoints hold: a resumed run draws on where it stopped. The ops of a draw do not depend on
P: one batched draw replaces a ``torch.multinomial`` per member (some fourteen kernels each).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import torch

from safelife_rl.engine.torch_random import ACTION_DRAWS, bits, env_keys, mix


def run_seed(model: object) -> int:
    """The seed of a run's action draws: its ``seed``, or for a run made without one a seed
    drawn once from the system (kept as ``action_seed``, which its saved model holds)."""
    seed = getattr(model, "seed", None)
    if seed is not None:
        return int(seed)
    if getattr(model, "action_seed", None) is None:
        model.action_seed = secrets.randbelow(2**31)  # type: ignore[attr-defined]
    return int(model.action_seed)  # type: ignore[attr-defined]


class ActionSampler:
    """Draws the actions of ``len(seeds)`` runs of ``n_envs`` envs each, all at one step
    count (see the module docstring).

    :param seeds: each run's seed (:func:`run_seed`).
    :param n_envs: envs a run.
    :param n_actions: the number of discrete actions.
    """

    def __init__(
        self, seeds: Sequence[int], n_envs: int, n_actions: int, device: torch.device | str
    ):
        seeds_t = torch.tensor(list(seeds), dtype=torch.int64, device=device)
        envs = torch.arange(n_envs, device=device)
        self.n_envs = n_envs
        self.seeds = tuple(int(seed) for seed in seeds)
        self._env_keys = env_keys(seeds_t[:, None], ACTION_DRAWS, envs)  # (P, n)
        self._actions = torch.arange(n_actions, device=device)
        #: the runs' step count at the next draw (on the device: no copy a step)
        self.steps = torch.zeros((), dtype=torch.int64, device=device)

    def start(self, steps: int) -> None:
        """Draw on from the step count ``steps`` (a run's ``num_timesteps``: at every rollout's
        start, so a resumed or replayed run goes on from its own)."""
        self.steps.fill_(steps)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """The actions of ``logits`` ``(P, n_envs, n_actions)`` at the current step count,
        int64 ``(P, n_envs)``; the count then moves on by ``n_envs`` (one vector-env step)."""
        keys = mix(self._env_keys + self.steps)
        uniforms = (bits(keys[..., None], self._actions).to(torch.float64) + 0.5) * 2.0**-32
        gumbels = -torch.log(-torch.log(uniforms))
        actions = torch.argmax(logits.to(torch.float64) + gumbels, dim=-1)
        self.steps.add_(self.n_envs)
        return actions
