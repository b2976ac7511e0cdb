"""Any extended environment as a :class:`gymnasium.Env`, given the agent class it simulates.

The environment's simulated copies are instances of ``agent_class`` (bound to the
environment's sizes, the seed and ``agent_hyperparams``); whoever drives the Gymnasium env (an
SB3 ``learn()``, a person) plays the true agent. An extended environment is one continuing
interaction: ``reset(seed=...)`` (or the first reset) starts a new one, and a later ``reset()``
without a seed continues the current one, so episode limits (``TimeLimit``) only cut it into
windows. Actions are ``Discrete(n_actions)``; observations ``Discrete(n_obs)`` or the
environment's ``Box``. Actions, observations and rewards are checked as in
:func:`~extended_envs.core.run_environment` (a bad one is a UserError naming who gave it); the
simulated agents' use of NumPy's global generator is not undone per step (that costs about
0.1 ms), so they must keep the contract and leave it alone, as the library's agents do.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from extended_envs.checks import check_action, check_obs, check_reward
from extended_envs.core import (
    Obs,
    bind_agent,
    check_agent_class,
    check_env_class,
    check_step,
    resolve_hyperparams,
    seed_env,
)
from extended_envs.reality_check import reality_check


class ExtendedEnvGym(gym.Env):
    """Gymnasium view of ``env_class`` whose simulations are ``agent_class`` instances.

    :param use_reality_check: simulate ``reality_check(agent_class)`` instead.
    :param agent_hyperparams: the agent's; an unknown name raises
        :class:`~safety_rl_common.errors.UnknownKeywords` (a ``TypeError``) here, not at reset.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        env_class: type,
        agent_class: type,
        use_reality_check: bool = False,
        **agent_hyperparams: Any,
    ) -> None:
        self.env_class = check_env_class(env_class)
        self.base_agent_class = check_agent_class(agent_class)
        self.use_reality_check = use_reality_check
        self.agent_class = reality_check(agent_class) if use_reality_check else agent_class
        # an unknown name is refused when the env is made (a TypeError), not at its reset
        resolve_hyperparams(self.agent_class, agent_hyperparams)
        self.agent_hyperparams = agent_hyperparams
        n_obs = env_class.n_obs
        self.observation_space = n_obs if isinstance(n_obs, spaces.Box) else spaces.Discrete(n_obs)
        self.action_space = spaces.Discrete(env_class.n_actions)
        self.env: Any = None
        self.obs: Obs = None
        self.run_seed: int | None = None  # of the current interaction
        self.actions: list[int] = []  # taken in it, to rebuild it when unpickled

    def init_kwargs(self) -> dict[str, Any]:
        """The arguments that construct this adapter again (for pickling)."""
        return {
            "env_class": self.env_class,
            "agent_class": self.base_agent_class,
            "use_reality_check": self.use_reality_check,
            **self.agent_hyperparams,
        }

    def __getstate__(self) -> dict[str, Any]:
        kept = ("_np_random", "_np_random_seed", "spec", "run_seed", "actions")
        return {"init_kwargs": self.init_kwargs(), **{k: getattr(self, k, None) for k in kept}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(**state.pop("init_kwargs"))  # type: ignore[misc]
        run_seed, actions = state.pop("run_seed"), state.pop("actions")
        vars(self).update(state)
        if run_seed is not None:
            self.begin(run_seed)
            for action in actions:
                self.step(action)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        if self.env is None or seed is not None:
            self.begin(int(self.np_random.integers(2**31)))
        return self.obs, {}

    def begin(self, run_seed: int) -> None:
        """Start a new interaction whose environment and agents are seeded by ``run_seed``."""
        A = bind_agent(
            self.agent_class,
            self.env_class.n_actions,
            self.env_class.n_obs,
            run_seed,
            **self.agent_hyperparams,
        )
        self.env = self.env_class(A)
        seed_env(self.env, run_seed)
        self.run_seed, self.actions = run_seed, []
        self.obs = check_obs(self.env.start(), self.env_class.n_obs, self.source("start"))

    def source(self, method: str) -> str:
        return f"{self.env_class.__name__}.{method}"

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self.env is None:
            raise RuntimeError("call reset() before step()")
        action = check_action(action, self.env_class.n_actions, "the Gymnasium agent")
        reward, obs = check_step(self.env.step(action), self.source("step"))
        self.actions.append(action)
        reward = check_reward(reward, self.source("step"))
        self.obs = check_obs(obs, self.env_class.n_obs, self.source("step"))
        return self.obs, reward, False, False, {}
