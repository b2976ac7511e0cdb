"""The networks of a population's members as one: their parameters stacked along a leading
member dimension and their forward passes batched over it (written out as grouped convolutions
and batched products, :mod:`.grouped`; by ``torch.func.vmap``; or member by member over slices
of the stack); and their optimizers (:class:`StackedOptimizer`).

Each member's network (its SB3 policy, its cost critic) keeps its own parameter objects, whose
data become views of the stacked tensors: the member's ``predict``, evaluation and ``save`` see
the population's current weights without a copy, and one optimizer step over the stacked
tensors is every member's.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.utils._pytree import tree_map

from safelife_rl.training.device.grouped import PolicyHeads, grouped_network

__all__ = [
    "BATCHING",
    "CUDA_AUTO",
    "PolicyHeads",
    "StackedNetworks",
    "StackedOptimizer",
    "UnfoldConv2d",
    "set_lr",
]


#: How the members' forward passes run: ``grouped``: written out over the member axis
#: (:mod:`.grouped`: each convolution one grouped ``conv2d``, each linear layer one
#: ``baddbmm``; 13 kernel ops a forward of the SafeLife CNN's policy for any number of members,
#: vmap's outputs bit for bit; not yet measured on a GPU); ``vmap``: ``torch.func.vmap`` of a
#: member's network (the same grouped kernels with its batching rules around them: 25 ops; any
#: network); ``unfold``: as ``vmap``, but each convolution an unfold and one batched matrix
#: product over the members (:class:`UnfoldConv2d`: no grouped convolution; 34 ops). Batched,
#: the sums round otherwise than a single network's. ``loop``: member by member, each as its
#: single run computes it (bit for bit the single runs'). ``auto``: :data:`CUDA_AUTO` on CUDA
#: (``unfold``: on the H200 lease, P = 72, fp32, a minibatch in 8.6 ms against vmap's 15.7, a
#: rollout forward in 2.82 ms against 3.06; grouped runs vmap's kernels and is not yet measured
#: there), ``loop`` elsewhere (on a 2-core CPU, 72 paper CNNs on a minibatch's 80 observations
#: each: a forward and backward in 1.9 s, grouped 3.8, vmap 3.9, unfold 6.6; docs/speed.md).
BATCHING = ("auto", "grouped", "unfold", "vmap", "loop")
#: ``auto``'s batching on CUDA: the fastest measured there (see :data:`BATCHING`)
CUDA_AUTO = "unfold"


class UnfoldConv2d(nn.Module):
    """A :class:`torch.nn.Conv2d`'s convolution (one group, zero padding) as its input's
    patches (strided views) contracted with its weight; under ``vmap`` over stacked weights,
    one batched product of each member's weight with all its samples' patches, where ``vmap``
    of ``conv2d`` makes a grouped convolution of one group per member (in cuDNN, slow to
    differentiate for many groups). The same parameters (``weight``, ``bias``) by name."""

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        if conv.groups != 1 or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("UnfoldConv2d takes convolutions of one group and numeric padding")
        self.weight, self.bias = conv.weight, conv.bias
        self.kernel_size, self.stride = conv.kernel_size, conv.stride
        self.padding, self.dilation = conv.padding, conv.dilation

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        (pad_h, pad_w), (dil_h, dil_w) = self.padding, self.dilation
        if pad_h or pad_w:
            images = F.pad(images, (pad_w, pad_w, pad_h, pad_h))
        (k_h, k_w), (s_h, s_w) = self.kernel_size, self.stride
        # (batch, channels, rows, cols, k_h, k_w): views, which vmap batches as views
        patches = images.unfold(2, dil_h * (k_h - 1) + 1, s_h).unfold(3, dil_w * (k_w - 1) + 1, s_w)
        patches = patches[..., ::dil_h, ::dil_w]
        out = torch.einsum("bchwij,ocij->bohw", patches, self.weight)
        if self.bias is not None:
            out = out + self.bias[:, None, None]
        return out


def _unfolded(network: nn.Module) -> nn.Module:
    """``network`` with its convolutions as :class:`UnfoldConv2d` (in place)."""
    for name, child in network.named_children():
        if isinstance(child, nn.Conv2d):
            setattr(network, name, UnfoldConv2d(child))
        else:
            _unfolded(child)
    return network


class StackedNetworks:
    """The members' networks (one architecture) with their parameters stacked.

    :param networks: one module per member; its ``forward`` takes a batch of observations.
    :param batching: one of :data:`BATCHING`.
    :ivar params: the stacked parameters by name, leaf tensors ``(P, ...)`` that the population's
        optimizer updates; each member's parameter ``k`` is a view of ``params[...][k]``.
    """

    def __init__(self, networks: Sequence[nn.Module], batching: str = "auto"):
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {BATCHING}, got {batching!r}")
        shapes = [[(n, p.shape) for n, p in net.named_parameters()] for net in networks]
        if any(s != shapes[0] for s in shapes):
            raise ValueError("the members' networks differ in architecture")
        params, buffers = stack_module_state(list(networks))
        self.params = {name: p.detach().requires_grad_() for name, p in params.items()}
        self.buffers = buffers
        self.size = len(networks)
        self.networks = list(networks)
        self.members = [list(net.parameters()) for net in networks]
        for k, net in enumerate(networks):
            for name, param in net.named_parameters():
                param.data = self.params[name].detach()[k]
        if batching == "auto":
            device = next(iter(self.params.values())).device
            batching = CUDA_AUTO if device.type == "cuda" else "loop"
        self.batching = batching
        self._base = copy.deepcopy(networks[0]).to("meta")
        #: the network the batched pass runs (the same as ``_base`` but under ``unfold``)
        self._batched_base = (
            _unfolded(copy.deepcopy(self._base)) if batching == "unfold" else self._base
        )
        self._batched = vmap(partial(_called, self._batched_base), in_dims=(0, 0, 0))
        #: the forward pass written out (``grouped``: the networks it takes have no buffers)
        self._grouped = grouped_network(self._base, self.size) if batching == "grouped" else None

    def set_training_mode(self, mode: bool) -> None:
        """Training or evaluation mode (dropout, batch norm) for the network all members run."""
        self._base.train(mode)
        self._batched_base.train(mode)

    def parameters(self) -> list[torch.Tensor]:
        """The stacked parameters in the members' ``parameters()`` order."""
        return list(self.params.values())

    def __call__(self, obs: torch.Tensor) -> Any:
        """The networks' outputs of observations ``(P, B, ...)``, each ``(P, B, ...)``: member
        ``k``'s of ``obs[k]`` by its own network. Member by member (``loop``) each member's
        module runs as its single run runs it (its gradients on its own parameters, which
        :class:`StackedOptimizer` steps); batched, a population of one runs its network alone
        on the stacked parameters."""
        if self.batching == "loop":
            outputs = [network(obs[k]) for k, network in enumerate(self.networks)]
        elif self.size == 1:
            outputs = [self.member(0, obs[0])]
        elif self._grouped is not None:
            return self._grouped(self.params, obs)
        else:
            return self._batched(self.params, self.buffers, obs)
        if self.size == 1:  # a view, not a copy
            return tree_map(lambda part: part.unsqueeze(0), outputs[0])
        return tree_map(lambda *parts: torch.stack(parts), *outputs)

    def member(self, k: int, obs: torch.Tensor) -> Any:
        """Member ``k``'s outputs of a batch ``obs`` by its network alone."""
        params = {name: p[k] for name, p in self.params.items()}
        buffers = {name: b[k] for name, b in self.buffers.items()}
        return _called(self._base, params, buffers, obs)

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


