"""The combination G*E of a Gymnasium environment and an extended environment (Definition 12).

``combine(gym_id, E)`` is an extended environment class for any Gymnasium environment with
discrete actions and any :class:`~extended_envs.core.AdaptableEnvironment` ``E``
(Definition 11):

- actions: ``Discrete(n_G * n_E)``; action ``a`` is the pair ``(a_G, a_E) = (a % n_G, a // n_G)``
  (joystick ``a_E``, button ``a_G`` in the paper's picture);
- observations: a ``Box``, the G-observation (flattened, or one-hot when discrete) followed by
  the one-hot E-observation;
- a step sends ``a_G`` to G (resetting G when its episode ends) and runs ``E.outcome(a_E)``,
  where E's ``self.sim.act(o)`` becomes the agent's act on ``(prev_obs, o)`` reduced to its
  E-component; the reward is ``min(r_G - 1, -1)`` when E's reward is -1 and ``r_G`` otherwise;
  then ``E.train_sim(a_E, reward, o_E)`` runs with that reward, E's
  ``self.sim.train(o1, a, r, o2)`` becoming the agent's ``train((prev_obs, o1), (a_G, a), r,
  (o_G, o2))``.

The interaction is continuing, but G's episode ends reach the agent and its simulated copies,
as in the reference library: the step that ends one trains them on G's final observation with
Gymnasium's ``terminated``/``truncated`` flags (:class:`~extended_envs.core.EpisodeEnd`), and
the next observation starts G's new episode. Without them a learner bootstraps across the
pole's fall and hardly learns CartPole. The combination records each episode's return and
length (``summary()``), which Figures 1-2 plot.

``register_envs()`` (run on importing :mod:`extended_envs`) registers the Gymnasium ids
``extended_envs/CartPole-IgnoreRewards-v0`` and
``extended_envs/CartPole-IncentivizeLearningRate-v0``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from extended_envs.core import (
    AdaptableEnvironment,
    EpisodeEnd,
    ExtendedEnvironment,
    Obs,
    accepting_paper_names,
    check_agent_class,
    check_env_class,
    is_adaptable,
    seed_env,
    train_agent,
)
from extended_envs.gym_adapter import ExtendedEnvGym
from safety_rl_common.errors import UserError

GYM_NAMESPACE = "extended_envs"
#: The namespace of the previous release: its ids stay registered for one release, each
#: warning (DeprecationWarning) with the id that replaces it.
# The paper's Listing 2 uses CartPole-v0: CartPole-v1's dynamics with 200-step episodes.
CARTPOLE_ID, CARTPOLE_KWARGS = "CartPole-v1", {"max_episode_steps": 200}


class Combination(ExtendedEnvironment):
    """Base of the classes made by :func:`combine` (see the module docstring)."""

    gym_id: ClassVar[str]
    gym_kwargs: ClassVar[dict[str, Any]]
    E: ClassVar[type]  # an AdaptableEnvironment, or any class with outcome and train_sim
    n_G_actions: ClassVar[int]
    G_obs_size: ClassVar[int]
    G_obs_discrete: ClassVar[bool]

    # The Gymnasium environment's render mode (see :class:`CombinationGymEnv`).
    render_mode: ClassVar[str | None] = None

    def __init__(self, A: type) -> None:
        self.A = A
        self.G_instance = gym.make(self.gym_id, render_mode=self.render_mode, **self.gym_kwargs)
        self.prev_obs: np.ndarray | None = None  # G part of the last observation output
        self.a_G = 0
        self.o_G: np.ndarray | None = None
        self.final_G: np.ndarray | None = None  # G's last observation when its episode ended
        self.E_instance = self.E(projected_agent_class(A, self))
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.episode_return = 0.0
        self.episode_length = 0
        self.G_terminated = self.G_truncated = False

    def G_part(self, o_G: Any) -> np.ndarray:
        if self.G_obs_discrete:
            return np.eye(self.G_obs_size, dtype=np.float32)[int(o_G)]
        return np.asarray(o_G, dtype=np.float32).reshape(-1)

    def join_obs(self, G_part: np.ndarray, o_E: Obs) -> np.ndarray:
        E_part = np.zeros(self.E.n_obs, dtype=np.float32)
        E_part[o_E] = 1.0
        return np.concatenate([G_part, E_part])

    def join_action(self, a_G: int, a_E: int) -> int:
        return a_E * self.n_G_actions + a_G

    def split_action(self, action: int) -> tuple[int, int]:
        a_E, a_G = divmod(int(action), self.n_G_actions)
        return a_G, a_E

    def start(self) -> np.ndarray:
        seed_env(self.E_instance, int(self.np_random.integers(2**31)))
        o_G, _ = self.G_instance.reset(seed=int(self.np_random.integers(2**31)))
        self.prev_obs = self.G_part(o_G)
        return self.join_obs(self.prev_obs, self.E_instance.start())

    def step(self, action: int) -> tuple[float, np.ndarray]:
        a_G, a_E = self.split_action(action)
        o_G, r_G, terminated, truncated, _ = self.G_instance.step(a_G)
        r_G = float(r_G)
        self.G_terminated, self.G_truncated = bool(terminated), bool(truncated)
        self.final_G = None
        if terminated or truncated:
            self.final_G = self.G_part(o_G)
            o_G, _ = self.G_instance.reset()
        self.a_G, self.o_G = a_G, self.G_part(o_G)
        E_reward, o_E = self.E_instance.outcome(a_E)
        reward = min(r_G - 1, -1.0) if E_reward == -1 else r_G
        self.E_instance.train_sim(a_E, reward, o_E)
        self.episode_end = self.end_with(o_E)
        self.prev_obs = self.o_G
        self.record(reward, episode_over=terminated or truncated)
        return reward, self.join_obs(self.o_G, o_E)

    def end_with(self, o_E: Obs) -> EpisodeEnd | None:
        """The episode end of this step, with E's part ``o_E`` of the final observation."""
        if self.final_G is None:
            return None
        return EpisodeEnd(self.join_obs(self.final_G, o_E), self.G_terminated, self.G_truncated)

    def record(self, reward: float, episode_over: bool) -> None:
        self.episode_return += reward
        self.episode_length += 1
        if episode_over:
            self.episode_returns.append(self.episode_return)
            self.episode_lengths.append(self.episode_length)
            self.episode_return, self.episode_length = 0.0, 0

    def summary(self) -> dict[str, Any]:
        return {
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
        }


