"""Multi-agent envs as one SB3 ``VecEnv`` of agents, so that one policy plays every agent
(parameter sharing, as the original SafeLife trained its multi-agent levels).

Slot ``k * A + i`` of the vector env is agent ``i`` of env ``k``. An agent that finishes before
its env's episode ends reports ``done`` with its episode's totals; until the episode ends, its
slot sees an all-zero view, earns nothing and its actions are ignored. When the episode ends,
every slot is done (the finished agents' slots marked ``"dead_slot"``, with no episode) and
the env resets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from safelife_rl.envs.multi_agent_env import SafeLifeParallelEnv


class SharedPolicyVecEnv(VecEnv):
    """``len(env_fns) * A`` slots, one per agent of each multi-agent env.

    Per-agent infos carry the env's (``type``, ``reward``, ``success``, ``performance``, ...),
    ``agent`` (its id, e.g. ``agent_0``) and, when its episode ends, ``episode`` (SB3's
    ``{"r", "l", "t"}``) and ``terminal_observation``; the info of the env's episode end also
    carries the board's ``side_effects`` (once per env, on its first live agent's slot) when
    the env measures them.
    """

    def __init__(self, env_fns: Sequence[Callable[[], SafeLifeParallelEnv]]):
        self.envs = [fn() for fn in env_fns]
        first = self.envs[0]
        self.agents = list(first.possible_agents)
        if any(env.possible_agents != self.agents for env in self.envs):
            raise ValueError("the envs of a shared-policy vector env must have the same agents")
        agent = self.agents[0]
        super().__init__(
            len(self.envs) * len(self.agents),
            first.observation_space(agent),
            first.action_space(agent),
        )
        self.metadata = first.metadata
        self._observations = np.zeros((self.num_envs,) + self.observation_space.shape, np.uint8)
        self._start = time.time()
        self.actions = np.zeros(self.num_envs, np.int64)

    def _slot(self, env_index: int, agent: str) -> int:
        return env_index * len(self.agents) + self.agents.index(agent)

    def _reset_env(self, k: int, seed: int | None = None) -> None:
        options = self._options[k] if self._options[k] else None
        observations, infos = self.envs[k].reset(seed=seed, options=options)
        for agent in self.agents:
            slot = self._slot(k, agent)
            self._observations[slot] = observations[agent]
            self.reset_infos[slot] = infos[agent]

    def reset(self) -> np.ndarray:
        for k in range(len(self.envs)):
            self._reset_env(k, self._seeds[k * len(self.agents)])
        self._reset_seeds()
        self._reset_options()
        return self._observations.copy()

    def step_async(self, actions: np.ndarray) -> None:
        self.actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        rewards = np.zeros(self.num_envs, np.float32)
        dones = np.zeros(self.num_envs, bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for k, env in enumerate(self.envs):
            live = list(env.agents)
            actions = {agent: int(self.actions[self._slot(k, agent)]) for agent in live}
            observations, agent_rewards, terminations, truncations, agent_infos = env.step(actions)
            effects = None
            for agent in live:
                slot = self._slot(k, agent)
                info = dict(agent_infos[agent], agent=agent)
                effects = info.pop("side_effects", effects)
                self._observations[slot] = observations[agent]
                rewards[slot] = agent_rewards[agent]
                if terminations[agent] or truncations[agent]:
                    dones[slot] = True
                    info["TimeLimit.truncated"] = truncations[agent] and not terminations[agent]
                    info["terminal_observation"] = observations[agent].copy()
                    info["episode"] = {
                        "r": info["reward"],
                        "l": info["length"],
                        "t": round(time.time() - self._start, 6),
                    }
                    self._observations[slot] = 0
                infos[slot] = info
            if env.agents:
                continue
            if effects is not None:
                infos[self._slot(k, live[0])]["side_effects"] = effects
            for agent in self.agents:
                slot = self._slot(k, agent)
                if agent not in live:  # finished earlier: its zero-view stretch ends here
                    dones[slot] = True
                    infos[slot] = {
                        "dead_slot": True,
                        "agent": agent,
                        "terminal_observation": self._observations[slot].copy(),
                    }
            self._reset_env(k)
        return self._observations.copy(), rewards, dones, infos

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def _envs(self, indices: VecEnvIndices) -> list[SafeLifeParallelEnv]:
        """The envs of the given slots, each once."""
        slots = self._get_indices(indices)
        return [self.envs[k] for k in sorted({slot // len(self.agents) for slot in slots})]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(env, attr_name) for env in self._envs(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for env in self._envs(indices):
            setattr(env, attr_name, deepcopy(value))

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        return [
            getattr(env, method_name)(*method_args, **method_kwargs) for env in self._envs(indices)
        ]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [env.render() for env in self.envs]
