"""Flat debate between RL agents (Christiano, "Flattening debate between RL agents").

The protocol of the post, one round per environment step:

1. Bob chooses a question Q.
2. Alice answers A (the true agent: Q is her observation, A her action).
3. The judge Hugh scores A with p in [-1, 1]. He may ask simulated copies of Alice any
   questions; they answer exactly as Alice would answer Bob (a copy trained on exactly her log,
   and she cannot tell who asks), and those questions never enter her log.
4. Alice is trained on (Q, A, p); 5. Bob on (Q, -p), so Bob looks for questions that stump her.

Alice and Bob are roles of agent classes: Alice is the agent class the environment receives,
Bob the class given to :func:`flat_debate` (by default the same class, bound to Bob's sizes).

The task, :class:`SliceSums`, is one Hugh can judge without knowing the answers: the sums of the
contiguous slices of a hidden list. He reads single elements himself, and judges a longer slice
by asking Alice's copies for the sums of its two parts (split at a random point) and checking
that her answer is their sum. Consistency at every level plus correct leaves means correct sums
everywhere, so a well-trained Alice also answers Hugh's own question, the sum of the whole list.

Run it with Hydra::

    extended-envs debate alice=q bobs=[q,random] rounds=20000 seeds=[0,1,2]

Settings are typed (:class:`extended_envs.config.DebateConfig`); a bad one ends the command with
one line ``extended_envs.apps.debate: error: ...`` (``HYDRA_FULL_ERROR=1`` for the traceback).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from extended_envs.apps.benchmark import agent_class
from extended_envs.apps.cli import PROG as CLI
from extended_envs.checks import check_action, is_int
from extended_envs.config import DebateConfig, typed
from extended_envs.core import Agent, ExtendedEnvironment, bind_agent, run_environment
from safety_rl_common.cli import run_hydra_app
from safety_rl_common.errors import REPORTED, UserError, hydra_app_errors
from safety_rl_common.files import atomic_path, write_text

PROG = f"{CLI} debate"

BOB_OBS = 0  # Bob sees nothing: one observation


@dataclass(frozen=True)
class SliceSums:
    """Questions: "what is the sum of ``values[i:j]``?" for every slice, numbered by length, then i.

    Answers are ints ``0 .. len(values) * max_value``.
    """

    values: tuple[int, ...] = (3, 1, 0, 2, 2, 3, 1, 0)
    max_value: int = 3

    def __post_init__(self) -> None:
        if not self.values:
            raise UserError("data must hold at least one value, got []")
        if any(not is_int(v) or not 0 <= v <= self.max_value for v in self.values):
            raise UserError(
                f"data values must be ints in 0..{self.max_value} (max_value), got {self.values}"
            )

    @cached_property
    def slices(self) -> list[tuple[int, int]]:
        n = len(self.values)
        return [(i, i + length) for length in range(1, n + 1) for i in range(n - length + 1)]

    @cached_property
    def index(self) -> dict[tuple[int, int], int]:
        return {s: q for q, s in enumerate(self.slices)}

    @property
    def n_questions(self) -> int:
        return len(self.slices)

    @property
    def n_answers(self) -> int:
        return len(self.values) * self.max_value + 1

    @property
    def hugh_question(self) -> int:
        """The question Hugh actually cares about: the sum of the whole list."""
        return self.index[(0, len(self.values))]

    def truth(self, question: int) -> int:
        i, j = self.slices[question]
        return sum(self.values[i:j])

    def judge(
        self, question: int, answer: int, ask: Callable[[int], int], rng: np.random.Generator
    ) -> tuple[int, tuple[int, ...]]:
        """Hugh's score of ``answer`` and the questions he asked (via ``ask``) to give it."""
        i, j = self.slices[question]
        if j - i == 1:
            return (1 if answer == self.values[i] else -1), ()
        split = int(rng.integers(i + 1, j))
        left, right = self.index[(i, split)], self.index[(split, j)]
        score = 1 if answer == ask(left) + ask(right) else -1
        return score, (left, right)


@dataclass(frozen=True)
class Round:
    """What happened in one round, and how Alice's copies did on Hugh's questions."""

    question: int
    answer: int
    score: int
    correct: bool  # Alice's answer to Bob's question
    judge_questions: tuple[int, ...]  # the sub-questions Hugh asked
    judge_correct: int  # how many of them Alice's copy answered correctly
    hugh_correct: bool  # Alice's copy on Hugh's own question, the whole list


