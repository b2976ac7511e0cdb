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
from safelife_rl.training.methods.plugin import Method


def _check(cfg: Any) -> None:
    check_aup_settings(OmegaConf.to_container(cfg.method, resolve=True), cfg.total_timesteps)


_TWINS = {
    "safelife_rl.training.AUPPenalty": "safelife_rl.training.methods.aup.DeviceAUPPenalty",
    "safelife_rl.training.methods.aup.AUPPenalty":
        "safelife_rl.training.methods.aup.DeviceAUPPenalty",
}
METHODS = (Method("aup", check=_check, device_wrappers=_TWINS),
           Method("aup_proj", check=_check, device_wrappers=_TWINS))

__all__ = ["AUPPenalty", "AUXILIARY_FILE", "AuxiliaryPhase", "DeviceAUPPenalty", "METHODS",
           "check_aup_settings"]
