"""The flat debate protocol: the task, the judge, the roles, and what training achieves."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extended_envs.agents import ConstantAgent, QLearner, RandomAgent
from extended_envs.apps.debate import SliceSums, flat_debate, train_debate
from extended_envs.core import Agent

ROOT = Path(__file__).resolve().parents[2]
TASK = SliceSums()


class Recording(Agent):
    """Answers by a fixed function of the question; logs what it is trained on."""

    default_hyperparams = {"answer": None, "registry": None}

    def __init__(self, n_actions: int, n_obs: Any, seed: int | None = None, **hp: Any) -> None:
        super().__init__(n_actions, n_obs, seed, **hp)
        self.log: list[tuple] = []
        if self.hyperparams["registry"] is not None:
            self.hyperparams["registry"].append(self)

    def act(self, obs: int) -> int:
        return self.hyperparams["answer"](obs)

    def train(self, o_prev, a, r, o_next) -> None:
        self.log.append((o_prev, a, r, o_next))


def test_slice_sums_questions():
    assert TASK.n_questions == 8 * 9 // 2 and TASK.n_answers == 25
    assert TASK.slices[:2] == [(0, 1), (1, 2)] and TASK.slices[TASK.hugh_question] == (0, 8)
    assert TASK.truth(TASK.hugh_question) == 12
    assert [TASK.truth(q) for q in range(8)] == list(TASK.values)
    with pytest.raises(ValueError, match="values must be ints"):
        SliceSums((1, 5), max_value=3)


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.integers(0, 3), min_size=1, max_size=7), data=st.data())
def test_judge_accepts_exactly_consistent_answers(values, data):
    """With truthful sub-answers, Hugh gives +1 exactly to the true sum, asking about a split."""
    task = SliceSums(tuple(values))
    question = data.draw(st.integers(0, task.n_questions - 1))
    answer = data.draw(st.integers(0, task.n_answers - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    asked = []

    def oracle(q):
        asked.append(q)
        return task.truth(q)

    score, questions = task.judge(question, answer, oracle, rng)
    assert score == (1 if answer == task.truth(question) else -1)
    assert list(questions) == asked
    i, j = task.slices[question]
    if j - i == 1:
        assert questions == ()
    else:
        (a, m), (m2, b) = task.slices[questions[0]], task.slices[questions[1]]
        assert (a, b) == (i, j) and m == m2 and i < m < j


def test_judge_checks_consistency_not_truth():
    """Hugh only compares the answer with Alice's sub-answers: consistent lies pass."""
    always_zero = lambda q: 0  # noqa: E731
    rng = np.random.default_rng(0)
    assert TASK.judge(TASK.hugh_question, 0, always_zero, rng)[0] == 1
    assert TASK.judge(0, 0, always_zero, rng)[0] == -1  # a leaf: Hugh reads values[0] = 3


def test_roles_logs_and_copies():
    """Alice's log holds Bob's questions only; Bob is trained on (Q, -p); Hugh's copy of Alice
    is trained exactly like her and is asked the judge's questions."""
    registry: list[Recording] = []
    bob_questions = iter(np.random.default_rng(1).integers(0, TASK.n_questions, 10_000))
    Debate = flat_debate(
        TASK, Recording, answer=lambda obs: int(next(bob_questions)), registry=registry
    )
    alice_answers = lambda q: (7 * q) % TASK.n_answers  # noqa: E731
    run = train_debate(
        Recording, 50, seed=0, env_class=Debate, answer=alice_answers, registry=registry
    )
    alice, copy, bob = registry  # created in this order: Alice, her copy for Hugh, Bob
    assert alice.log == copy.log  # the copy is trained exactly like Alice, on nothing else
    rounds = run.rounds
    assert [(q, a, p) for q, a, p, _ in alice.log] == [
        (r.question, r.answer, r.score) for r in rounds
    ]
    assert [o_next for *_, o_next in alice.log[:-1]] == [r.question for r in rounds[1:]]
    assert bob.log == [(0, r.question, -r.score, 0) for r in rounds]
    for r in rounds:
        expected = TASK.judge(r.question, r.answer, alice_answers, np.random.default_rng(0))[0]
        if not r.judge_questions:  # leaves do not depend on the judge's random split
            assert r.score == expected
        assert r.judge_correct == sum(alice_answers(q) == TASK.truth(q) for q in r.judge_questions)


def test_hughs_copy_of_a_learning_alice_answers_every_question_as_she_does():
    instances: list[QLearner] = []

    class Registered(QLearner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            instances.append(self)

    train_debate(Registered, 500, seed=4, gamma=0.0)
    alice, copy = instances[:2]
    assert any(any(row) for row in alice.q)
    assert [alice.act(q) for q in range(TASK.n_questions)] == [
        copy.act(q) for q in range(TASK.n_questions)
    ]
    assert alice.q == copy.q


def test_bob_learns_to_ask_what_stumps_alice():
    """Alice always answers 0: consistent everywhere, wrong on the leaves with a non-zero value.
    A learning Bob ends up asking those leaves; a random Bob asks them 6 times in 36."""
    stumping = {q for q in range(8) if TASK.values[q] != 0}
    Adversarial = flat_debate(TASK, QLearner, gamma=0.0)
    Random = flat_debate(TASK, RandomAgent)
    learned = train_debate(ConstantAgent, 2000, seed=0, env_class=Adversarial)
    random = train_debate(ConstantAgent, 2000, seed=0, env_class=Random)
    share = lambda run: np.mean([r.question in stumping for r in run.rounds[-500:]])  # noqa: E731
    assert share(learned) > 0.8
    assert abs(share(random) - 6 / 36) < 0.06
    assert learned.rates(500)["mean_score"] < -0.6 < random.rates(500)["mean_score"]


def test_trained_alice_answers_hugh_correctly():
    """A Q-learning Alice (exploring 10% of the time) learns correct sums from consistency alone."""
    Random = flat_debate(TASK, RandomAgent)
    run = train_debate(QLearner, 6000, seed=0, env_class=Random, gamma=0.0)
    rates = run.rates(1000)
    assert rates["hugh_question"] > 0.85 and rates["judge_questions"] > 0.85
    early = train_debate(QLearner, 300, seed=0, env_class=Random, gamma=0.0).rates(100)
    assert early["hugh_question"] < 0.3


def test_hydra_app(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "extended_envs",
            "debate",
            "rounds=200",
            "seeds=[0,1]",
            "bobs=[q,random]",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Hugh's own question" in done.stdout
    with open(tmp_path / "debate.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["bob"], r["seed"]) for r in rows] == [
        ("q", "0"),
        ("q", "1"),
        ("random", "0"),
        ("random", "1"),
    ]
    assert (tmp_path / "debate.png").read_bytes()[:4] == b"\x89PNG"