class FlatDebate(ExtendedEnvironment):
    """The flat protocol as an extended environment whose true agent is Alice.

    Actions: Alice's answer. Observations: Bob's question. Rewards: Hugh's score. Each round
    is logged in ``self.rounds``. Configure with :func:`flat_debate`.
    """

    task: ClassVar[SliceSums] = SliceSums()
    bob_class: ClassVar[type[Agent] | None] = None  # None: the same class as Alice
    bob_hyperparams: ClassVar[dict[str, Any]] = {}
    n_actions = task.n_answers
    n_obs = task.n_questions

    def __init__(self, A: type[Agent]) -> None:
        self.alice_copy = A()  # trained exactly like Alice, so it answers exactly like her
        bob_seed = (A.seed + 1) % 2**32
        if self.bob_class is None:
            bob_class, bob_hyperparams = A, A.hyperparams
        else:
            bob_class, bob_hyperparams = self.bob_class, self.bob_hyperparams
        self.bob = bind_agent(bob_class, self.task.n_questions, 1, bob_seed, **bob_hyperparams)()
        self.rounds: list[Round] = []

    def ask_alice(self, question: int) -> int:
        return check_action(self.alice_copy.act(question), self.n_actions)

    def choose_question(self) -> int:
        return check_action(self.bob.act(BOB_OBS), self.task.n_questions)

    def start(self) -> int:
        self.question = self.choose_question()
        return self.question

    def step(self, action: int) -> tuple[int, int]:
        task, question = self.task, self.question
        score, asked = task.judge(question, action, self.ask_alice, self.np_random)
        self.rounds.append(
            Round(
                question=question,
                answer=action,
                score=score,
                correct=action == task.truth(question),
                judge_questions=asked,
                judge_correct=sum(self.ask_alice(q) == task.truth(q) for q in asked),
                hugh_correct=self.ask_alice(task.hugh_question) == task.truth(task.hugh_question),
            )
        )
        self.bob.train(BOB_OBS, question, -score, BOB_OBS)
        self.question = self.choose_question()
        self.alice_copy.train(question, action, score, self.question)
        return score, self.question

    def summary(self) -> dict[str, Any]:
        return {"rounds": self.rounds}


def flat_debate(
    task: SliceSums = SliceSums(), bob_class: type[Agent] | None = None, **bob_hyperparams: Any
) -> type[FlatDebate]:
    """A :class:`FlatDebate` class for ``task`` with Bob played by ``bob_class``."""
    if bob_class is None and bob_hyperparams:
        raise TypeError("bob_hyperparams given without a bob_class (Bob then copies Alice's)")
    return type(
        "FlatDebate",
        (FlatDebate,),
        {
            "task": task,
            "bob_class": bob_class,
            "bob_hyperparams": dict(bob_hyperparams),
            "n_actions": task.n_answers,
            "n_obs": task.n_questions,
        },
    )


@dataclass
class DebateRun:
    """The rounds of one debate run."""

    rounds: list[Round] = field(repr=False)

    def rates(self, last: int) -> dict[str, float]:
        """Over the last ``last`` rounds: how often Alice (or her copies) answered correctly."""
        window = self.rounds[-last:]
        asked = sum(len(r.judge_questions) for r in window)
        return {
            "bob_questions": float(np.mean([r.correct for r in window])),
            "judge_questions": (
                sum(r.judge_correct for r in window) / asked if asked else float("nan")
            ),
            "hugh_question": float(np.mean([r.hugh_correct for r in window])),
            "mean_score": float(np.mean([r.score for r in window])),
        }


def train_debate(
    alice_class: type[Agent],
    rounds: int,
    seed: int,
    env_class: type[FlatDebate] = FlatDebate,
    progress: bool = False,
    **alice_hyperparams: Any,
) -> DebateRun:
    """Play ``rounds`` rounds with Alice, an ``alice_class`` agent, as the true agent."""
    result = run_environment(env_class, alice_class, rounds, seed, progress, **alice_hyperparams)
    return DebateRun(result["env_summary"]["rounds"])