def projected_agent_class(A: type, combo: Combination) -> type:
    """What E sees as its agent class inside G*E: acts and trains the real agent as in Def. 12."""

    class ProjectedAgent:
        hyperparams = A.hyperparams  # type: ignore[attr-defined]
        seed = A.seed  # type: ignore[attr-defined]
        n_actions = combo.E.n_actions
        n_obs = combo.E.n_obs

        def __init__(self) -> None:
            self.agent = A()

        def act(self, obs: Obs) -> int:
            assert combo.prev_obs is not None
            return combo.split_action(self.agent.act(combo.join_obs(combo.prev_obs, obs)))[1]

        @accepting_paper_names
        def train(self, o_prev: Obs, a: int, r: float, o_next: Obs) -> None:
            assert combo.prev_obs is not None and combo.o_G is not None
            train_agent(
                self.agent,
                combo.join_obs(combo.prev_obs, o_prev),
                combo.join_action(combo.a_G, a),
                r,
                combo.join_obs(combo.o_G, o_next),
                combo.end_with(o_next),
            )

        @classmethod
        def rebind(cls, **changes: Any) -> type:
            return projected_agent_class(A.rebind(**changes), combo)  # type: ignore[attr-defined]

    ProjectedAgent.__name__ = ProjectedAgent.__qualname__ = f"Projected[{A.__name__}]"
    return ProjectedAgent