def _called(
    network: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    obs: torch.Tensor,
) -> Any:
    return functional_call(network, (params, buffers), (obs,))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """``lr`` into every group of ``optimizer``: written into its tensor where it is one (a
    captured update's, ``graphs=update``, which its replays read), else set."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


class StackedOptimizer:
    """The members' optimizers of one :class:`StackedNetworks`, stepped as one.

    Batched (``grouped``, ``vmap``, ``unfold``): one optimizer (the members' kind and settings)
    over the stacked parameters; each member's optimizer state is made views of its slices of it
    (after the first step), so that a member's save holds its own moments. Member by member: each
    member's own optimizer steps its slices (a fused Adam's vector loop and scalar tail round a
    slice's elements otherwise than a single run's, unless run on it alone).
    """

    def __init__(self, stacked: StackedNetworks, optimizers: Sequence[torch.optim.Optimizer]):
        self.stacked, self.optimizers = stacked, list(optimizers)
        self.optimizer: torch.optim.Optimizer | None = None
        if stacked.batching != "loop":  # batched: grouped, vmap or unfold
            first = self.optimizers[0]
            self.optimizer = type(first)(stacked.parameters(), **first.defaults)
        self._linked = False

    def set_lr(self, lr: float) -> None:
        """The stacked optimizer's learning rate (the members' own are set by their models)."""
        if self.optimizer is not None:
            set_lr(self.optimizer, lr)

    def stepping(self) -> list[torch.optim.Optimizer]:
        """The optimizers :meth:`step` steps: the stacked one, or member by member each
        member's."""
        return self.optimizers if self.optimizer is None else [self.optimizer]

    def zero_grad(self) -> None:
        for param in self.stacked.parameters():
            param.grad = None
        for params in self.stacked.members:
            for param in params:
                param.grad = None

    def step(self, max_grad_norm: float) -> None:
        """Every member's step on its gradients (the stacked ones batched, its own parameters'
        member by member): clipped to ``max_grad_norm`` (its global norm, as
        ``clip_grad_norm_``), then its optimizer's step."""
        if self.optimizer is not None:
            self.stacked.clip_grad_norms(max_grad_norm)
            self.optimizer.step()
            return
        for params, optimizer in zip(self.stacked.members, self.optimizers):
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()

    def adopt_member_states(self) -> None:
        """Take the members' optimizer states into the stacked optimizer, after their weights
        (in place, in the stack) and optimizer states were loaded from their checkpoints."""
        if self.optimizer is None:  # member by member: each member's optimizer is its own
            return
        for j, stacked in enumerate(self.stacked.parameters()):
            states = [
                optimizer.state.get(params[j])
                for optimizer, params in zip(self.optimizers, self.stacked.members)
            ]
            if not all(states):
                continue
            self.optimizer.state[stacked] = {
                key: torch.stack([s[key] for s in states]) if value.dim() else value.clone()
                for key, value in states[0].items()
            }
        self._linked = False
        self.link_member_states()

    def link_member_states(self) -> None:
        """Batched, make each member's optimizer state views of its slices of the stacked
        optimizer's (once it has a state: after its first step)."""
        if self._linked or self.optimizer is None or not self.optimizer.state:
            return
        for k, (optimizer, params) in enumerate(zip(self.optimizers, self.stacked.members)):
            for param, stacked in zip(params, self.stacked.parameters()):
                state = self.optimizer.state[stacked]
                optimizer.state[param] = {
                    key: value if value.dim() == 0 else value[k] for key, value in state.items()
                }
        self._linked = True
