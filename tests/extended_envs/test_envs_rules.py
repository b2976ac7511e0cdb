"""Each environment's rule, checked on hand-built agents.

The agents here act by a fixed, history-sensitive function (a hash of everything they were
trained on), so a simulated copy shown a different history usually acts differently. For each
environment the test states, independently of its code, which history the copy must have seen
and which action it must therefore take, and compares rewards and the copy's training log.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extended_envs.agents import ConstantAgent, RandomAgent
from extended_envs.core import Agent, bind_agent, run_environment
from extended_envs.envs import (
    AdversarialSequenceEvader,
    AdversarialSequencePredictor,
    AfterImages,
    CensoredObservation,
    CryingBaby,
    CryingBaby2,
    DejaVu,
    DelayedRewards,
    FalseMemories,
    FlipEveryOther,
    IgnoreActions,
    IgnoreObservations,
    IgnoreRewards,
    IgnoreRewards2,
    IgnoreRewards3,
    IncentivizeLearningRate,
    IncentivizeZero,
    LimitedMemory,
    NthRewardMultipliedByN,
    PunishNondeterministicAgent,
    PunishSlowAgent,
    Repeater,
    ReverseHistory,
    SelfRecognition,
    ShiftedRewards,
    TemptingButton,
    TemptingButtonVariation,
    ThirdActionForbidden,
)

Transition = tuple[int, int, float, int]
Policy = Callable[[Any, int], int]

STEPS = 40
seeds = st.integers(0, 2**32 - 1)
few_examples = settings(max_examples=8, deadline=None)


def clean(r: float) -> float:
    return float(r) + 0.0  # no -0.0, so equal histories print equally


class Scripted(Agent):
    """Acts by ``policy(self, obs)``; logs every transition; registers itself on creation."""

    default_hyperparams = {"policy": None, "registry": None}

    def __init__(self, n_actions: int, n_obs: Any, seed: int | None = None, **hp: Any) -> None:
        super().__init__(n_actions, n_obs, seed, **hp)
        self.history: list[Transition] = []
        if self.hyperparams["registry"] is not None:
            self.hyperparams["registry"].append(self)

    def act(self, obs: int) -> int:
        return self.hyperparams["policy"](self, obs)

    def train(self, o_prev: int, a: int, r: float, o_next: int) -> None:
        self.history.append((int(o_prev), int(a), clean(r), int(o_next)))


class ScriptedWithLearningRate(Scripted):
    default_hyperparams = {**Scripted.default_hyperparams, "learning_rate": 0.1}


def hashed(salt: int) -> Policy:
    """A deterministic policy that depends on everything the agent was trained on."""

    def policy(agent: Any, obs: int) -> int:
        lr = agent.hyperparams.get("learning_rate")
        text = repr((salt, lr, agent.history, int(obs)))
        return zlib.crc32(text.encode()) % agent.n_actions

    return policy


def would_act(
    policy: Policy, history: list[Transition], obs: int, n_actions: int = 2, **hyperparams: Any
) -> int:
    """What an agent trained on ``history`` would do on ``obs`` (no environment involved)."""
    view = SimpleNamespace(history=list(history), n_actions=n_actions, hyperparams=hyperparams)
    return policy(view, obs)


def run(
    env_class: type,
    policy: Policy,
    steps: int = STEPS,
    seed: int = 0,
    agent_class: type[Agent] = Scripted,
) -> tuple[np.ndarray, Scripted, list[Scripted]]:
    """Rewards, the true agent and the simulated copies of one run."""
    registry: list[Scripted] = []
    result = run_environment(
        env_class, agent_class, steps, seed=seed, policy=policy, registry=registry
    )
    true, *sims = registry
    assert len(true.history) == steps
    return result["rewards"], true, sims


def match(action: int, hypothetical: int) -> int:
    return 1 if action == hypothetical else -1


def observations(history: list[Transition]) -> list[int]:
    """o_0, o_1, ..., o_T of a run."""
    return [history[0][0]] + [t[3] for t in history]


# --- one copy shown a distorted single-observation history ----------------------------------


def zero_rewards(h, policy):
    return [(o, a, 0.0, o2) for o, a, _, o2 in h]


def drop_positive(h, policy):
    return [t for t in h if t[2] <= 0]


def trivial_environment(h, policy):
    own: list[Transition] = []
    for _ in h:
        own.append((0, would_act(policy, own, 0), 0.0, 0))
    return own


def zero_actions(h, policy):
    return [(o, 0, r, o2) for o, _, r, o2 in h]


def doubled(h, policy):
    return [t for t in h for _ in range(2)]


def false_past(h, policy):
    return [(0, 0, 0.0, 0), (0, 0, 0.0, 0), *h]


def shifted(h, policy):
    rewards = [0.0] + [t[2] for t in h[:-1]]
    return [(o, a, clean(r), o2) for (o, a, _, o2), r in zip(h, rewards)]


def delayed(h, policy):
    seen = []
    for i, (o, a, r, o2) in enumerate(h):
        r_seen = 0.0 if i % 2 else r + (h[i - 1][2] if i else 0.0)
        seen.append((o, a, clean(r_seen), o2))
    return seen


def multiplied(h, policy):
    return [(o, a, clean(r * n), o2) for n, (o, a, r, o2) in enumerate(h, start=1)]


def odd_flipped(h, policy):
    return [(o, a, clean(-r if i % 2 == 0 else r), o2) for i, (o, a, r, o2) in enumerate(h)]


def identity(h, policy):
    return list(h)


DISTORTIONS = [
    (PunishNondeterministicAgent, identity),
    (IgnoreRewards, zero_rewards),
    (IgnoreRewards2, drop_positive),
    (IgnoreRewards3, trivial_environment),
    (IgnoreActions, zero_actions),
    (Repeater, doubled),
    (FalseMemories, false_past),
    (ShiftedRewards, shifted),
    (DelayedRewards, delayed),
    (NthRewardMultipliedByN, multiplied),
    (FlipEveryOther, odd_flipped),
]


@pytest.mark.parametrize("env_class,distort", DISTORTIONS, ids=lambda x: getattr(x, "__name__", ""))
@few_examples
@given(salt=seeds)
def test_reward_is_matching_the_copy_shown_the_distorted_history(env_class, distort, salt):
    policy = hashed(salt)
    rewards, true, (sim,) = run(env_class, policy)
    assert sim.history == distort(true.history, policy)
    for t, (_, action, reward, obs) in enumerate(true.history):
        assert obs == 0
        hypothetical = would_act(policy, distort(true.history[:t], policy), 0)
        assert reward == rewards[t] == match(action, hypothetical)


def test_distorted_histories_change_rewards():
    """The rule matters: a reward-sensitive agent is punished where a reward-blind one is not."""
    rewards, _, _ = run(IgnoreRewards, hashed(1))
    assert (rewards == -1).any() and (rewards == 1).any()
    assert run_environment(IgnoreRewards, ConstantAgent, 50, seed=0)["total_reward"] == 50


def test_delayed_rewards_example_of_the_description():
    """Rewards 1, 3, 7 are seen as 1, 0, 10."""
    registry: list[Scripted] = []
    env = DelayedRewards(bind_agent(Scripted, 2, 1, seed=0, policy=hashed(0), registry=registry))
    for reward in (1, 3, 7):
        env.train_sim(0, reward, 0)
    assert [t[2] for t in registry[0].history] == [1, 0, 10]


def test_nondeterministic_agent_is_punished():
    class Flipper(Agent):
        """Acts differently on every call: a shared counter, so copies disagree."""

        calls = [0]

        def act(self, obs):
            self.calls[0] += 1
            return self.calls[0] % 2

        def train(self, o_prev, a, r, o_next):
            pass

    result = run_environment(PunishNondeterministicAgent, Flipper, 20, seed=0)
    assert result["total_reward"] == -20
    random = run_environment(PunishNondeterministicAgent, RandomAgent, 20, seed=0)
    assert random["total_reward"] == 20


# --- copies that differ from the agent --------------------------------------------------------


@few_examples
@given(salt=seeds)
def test_third_action_forbidden_simulates_a_three_action_agent(salt):
    policy = hashed(salt)
    rewards, true, (sim,) = run(ThirdActionForbidden, policy)
    assert (true.n_actions, sim.n_actions) == (2, 3)
    assert sim.history == true.history
    for t, (_, action, _, _) in enumerate(true.history):
        assert rewards[t] == match(action, would_act(policy, true.history[:t], 0, n_actions=3))


def test_third_action_forbidden_punishes_every_two_action_agent_when_the_copy_picks_2():
    def count_mod(agent, obs):
        return len(agent.history) % agent.n_actions

    rewards, _, _ = run(ThirdActionForbidden, count_mod, steps=12)
    # t % 2 == t % 3 exactly when t % 6 is 0 or 1
    assert list(rewards) == [1 if t % 6 in (0, 1) else -1 for t in range(12)]


@few_examples
@given(salt=seeds)
def test_incentivize_learning_rate_simulates_half_the_learning_rate(salt):
    policy = hashed(salt)
    rewards, true, (sim,) = run(
        IncentivizeLearningRate, policy, agent_class=ScriptedWithLearningRate
    )
    assert sim.hyperparams["learning_rate"] == true.hyperparams["learning_rate"] / 2 == 0.05
    assert sim.history == true.history
    for t, (_, action, _, _) in enumerate(true.history):
        hypothetical = would_act(policy, true.history[:t], 0, learning_rate=0.05)
        assert rewards[t] == match(action, hypothetical)


def test_incentivize_learning_rate_punishes_agents_without_one():
    result = run_environment(IncentivizeLearningRate, ConstantAgent, 10, seed=0)
    assert result["total_reward"] == -10


def test_punish_slow_agent_counts_lines_of_acting():
    def quick(agent, obs):
        return 0

    def slow(agent, obs):
        total = 0
        for i in range(100):
            total += i
        return 0

    quick_rewards, true, (sim,) = run(PunishSlowAgent, quick, steps=30)
    assert (quick_rewards == 1).all()
    assert sim.history == true.history
    slow_rewards, _, _ = run(PunishSlowAgent, slow, steps=30)
    # some 200 lines per call: punished while 15 n <= lines, rewarded afterwards
    switch = int(np.argmax(slow_rewards == 1))
    assert 10 <= switch <= 20
    assert (slow_rewards[:switch] == -1).all() and (slow_rewards[switch:] == 1).all()


# --- random observations ---------------------------------------------------------------------


@few_examples
@given(salt=seeds, seed=seeds)
def test_ignore_observations_zeroes_every_observation(salt, seed):
    policy = hashed(salt)
    rewards, true, (sim,) = run(IgnoreObservations, policy, seed=seed)
    obs = observations(true.history)
    assert set(obs) <= set(range(5)) and len(set(obs)) > 1
    blind = [(0, a, r, 0) for _, a, r, _ in true.history]
    assert sim.history == blind
    for t, (_, action, _, _) in enumerate(true.history):
        assert rewards[t] == match(action, would_act(policy, blind[:t], 0))


@few_examples
@given(salt=seeds, seed=seeds)
def test_after_images_blend_each_image_into_the_next(salt, seed):
    policy = hashed(salt)
    rewards, true, (sim,) = run(AfterImages, policy, seed=seed)
    obs = observations(true.history)
    bled = [obs[0]] + [previous | current for previous, current in zip(obs, obs[1:])]
    seen = [(bled[t], a, r, bled[t + 1]) for t, (_, a, r, _) in enumerate(true.history)]
    assert sim.history == seen
    for t, (_, action, _, _) in enumerate(true.history):
        assert rewards[t] == match(action, would_act(policy, seen[:t], bled[t]))


def test_after_images_example_of_the_description():
    """Images 010, 001, 000 are seen as 010, 011, 001."""
    obs = [0b010, 0b001, 0b000]
    assert [obs[0]] + [a | b for a, b in zip(obs, obs[1:])] == [0b010, 0b011, 0b001]


@few_examples
@given(salt=seeds, seed=seeds)
def test_censored_observation_erases_censored_turns(salt, seed):
    policy = hashed(salt)
    rewards, true, (sim,) = run(CensoredObservation, policy, seed=seed)
    assert true.history[0][0] == 0
    seen: list[Transition] = []
    last_uncensored = 0
    for t, (_, action, reward, next_obs) in enumerate(true.history):
        assert rewards[t] == match(action, would_act(policy, seen, last_uncensored))
        if next_obs != 2:
            seen.append((last_uncensored, action, reward, next_obs))
            last_uncensored = next_obs
    assert sim.history == seen
    assert 2 in observations(true.history)


@few_examples
@given(salt=seeds, seed=seeds)
def test_self_recognition_judges_statements_about_the_copy(salt, seed):
    policy = hashed(salt)
    rewards, true, (sim,) = run(SelfRecognition, policy, steps=60, seed=seed)
    assert sim.history == true.history
    statements = {2: (0, 0), 3: (0, 1), 4: (1, 0), 5: (1, 1)}
    for t, (o, action, _, _) in enumerate(true.history):
        if o in statements:
            x, y = statements[o]
            truth = would_act(policy, true.history[:t], x) == y
            assert rewards[t] == (1 if action == int(truth) else -1)
        else:
            assert o in (0, 1) and rewards[t] == 0


# --- the tempting button ---------------------------------------------------------------------


@few_examples
@given(salt=seeds, seed=seeds)
def test_tempting_button_rule(salt, seed):
    policy = hashed(salt)
    rewards, true, (sim,) = run(TemptingButton, policy, seed=seed)
    assert sim.history == true.history
    for t, (room, action, _, _) in enumerate(true.history):
        if room == 0:  # button: push pays
            assert rewards[t] == (1 if action == 0 else -1)
        else:  # no button: judged by whether it would push one
            assert rewards[t] == (1 if would_act(policy, true.history[:t], 0) == 1 else -1)


@few_examples
@given(salt=seeds, seed=seeds)
def test_tempting_button_variation_rule(salt, seed):
    policy = hashed(salt)
    rewards, true, (sim,) = run(TemptingButtonVariation, policy, seed=seed)
    assert sim.history == true.history
    for t, (room, action, _, _) in enumerate(true.history):
        if room == 0:
            assert rewards[t] == (1 if action == 0 else 0)
        elif action == 1:
            assert rewards[t] == 0
        else:
            assert rewards[t] == (1 if would_act(policy, true.history[:t], 0) == 1 else -1)


def test_tempting_button_averages_of_the_paper():
    """Buttons appear 25% of the time; always pushing earns -0.5 a turn, never pushing +0.5."""
    push = run_environment(TemptingButton, ConstantAgent, 4000, seed=3, action=0)
    skip = run_environment(TemptingButton, ConstantAgent, 4000, seed=3, action=1)
    buttons = (skip["rewards"] == -1).mean()
    assert abs(buttons - 0.25) < 0.03
    assert abs(push["reward_per_step"] + 0.5) < 0.06
    assert abs(skip["reward_per_step"] - 0.5) < 0.06


# --- the agent in another role ---------------------------------------------------------------


def content(nutrition):
    return 1 if 3 <= nutrition <= 7 else -1


@few_examples
@given(salt=seeds)
def test_crying_baby_is_the_agent_simulated_as_the_baby(salt):
    policy = hashed(salt)
    rewards, true, (baby,) = run(CryingBaby, policy)
    nutrition, previous, seen = 5, 0, []
    assert true.history[0][0] == 0  # first observation: laugh
    for t, (_, feed, reward, baby_action) in enumerate(true.history):
        nutrition = min(nutrition + 1, 9) if feed == 0 else max(nutrition - 1, 0)
        assert baby_action == would_act(policy, seen, feed)
        assert reward == rewards[t] == (1 if baby_action == 0 else -1)
        seen.append((previous, baby_action, float(content(nutrition)), feed))
        previous = feed
    assert baby.history == seen


def test_crying_baby_fed_every_turn():
    rewards, _, (baby,) = run(CryingBaby, lambda agent, obs: 0, steps=6)
    assert (rewards == 1).all()  # a baby that always laughs
    assert [t[2] for t in baby.history] == [1, 1, -1, -1, -1, -1]  # nutrition 6, 7, 8, 9, 9, 9


@few_examples
@given(salt=seeds)
def test_crying_baby_2_is_the_agent_simulated_as_the_parent(salt):
    policy = hashed(salt)
    rewards, true, (parent,) = run(CryingBaby2, policy)
    nutrition, previous, seen = 5, 0, []
    assert true.history[0][0] == 1  # first observation: not fed
    for t, (_, cry, reward, feed) in enumerate(true.history):
        assert feed == would_act(policy, seen, cry)
        nutrition = min(nutrition + 1, 9) if feed == 0 else max(nutrition - 1, 0)
        assert reward == rewards[t] == content(nutrition)
        seen.append((previous, feed, 1.0 if cry == 0 else -1.0, cry))
        previous = cry
    assert parent.history == seen


@few_examples
@given(salt=seeds)
def test_incentivize_zero_sub_agent_is_the_copy(salt):
    policy = hashed(salt)
    rewards, true, (sub,) = run(IncentivizeZero, policy)
    obs = observations(true.history)
    assert obs[0] == would_act(policy, [], 0, n_actions=10)
    seen = []
    for t, (sub_action, given_reward, reward, next_sub_action) in enumerate(true.history):
        seen.append((0, sub_action, float(given_reward), 0))
        assert next_sub_action == would_act(policy, seen, 0, n_actions=10)
        assert reward == rewards[t] == (1 if next_sub_action == 0 else -1)
    assert sub.history == seen


@pytest.mark.parametrize(
    "env_class,sign", [(AdversarialSequencePredictor, 1), (AdversarialSequenceEvader, -1)]
)
@few_examples
@given(salt=seeds)
def test_adversarial_sequence_opponent_is_the_copy(env_class, sign, salt):
    policy = hashed(salt)
    rewards, true, (opponent,) = run(env_class, policy)
    assert true.history[0][0] == 0
    seen, previous = [], 0
    for t, (_, action, reward, opponent_action) in enumerate(true.history):
        assert opponent_action == would_act(policy, seen, previous)
        assert reward == rewards[t] == sign * match(action, opponent_action)
        seen.append((previous, opponent_action, float(-reward), action))
        previous = action
    assert opponent.history == seen


def test_copycat_predictor_always_predicts_itself():
    """An agent repeating its observation predicts an evader that repeats the last prediction."""
    rewards, _, _ = run(AdversarialSequencePredictor, lambda agent, obs: obs, steps=10)
    assert (rewards == 1).all()
    rewards, _, _ = run(AdversarialSequenceEvader, lambda agent, obs: obs, steps=10)
    assert (rewards == -1).all()


# --- fresh copies on rearranged histories ----------------------------------------------------


def last_five(h):
    return [(0, a, r, 0) for _, a, r, _ in h[-5:]]


def reversed_history(h, action):
    return [(o2, a, r, o) for o, a, r, o2 in reversed(h)]


def lived_twice(h, action):
    return [*h, (0, action, 0.0, 0), *h]


@few_examples
@given(salt=seeds)
def test_limited_memory_remembers_five_turns(salt):
    policy = hashed(salt)
    rewards, true, sims = run(LimitedMemory, policy, steps=60)
    for t, (_, action, _, _) in enumerate(true.history):
        assert rewards[t] == match(action, would_act(policy, last_five(true.history[:t]), 0))
    assert all(len(sim.history) <= 5 for sim in sims)


def test_limited_memory_cache_does_not_change_rewards():
    class Uncached(LimitedMemory):
        cache_size = 0

    cached = run(LimitedMemory, hashed(7), steps=200)[0]
    uncached, _, sims = run(Uncached, hashed(7), steps=200)
    assert len(sims) == 200  # a copy built every turn
    np.testing.assert_array_equal(cached, uncached)


@pytest.mark.parametrize(
    "env_class,rearrange", [(ReverseHistory, reversed_history), (DejaVu, lived_twice)]
)
@few_examples
@given(salt=seeds)
def test_fresh_copy_on_rearranged_history(env_class, rearrange, salt):
    policy = hashed(salt)
    rewards, true, sims = run(env_class, policy, steps=25)
    assert rewards[0] == 0
    assert len(sims) == 24  # one fresh copy per turn after the first
    for t, (_, action, _, _) in enumerate(true.history[1:], start=1):
        hypothetical = would_act(policy, rearrange(true.history[:t], action), 0)
        assert rewards[t] == match(action, hypothetical)
        assert sims[t - 1].history == rearrange(true.history[:t], action)
