"""The members' networks written out over the member axis (``batching="grouped"``,
:mod:`safelife_rl.training.device.grouped`): each member's outputs and gradients are its
own network's (to the batched kernels' rounding: bit for bit vmap's outputs), the operations of
a forward pass do not grow with the members and are fewer than vmap's, a member's weights
reach its outputs alone, and a network it does not know is refused by name."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import NatureCNN
from torch import nn

from safelife_rl.training import SafeLifeCNN
from safelife_rl.training.cost_critic import CostCritic
from safelife_rl.training.device.grouped import UnknownNetwork
from safelife_rl.training.device.stacked import PolicyHeads, StackedNetworks
from safety_rl_common.torch_counts import count_ops

pytestmark = pytest.mark.usefixtures("torch_one_thread")

#: a small SafeLife view: padded to the CNN's 17x17 as the default 15x15 view is
VIEW = gym.spaces.Box(0, 1, (15, 15, 10), np.uint8)
ACTIONS = gym.spaces.Discrete(9)
CNN = {
    "features_extractor_class": SafeLifeCNN,
    "features_extractor_kwargs": {"features_dim": 32, "conv_channels": [4, 8, 8]},
    "net_arch": [],
}
#: outputs against each member's own network on the CPU (the batched kernels sum in another
#: order: measured up to 1.4e-7 here), and gradients relative to their largest (measured 6e-7)
OUTPUT_TOLERANCE, GRADIENT_TOLERANCE = 1e-6, 1e-5


def cnn_policy() -> ActorCriticPolicy:
    return ActorCriticPolicy(VIEW, ACTIONS, lambda _: 1e-3, **CNN)  # type: ignore[arg-type]


def mlp_policy() -> ActorCriticPolicy:
    space = gym.spaces.Box(-1, 1, (6,))
    return ActorCriticPolicy(space, ACTIONS, lambda _: 1e-3, net_arch=[8, 8])


NETWORKS = {
    "cnn policy": lambda: PolicyHeads(cnn_policy()),
    "mlp policy": lambda: PolicyHeads(mlp_policy()),
    "cost critic": lambda: CostCritic.like(cnn_policy()),
}


def observations(network: nn.Module, size: int, n: int = 4, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if isinstance(network, PolicyHeads) and network.policy.observation_space.shape == (6,):
        return torch.randn((size, n, 6), generator=generator)
    return torch.randint(0, 2, (size, n, *VIEW.shape), generator=generator, dtype=torch.uint8)


def members(kind: str, size: int) -> list[nn.Module]:
    torch.manual_seed(1)
    return [NETWORKS[kind]() for _ in range(size)]


def outputs_and_gradients(
    stacked: StackedNetworks, obs: torch.Tensor
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The stacked outputs of ``obs`` and the gradients of their sum of squares, stacked over
    the members (``loop`` leaves them on each member's own parameters)."""
    out = stacked(obs)
    out = list(out) if isinstance(out, tuple) else [out]
    for param in [*stacked.parameters(), *(p for m in stacked.members for p in m)]:
        param.grad = None
    sum(o.float().square().sum() for o in out).backward()  # type: ignore[union-attr]
    if stacked.batching == "loop":
        grads = [torch.stack([p.grad for p in params]) for params in zip(*stacked.members)]  # type: ignore[misc]
    else:
        grads = [p.grad.clone() for p in stacked.parameters()]  # type: ignore[union-attr]
    return [o.detach() for o in out], grads


@pytest.mark.parametrize("kind", NETWORKS)
def test_each_member_is_its_own_network(kind):
    """Each member's outputs and gradients are its own network's (``loop``: each member's
    network alone) to the stated tolerance, and its outputs vmap's bit for bit (the same grouped
    convolutions and batched products; vmap sums a convolution's bias gradient in another
    order: it differs by a rounding of the largest, 6e-8 in 0.5 here)."""
    networks = members(kind, 3)
    obs = observations(networks[0], 3)
    grouped = outputs_and_gradients(StackedNetworks(networks, "grouped"), obs)
    own = outputs_and_gradients(StackedNetworks(networks, "loop"), obs)
    vmapped = outputs_and_gradients(StackedNetworks(networks, "vmap"), obs)
    for out, expected, batched in zip(grouped[0], own[0], vmapped[0]):
        assert out.shape == expected.shape
        torch.testing.assert_close(out, expected, rtol=0, atol=OUTPUT_TOLERANCE)
        assert torch.equal(out, batched)
    for grad, expected, batched in zip(grouped[1], own[1], vmapped[1]):
        scale = expected.abs().max()
        assert (grad - expected).abs().max() <= GRADIENT_TOLERANCE * scale
        assert (grad - batched).abs().max() <= 1e-6 * scale


