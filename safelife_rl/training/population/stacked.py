"""The networks of a population's members as one: their parameters stacked along a leading
member dimension and their forward passes batched over it, with ``torch.func.vmap`` (one
grouped kernel for all members) or member by member over slices of the stack.

Each member's SB3 policy keeps its own parameter objects, whose data become views of the
stacked tensors: the member's ``predict``, evaluation and ``save`` see the population's current
weights without a copy, and one optimizer step over the stacked tensors is every member's.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn
from torch.func import functional_call, stack_module_state, vmap


class PolicyHeads(nn.Module):
    """An SB3 actor-critic policy's action logits and values of a batch of observations, the
    same operations in the same order as its ``forward``, ``evaluate_actions`` and
    ``predict_values`` (features, latent codes, heads)."""

    def __init__(self, policy: ActorCriticPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        policy = self.policy
        features = policy.extract_features(obs)
        latent_pi, latent_vf = policy.mlp_extractor(features)
        return policy.action_net(latent_pi), policy.value_net(latent_vf)


#: How the members' forward passes run: ``vmap``: all members in one grouped kernel per layer
#: (fewer, larger kernels: what a GPU wants; its sums round otherwise than a single network's);
#: ``loop``: member by member, each as its single run computes it (on a CPU, where the
#: arithmetic dominates, as fast as the grouped kernels or faster, and bit for bit the single
#: runs'); ``auto``: ``vmap`` on CUDA, ``loop`` elsewhere.
BATCHING = ("auto", "vmap", "loop")


class StackedPolicies:
    """The members' policies (one architecture) with their parameters stacked.

    :param batching: one of :data:`BATCHING`.
    :ivar params: the stacked parameters by name, leaf tensors ``(P, ...)`` that the population's
        optimizer updates; each member's parameter ``k`` is a view of ``params[...][k]``.
    """

    def __init__(self, policies: Sequence[ActorCriticPolicy], batching: str = "auto"):
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {BATCHING}, got {batching!r}")
        heads = [PolicyHeads(policy) for policy in policies]
        shapes = [[(n, p.shape) for n, p in h.named_parameters()] for h in heads]
        if any(s != shapes[0] for s in shapes):
            raise ValueError("the members' policies differ in architecture")
        params, buffers = stack_module_state(heads)
        self.params = {name: p.detach().requires_grad_() for name, p in params.items()}
        self.buffers = buffers
        self.size = len(policies)
        for k, head in enumerate(heads):
            for name, param in head.named_parameters():
                param.data = self.params[name].detach()[k]
        if batching == "auto":
            device = next(iter(self.params.values())).device
            batching = "vmap" if device.type == "cuda" else "loop"
        self.batching = batching
        self._base = copy.deepcopy(heads[0]).to("meta")
        self._batched = vmap(self._one, in_dims=(0, 0, 0))

    def _one(
        self, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return functional_call(self._base, (params, buffers), (obs,))

    def set_training_mode(self, mode: bool) -> None:
        """Training or evaluation mode (dropout, batch norm) for the network all members run."""
        self._base.train(mode)

    def parameters(self) -> list[torch.Tensor]:
        """The stacked parameters in the members' ``policy.parameters()`` order."""
        return list(self.params.values())

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``(P, B, actions)`` and values ``(P, B)`` of observations ``(P, B, ...)``,
        member ``k``'s of ``obs[k]`` by its own network. A population of one always runs its
        network as itself."""
        if self.size == 1 or self.batching == "loop":
            outputs = [self.member(k, obs[k]) for k in range(self.size)]
            logits = torch.stack([logits for logits, _ in outputs])
            values = torch.stack([values for _, values in outputs])
            return logits, values.flatten(1)
        logits, values = self._batched(self.params, self.buffers, obs)
        return logits, values.flatten(1)

    def member(self, k: int, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Member ``k``'s logits and values of a batch ``obs`` by its network alone."""
        params = {name: p[k] for name, p in self.params.items()}
        buffers = {name: b[k] for name, b in self.buffers.items()}
        return self._one(params, buffers, obs)

    def clip_grad_norms(self, max_norm: float) -> None:
        """Scale each member's gradients so that their global 2-norm is at most ``max_norm``,
        as ``torch.nn.utils.clip_grad_norm_`` does for one network (SB3's PPO step)."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        norms = torch.stack(
            [torch.linalg.vector_norm(g.reshape(self.size, -1), 2, dim=1) for g in grads]
        )
        total = torch.linalg.vector_norm(norms, 2, dim=0)
        coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coefficient.view(-1, *[1] * (g.dim() - 1)))
