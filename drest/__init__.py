"""DREST: shutdown gridworlds, the meta-episode DREST reward, USEFULNESS and NEUTRALITY
(Thornley et al., "Towards shutdownable agents via stochastic choice")."""

from drest.registration import ENV_IDS, PROCEDURAL_ID, register_envs

register_envs()

__all__ = ["ENV_IDS", "PROCEDURAL_ID", "register_envs"]