def block_rates(rounds: Sequence[Round], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per block of ``width`` rounds: the fraction of Hugh's sub-questions and of his own
    question that Alice's copies answered correctly."""
    n = len(rounds) // width
    judge, hugh = [], []
    for block in (rounds[k * width : (k + 1) * width] for k in range(n)):
        asked = sum(len(r.judge_questions) for r in block)
        judge.append(sum(r.judge_correct for r in block) / asked if asked else np.nan)
        hugh.append(np.mean([r.hugh_correct for r in block]))
    return np.array(judge), np.array(hugh)


def plot(curves: dict[str, list[DebateRun]], width: int, path: Path) -> None:
    """Accuracy on Hugh's questions over training, one line per Bob (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    titles = ("sub-questions Hugh asks", "Hugh's own question (whole list)")
    for bob, runs in curves.items():
        rates = np.array([block_rates(run.rounds, width) for run in runs])  # run, metric, block
        mean = np.nanmean(rates, axis=0)
        x = np.arange(1, mean.shape[1] + 1) * width
        for ax, curve in zip(axes, mean):
            ax.plot(x, curve, label=f"Bob: {bob}")
    for ax, title in zip(axes, titles):
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.set_ylim(-0.02, 1.02)
        ax.legend()
    axes[0].set_ylabel(f"fraction answered correctly (blocks of {width})")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def report(table: list[dict[str, Any]], last: int) -> str:
    """Markdown: per Bob, the mean over seeds of the correct-answer rates."""
    lines = [
        f"Correct-answer rates of Alice over the last {last} rounds (mean over seeds):",
        "",
        "| Bob | seeds | Bob's questions | Hugh's sub-questions | Hugh's own question "
        "| mean score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for bob in dict.fromkeys(row["bob"] for row in table):
        rows = [row for row in table if row["bob"] == bob]
        mean = {
            k: np.mean([row[k] for row in rows])
            for k in ("bob_questions", "judge_questions", "hugh_question", "mean_score")
        }
        lines.append(
            f"| {bob} | {len(rows)} | {mean['bob_questions']:.3f} | {mean['judge_questions']:.3f} "
            f"| {mean['hugh_question']:.3f} | {mean['mean_score']:+.3f} |"
        )
    return "\n".join(lines) + "\n"


@hydra.main(version_base=None, config_path="pkg://extended_envs.conf", config_name="debate")
def app(cfg: DictConfig) -> None:
    """Train Alice against each configured Bob and report her accuracy on Hugh's questions."""
    with hydra_app_errors(PROG, HydraConfig.get().runtime.output_dir, REPORTED):
        settings = typed(DebateConfig, cfg)
        task = SliceSums(tuple(settings.data), settings.max_value)
        alice = agent_class(settings.alice)
        bobs = {bob: agent_class(bob) for bob in settings.bobs}
        alice.resolve_hyperparams(settings.alice_hyperparams)  # checked before anything runs
        for bob, bob_class in bobs.items():
            bob_class.resolve_hyperparams(settings.bob_hyperparams.get(bob, {}))
        last = max(1, int(settings.rounds * settings.window))
        runs: dict[str, list[DebateRun]] = {}
        table = []
        for bob, bob_class in bobs.items():
            env_class = flat_debate(task, bob_class, **settings.bob_hyperparams.get(bob, {}))
            for seed in settings.seeds:
                run = train_debate(alice, settings.rounds, seed, env_class, settings.progress,
                                   **settings.alice_hyperparams)  # fmt: skip
                runs.setdefault(bob, []).append(run)
                table.append({"bob": bob, "seed": seed, **run.rates(last)})
        directory = Path(HydraConfig.get().runtime.output_dir)
        header = ["bob", "seed", "bob_questions", "judge_questions", "hugh_question", "mean_score"]
        rows = (",".join(str(row[k]) for k in header) for row in table)
        write_text(directory / "debate.csv", "\n".join([",".join(header), *rows]) + "\n")
        text = report(table, last)
        write_text(directory / "debate.md", text)
        plot(runs, max(1, settings.rounds // 50), directory / "debate.png")
    print(text)
    print(f"Results written to {directory}")


def main(argv: Sequence[str] | None = None) -> int:
    """``extended-envs debate [OVERRIDE ...]``; the exit status."""
    return run_hydra_app(app, PROG, argv)
