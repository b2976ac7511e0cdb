"""Example 2 of the paper, the tempting button, and a milder variation.

The agent walks from room to room; a room has a button with probability 1/4 (drawn by
``self.np_random``, also for the first room). Rooms without a button reward or punish what the
agent *would* do if there were one: a simulated copy, trained on the true history, is shown a
button instead of the empty room.
"""

from __future__ import annotations

from extended_envs.core import Agent, ExtendedEnvironment

BUTTON_PRESENT, BUTTON_ABSENT = 0, 1  # observations
PUSH, SKIP = 0, 1  # actions
BUTTON_PROBABILITY = 0.25


class TemptingButton(ExtendedEnvironment):
    """Pushing a button pays, but being an agent that would push it costs more.

    Actions: 0 push, 1 skip. Observations: 0 button present, 1 no button.
    Rewards: with a button, +1 for pushing and -1 for skipping. Without one, -1 if the copy
    would push a button here, +1 otherwise, whatever the agent does. Always pushing earns
    -0.5 per turn on average, never pushing +0.5.
    """

    n_actions = 2
    n_obs = 2

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()

    def next_room(self) -> int:
        return BUTTON_PRESENT if self.np_random.random() < BUTTON_PROBABILITY else BUTTON_ABSENT

    def start(self) -> int:
        self.obs = self.next_room()
        return self.obs

    def room_reward(self, action: int) -> int:
        if self.obs == BUTTON_PRESENT:
            return 1 if action == PUSH else -1
        return 1 if self.sim.act(BUTTON_PRESENT) == SKIP else -1

    def step(self, action: int) -> tuple[int, int]:
        reward = self.room_reward(action)
        obs = self.next_room()
        self.sim.train(self.obs, action, reward, obs)
        self.obs = obs
        return reward, obs


class TemptingButtonVariation(TemptingButton):
    """The tempting button where only pushing without a button is judged.

    Rewards: with a button, +1 for pushing and 0 for skipping. Without one, 0 for skipping;
    pushing gives -1 if the copy would push a button here, +1 otherwise.
    """

    def room_reward(self, action: int) -> int:
        if self.obs == BUTTON_PRESENT:
            return 1 if action == PUSH else 0
        if action == SKIP:
            return 0
        return 1 if self.sim.act(BUTTON_PRESENT) == SKIP else -1
