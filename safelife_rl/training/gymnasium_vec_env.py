"""SB3's ``VecEnv`` over a Gymnasium NumPy ``VectorEnv``: the one NumPy adapter.

Gymnasium's ``VectorEnv`` is the env API; SB3's algorithms take a ``VecEnv``. A vector env whose
autoreset mode is ``SAME_STEP`` (an ended env is reset in the step that ended it, its last
observation and info under ``final_obs`` and ``final_info``) steps as SB3's vector envs do, so
:class:`GymnasiumVecEnv` only translates: per-env info dicts with ``terminal_observation`` and
``TimeLimit.truncated``, the reset infos in ``reset_infos``, ``float32`` rewards, SB3's seeding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn


class GymnasiumVecEnv(VecEnv):
    """SB3's ``VecEnv`` over ``vector``, which resets ended envs in the same step and holds its
    envs in this process (``vector.envs``, as ``SyncVectorEnv`` and
    :class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` do): ``get_attr``,
    ``env_method`` and ``env_is_wrapped`` (SB3's ``evaluate_policy`` looks for ``Monitor``)
    reach each env's wrapper chain.

    :param vector: a NumPy ``VectorEnv`` with ``autoreset_mode`` ``SAME_STEP``.
    """

    def __init__(self, vector: VectorEnv):
        mode = vector.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"GymnasiumVecEnv needs autoreset_mode=SAME_STEP, got {mode}")
        self.vector = vector
        self.envs: list[gym.Env] = list(vector.envs)  # type: ignore[attr-defined]
        super().__init__(
            vector.num_envs, vector.single_observation_space, vector.single_action_space
        )
        self._actions: Any = None

    def reset(self) -> VecEnvObs:
        options = self._options[0]
        if any(o != options for o in self._options):
            raise ValueError("a Gymnasium vector env resets all envs with the same options")
        obs, infos = self.vector.reset(seed=list(self._seeds), options=options or None)
        self.reset_infos = unbatch_infos(infos, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminated, truncated, vector_infos = self.vector.step(self._actions)
        infos = unbatch_infos(vector_infos, self.num_envs)
        dones = terminated | truncated
        for i, (info, done) in enumerate(zip(infos, dones.tolist())):
            if done:
                terminal_obs = info.pop("final_obs")
                self.reset_infos[i] = info
                info = infos[i] = info.pop("final_info")
                info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                info["terminal_observation"] = terminal_obs
            else:
                info["TimeLimit.truncated"] = False
        return obs, np.asarray(rewards, np.float32), dones, infos

    def close(self) -> None:
        self.vector.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return list(self.vector.render())  # type: ignore[arg-type]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [env.get_wrapper_attr(attr_name) for env in self._targets(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for env in self._targets(indices):
            setattr(env, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:  # fmt: skip
        return [
            env.get_wrapper_attr(method_name)(*method_args, **method_kwargs)
            for env in self._targets(indices)
        ]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        return [is_wrapped(env, wrapper_class) for env in self._targets(indices)]

    def _targets(self, indices: VecEnvIndices) -> list[gym.Env]:
        return [self.envs[i] for i in self._get_indices(indices)]


def unbatch_infos(infos: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's batched info dict (values stacked, ``_key`` marks the envs that have ``key``)
    as one dict per env, scalars back as Python scalars (Gymnasium stacks ``int``, ``float`` and
    ``bool`` into NumPy arrays)."""
    per_env: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        has = infos.get(f"_{key}")
        if isinstance(value, dict):
            values: Sequence[Any] = unbatch_infos(value, num_envs)
        elif value.dtype != object and value.ndim == 1:
            values = value.tolist()
        else:
            values = value
        for info, env_value, present in zip(
            per_env, values, [True] * num_envs if has is None else has.tolist()
        ):
            if present:
                info[key] = env_value
    return per_env