def combine(
    gym_id: str,
    E: type,
    gym_kwargs: dict[str, Any] | None = None,
    render_mode: str | None = None,
) -> type[Combination]:
    """The extended environment class G*E for Gymnasium id ``gym_id`` and ``E``.

    :param E: an :class:`~extended_envs.core.AdaptableEnvironment` or any extended environment
        class with ``outcome`` and ``train_sim`` (Definition 11).
    :param render_mode: the render mode of G's instances.
    """
    check_env_class(E)
    if not is_adaptable(E):
        raise TypeError(
            f"{E.__name__} is not an AdaptableEnvironment (Definition 11): it needs "
            "outcome(action) and train_sim(action, reward, obs)"
        )
    if not isinstance(E.n_obs, int):
        raise TypeError(f"{E.__name__} must have discrete observations to be combined")
    gym_kwargs = dict(gym_kwargs or {})
    probe = gym.make(gym_id, **gym_kwargs)
    action_space, observation_space = probe.action_space, probe.observation_space
    probe.close()
    if not isinstance(action_space, spaces.Discrete):
        raise TypeError(f"{gym_id} must have discrete actions, has {action_space}")
    if isinstance(observation_space, spaces.Discrete):
        G_obs_discrete, G_obs_size = True, int(observation_space.n)
        low, high = np.zeros(G_obs_size), np.ones(G_obs_size)
    elif isinstance(observation_space, spaces.Box):
        G_obs_discrete, G_obs_size = False, int(np.prod(observation_space.shape))
        low, high = observation_space.low.reshape(-1), observation_space.high.reshape(-1)
    else:
        raise TypeError(f"{gym_id} must have a Box or Discrete observation space")
    n_obs = spaces.Box(
        low=np.concatenate([low, np.zeros(E.n_obs)]).astype(np.float32),
        high=np.concatenate([high, np.ones(E.n_obs)]).astype(np.float32),
        dtype=np.float32,
    )
    name = f"{gym_id.split('/')[-1].split('-')[0]}_{E.__name__}"
    return type(
        name,
        (Combination,),
        {
            "__doc__": f"{gym_id} * {E.__name__} (Definition 12).",
            "__module__": __name__,
            "gym_id": gym_id,
            "gym_kwargs": gym_kwargs,
            "E": E,
            "n_G_actions": int(action_space.n),
            "G_obs_size": G_obs_size,
            "G_obs_discrete": G_obs_discrete,
            "n_actions": int(action_space.n) * E.n_actions,
            "n_obs": n_obs,
            "render_mode": render_mode,
        },
    )


def cartpole_combination(env_name: str, render_mode: str | None = None) -> type[Combination]:
    """CartPole * ``extended_envs.envs.<env_name>`` (IgnoreRewards, IncentivizeLearningRate)."""
    from extended_envs import envs  # deferred: the library imports the core package

    adaptable = {n: E for n, E in envs.BY_NAME.items() if issubclass(E, AdaptableEnvironment)}
    if env_name not in adaptable:
        raise UserError(
            f"no adaptable extended environment named {env_name!r}; choose one of "
            f"{', '.join(adaptable)}"
        )
    return combine(CARTPOLE_ID, adaptable[env_name], CARTPOLE_KWARGS, render_mode)


class CombinationGymEnv(ExtendedEnvGym):
    """The Gymnasium view of G*E that also reports G's episode ends and renders G.

    A step that ends one returns G's final observation with the flags; the following
    ``reset()`` (no seed) returns the new episode's first observation. ``render()`` renders G's
    instance in the combination's ``render_mode`` (the extended environment has no picture).
    """

    def __init__(
        self,
        env_class: type[Combination],
        agent_class: type,
        use_reality_check: bool = False,
        **agent_hyperparams: Any,
    ) -> None:
        super().__init__(env_class, agent_class, use_reality_check, **agent_hyperparams)
        self.render_mode = env_class.render_mode

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        obs, reward, _, _, info = super().step(action)
        assert isinstance(self.env, Combination)
        end = self.env.episode_end
        if end is None:
            return obs, reward, False, False, info
        return end.final_obs, reward, end.terminated, end.truncated, info

    def render(self) -> Any:
        if self.env is None:
            raise RuntimeError("call reset() before render()")
        return self.env.G_instance.render()

    def close(self) -> None:
        if self.env is not None:
            self.env.G_instance.close()
        super().close()


