"""The members' networks written out over a leading member axis (``batching="grouped"`` of
:class:`~.stacked.StackedNetworks`): each convolution one grouped ``conv2d`` of all members (the
images ``(n, P * C, H, W)``, the weights ``(P * O, C, k, k)``, ``groups=P``), each linear layer
one ``baddbmm`` over the member axis, the observations made floats once for all members. The
same kernels as ``torch.func.vmap`` picks for these layers, without its batching rules around
them: fewer operations a forward (counted, independent of P), the same numbers.

:func:`grouped_network` writes out the networks a population stacks (:class:`PolicyHeads` of
SB3 actor-critic policies, PPO-Lagrangian's cost critics) with their features extractors
(:class:`~safelife_rl.training.SafeLifeCNN`, SB3's ``FlattenExtractor``), multilayer
perceptrons and element-wise activations; any other module is refused by name
(:class:`UnknownNetwork`), never guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space, preprocess_obs
from stable_baselines3.common.torch_layers import FlattenExtractor, MlpExtractor
from torch import nn

from safelife_rl.training.cost_critic import CostCritic
from safelife_rl.training.device.captured_policy import policy_latents
from safelife_rl.training.features import SafeLifeCNN


class PolicyHeads(nn.Module):
    """An SB3 actor-critic policy's action logits and values of a batch of observations, the
    same operations in the same order as its ``forward``, ``evaluate_actions`` and
    ``predict_values`` (features, latent codes, heads)."""

    def __init__(self, policy: ActorCriticPolicy):
        super().__init__()
        self.policy = policy
        self._preprocess = preprocessing(policy.observation_space, policy.normalize_images)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        latent_pi, values = policy_latents(self.policy, self._preprocess(obs))
        return self.policy.action_net(latent_pi), values


def preprocessing(space: spaces.Space, normalize_images: bool) -> Callable[..., torch.Tensor]:
    """SB3's ``preprocess_obs`` for ``space``, its test of a box (``is_image_space``, which
    reads the bounds with NumPy) made once, here: the forward passes read nothing of the host
    (``torch._dynamo`` traces them without a break)."""
    if not isinstance(space, spaces.Box):
        return partial(preprocess_obs, observation_space=space, normalize_images=normalize_images)
    if normalize_images and is_image_space(space):
        return lambda obs: obs.float() / 255.0
    return lambda obs: obs.float()


class UnknownNetwork(ValueError):
    """A module :func:`grouped_network` cannot write out (``batching="vmap"`` batches any)."""


#: A written-out piece of the network: the stacked parameters by name (each ``(P, ...)``) and
#: its input, to its output.
Layer = Callable[[Mapping[str, torch.Tensor], torch.Tensor], Any]

#: The parameter-free modules applied as they are: element-wise, so indifferent to the layout.
ELEMENTWISE = (
    nn.Identity, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
    nn.Mish, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Hardtanh,
)  # fmt: skip

# The two layouts of a member's activations between layers: images ``(n, P * C, H, W)`` (a
# grouped convolution's input and output, member k's channels the k-th block of C) and vectors
# ``(P, n, F)`` (a batched product's).
IMAGES, VECTORS = "images", "vectors"


def _unknown(module: nn.Module, path: str, why: str = "") -> UnknownNetwork:
    where = f"{path or 'the network'} ({type(module).__name__})"
    return UnknownNetwork(
        f"batching='grouped' cannot write out {where}{why}; it writes out SB3 actor-critic "
        "policies' heads and cost critics over SafeLifeCNN or FlattenExtractor features, "
        "linear layers, convolutions and element-wise activations: give batching='vmap', "
        "which batches any network"
    )


def _conv(conv: nn.Conv2d, name: str) -> Layer:
    """A convolution of every member at once: images ``(n, P * C, H, W)`` to
    ``(n, P * O, H', W')``."""
    if conv.groups != 1 or conv.padding_mode != "zeros":
        raise _unknown(conv, name, ": a convolution of more than one group or padding not zeros")
    stride, padding, dilation = conv.stride, conv.padding, conv.dilation
    weight_name, bias_name = f"{name}.weight", f"{name}.bias" if conv.bias is not None else None

    def forward(params: Mapping[str, torch.Tensor], images: torch.Tensor) -> torch.Tensor:
        weight = params[weight_name]  # (P, O, C, k, k)
        bias = params[bias_name].flatten() if bias_name else None
        return F.conv2d(
            images, weight.flatten(0, 1), bias, stride, padding, dilation, groups=weight.shape[0]
        )

    return forward


def _linear(linear: nn.Linear, name: str) -> Layer:
    """A linear layer of every member at once: vectors ``(P, n, F)`` to ``(P, n, O)``."""
    weight_name, bias_name = f"{name}.weight", f"{name}.bias" if linear.bias is not None else None

    def forward(params: Mapping[str, torch.Tensor], vectors: torch.Tensor) -> torch.Tensor:
        weight = params[weight_name].transpose(1, 2)  # (P, F, O)
        if bias_name is None:
            return torch.bmm(vectors, weight)
        return torch.baddbmm(params[bias_name].unsqueeze(1), vectors, weight)

    return forward


def _flatten(flatten: nn.Flatten, name: str, size: int) -> Layer:
    """Each member's image flattened: images ``(n, P * C, H, W)`` to vectors
    ``(P, n, C * H * W)`` (a view: the batched product reads it strided)."""
    if (flatten.start_dim, flatten.end_dim) != (1, -1):
        raise _unknown(flatten, name, ": a flatten of other than all of a sample's dimensions")

    def forward(params: Mapping[str, torch.Tensor], images: torch.Tensor) -> torch.Tensor:
        return images.reshape(images.shape[0], size, -1).transpose(0, 1)

    return forward


def _sequence(modules: nn.Module, prefix: str, layout: str, size: int) -> tuple[Layer, str]:
    """``modules`` (a ``Sequential``) written out from ``layout``; with the layout it ends in."""
    layers: list[Layer] = []
    for name, child in modules.named_children():
        path = f"{prefix}{name}"
        kind = type(child)  # the class itself: a subclass may compute otherwise
        if kind is nn.Sequential:
            layer, layout = _sequence(child, f"{path}.", layout, size)
        elif kind is nn.Conv2d and layout == IMAGES:
            layer = _conv(child, path)
        elif kind is nn.Linear and layout == VECTORS:
            layer = _linear(child, path)
        elif kind is nn.Flatten and layout == IMAGES:
            layer, layout = _flatten(child, path, size), VECTORS
        elif kind in ELEMENTWISE:
            layer = _elementwise(child)
        else:
            raise _unknown(child, path, f" on {layout}")
        layers.append(layer)

    def forward(params: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        for layer in layers:
            x = layer(params, x)
        return x

    return forward, layout


def _elementwise(module: nn.Module) -> Layer:
    return lambda params, x: module(x)


def _mlp(modules: nn.Module, prefix: str, size: int) -> Layer:
    """A multilayer perceptron (a ``Sequential`` of linear layers and activations) on vectors."""
    if type(modules) is not nn.Sequential:
        raise _unknown(modules, prefix.rstrip("."))
    layer, _ = _sequence(modules, prefix, VECTORS, size)
    return layer


def _safelife_cnn(cnn: SafeLifeCNN, prefix: str, size: int) -> Layer:
    """The SafeLife CNN of every member: observations ``(P, n, H, W, C)`` (floats, or 0/1
    integers taken as floats) to features ``(P, n, F)``, under its ``compute_dtype``."""
    body, layout = _sequence(cnn.cnn, f"{prefix}cnn.", IMAGES, size)
    if layout != VECTORS:
        raise _unknown(cnn.cnn, f"{prefix}cnn", ": its convolutions end unflattened")
    dense = _mlp(cnn.dense, f"{prefix}dense.", size)
    left, right, top, bottom = cnn.padding
    dense_weight = f"{prefix}dense.0.weight"

    def forward(params: Mapping[str, torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
        if not obs.is_floating_point():
            obs = obs.to(params[dense_weight].dtype)
        members, n, height, width, channels = obs.shape
        images = obs.permute(1, 0, 4, 2, 3)  # (n, P, C, H, W), a view
        # one copy into the layout of a grouped convolution's input, padded on the way
        images = F.pad(images, (left, right, top, bottom)) if any(cnn.padding) else images
        images = images.reshape(n, members * channels, height + top + bottom, width + left + right)
        if cnn.compute_dtype is None:
            return dense(params, body(params, images))
        with torch.autocast(images.device.type, dtype=cnn.compute_dtype, cache_enabled=False):
            features = dense(params, body(params, images))
        return features.float()

    return forward


def _extractor(extractor: nn.Module, prefix: str, size: int) -> Layer:
    """A features extractor of every member: observations ``(P, n, ...)`` to ``(P, n, F)``."""
    if type(extractor) is SafeLifeCNN:
        return _safelife_cnn(extractor, prefix, size)
    if type(extractor) is FlattenExtractor:
        return lambda params, obs: obs.flatten(2)
    raise _unknown(extractor, prefix.rstrip("."))


def _preprocessing(space: spaces.Space, normalize_images: bool) -> Callable[..., torch.Tensor]:
    """SB3's ``preprocess_obs`` of observations ``(P, n, ...)``: the members' samples as one
    batch (the uint8 to float conversion once for all members)."""
    if isinstance(space, spaces.Dict):
        raise UnknownNetwork("batching='grouped' takes no Dict observations: give batching='vmap'")
    preprocess = preprocessing(space, normalize_images)

    def forward(obs: torch.Tensor) -> torch.Tensor:
        members, n = obs.shape[:2]
        return preprocess(obs.flatten(0, 1)).unflatten(0, (members, n))

    return forward


def _policy_heads(heads: PolicyHeads, size: int) -> Layer:
    policy = heads.policy
    if (
        not isinstance(policy, ActorCriticPolicy)
        or type(policy).extract_features is not ActorCriticPolicy.extract_features
        or not policy.share_features_extractor
    ):
        raise _unknown(policy, "policy", ": not an SB3 actor-critic policy sharing its features")
    if type(policy.mlp_extractor) is not MlpExtractor:
        raise _unknown(policy.mlp_extractor, "policy.mlp_extractor")
    preprocess = _preprocessing(policy.observation_space, policy.normalize_images)
    extract = _extractor(policy.features_extractor, "policy.features_extractor.", size)
    latent_pi = _mlp(policy.mlp_extractor.policy_net, "policy.mlp_extractor.policy_net.", size)
    latent_vf = _mlp(policy.mlp_extractor.value_net, "policy.mlp_extractor.value_net.", size)
    heads_ = []
    for name in ("action_net", "value_net"):
        head = getattr(policy, name)
        if type(head) is not nn.Linear:
            raise _unknown(head, f"policy.{name}")
        heads_.append(_linear(head, f"policy.{name}"))
    action, value = heads_

    def forward(params: Mapping[str, torch.Tensor], obs: torch.Tensor) -> Any:
        features = extract(params, preprocess(obs))
        logits = action(params, latent_pi(params, features))
        return logits, value(params, latent_vf(params, features))

    return forward


def _cost_critic(critic: CostCritic, size: int) -> Layer:
    preprocess = _preprocessing(critic.observation_space, critic.normalize_images)
    extract = _extractor(critic.features_extractor, "features_extractor.", size)
    head = _mlp(critic.head, "head.", size)
    return lambda params, obs: head(params, extract(params, preprocess(obs)))


def grouped_network(network: nn.Module, size: int) -> Layer:
    """``network``'s forward pass written out for ``size`` members: a function of the stacked
    parameters by name (each ``(P, ...)``, as ``network.named_parameters()`` names them) and the
    observations ``(P, n, ...)``, whose outputs are ``(P, n, ...)``: member ``k``'s of
    ``obs[k]`` by its own parameters. Raises :class:`UnknownNetwork` for a network it does not
    know (no guess: ``vmap`` batches any)."""
    if type(network) is PolicyHeads:
        return _policy_heads(network, size)
    if type(network) is CostCritic:
        return _cost_critic(network, size)
    if type(network) in (SafeLifeCNN, FlattenExtractor):
        return _extractor(network, "", size)
    if type(network) is nn.Sequential:
        return _mlp(network, "", size)
    raise _unknown(network, "")
