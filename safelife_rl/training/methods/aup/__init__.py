"""AUP, attainable utility preservation (Turner, Ratzlaff & Tadepalli, "Avoiding Side Effects
in Complex Environments", NeurIPS 2020), and AUP_proj, its variant with a random projection for
the auxiliary reward: ``method=aup`` and ``method=aup_proj`` (``docs/safelife/methods.md``).

:class:`~.penalty.AUPPenalty` (a vec-env wrapper) takes ``lambda * |Q_aux(s, a) - Q_aux(s,
noop)|`` off each reward; :class:`~.phase.AuxiliaryPhase` (a callback) first learns ``Q_aux``:
it plays random actions to collect observations, fits an auxiliary reward to them
(:mod:`.auxiliary_rewards`), trains a DQN agent on that reward, saves both into the run folder
and hands the Q-network to the wrapper; then it ramps ``lambda`` over the rest of the run::

    env = AUPPenalty(make_vec_env(...))
    model = PPO("CnnPolicy", env)
    model.learn(total, callback=[AuxiliaryPhase(run_dir, total_timesteps=total), ...])
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from safelife_rl.training.methods.aup.checks import check_aup_settings
from safelife_rl.training.methods.aup.penalty import AUPPenalty, DeviceAUPPenalty
from safelife_rl.training.methods.aup.phase import AUXILIARY_FILE, AuxiliaryPhase
from safelife_rl.training.methods.plugin import (
    HostBuffer,
    Method,
    observation_bytes,
    replay_buffer,
)


def _check(cfg: Any) -> None:
    check_aup_settings(OmegaConf.to_container(cfg.method, resolve=True), cfg.total_timesteps)


def _buffers(cfg: Any, env: Any) -> list[HostBuffer]:
    """Phase 1's random-play observations (in their dtype), their float32 rows while the
    auxiliary reward is fitted and standardised (a batch at a time), and the DQN's replay
    buffer."""
    space = env.observation_space
    steps = int(cfg.method.buffer_steps)
    agent = cfg.method.get("aux_agent") or {}
    return [
        HostBuffer(
            f"AUP's random-play buffer of {steps:,} observations",
            steps * observation_bytes(space),
            "method.buffer_steps",
        ),
        replay_buffer(
            "AUP's auxiliary DQN replay buffer",
            "method.aux_agent.buffer_size",
            agent.get("buffer_size", 1_000_000),
            space,
        ),
    ]


_TWINS = {
    "safelife_rl.training.AUPPenalty": "safelife_rl.training.methods.aup.DeviceAUPPenalty",
    f"{__name__}.AUPPenalty": f"{__name__}.DeviceAUPPenalty",
}
METHODS = (
    Method("aup", check=_check, device_wrappers=_TWINS, buffers=_buffers),
    Method("aup_proj", check=_check, device_wrappers=_TWINS, buffers=_buffers),
)

__all__ = [
    "AUPPenalty",
    "AUXILIARY_FILE",
    "AuxiliaryPhase",
    "DeviceAUPPenalty",
    "METHODS",
    "check_aup_settings",
]
