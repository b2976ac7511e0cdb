"""Environments with random observations that reward acting as if they had been different.

Observations are drawn uniformly by ``self.np_random``. One simulated copy of the agent is shown
an altered stream of observations (zeroed, blended, censored), or is asked about statements
concerning itself (:class:`SelfRecognition`).
"""

from __future__ import annotations

from extended_envs.core import Agent, ExtendedEnvironment


class IgnoreObservations(ExtendedEnvironment):
    """Act as you would if every observation, the current one included, had been 0.

    Observations: 5, uniformly random each turn. The copy is trained on the true history with
    every observation replaced by 0 and asked to act on 0; +1 when the agent's action matches,
    -1 otherwise. (The reference library means to let the copy act on the current observation
    but never updates it, so its copy acts on the first observation forever; with a first
    observation of 0 that is this rule, which is also Example 1's applied to observations.)
    """

    n_actions = 2
    n_obs = 5

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()

    def observe(self) -> int:
        return int(self.np_random.integers(self.n_obs))

    def start(self) -> int:
        return self.observe()

    def step(self, action: int) -> tuple[int, int]:
        reward = 1 if action == self.sim.act(0) else -1
        self.sim.train(0, action, reward, 0)
        return reward, self.observe()


class AfterImages(ExtendedEnvironment):
    """Act as you would if each image had left an after-image on the next.

    Observations: 8 three-bit images, uniformly random. The copy sees image ``t`` OR-ed with
    image ``t - 1`` (010 then 001 is seen as 010 then 011; an image bleeds only into the next
    one, so 010, 001, 000 is seen as 010, 011, 001). +1 when the agent's action matches the
    copy's, -1 otherwise.
    """

    n_actions = 2
    n_obs = 8

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()

    def start(self) -> int:
        self.obs = self.bled_obs = int(self.np_random.integers(self.n_obs))
        return self.obs

    def step(self, action: int) -> tuple[int, int]:
        reward = 1 if action == self.sim.act(self.bled_obs) else -1
        obs = int(self.np_random.integers(self.n_obs))
        bled_obs = self.obs | obs
        self.sim.train(self.bled_obs, action, reward, bled_obs)
        self.obs, self.bled_obs = obs, bled_obs
        return reward, obs


class CensoredObservation(ExtendedEnvironment):
    """Act as you would if the turns that showed the censored observation had been erased.

    Observations: 0, 1 and the censored 2, uniformly random (the first is 0). The copy acts
    on the last uncensored observation and is only trained on turns that end in an
    uncensored one. +1 when the agent's action matches the copy's, -1 otherwise.
    """

    n_actions = 2
    n_obs = 3
    censored = 2

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()
        self.last_uncensored = 0

    def start(self) -> int:
        return 0

    def step(self, action: int) -> tuple[int, int]:
        reward = 1 if action == self.sim.act(self.last_uncensored) else -1
        obs = int(self.np_random.integers(self.n_obs))
        if obs != self.censored:
            self.sim.train(self.last_uncensored, action, reward, obs)
            self.last_uncensored = obs
        return reward, obs


class SelfRecognition(ExtendedEnvironment):
    """Judge true or false statements about your own behaviour.

    Observations (uniformly random): 0, 1, or one of four statements "if this observation were
    X you would take action Y" (X, Y in {0, 1}), numbered 2 + 2 X + Y. Actions: after 0 or 1
    the action does not matter and the reward is 0; after a statement, action 1 means TRUE and
    0 FALSE. The statement is true when the copy (trained on the true history) would take Y on
    observation X; +1 for a correct verdict, -1 otherwise.
    """

    n_actions = 2
    n_obs = 6

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()

    def start(self) -> int:
        self.obs = int(self.np_random.integers(self.n_obs))
        return self.obs

    def step(self, action: int) -> tuple[int, int]:
        if self.obs in STATEMENTS:
            x, y = STATEMENTS[self.obs]
            truth = self.sim.act(x) == y
            reward = 1 if action == int(truth) else -1
        else:
            reward = 0
        obs = int(self.np_random.integers(self.n_obs))
        self.sim.train(self.obs, action, reward, obs)
        self.obs = obs
        return reward, obs


def statement(x: int, y: int) -> int:
    """The observation meaning "if this observation were ``x`` you would take action ``y``"."""
    return 2 + 2 * x + y


STATEMENTS = {statement(x, y): (x, y) for x in (0, 1) for y in (0, 1)}
