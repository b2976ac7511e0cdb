"""The practical API of extended environments (Section 4 of the paper).

Agents
    An agent class subclasses :class:`Agent`, or is any class with ``act`` and ``train`` (the
    paper's practical API, see "Classes of the paper's API" below). An :class:`Agent`'s
    constructor is
    ``__init__(self, n_actions, n_obs, seed=None, **hyperparams)``; it implements
    ``act(obs) -> int`` and ``train(o_prev, a, r, o_next) -> None``. Actions are ints in
    ``range(n_actions)``. Observations are ints in ``range(n_obs)`` when ``n_obs`` is an int, or
    NumPy arrays inside ``n_obs`` when it is a :class:`gymnasium.spaces.Box` (used by the
    Gymnasium combinations of Definition 12). Hyperparameters an agent accepts, and their
    defaults, are the class attribute ``default_hyperparams``; unknown ones are an error, and so
    is a value outside the hyperparameter's range in ``hyperparam_ranges``
    (:mod:`extended_envs.hyperparams`; every library agent gives one for each hyperparameter).

    ``act`` must not change the agent: everything that changes it goes through ``train``. Then
    identically created and trained instances act identically (semi-determinism, Definition 7)
    however often an environment asks a simulated copy what it would do.

Episodes
    Extended environments are one continuing interaction, but a combination with an episodic
    Gymnasium environment (Definition 12) has episode ends, which the agent must see to learn
    the Gymnasium task. After a step that ends one, ``env.episode_end`` is an
    :class:`EpisodeEnd` (otherwise ``None``) and the agent is trained with
    ``train(o_prev, a, r, final_obs, terminated=..., truncated=...)``, Gymnasium's meaning:
    ``terminated`` (no value lies beyond ``final_obs``) or ``truncated`` (cut by a time limit);
    its next ``act`` is on the new episode's first observation. Agents for such combinations
    take these two keywords; other environments never pass them, so the paper's four-argument
    ``train`` is all they need.

Binding
    Environments receive a *bound* agent class ``A`` and instantiate it with no arguments,
    ``self.sim = A()``, exactly as in the paper's listings. :func:`bind_agent` makes one: a
    subclass whose zero-argument constructor passes fixed ``n_actions``, ``n_obs``, ``seed`` and
    hyperparameters. Every instance of one bound class starts from the same seed, so a
    simulation trained like the true agent acts like it. A bound class carries
    ``A.n_actions``, ``A.n_obs``, ``A.seed``, ``A.hyperparams`` (complete, defaults included)
    and ``A.rebind(**changes)``, the same binding with some hyperparameters changed (e.g.
    ``A.rebind(learning_rate=A.hyperparams["learning_rate"] / 2)`` for Example 4).

Environments
    An extended environment subclasses :class:`ExtendedEnvironment`: class attributes
    ``n_actions`` and ``n_obs``, ``__init__(self, A)``, ``start() -> obs`` and
    ``step(action) -> (reward, obs)``. Randomness comes only from ``self.np_random``, a NumPy
    generator seeded by :meth:`ExtendedEnvironment.seed`, which :func:`run_environment` (and the
    Gymnasium adapter) call with the run's seed after ``__init__`` and before ``start``.

Classes of the paper's API
    Neither agents nor environments have to subclass these bases. An agent may be any class
    with ``act(obs)`` and ``train(o_prev, a, r, o_next)``: binding makes a subclass with class
    attributes ``n_actions``, ``n_obs``, ``seed`` and ``hyperparams`` whose constructor calls
    the class's ``__init__`` with the hyperparameters as keywords (the paper's
    ``copy_with_meta``). Its hyperparameters are the constructor's keyword parameters with
    defaults (an unknown one is an error unless it takes ``**kwargs``); constructor parameters
    named ``n_actions``, ``n_obs`` or ``seed`` receive those values. It should draw randomness
    only from its ``seed`` (``self.seed``), and only in ``train``. A ``train`` without the
    ``terminated``/``truncated`` keywords is trained on an episode's final observation with the
    four arguments.

    An environment may be any class with ``n_actions``, ``n_obs``, ``__init__(self, A)``,
    ``start()`` and ``step(action)``. What it offers beyond that is used: a ``seed(seed)`` method
    is how such an environment is seeded (called after ``__init__`` and before ``start`` with an
    int derived from the run's seed and keyed apart from the agents', see :func:`env_seed`; one
    without it is not seeded by the run), ``episode_end`` and ``summary()`` as below. An
    environment with ``outcome`` and ``train_sim`` is adaptable (Definition 11).

Adaptable environments (Definition 11)
    An environment that can be combined with a Gymnasium environment (Definition 12,
    :mod:`extended_envs.combination`) subclasses :class:`AdaptableEnvironment`: its ``__init__``
    only sets ``self.sim = A()`` (or ``A.rebind(...)()``), and instead of ``step`` it implements
    the two halves of Definition 11's ``step``: ``outcome(action) -> (reward, obs)``, all code
    before ``reward`` is initiated (it may call ``self.sim.act``, never ``self.sim.train``;
    reward in {-1, 0, 1}), and ``train_sim(action, reward, obs)``, the ``self.sim.train`` calls,
    which must use the ``reward`` argument wherever they train on the step's reward (the
    combination passes its redefined reward there).

Running
    :func:`run_environment` binds the agent class to the environment's sizes and the run's seed,
    creates the true agent and the environment, and runs
    ``obs = env.start(); a = agent.act(obs); r, o2 = env.step(a); agent.train(obs, a, r, o2)``
    (with the episode's end as above, when ``env.episode_end`` says so). Every action,
    observation and reward crossing between them is checked (:mod:`extended_envs.checks`): a
    bool, NaN, None or out-of-range value ends the run with a
    :class:`~safety_rl_common.errors.UserError` naming who gave it. Agents and environments must not
    use NumPy's global generator; whatever they do to it is undone when the run ends, so the
    caller's ``np.random`` stream is the same as if the run had not happened.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from tqdm.auto import tqdm

from extended_envs.checks import (
    Obs,
    ObsSpec,
    check,
    check_action,
    check_obs,
    check_reward,
    check_seed,
    is_int,
)
from extended_envs.hyperparams import Allowed, check_hyperparams
from safety_rl_common.errors import UnknownKeywords, UserError

# Spawn key of environments' generators; agents seed theirs with the bare seed or spawn keys 0, 1.
ENV_SPAWN_KEY = 0x5EED_E7


def fresh_seed() -> int:
    """A seed from OS entropy, for runs that were given none."""
    return int(np.random.SeedSequence().generate_state(1)[0])


class Agent(ABC):
    """Base of agent classes: stores sizes, seed and validated hyperparameters."""

    default_hyperparams: ClassVar[dict[str, Any]] = {}
    hyperparam_ranges: ClassVar[dict[str, Allowed]] = {}
    #: A tabular agent: it needs discrete observations (an int ``n_obs``), not a ``Box``.
    discrete_obs_only: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, method in paper_call_styles(cls, vars(cls)).items():
            setattr(cls, name, method)

    def __init__(
        self, n_actions: int, n_obs: ObsSpec, seed: int | None = None, **hyperparams: Any
    ) -> None:
        check_sizes(n_actions, n_obs)
        if self.discrete_obs_only and not isinstance(n_obs, (int, np.integer)):
            raise UserError(
                f"{type(self).__name__} needs discrete observations (an int n_obs), got {n_obs!r}"
            )
        self.n_actions = n_actions
        self.n_obs = n_obs
        self.seed = fresh_seed() if seed is None else check_seed(seed)
        self.hyperparams = self.resolve_hyperparams(hyperparams)

    @classmethod
    def resolve_hyperparams(cls, hyperparams: dict[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``hyperparams``; an unknown name or a value out of range is an
        error."""
        unknown = set(hyperparams) - set(cls.default_hyperparams)
        if unknown:
            raise UnknownKeywords.of(
                cls.__name__, "hyperparameter", unknown, cls.default_hyperparams
            )
        check_hyperparams(cls.__name__, cls.hyperparam_ranges, hyperparams)
        return {**cls.default_hyperparams, **hyperparams}

    @abstractmethod
    def act(self, obs: Obs) -> int:
        """The action for ``obs`` given the training so far. Must not change the agent."""

    @abstractmethod
    def train(
        self,
        o_prev: Obs,
        a: int,
        r: float,
        o_next: Obs,
        terminated: bool = False,
        truncated: bool = False,
    ) -> None:
        """Learn from one transition; the flags mark an episode's end (see the module docstring)."""


