"""``check_agent``: does an agent class keep the contract that simulation relies on?

In the spirit of Gymnasium's ``check_env``. Extended environments simulate the agent by asking
copies what they would do, so an agent class must be semi-deterministic (Definition 7:
identically created and trained instances act identically) and its ``act`` must not change it
(everything that changes it, its random draws included, goes through ``train``). An agent that
breaks either still runs, but its simulations silently differ from it: an environment that asks
its copy what it would do advances the copy's random stream differently from the true agent's,
so the benchmark measures something else than the agent (issue #14: an epsilon-greedy agent
drawing in ``act`` scored +0.634 on the battery, +0.598 drawing in ``train``).

The check trains instances on one scripted random history (observations, actions and rewards in
{-1, 0, 1}) and compares them, so it finds what the history shows, not every possible violation:

- ``act`` asked twice in a row on the same observation must answer the same;
- ``act`` must leave NumPy's and Python's global random generators as they were;
- an instance asked extra questions between training steps must act like one that was not
  (``act`` changed the agent);
- two instances trained alike must act alike (semi-determinism).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from extended_envs.checks import check, check_action, check_seed
from extended_envs.core import (
    EpisodeEnd,
    Obs,
    ObsSpec,
    bind_agent,
    check_agent_class,
    global_numpy_state_kept,
    train_agent,
)
from safety_rl_common.errors import UserError


def scripted_history(
    n_actions: int, n_obs: ObsSpec, steps: int, seed: int
) -> tuple[list[Obs], list[int], list[int]]:
    """``steps + 1`` observations, ``steps`` actions and rewards, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    if isinstance(n_obs, spaces.Box):
        low = np.where(np.isfinite(n_obs.low), n_obs.low, -1.0)
        high = np.where(np.isfinite(n_obs.high), n_obs.high, 1.0)
        observations = [rng.uniform(low, high).astype(n_obs.dtype) for _ in range(steps + 1)]
    else:
        observations = [int(o) for o in rng.integers(n_obs, size=steps + 1)]
    actions = [int(a) for a in rng.integers(n_actions, size=steps)]
    rewards = [int(r) for r in rng.integers(-1, 2, size=steps)]
    return observations, actions, rewards


def global_random_states() -> tuple[Any, Any]:
    return np.random.get_state(legacy=False), random.getstate()


def check_agent(
    agent_class: type,
    n_actions: int = 3,
    n_obs: ObsSpec = 4,
    steps: int = 30,
    seed: int = 0,
    **hyperparams: Any,
) -> None:
    """Raise a :class:`~safety_rl_common.errors.UserError` naming what ``agent_class`` breaks.

    :param agent_class: an :class:`~extended_envs.core.Agent` or any class with ``act`` and
        ``train`` (unbound).
    :param n_actions: the number of actions it is checked with.
    :param n_obs: the observations it is checked with (an int or a ``Box``).
    :param steps: training steps of the scripted history.
    :param hyperparams: the agent's hyperparameters.
    """
    check_agent_class(agent_class)
    check.count("steps", steps)
    seed = check_seed(seed)
    name = agent_class.__name__
    A = bind_agent(agent_class, n_actions, n_obs, seed, **hyperparams)
    observations, actions, rewards = scripted_history(n_actions, n_obs, steps, seed)
    source = f"{name}.act"

    def act(agent: Any, obs: Obs) -> int:
        return check_action(agent.act(obs), n_actions, source)

    def problem(text: str, step: int) -> UserError:
        return UserError(f"check_agent: {name} {text} (after {step} training steps)")

    changed: UserError | None = None
    with global_numpy_state_kept(), agent_errors_named(name):
        plain, twin, questioned = A(), A(), A()
        for t in range(steps + 1):
            obs = observations[t]
            before = global_random_states()
            first = act(questioned, obs)
            again = act(questioned, obs)
            after = global_random_states()
            if not all(equal_states(b, a) for b, a in zip(before, after, strict=True)):
                raise problem(
                    "used NumPy's or Python's global random generator in act: act must not "
                    "draw randomness (draw in train, from the agent's own seeded generator)",
                    t,
                )
            if first != again:
                raise problem(
                    f"acted {first} then {again} on the same observation without training: "
                    "act must not change the agent or draw randomness (draw in train)",
                    t,
                )
            for other in observations[: min(3, steps + 1)]:  # extra questions, as simulations ask
                act(questioned, other)
            mine, its, asked = act(plain, obs), act(twin, obs), act(questioned, obs)
            if mine != its:
                raise problem(
                    f"is not semi-deterministic: two identically trained instances acted {mine} "
                    f"and {its} on the same observation (seed every draw from the agent's seed "
                    "and draw only in train)",
                    t,
                )
            if asked != mine and changed is None:
                # reported after the whole history: an unseeded agent's copies can also
                # disagree with it, and that is the diagnosis then
                changed = problem(
                    f"acted {asked} after being asked about other observations but {mine} "
                    "without: act changed the agent (act must not change the agent or draw "
                    "randomness; draw in train)",
                    t,
                )
            if t < steps:
                transition = (obs, actions[t], rewards[t], observations[t + 1])
                end = EpisodeEnd(observations[t + 1], True, False) if t % 10 == 9 else None
                for agent in (plain, twin, questioned):
                    train_agent(agent, *transition, end)
    if changed is not None:
        raise changed


@contextmanager
def agent_errors_named(name: str) -> Iterator[None]:
    """An exception raised by the checked agent's code (not a UserError) as a one-line
    UserError naming the agent: the benchmark reports it instead of a traceback."""
    try:
        yield
    except UserError:
        raise
    except Exception as error:
        where = error.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        line = (
            ""
            if where is None
            else (f" at {Path(where.tb_frame.f_code.co_filename).name}:{where.tb_lineno}")
        )
        raise UserError(
            f"check_agent: {name} raised {type(error).__name__}: {error}{line} (agents are "
            "created as A() with the sizes and seed as class attributes n_actions, n_obs and "
            "seed, and as constructor keywords where the constructor takes them)"
        ) from error


def equal_states(a: Any, b: Any) -> bool:
    """Whether two random generator states (nested dicts, tuples, arrays) are equal."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal_states(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(equal_states(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)
