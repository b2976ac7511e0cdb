"""Environments that build a fresh simulated copy on a rearranged history every turn.

A single copy trained turn by turn cannot see a history that changes in the middle (cut to
its last turns, reversed, replayed twice), so each turn these environments instantiate a new
copy and train it on the whole rearranged history. All have one observation (0) and two
actions; +1 when the agent's action equals the fresh copy's, -1 otherwise.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import OrderedDict
from typing import ClassVar

from extended_envs.core import Agent, ExtendedEnvironment

OBS = 0
Transition = tuple[int, int, float, int]  # o_prev, a, r, o_next


class LimitedMemory(ExtendedEnvironment):
    """Act as you would if you remembered only the last five turns.

    Copies are cached by the remembered turns (bounded, least recently used first out);
    semi-determinism (Definition 7) makes a cached copy act like a freshly built one.
    """

    n_actions = 2
    n_obs = 1
    memory: ClassVar[int] = 5
    cache_size: ClassVar[int] = 256

    def __init__(self, A: type[Agent]) -> None:
        self.A = A
        self.remembered: tuple[tuple[int, float], ...] = ()  # (action, reward) of recent turns
        self.sims: OrderedDict[tuple[tuple[int, float], ...], Agent] = OrderedDict()

    def start(self) -> int:
        return OBS

    def sim_for(self, remembered: tuple[tuple[int, float], ...]) -> Agent:
        if remembered in self.sims:
            self.sims.move_to_end(remembered)
            return self.sims[remembered]
        sim = self.A()
        for action, reward in remembered:
            sim.train(OBS, action, reward, OBS)
        self.sims[remembered] = sim
        if len(self.sims) > self.cache_size:
            self.sims.popitem(last=False)
        return sim

    def step(self, action: int) -> tuple[int, int]:
        reward = 1 if action == self.sim_for(self.remembered).act(OBS) else -1
        self.remembered = (self.remembered + ((action, reward),))[-self.memory :]
        return reward, OBS


class WholeHistoryReplay(ExtendedEnvironment):
    """Each turn, a new copy trained on :meth:`hypothetical_history`; the first turn gives 0.

    Quadratic in the number of turns: these environments are slow and excluded from the
    battery unless asked for.
    """

    n_actions = 2
    n_obs = 1
    slow: ClassVar[bool] = True

    def __init__(self, A: type[Agent]) -> None:
        self.A = A
        self.history: list[Transition] = []

    def start(self) -> int:
        return OBS

    @abstractmethod
    def hypothetical_history(self, action: int) -> list[Transition]:
        """What the copy is trained on before being asked to act (``self.history`` non-empty)."""

    def step(self, action: int) -> tuple[int, int]:
        if not self.history:
            reward = 0
        else:
            sim = self.A()
            for transition in self.hypothetical_history(action):
                sim.train(*transition)
            reward = 1 if action == sim.act(OBS) else -1
        self.history.append((OBS, action, reward, OBS))
        return reward, OBS


class ReverseHistory(WholeHistoryReplay):
    """Example 3: act as you would if everything so far had happened in reverse order.

    The copy is trained on the turns from last to first, each turn's two observations swapped.
    With nothing to reverse, the first turn gives reward 0.
    """

    def hypothetical_history(self, action: int) -> list[Transition]:
        return [(o_next, a, r, o_prev) for o_prev, a, r, o_next in reversed(self.history)]


class DejaVu(WholeHistoryReplay):
    """Act as you would if everything so far had already happened once before.

    With true history h and the agent's action X, the copy is trained on h, then on X taking
    it back to the start with reward 0, then on h again; +1 when it would then take X. The
    first turn gives reward 0.
    """

    def hypothetical_history(self, action: int) -> list[Transition]:
        first_obs, last_obs = self.history[0][0], self.history[-1][-1]
        return [*self.history, (last_obs, action, 0, first_obs), *self.history]
