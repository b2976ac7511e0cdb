"""The policy's forward pass of a rollout step replayed as a CUDA graph (``compile=cudagraphs``).

With ``compile=cudagraphs`` the device vector env's step is one CUDA graph; :class:`CapturedPolicy`
makes a single run's policy network one more, so that a rollout step is two graph replays and a
few kernels of the action draw, where it was some fifty launches of the network alone. The
network (features, the shared MLP, the value head) is captured with
``torch.compile(backend="cudagraphs")``: its graph runs the eager kernels, only replayed, so the
action logits and values are the eager policy's bit for bit (inductor's fused kernels round
differently, by about 1e-9 on the SafeLife CNN, and were no faster on a CPU), and a run may
resume with ``compile`` changed. The action head runs eagerly after it.
"""

from __future__ import annotations

from functools import partial

import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs


def policy_latents(
    policy: ActorCriticPolicy, preprocessed: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """SB3's ``ActorCriticPolicy.forward`` after ``preprocess_obs`` and up to the action head:
    the actor's latent and the values."""
    if policy.share_features_extractor:
        latent_pi, latent_vf = policy.mlp_extractor(policy.features_extractor(preprocessed))
    else:
        latent_pi = policy.mlp_extractor.forward_actor(policy.pi_features_extractor(preprocessed))
        latent_vf = policy.mlp_extractor.forward_critic(policy.vf_features_extractor(preprocessed))
    return latent_pi, policy.value_net(latent_vf)


class CapturedPolicy:
    """A policy's action logits (its action head's output) and values of a batch of
    observations, as :class:`~.stacked.PolicyHeads` computes them, with its network captured.

    :param policy: an SB3 actor-critic policy, in evaluation mode when called.
    :param backend: the ``torch.compile`` backend: ``"cudagraphs"`` (a CUDA graph of the eager
        kernels); the tests use ``"aot_eager"``, the same graph run eagerly on a CPU.
    """

    def __init__(self, policy: ActorCriticPolicy, backend: str = "cudagraphs"):
        self.policy = policy
        # preprocess_obs stays outside the graph: its image-space test branches on NumPy
        # arrays, which Dynamo traces as data in torch 2.11
        self._network = torch.compile(
            partial(policy_latents, policy), fullgraph=True, dynamic=False, backend=backend
        )
        self._graphs = backend == "cudagraphs"

    def __call__(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self._graphs:
            torch.compiler.cudagraph_mark_step_begin()
        policy = self.policy
        preprocessed = preprocess_obs(
            observations, policy.observation_space, normalize_images=policy.normalize_images
        )
        latent_pi, values = self._network(preprocessed)
        # the graph's next replay writes over its outputs: the values outlive this step
        return policy.action_net(latent_pi), values.clone() if self._graphs else values
