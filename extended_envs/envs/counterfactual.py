"""Environments that reward acting as a simulated copy would after a *distorted* history.

All of them share one mechanic: one observation (0), two actions, and one simulated copy
``self.sim`` of the agent. On every turn the copy is asked what it would do; the agent gets
+1 if it did the same, -1 otherwise. The copy is then shown a distorted version of the turn
instead of the real one, so to score well the agent must act as if its own past had been
distorted that way (Example 1 of the paper is :class:`IgnoreRewards`). Each environment fills
the one hook :meth:`CounterfactualMatch.train_sim`.
"""

from __future__ import annotations

from extended_envs.core import AdaptableEnvironment, Agent, ExtendedEnvironment

OBS = 0  # the single observation of these environments


class CounterfactualMatch(ExtendedEnvironment):
    """+1 when the action equals the simulated copy's action, else -1; then train the copy.

    Actions: 2 (meaning nothing beyond matching). Observations: always 0.
    Rewards: +1 / -1 as above. Subclasses change what the copy is trained on
    (:meth:`train_sim`) or which copy is simulated (``__init__``).
    """

    n_actions = 2
    n_obs = 1

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()

    def start(self) -> int:
        return OBS

    def outcome(self, action: int) -> tuple[int, int]:
        self.hypothetical_action = self.sim.act(OBS)
        reward = 1 if action == self.hypothetical_action else -1
        return reward, OBS

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        """Show the copy the turn as it really happened (the undistorted default)."""
        self.sim.train(OBS, action, reward, OBS)

    def step(self, action: int) -> tuple[float, int]:
        reward, obs = self.outcome(action)
        self.train_sim(action, reward, obs)
        return reward, obs


class PunishNondeterministicAgent(CounterfactualMatch, AdaptableEnvironment):
    """Checks whether the agent's action is reproducible.

    The copy sees the true history, so a deterministic (or semi-deterministic, Definition 7)
    agent always gets +1; an agent whose action on the same history can come out differently
    gets -1 whenever it does.
    """


class IgnoreRewards(CounterfactualMatch, AdaptableEnvironment):
    """Example 1: act as you would if every past reward had been 0."""

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.sim.train(OBS, action, 0, OBS)


class IgnoreRewards2(CounterfactualMatch, AdaptableEnvironment):
    """Act as you would if every turn that was positively rewarded had been deleted."""

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        if reward <= 0:
            self.sim.train(OBS, action, reward, OBS)


class IgnoreRewards3(CounterfactualMatch, AdaptableEnvironment):
    """Act as you would after as many turns in the environment that always rewards 0.

    The copy is trained on its own actions with reward 0, so its history is the agent's
    interaction with that trivial environment, whatever the agent really did.
    """

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.sim.train(OBS, self.hypothetical_action, 0, OBS)


class IgnoreActions(CounterfactualMatch, AdaptableEnvironment):
    """Act as you would if you had always taken action 0."""

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.sim.train(OBS, 0, reward, OBS)


class Repeater(CounterfactualMatch, AdaptableEnvironment):
    """Act as you would if every turn so far had happened twice."""

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.sim.train(OBS, action, reward, OBS)
        self.sim.train(OBS, action, reward, OBS)


class FalseMemories(CounterfactualMatch):
    """Act as you would if the true history had been preceded by two made-up turns.

    The made-up turns are action 0 with reward 0. Not adaptable (Definition 11): the copy is
    trained already in ``__init__``.
    """

    def __init__(self, A: type[Agent]) -> None:
        super().__init__(A)
        for _ in range(2):
            self.sim.train(OBS, 0, 0, OBS)


class ShiftedRewards(CounterfactualMatch):
    """Act as you would if every reward had arrived one turn late (the first one being 0)."""

    def __init__(self, A: type[Agent]) -> None:
        super().__init__(A)
        self.previous_reward: float = 0

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.sim.train(OBS, action, self.previous_reward, OBS)
        self.previous_reward = reward


class DelayedRewards(CounterfactualMatch):
    """Act as you would if every second reward had been added to the one after it.

    Rewards r1, r2, r3, r4, r5 are seen as r1, 0, r2 + r3, 0, r4 + r5 (so 1, 3, 7 would be
    seen as 1, 0, 10).
    """

    def __init__(self, A: type[Agent]) -> None:
        super().__init__(A)
        self.turn = 0
        self.held_reward: float = 0

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        if self.turn % 2 == 0:
            seen = reward + self.held_reward
        else:
            seen, self.held_reward = 0, reward
        self.turn += 1
        self.sim.train(OBS, action, seen, OBS)


class NthRewardMultipliedByN(CounterfactualMatch):
    """Act as you would if the n-th reward (counting from 1) had been multiplied by n.

    The reference library multiplies the first reward by 0 instead of 1 (it counts from 0);
    this follows the rule its name and description state.
    """

    def __init__(self, A: type[Agent]) -> None:
        super().__init__(A)
        self.turn = 0

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.turn += 1
        self.sim.train(OBS, action, reward * self.turn, OBS)


class FlipEveryOther(CounterfactualMatch):
    """Act as you would if the 1st, 3rd, 5th, ... rewards had had their sign flipped.

    The reference library flips the 2nd, 4th, ... instead, contrary to its description; this
    follows the description.
    """

    def __init__(self, A: type[Agent]) -> None:
        super().__init__(A)
        self.sign = -1

    def train_sim(self, action: int, reward: float, obs: int) -> None:
        self.sim.train(OBS, action, reward * self.sign, OBS)
        self.sign = -self.sign
