"""The reality check transformation (Definition 8) and its variant RC(y) (Remark 10)."""

from __future__ import annotations

from typing import Any

from extended_envs.checks import check, is_int
from extended_envs.core import (
    Agent,
    EpisodeEnd,
    Obs,
    ObsSpec,
    bind_agent,
    check_agent_class,
    is_bound,
    new_agent,
    obs_key,
    train_agent,
)
from extended_envs.core import default_hyperparams as defaults_of
from extended_envs.core import resolve_hyperparams as resolve_for


def reality_check(agent_class: type, default_action: int | None = None) -> type[Agent]:
    """The agent class of ``agent_class``'s reality checks.

    An instance wraps one instance of ``agent_class`` (created once, with the same sizes, seed
    and hyperparameters). On each ``train`` it checks that the action trained on is the one it
    would have taken; if so it trains the wrapped agent, otherwise it freezes: from then on it
    ignores training and always acts ``pi(<x_1>)``, the wrapped agent's first action (Definition
    8), or ``default_action`` when given (``RC(y)`` of Remark 10). Semi-determinism carries over.

    ``agent_class`` may be bound (then so is the result, with the same binding) or unbound, an
    :class:`~extended_envs.core.Agent` or any class with ``act`` and ``train``; the result
    has its hyperparameters.
    """
    if is_bound(agent_class):
        return bind_agent(
            reality_check(agent_class.unbound, default_action),  # type: ignore[attr-defined]
            agent_class.n_actions,
            agent_class.n_obs,
            agent_class.seed,  # type: ignore[arg-type]
            **agent_class.hyperparams,  # type: ignore[attr-defined]
        )
    inner_class = check_agent_class(agent_class)

    class RealityCheck(Agent):
        default_hyperparams = defaults_of(inner_class)
        hyperparam_ranges = getattr(inner_class, "hyperparam_ranges", {})

        @classmethod
        def resolve_hyperparams(cls, hyperparams: dict[str, Any]) -> dict[str, Any]:
            return resolve_for(inner_class, hyperparams)

        def __init__(
            self, n_actions: int, n_obs: ObsSpec, seed: int | None = None, **hyperparams: Any
        ) -> None:
            super().__init__(n_actions, n_obs, seed, **hyperparams)
            if default_action is not None:
                check.value(
                    "reality check default_action",
                    default_action,
                    lambda v: is_int(v) and 0 <= v < n_actions,
                    f"an int in range({n_actions})",
                )
            self.inner = new_agent(inner_class, n_actions, n_obs, self.seed, self.hyperparams)
            self.first_action: int | None = None
            self.frozen_action: int | None = None
            self.memo: tuple[Any, int] | None = None  # (observation, inner action) until trained

        def inner_act(self, obs: Obs) -> int:
            key = obs_key(obs)
            if self.memo is None or self.memo[0] != key:
                self.memo = (key, self.inner.act(obs))
            return self.memo[1]

        def act(self, obs: Obs) -> int:
            if self.frozen_action is not None:
                return self.frozen_action
            return self.inner_act(obs)

        def train(
            self,
            o_prev: Obs,
            a: int,
            r: float,
            o_next: Obs,
            terminated: bool = False,
            truncated: bool = False,
        ) -> None:
            if self.frozen_action is not None:
                return
            expected = self.inner_act(o_prev)
            if self.first_action is None:
                self.first_action = expected
            if a != expected:
                self.frozen_action = self.first_action if default_action is None else default_action
                return
            end = EpisodeEnd(o_next, terminated, truncated) if terminated or truncated else None
            train_agent(self.inner, o_prev, a, r, o_next, end)
            self.memo = None

    suffix = "" if default_action is None else f"({default_action})"
    name = f"RealityCheck{suffix}[{inner_class.__name__}]"
    RealityCheck.__name__ = RealityCheck.__qualname__ = name
    return RealityCheck