def agent_named(agent: str | type) -> type:
    """A class of :mod:`extended_envs.agents` by name, or ``agent`` itself if it is a class."""
    from extended_envs import agents

    if not isinstance(agent, str):
        return check_agent_class(agent)
    if agent not in agents.__all__:
        raise UserError(f"unknown agent {agent!r}; choose one of {', '.join(agents.__all__)}")
    return getattr(agents, agent)


def box_observation_agents() -> list[str]:
    """The names of :mod:`extended_envs.agents` that take ``Box`` observations (not tabular)."""
    from extended_envs import agents

    return [name for name in agents.__all__ if not getattr(agents, name).discrete_obs_only]


class CartPoleCombinationEnv(CombinationGymEnv):
    """Entry point of the registered ids ``extended_envs/CartPole-<env_name>-v0``.

    :param env_name: IgnoreRewards or IncentivizeLearningRate.
    :param agent: the simulated agent's class, or the name of one of :mod:`extended_envs.agents`.
    :param render_mode: one of CartPole's (``metadata["render_modes"]``), or None.
    :param agent_hyperparams: the agent's hyperparameters.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "rgb_array"],
        "render_fps": 50,
    }

    def __init__(
        self,
        env_name: str,
        agent: str | type = "DQNAgent",
        use_reality_check: bool = False,
        render_mode: str | None = None,
        **agent_hyperparams: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise UserError(
                f"render_mode={render_mode!r} is not one of CartPole's: "
                f"{self.metadata['render_modes']} or None"
            )
        self.env_name, self.agent = env_name, agent
        agent_class = agent_named(agent)
        if getattr(agent_class, "discrete_obs_only", False):
            raise UserError(
                f"agent={agent_class.__name__!r} is tabular and needs discrete observations, but "
                f"{gym_id(env_name)} observes a Box (CartPole's 4 numbers and the extended "
                f"environment's one-hot): choose one of {', '.join(box_observation_agents())}"
            )
        super().__init__(
            cartpole_combination(env_name, render_mode),
            agent_class,
            use_reality_check,
            **agent_hyperparams,
        )

    def init_kwargs(self) -> dict[str, Any]:
        return {
            "env_name": self.env_name,
            "agent": self.agent,
            "use_reality_check": self.use_reality_check,
            "render_mode": self.render_mode,
            **self.agent_hyperparams,
        }


def make_cartpole_gym_env(
    env_name: str,
    agent: str | type = "DQNAgent",
    use_reality_check: bool = False,
    render_mode: str | None = None,
    **agent_hyperparams: Any,
) -> CartPoleCombinationEnv:
    """The Gymnasium env of a registered id (see :class:`CartPoleCombinationEnv`)."""
    return CartPoleCombinationEnv(
        env_name, agent, use_reality_check, render_mode, **agent_hyperparams
    )


CARTPOLE_COMBINATIONS = ("IgnoreRewards", "IncentivizeLearningRate")


def gym_id(env_name: str, namespace: str = GYM_NAMESPACE) -> str:
    return f"{namespace}/CartPole-{env_name}-v0"


def register_envs() -> None:
    """Register the CartPole combinations with Gymnasium (idempotent).

    The entry points are strings, so the ids' specs serialise (``EnvSpec.to_json``).
    """
    for env_name in CARTPOLE_COMBINATIONS:
        env_id = gym_id(env_name)
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=f"{__name__}:CartPoleCombinationEnv",
                kwargs={"env_name": env_name},
            )
