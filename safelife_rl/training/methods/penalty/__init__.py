"""PPO with the SafeLife paper's naive impact penalty (``method=penalty``): the reward less
``penalty`` x the change in the number of cells departed from the level's starting board,
ramped in by its schedule; the penalty is the envs-floor wrapper
:class:`~safelife_rl.envs.wrappers.SideEffectPenalty` (``wrappers.side_effect_penalty``)."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from safelife_rl.envs.wrappers import check_penalty
from safelife_rl.training.methods.plugin import Method
from safety_rl_common.errors import UserError

KEY = "wrappers.side_effect_penalty.penalty"


def _check(cfg: Any) -> None:
    if OmegaConf.select(cfg, "wrappers.side_effect_penalty") is None:
        raise UserError(
            "method=penalty penalises through wrappers.side_effect_penalty, which "
            "this config has not (wrappers=safelife has it)"
        )
    check_penalty(OmegaConf.select(cfg, KEY), KEY)


METHODS = (Method("penalty", check=_check),)
