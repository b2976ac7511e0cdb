"""The policy's forward pass of a rollout step replayed as a CUDA graph (``compile=cudagraphs``).

With ``compile=cudagraphs`` the device vector env's step is one CUDA graph; :class:`CapturedPolicy`
makes the policy's network one more, so that a rollout step is two graph replays and a few
kernels of SB3's own action distribution, where it was some fifty launches of the network
alone. The network (features, the shared MLP, the value head) is captured with
``torch.compile(backend="cudagraphs")``: its graph runs the eager kernels, only replayed, so the
actions, values and log-probabilities are the eager policy's bit for bit (inductor's fused
kernels round differently, by about 1e-9 on the SafeLife CNN, and were no faster on a CPU), and
a run may resume with ``compile`` changed. The action head, the distribution and the sampling
stay SB3's own code, run eagerly (the random numbers are drawn as stock SB3 draws them).
"""

from __future__ import annotations

import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs


class CapturedPolicy:
    """``policy(observations)`` (actions, values, log-probabilities) with the network captured.

    :param policy: an SB3 actor-critic policy, in evaluation mode when called.
    :param backend: the ``torch.compile`` backend: ``"cudagraphs"`` (a CUDA graph of the eager
        kernels); the tests use ``"aot_eager"``, the same graph run eagerly on a CPU.
    """

    def __init__(self, policy: ActorCriticPolicy, backend: str = "cudagraphs"):
        self.policy = policy
        self._network = torch.compile(self._latents, fullgraph=True, dynamic=False, backend=backend)
        self._graphs = backend == "cudagraphs"

    def _latents(self, preprocessed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """SB3's ``ActorCriticPolicy.forward`` after ``preprocess_obs`` and up to the action
        head: the actor's latent and the values. (``preprocess_obs`` stays outside the graph:
        its image-space test branches on NumPy arrays, which Dynamo traces as data in torch
        2.11.)"""
        policy = self.policy
        if policy.share_features_extractor:
            latent_pi, latent_vf = policy.mlp_extractor(policy.features_extractor(preprocessed))
        else:
            latent_pi = policy.mlp_extractor.forward_actor(
                policy.pi_features_extractor(preprocessed)
            )
            latent_vf = policy.mlp_extractor.forward_critic(
                policy.vf_features_extractor(preprocessed)
            )
        return latent_pi, policy.value_net(latent_vf)

    def __call__(
        self, observations: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._graphs:
            torch.compiler.cudagraph_mark_step_begin()
        policy = self.policy
        latent_pi, values = self._network(
            preprocess_obs(
                observations, policy.observation_space, normalize_images=policy.normalize_images
            )
        )
        # the graph's next replay writes over its outputs: the values outlive this step
        values = values.clone() if self._graphs else values
        distribution = self.policy._get_action_dist_from_latent(latent_pi)
        actions = distribution.get_actions()
        log_prob = distribution.log_prob(actions)
        return actions.reshape((-1, *self.policy.action_space.shape)), values, log_prob