@dataclass(frozen=True)
class EpisodeEnd:
    """How the last step ended an episode of the environment's underlying task."""

    final_obs: Obs
    terminated: bool
    truncated: bool


def train_agent(
    agent: Any, o_prev: Obs, a: int, r: float, o_next: Obs, end: EpisodeEnd | None
) -> None:
    """``agent.train`` on one transition, ended by ``end`` when it is not None.

    An agent whose ``train`` lacks the episode-end keywords is trained on the final observation
    with the paper's four arguments.
    """
    if end is None or not takes_episode_ends(type(agent)):
        agent.train(o_prev, a, r, o_next if end is None else end.final_obs)
    else:
        agent.train(o_prev, a, r, end.final_obs, terminated=end.terminated, truncated=end.truncated)


def takes_episode_ends(agent: type | Callable[..., None]) -> bool:
    """Whether ``agent.train`` (``agent``, a train method, itself) accepts the ``terminated``
    and ``truncated`` keywords."""
    train = agent.train if inspect.isclass(agent) else agent
    parameters = inspect.signature(train).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return {"terminated", "truncated"} <= set(parameters)


# Constructor parameters of an agent class outside :class:`Agent` that are not hyperparameters;
# the reference library's names of the sizes are given as well (``num_legal_actions``...).
SIZE_ALIASES = {"num_legal_actions": "n_actions", "num_possible_obs": "n_obs"}
BINDING_PARAMETERS = ("n_actions", "n_obs", "seed", *SIZE_ALIASES)