def test_the_members_weights_are_their_own_networks():
    """The stacks and the members' own parameters are the same memory: a member's weight
    changed in place (as its ``load`` does) reaches its outputs of the stacked pass, and its
    alone; the other members' outputs stay bit for bit."""
    networks = members("cnn policy", 4)
    stacked = StackedNetworks(networks, "grouped")
    obs = observations(networks[0], 4)
    with torch.no_grad():
        before = stacked(obs)
        networks[2].policy.features_extractor.cnn[0].weight.add_(0.01)  # type: ignore[union-attr]
        after = stacked(obs)
    for old, new in zip(before, after):
        changed = [not torch.equal(old[k], new[k]) for k in range(4)]
        assert changed == [False, False, True, False]


def test_bfloat16_is_each_members_own_network():
    """Under ``SafeLifeCNN.compute_dtype = bfloat16`` (``precision=bf16``) each member runs its
    convolutions and dense layer in bfloat16 as its own network does (measured 6e-8 from it),
    its features and heads in FP32."""
    networks = members("cnn policy", 3)
    for network in networks:
        network.policy.features_extractor.compute_dtype = torch.bfloat16  # type: ignore[union-attr]
    obs = observations(networks[0], 3)
    grouped = outputs_and_gradients(StackedNetworks(networks, "grouped"), obs)
    own = outputs_and_gradients(StackedNetworks(networks, "loop"), obs)
    for out, expected in zip(grouped[0], own[0]):
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    for grad, expected in zip(grouped[1], own[1]):
        assert (grad - expected).abs().max() <= 1e-5 * expected.abs().max()


def forward_ops(kind: str, size: int, batching: str) -> tuple[int, int]:
    """The kernel ops of a forward pass, and of a forward and backward pass, of ``size``
    members."""
    networks = members(kind, size)
    stacked = StackedNetworks(networks, batching)
    obs = observations(networks[0], size, n=2)
    with torch.no_grad():
        forward = count_ops(stacked, obs).kernels

    def update() -> None:
        out = stacked(obs)
        sum(o.square().sum() for o in (out if isinstance(out, tuple) else [out])).backward()

    return forward, count_ops(update).kernels


@pytest.mark.parametrize("kind", ["cnn policy", "cost critic"])
def test_a_forward_pass_makes_as_many_operations_for_72_members_as_for_2(kind):
    """Written out, a forward pass (and a forward and backward pass) is the same operations
    for 72 members as for 2, and fewer than vmap's: the SafeLife CNN's policy heads are 13
    kernel ops a forward (vmap: 27 on this padded view, 25 on the paper's 25x25)."""
    two, many = forward_ops(kind, 2, "grouped"), forward_ops(kind, 72, "grouped")
    assert two == many
    vmapped = forward_ops(kind, 2, "vmap")
    assert two[0] < vmapped[0] and two[1] < vmapped[1]
    if kind == "cnn policy":
        assert two[0] == 13


class _Scaled(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * x


@pytest.mark.parametrize(
    "network, named",
    [
        (lambda: PolicyHeads(ActorCriticPolicy(
            gym.spaces.Box(0, 255, (3, 36, 36), np.uint8), ACTIONS, lambda _: 1e-3,
            features_extractor_class=NatureCNN,
        )), "policy.features_extractor (NatureCNN)"),
        (lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)), "1 (BatchNorm1d)"),
        (lambda: nn.Sequential(nn.Linear(4, 4), _Scaled()), "1 (_Scaled)"),
        (lambda: nn.Sequential(nn.Conv2d(3, 4, 3)), "0 (Conv2d) on vectors"),
    ],
)  # fmt: skip
def test_a_network_it_does_not_know_is_refused_by_name(network, named):
    """A module the written-out network does not know is refused at once, by its path and
    class, with the batching that takes it (vmap), never guessed at."""
    with pytest.raises(UnknownNetwork, match=r"batching='vmap'") as refused:
        StackedNetworks([network(), network()], "grouped")
    assert named in str(refused.value)
