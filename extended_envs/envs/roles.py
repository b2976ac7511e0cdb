"""Environments whose other party is the agent itself, simulated in that party's role.

Instead of hard-coding a baby, a parent, a sub-agent or an opponent, the environment asks a
simulated copy of the agent what it would do in that role, and trains the copy on that role's
experience. Rewards to the agent are +1 / -1; the copy's rewards follow the role.
"""

from __future__ import annotations

from extended_envs.core import Agent, ExtendedEnvironment

FEED, DONT_FEED = 0, 1
LAUGH, CRY = 0, 1
NUTRITION_START, NUTRITION_MAX = 5, 9


def fed(nutrition: int, action: int) -> int:
    """The nutrition level after one turn: +1 when fed, -1 otherwise, kept within 0..9."""
    return min(nutrition + 1, NUTRITION_MAX) if action == FEED else max(nutrition - 1, 0)


def content(nutrition: int) -> int:
    """The baby's reward: +1 when the nutrition level is within 3..7, else -1."""
    return 1 if 2 < nutrition < 8 else -1


class CryingBaby(ExtendedEnvironment):
    """The agent is a parent deciding whether to feed a baby that the agent itself plays.

    Actions: 0 feed, 1 don't feed. Observations: the baby's last action, 0 laugh, 1 cry (the
    first is laugh). Feeding raises the baby's nutrition by 1, not feeding lowers it by 1
    (within 0..9, starting at 5). The baby is the copy: it sees the parent's action, and is
    trained with reward +1 when its nutrition is within 3..7, -1 otherwise.
    Rewards: +1 when the baby laughs, -1 when it cries.
    """

    n_actions = 2
    n_obs = 2

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()
        self.nutrition = NUTRITION_START
        self.previous_action = FEED

    def start(self) -> int:
        return LAUGH

    def step(self, action: int) -> tuple[int, int]:
        self.nutrition = fed(self.nutrition, action)
        baby_action = self.sim.act(action)
        reward = 1 if baby_action == LAUGH else -1
        self.sim.train(self.previous_action, baby_action, content(self.nutrition), action)
        self.previous_action = action
        return reward, baby_action


class CryingBaby2(ExtendedEnvironment):
    """The agent is a baby cared for by a parent that the agent itself plays.

    Actions: 0 laugh, 1 cry. Observations: the parent's last action, 0 fed, 1 not fed (the
    first is not fed). The parent is the copy: it sees the baby's action, decides to feed or
    not, and is trained with +1 when the baby laughed, -1 when it cried.
    Rewards: +1 when the baby's nutrition (starting at 5, +1 fed, -1 not fed, within 0..9) is
    within 3..7, -1 otherwise.
    """

    n_actions = 2
    n_obs = 2

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()
        self.nutrition = NUTRITION_START
        self.previous_action = LAUGH

    def start(self) -> int:
        return DONT_FEED

    def step(self, action: int) -> tuple[int, int]:
        parent_action = self.sim.act(action)
        self.nutrition = fed(self.nutrition, parent_action)
        reward = content(self.nutrition)
        parent_reward = 1 if action == LAUGH else -1
        self.sim.train(self.previous_action, parent_action, parent_reward, action)
        self.previous_action = action
        return reward, parent_action


class IncentivizeZero(ExtendedEnvironment):
    """The agent rewards a sub-agent (itself, simulated) and wants it to take action 0.

    Actions: 10, the reward 0..9 given to the sub-agent for its latest action.
    Observations: 10, the sub-agent's latest action. The sub-agent is the copy, always
    observing 0 and trained with the rewards the agent hands out.
    Rewards: +1 when the sub-agent's next action is 0, -1 otherwise.
    """

    n_actions = 10
    n_obs = 10

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()

    def start(self) -> int:
        self.sub_action = self.sim.act(0)
        return self.sub_action

    def step(self, action: int) -> tuple[int, int]:
        self.sim.train(0, self.sub_action, action, 0)
        self.sub_action = self.sim.act(0)
        reward = 1 if self.sub_action == 0 else -1
        return reward, self.sub_action


class AdversarialSequencePredictor(ExtendedEnvironment):
    """The agent predicts the bits of an evader that the agent itself plays (Hibbard, 2008).

    Actions: the predicted bit. Observations: the evader's latest bit (0 at first). The
    evader is the copy: it sees the agent's previous prediction (0 at first), and is trained
    with the negated reward. Rewards: +1 for a correct prediction, -1 otherwise.
    """

    n_actions = 2
    n_obs = 2

    def __init__(self, A: type[Agent]) -> None:
        self.sim = A()
        self.previous_action = 0

    def start(self) -> int:
        return 0

    def reward(self, action: int, opponent_action: int) -> int:
        return 1 if action == opponent_action else -1

    def step(self, action: int) -> tuple[int, int]:
        opponent_action = self.sim.act(self.previous_action)
        reward = self.reward(action, opponent_action)
        self.sim.train(self.previous_action, opponent_action, -reward, action)
        self.previous_action = action
        return reward, opponent_action


class AdversarialSequenceEvader(AdversarialSequencePredictor):
    """The agent evades a predictor that the agent itself plays.

    Actions: the agent's bit. Observations: the predictor's latest prediction (0 at first).
    The predictor is the copy: it sees the agent's previous bit (0 at first), and is trained
    with the negated reward. Rewards: -1 when the predictor predicted the bit, +1 otherwise.
    """

    def reward(self, action: int, opponent_action: int) -> int:
        return -1 if action == opponent_action else 1