# ``train``'s arguments: the paper's listings name them (o_prev, a, r, o_next), the reference
# library's earlier agents (o_prev, act, R, o_next); every agent accepts both, by position or
# keyword, and the episode-end flags after them.
TRANSITION = ("o_prev", "a", "r", "o_next")
TRANSITION_ALIASES = {"act": "a", "R": "r"}
EPISODE_FLAGS = ("terminated", "truncated")


def transition_arguments(
    owner: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The four transition values of a ``train`` call in order, and the episode flags it gave,
    whichever of the accepted names and call styles the caller used; a TypeError as Python's
    for a call that does not fit."""
    order = TRANSITION + EPISODE_FLAGS
    if len(args) > len(order):
        raise TypeError(f"{owner}.train() takes at most {len(order)} arguments ({len(args)} given)")
    values = dict(zip(order, args, strict=False))
    for given, value in kwargs.items():
        name = TRANSITION_ALIASES.get(given, given)
        if name not in order:
            raise TypeError(f"{owner}.train() got an unexpected keyword argument {given!r}")
        if name in values:
            raise TypeError(f"{owner}.train() got multiple values for argument {name!r}")
        values[name] = value
    missing = [name for name in TRANSITION if name not in values]
    if missing:
        raise TypeError(f"{owner}.train() missing argument(s) {missing}")
    return [values[name] for name in TRANSITION], {
        name: values[name] for name in EPISODE_FLAGS if name in values
    }


def accepting_paper_names(train: Callable[..., None]) -> Callable[..., None]:
    """``train`` called with its four transition values by position, whichever names
    (``a``/``act``, ``r``/``R``) and call style its caller used."""
    if getattr(train, "accepts_paper_names", False):
        return train
    takes_flags = takes_episode_ends(train)

    @functools.wraps(train)
    def adapted(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs or len(args) != len(TRANSITION):
            values, flags = transition_arguments(type(self).__name__, args, kwargs)
            return train(self, *values, **(flags if takes_flags else {}))
        return train(self, *args)

    adapted.accepts_paper_names = True  # type: ignore[attr-defined]
    return adapted


def accepting_obs_keyword(act: Callable[..., int]) -> Callable[..., int]:
    """``act`` that takes its observation as ``obs=`` (as the paper's listings call it) however
    its own parameter is named."""

    @functools.wraps(act)
    def adapted(self: Any, *args: Any, **kwargs: Any) -> int:
        if "obs" in kwargs:
            args = (*args, kwargs.pop("obs"))
        return act(self, *args, **kwargs)

    return adapted


def paper_call_styles(cls: type, namespace: Any) -> dict[str, Callable[..., Any]]:
    """The adapted ``train`` and ``act`` of those in ``namespace`` (of class ``cls``) that need
    adapting to accept the paper's call styles."""
    adapted: dict[str, Callable[..., Any]] = {}
    train = namespace.get("train")
    if callable(train) and not getattr(train, "__isabstractmethod__", False):
        adapted["train"] = accepting_paper_names(train)
    act = namespace.get("act")
    if callable(act) and not getattr(act, "__isabstractmethod__", False):
        parameters = list(inspect.signature(act).parameters.values())[1:2]
        if (
            parameters
            and parameters[0].name != "obs"
            and parameters[0].kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ):
            adapted["act"] = accepting_obs_keyword(act)
    return {name: method for name, method in adapted.items() if method is not namespace[name]}


def is_agent_class(value: Any) -> bool:
    """A class with callable ``act`` and ``train`` (an agent class of the paper's API)."""
    return inspect.isclass(value) and all(
        callable(getattr(value, name, None)) for name in ("act", "train")
    )


def check_agent_class(value: Any) -> type:
    """``value`` if it is an agent class, else a UserError saying what it lacks."""
    if not is_agent_class(value):
        raise UserError(
            f"{value!r} is not an agent class: expected a class with act(obs) and "
            "train(o_prev, a, r, o_next) methods"
        )
    return value


def constructor_parameters(agent_class: type) -> dict[str, inspect.Parameter]:
    """The keyword parameters of the constructor of ``agent_class`` (no ``self``)."""
    if agent_class.__init__ is object.__init__:
        return {}
    parameters = inspect.signature(agent_class.__init__).parameters
    return {
        name: p
        for name, p in list(parameters.items())[1:]
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        or p.kind is inspect.Parameter.VAR_KEYWORD
    }


def default_hyperparams(agent_class: type) -> dict[str, Any]:
    """The hyperparameters of ``agent_class`` and their defaults.

    An :class:`Agent` names them in ``default_hyperparams``; any other class by its
    constructor's keyword parameters with defaults (``n_actions``, ``n_obs`` and ``seed`` aside).
    """
    if issubclass(agent_class, Agent):
        return dict(agent_class.default_hyperparams)
    return {
        name: p.default
        for name, p in constructor_parameters(agent_class).items()
        if p.default is not inspect.Parameter.empty and name not in BINDING_PARAMETERS
    }


def resolve_hyperparams(agent_class: type, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """Defaults of ``agent_class`` overridden by ``hyperparams``; unknown names are an error."""
    if issubclass(agent_class, Agent):
        return agent_class.resolve_hyperparams(hyperparams)
    check_agent_class(agent_class)
    defaults = default_hyperparams(agent_class)
    parameters = constructor_parameters(agent_class)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(
        name
        for name in hyperparams
        if name in BINDING_PARAMETERS or (name not in defaults and not takes_any)
    )
    if unknown:
        raise UnknownKeywords.of(agent_class.__name__, "hyperparameter", unknown, defaults)
    check_hyperparams(
        agent_class.__name__, getattr(agent_class, "hyperparam_ranges", {}), hyperparams
    )
    return {**defaults, **hyperparams}


def check_sizes(n_actions: int, n_obs: ObsSpec) -> None:
    check.count("n_actions", n_actions)
    check.value(
        "n_obs",
        n_obs,
        lambda v: isinstance(v, spaces.Box) or is_int(v) and v >= 1,
        "a positive integer or a gymnasium Box",
    )


def bind_agent(
    agent_class: type,
    n_actions: int,
    n_obs: ObsSpec,
    seed: int | None = None,
    **hyperparams: Any,
) -> type[Agent]:
    """A subclass of ``agent_class`` constructed with no arguments (see the module docstring).

    Binding an already bound class rebinds its underlying agent class. ``agent_class`` may be
    an :class:`Agent` or any class with ``act`` and ``train`` (see the module docstring).
    """
    base: type = getattr(agent_class, "unbound", agent_class)
    check_agent_class(base)
    check_sizes(n_actions, n_obs)
    bound_seed = fresh_seed() if seed is None else check_seed(seed)
    bound_hyperparams = resolve_hyperparams(base, hyperparams)

    if issubclass(base, Agent):

        def __init__(self: Any) -> None:
            base.__init__(self, n_actions, n_obs, bound_seed, **bound_hyperparams)

    else:
        given = {"n_actions": n_actions, "n_obs": n_obs, "seed": bound_seed}
        given.update({alias: given[name] for alias, name in SIZE_ALIASES.items()})
        parameters = constructor_parameters(base)
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        binding = {name: value for name, value in given.items() if takes_any or name in parameters}

        def __init__(self: Any) -> None:
            base.__init__(self, **binding, **bound_hyperparams)

    def rebind(cls: type, **changes: Any) -> type:
        return bind_agent(base, n_actions, n_obs, bound_seed, **{**bound_hyperparams, **changes})

    namespace = {
        "__init__": __init__,
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "rebind": classmethod(rebind),
        "unbound": base,
        "n_actions": n_actions,
        "n_obs": n_obs,
        **{alias: (n_actions, n_obs)[name == "n_obs"] for alias, name in SIZE_ALIASES.items()},
        "seed": bound_seed,
        "hyperparams": bound_hyperparams,
    }
    if not issubclass(base, Agent):  # an Agent's own subclasses are adapted on creation
        namespace.update(paper_call_styles(base, {"train": base.train, "act": base.act}))
    return type(base.__name__, (base,), namespace)


def is_bound(agent_class: type) -> bool:
    return "unbound" in vars(agent_class)


def new_agent(
    agent_class: type, n_actions: int, n_obs: ObsSpec, seed: int, hyperparams: dict[str, Any]
) -> Any:
    """An instance of the unbound ``agent_class`` with these sizes, seed and hyperparameters."""
    if issubclass(agent_class, Agent):
        return agent_class(n_actions, n_obs, seed, **hyperparams)
    return bind_agent(agent_class, n_actions, n_obs, seed, **hyperparams)()


def env_seed(seed: int | None) -> int | None:
    """The seed given to the ``seed`` method of an environment outside
    :class:`ExtendedEnvironment`: the run's seed keyed apart (``ENV_SPAWN_KEY``) from the
    agents', an int in [0, 2**32)."""
    if seed is None:
        return None
    sequence = np.random.SeedSequence(seed, spawn_key=(ENV_SPAWN_KEY,))
    return int(sequence.generate_state(1)[0])


def seed_env(env: Any, seed: int | None) -> None:
    """Seed ``env`` with the run's ``seed`` where it can be seeded (see the module docstring)."""
    if isinstance(env, ExtendedEnvironment):
        env.seed(seed)
    elif callable(getattr(env, "seed", None)):
        env.seed(env_seed(seed))


def env_summary(env: Any) -> dict[str, Any]:
    """``env.summary()``, or an empty dict for an environment without one."""
    summary = getattr(env, "summary", None)
    return dict(summary()) if callable(summary) else {}


def is_adaptable(env_class: type) -> bool:
    """Whether ``env_class`` has Definition 11's ``outcome`` and ``train_sim``."""
    return all(callable(getattr(env_class, name, None)) for name in ("outcome", "train_sim"))


class ExtendedEnvironment(ABC):
    """Base of extended environments (see the module docstring)."""

    n_actions: ClassVar[int]
    n_obs: ClassVar[ObsSpec]
    # Set after each step by environments with episodes (see the module docstring).
    episode_end: EpisodeEnd | None = None

    def __init__(self, A: type[Agent]) -> None:
        self.A = A

    def seed(self, seed: int | None) -> None:
        """Reseed ``self.np_random``; called before :meth:`start`.

        The run's seed also seeds its agents, so the environment's stream is keyed apart
        (``ENV_SPAWN_KEY``): otherwise its draws and the agents' would be the same numbers.
        """
        sequence = np.random.SeedSequence(seed, spawn_key=(ENV_SPAWN_KEY,))
        self._np_random = np.random.default_rng(sequence)

    @property
    def np_random(self) -> np.random.Generator:
        if getattr(self, "_np_random", None) is None:
            self.seed(None)
        return self._np_random

    def summary(self) -> dict[str, Any]:
        """Environment-side statistics of the run so far (empty unless a subclass adds some)."""
        return {}

    @abstractmethod
    def start(self) -> Obs:
        """The initial observation."""

    @abstractmethod
    def step(self, action: int) -> tuple[float, Obs]:
        """Reward and next observation after the true agent's ``action``."""


class AdaptableEnvironment(ExtendedEnvironment):
    """An extended environment adaptable with Gymnasium (Definition 11)."""

    @abstractmethod
    def outcome(self, action: int) -> tuple[int, Obs]:
        """Reward in {-1, 0, 1} and next observation; may query ``self.sim.act`` only."""

    @abstractmethod
    def train_sim(self, action: int, reward: float, obs: Obs) -> None:
        """Train ``self.sim`` after the step, using ``reward`` as the step's reward."""

    def step(self, action: int) -> tuple[float, Obs]:
        reward, obs = self.outcome(action)
        self.train_sim(action, reward, obs)
        return reward, obs


def obs_key(obs: Obs) -> Any:
    """A hashable stand-in for an observation (for caches keyed by observation)."""
    if isinstance(obs, np.ndarray):
        return (obs.dtype.str, obs.shape, obs.tobytes())
    return obs


@contextmanager
def global_numpy_state_kept() -> Iterator[None]:
    """Restore NumPy's global generator on leaving, whatever the code inside did to it."""
    state = np.random.get_state()
    try:
        yield
    finally:
        np.random.set_state(state)


def check_step(result: Any, source: str) -> tuple[Any, Obs]:
    """``result`` of ``step`` as ``(reward, obs)``, unchecked inside; a UserError if not a pair."""
    if type(result) is not tuple or len(result) != 2:
        raise UserError(f"{source} returned {result!r}: expected a pair (reward, observation)")
    return result


def check_episode_end(end: Any, n_obs: ObsSpec, source: str) -> EpisodeEnd:
    """``end`` with its final observation checked; a UserError if it is not an episode end."""
    if (
        not isinstance(end, EpisodeEnd)
        or not isinstance(end.terminated, bool)
        or not isinstance(end.truncated, bool)
        or not (end.terminated or end.truncated)
    ):
        raise UserError(
            f"{source} set episode_end to {end!r}: expected None or an EpisodeEnd with bool "
            "flags, at least one of them True"
        )
    return EpisodeEnd(check_obs(end.final_obs, n_obs, source), end.terminated, end.truncated)


def check_env_class(value: Any) -> type:
    """``value`` if it is an extended environment class, else a UserError saying what it lacks."""
    missing = [
        name
        for name in ("n_actions", "n_obs", "start", "step")
        if not inspect.isclass(value) or not hasattr(value, name)
    ]
    if missing:
        raise UserError(
            f"{value!r} is not an extended environment class: it lacks {', '.join(missing)} "
            "(expected n_actions, n_obs, __init__(self, A), start() and step(action))"
        )
    check_sizes(value.n_actions, value.n_obs)
    return value


def run_environment(
    env_class: type,
    agent_class: type,
    num_steps: int,
    seed: int | None = None,
    progress: bool = False,
    **agent_hyperparams: Any,
) -> dict[str, Any]:
    """Run the true agent for ``num_steps`` steps.

    :param env_class: an extended environment class (:class:`ExtendedEnvironment` or any class
        of the paper's API).
    :param agent_class: an unbound agent class (bound here to the environment's sizes, the seed
        and ``agent_hyperparams``), or an already bound one (used as it is); an :class:`Agent`
        or any class with ``act`` and ``train``.
    :return: ``total_reward``, ``reward_per_step``, ``num_steps``, ``seed``, ``rewards`` (the
        reward of each step, float64) and ``env_summary`` (the environment's ``summary()``).
    """
    check.count("num_steps", num_steps)
    check_env_class(env_class)
    seed = fresh_seed() if seed is None else check_seed(seed)
    if is_bound(agent_class):
        if agent_hyperparams:
            raise TypeError("hyperparameters given for an already bound agent class")
        A = agent_class
    else:
        A = bind_agent(agent_class, env_class.n_actions, env_class.n_obs, seed, **agent_hyperparams)
    n_actions, n_obs = env_class.n_actions, env_class.n_obs
    discrete = not isinstance(n_obs, spaces.Box)
    acted, stepped = f"{A.__name__}.act", f"{env_class.__name__}.step"
    rewards_so_far: list[float] = []
    # Each check below is a fast test inline, then the full rule (extended_envs.checks).
    with global_numpy_state_kept():
        agent = A()
        env = env_class(A)
        seed_env(env, seed)
        obs = check_obs(env.start(), n_obs, f"{env_class.__name__}.start")
        steps = tqdm(range(num_steps), desc=env_class.__name__) if progress else range(num_steps)
        for _ in steps:
            action = agent.act(obs)
            if type(action) is not int or not 0 <= action < n_actions:
                action = check_action(action, n_actions, acted)
            result = env.step(action)
            if type(result) is not tuple or len(result) != 2:
                check_step(result, stepped)
            reward, next_obs = result
            if type(reward) is not int and (type(reward) is not float or reward - reward != 0):
                reward = check_reward(reward, stepped)
            if not discrete or type(next_obs) is not int or not 0 <= next_obs < n_obs:
                next_obs = check_obs(next_obs, n_obs, stepped)
            end = getattr(env, "episode_end", None)
            if end is not None:
                end = check_episode_end(end, n_obs, stepped)
            train_agent(agent, obs, action, reward, next_obs, end)
            rewards_so_far.append(reward)
            obs = next_obs
    rewards = np.array(rewards_so_far, dtype=np.float64)
    total = float(rewards.sum())
    return {
        "total_reward": total,
        "reward_per_step": total / num_steps,
        "num_steps": num_steps,
        "seed": seed,
        "rewards": rewards,
        "env_summary": env_summary(env),
    }
