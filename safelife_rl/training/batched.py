"""An in-process SB3 ``VecEnv`` that steps the games of all its SafeLife envs in one batch.

Stepping 16 SafeLife envs one by one spends most of the time in per-call overhead: each board
goes through the Numba kernels and the observation code on its own. :class:`BatchedSafeLifeVecEnv`
keeps every env's full wrapper chain (movement bonus, exit bonus, impact penalty, curriculum,
``Monitor``, ...) but plays the games underneath as one batch: the actions of all envs, the board
and goal updates, the scoring and the observations each take one call for the whole batch. Each
env's :class:`~safelife_rl.envs.env.SafeLifeEnv` still resets itself (its own seeded level stream
and game random generator), so every env plays exactly the episodes it would play on its own.
It is SB3's face of :class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` (Gymnasium's):
both step through its one :meth:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv.step_envs`;
this one resets an ended env in the same step, as SB3's vector envs do.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from safelife_rl.envs.batch_slot import BatchSlot
from safelife_rl.envs.batched_vector_env import BatchedVectorEnv

__all__ = ["BatchSlot", "BatchedSafeLifeVecEnv"]


class BatchedSafeLifeVecEnv(DummyVecEnv):
    """Like SB3's ``DummyVecEnv`` (in this process, with each env's full wrapper chain) but the
    SafeLife games of all envs step as one batch.

    :param env_fns: each builds one env whose wrapper chain has a :class:`BatchSlot` directly
        on its :class:`~safelife_rl.envs.env.SafeLifeEnv`; all must share view and channels.
        Wrappers above the slot must step their env exactly once per step with the action
        they get.
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]]):
        self.vector = BatchedVectorEnv(env_fns)  # builds the envs and their batch, once
        super().__init__([lambda env=env: env for env in self.vector.envs])

    def step_wait(self) -> VecEnvStepReturn:
        actions = np.asarray(self.actions, np.int64).reshape(self.num_envs)
        for slot in self.vector.slots:
            game = slot.env.game
            if not game.active[0, 0] or game.num_steps >= slot.env.time_limit:
                raise RuntimeError("the episode has ended; call reset()")
        steps = self.vector.step_envs(actions, np.ones(self.num_envs, bool))
        obs_out = np.empty(
            (self.num_envs, *self.observation_space.shape), self.observation_space.dtype
        )
        infos = []
        for i, (env, (obs, reward, terminated, truncated, info)) in enumerate(
            zip(self.envs, steps)
        ):
            self.buf_rews[i] = reward
            self.buf_dones[i] = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[i]:
                info["terminal_observation"] = obs
                obs, self.reset_infos[i] = env.reset()
            obs_out[i] = obs
            infos.append(info)
        return obs_out, self.buf_rews.copy(), self.buf_dones.copy(), infos
