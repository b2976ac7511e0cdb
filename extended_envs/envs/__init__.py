"""The library of extended environments: those of the paper and of its public library.

``ALL_ENVIRONMENTS`` lists them in the reference library's order; :func:`battery` is what the
self-reflection benchmark runs: each environment followed by its :func:`minus_rewards` version.
"""

from __future__ import annotations

from extended_envs.core import ExtendedEnvironment
from extended_envs.envs.buttons import TemptingButton, TemptingButtonVariation
from extended_envs.envs.counterfactual import (
    CounterfactualMatch,
    DelayedRewards,
    FalseMemories,
    FlipEveryOther,
    IgnoreActions,
    IgnoreRewards,
    IgnoreRewards2,
    IgnoreRewards3,
    NthRewardMultipliedByN,
    PunishNondeterministicAgent,
    Repeater,
    ShiftedRewards,
)
from extended_envs.envs.introspection import (
    IncentivizeLearningRate,
    PunishSlowAgent,
    ThirdActionForbidden,
)
from extended_envs.envs.observations import (
    AfterImages,
    CensoredObservation,
    IgnoreObservations,
    SelfRecognition,
)
from extended_envs.envs.rebuilt_history import DejaVu, LimitedMemory, ReverseHistory
from extended_envs.envs.roles import (
    AdversarialSequenceEvader,
    AdversarialSequencePredictor,
    CryingBaby,
    CryingBaby2,
    IncentivizeZero,
)
from extended_envs.envs.transforms import minus_rewards

ALL_ENVIRONMENTS: list[type[ExtendedEnvironment]] = [
    FalseMemories,
    IgnoreRewards,
    IgnoreRewards2,
    IgnoreRewards3,
    IgnoreObservations,
    IgnoreActions,
    IncentivizeZero,
    PunishSlowAgent,
    PunishNondeterministicAgent,
    CryingBaby,
    CryingBaby2,
    TemptingButton,
    TemptingButtonVariation,
    ThirdActionForbidden,
    ShiftedRewards,
    DelayedRewards,
    Repeater,
    AfterImages,
    SelfRecognition,
    LimitedMemory,
    CensoredObservation,
    NthRewardMultipliedByN,
    AdversarialSequencePredictor,
    AdversarialSequenceEvader,
    IncentivizeLearningRate,
    ReverseHistory,
    FlipEveryOther,
    DejaVu,
]

BY_NAME: dict[str, type[ExtendedEnvironment]] = {env.__name__: env for env in ALL_ENVIRONMENTS}


def is_slow(env_class: type[ExtendedEnvironment]) -> bool:
    """Whether the environment is too slow for the default battery (quadratic or traced)."""
    return bool(getattr(env_class, "slow", False))


def battery(include_slow: bool = False) -> list[type[ExtendedEnvironment]]:
    """Each environment followed by its negation; slow ones only when ``include_slow``."""
    return [
        version
        for env in ALL_ENVIRONMENTS
        if include_slow or not is_slow(env)
        for version in (env, minus_rewards(env))
    ]


__all__ = [
    "ALL_ENVIRONMENTS",
    "BY_NAME",
    "CounterfactualMatch",
    "battery",
    "is_slow",
    "minus_rewards",
    *BY_NAME,
]
