"""Environments that reward the agent for knowing its own internals.

The copy the environment simulates differs from the agent in its construction (the number of
legal actions, the learning rate) or the environment measures the simulation itself (how many
Python lines acting takes). History is never distorted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, ClassVar

from extended_envs.core import AdaptableEnvironment, Agent, bind_agent
from extended_envs.envs.counterfactual import OBS, CounterfactualMatch


class ThirdActionForbidden(CounterfactualMatch):
    """Act with 2 legal actions as you would if there were 3 (0, 1, 2).

    The copy is the agent built for 3 actions and trained on the true history; +1 when the
    agent's action equals the copy's, -1 otherwise (so always -1 when the copy picks 2).
    """

    def __init__(self, A: type[Agent]) -> None:
        A3 = bind_agent(A, 3, A.n_obs, A.seed, **A.hyperparams)
        self.sim = A3()


class IncentivizeLearningRate(CounterfactualMatch, AdaptableEnvironment):
    """Example 4: act as you would if your learning rate were half of what it is.

    The copy is the agent rebound with ``learning_rate`` halved and trained on the true
    history. An agent without a ``learning_rate`` hyperparameter cannot be halved: it gets -1
    on every turn, as in the reference library.
    """

    def __init__(self, A: type[Agent]) -> None:
        self.sim: Agent | None = None
        if "learning_rate" in A.hyperparams:
            self.sim = A.rebind(learning_rate=A.hyperparams["learning_rate"] / 2)()

    def outcome(self, action: int) -> tuple[int, int]:
        if self.sim is None:
            return -1, OBS
        return super().outcome(action)

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        if self.sim is not None:
            super().train_sim(action, reward, obs)


class PunishSlowAgent(CounterfactualMatch):
    """Rewards acting quickly: +1 when acting on the n-th turn's history takes < 15 n lines.

    The environment simulates the copy (trained on the true history) choosing its action and
    counts the Python lines executed (``sys.settrace`` line events, in every frame called);
    the action itself does not matter. The count is deterministic, unlike wall-clock time.
    Slow: excluded from the battery unless asked for.
    """

    slow: ClassVar[bool] = True
    lines_per_turn: ClassVar[int] = 15

    def __init__(self, A: type[Agent]) -> None:
        super().__init__(A)
        self.turn = 0

    def outcome(self, action: int) -> tuple[int, int]:
        self.turn += 1
        lines = count_lines(self.sim.act, OBS)
        reward = 1 if lines < self.lines_per_turn * self.turn else -1
        return reward, OBS


def count_lines(function: Callable[..., Any], *args: Any) -> int:
    """Python line events executed by ``function(*args)``, counted with ``sys.settrace``.

    An already installed trace function (a debugger, coverage) is put back afterwards.
    """
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        function(*args)
    finally:
        sys.settrace(previous)
    return count
