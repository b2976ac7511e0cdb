"""An in-process SB3 ``VecEnv`` that steps the games of all its SafeLife envs in one batch.

Stepping 16 SafeLife envs one by one spends most of the time in per-call overhead: each board
goes through the Numba kernels and the observation code on its own. :class:`BatchedSafeLifeVecEnv`
keeps every env's full wrapper chain (movement bonus, exit bonus, impact penalty, curriculum,
``Monitor``, ...) but plays the games underneath as one batch: the actions of all envs, the board
and goal updates, the scoring and the observations each take one call for the whole batch. Each
env's :class:`~safelife_rl.envs.env.SafeLifeEnv` still resets itself (its own seeded level stream and
game random generator), so every env plays exactly the episodes it would play on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from safelife_rl.engine.numba_batch import SlotBatch
from safelife_rl.envs.env import SafeLifeEnv


class BatchSlot(gym.Wrapper):
    """Sits directly on a :class:`SafeLifeEnv` whose game a :class:`BatchedSafeLifeVecEnv`
    steps in its batch. ``reset`` is the env's own; ``step`` returns what the batch computed
    for this env, with the env's episode bookkeeping (``info``, truncation, side effects) done
    as :meth:`SafeLifeEnv.step` does it."""

    def __init__(self, env: gym.Env):
        if not isinstance(env, SafeLifeEnv):
            name = env.spec.id if env.spec else env
            raise TypeError(
                f"vec_env=batched steps SafeLife games together; {name} is not a SafeLife env "
                "(use vec_env=dummy or subproc)"
            )
        super().__init__(env)
        self.needs_adoption = False
        self._result: tuple[int, np.ndarray, float, bool] | None = None

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        # Adopted at the next batch step, after the wrappers above have finished resetting
        # (the exit curriculum sets the new game's required points).
        self.needs_adoption = True
        self._result = None
        return obs, info

    def deliver(self, action: int, obs: np.ndarray, reward: float, done: bool) -> None:
        """Hand over the batch's result for this env's next ``step(action)``."""
        if self._result is not None:
            raise RuntimeError("a wrapper skipped a step of the env: use vec_env=dummy")
        self._result = (action, obs, reward, done)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._result is None:
            raise RuntimeError(
                "the env was stepped outside its batch (a wrapper stepping twice per step?): "
                "use vec_env=dummy"
            )
        batch_action, obs, reward, done = self._result
        self._result = None
        if int(action) != batch_action:
            raise RuntimeError(
                f"a wrapper changed action {batch_action} into {action}; the batch cannot "
                "follow wrappers that change actions: use vec_env=dummy"
            )
        env: SafeLifeEnv = self.env  # type: ignore[assignment]
        return obs, *env.record_step(reward, done)


def _slot(env: gym.Env) -> BatchSlot:
    while not isinstance(env, BatchSlot):
        if not isinstance(env, gym.Wrapper):
            raise TypeError("each env of a BatchedSafeLifeVecEnv needs a BatchSlot")
        env = env.env
    return env


class BatchedSafeLifeVecEnv(DummyVecEnv):
    """Like SB3's ``DummyVecEnv`` (in this process, with each env's full wrapper chain) but the
    SafeLife games of all envs step as one batch.

    :param env_fns: each builds one env whose wrapper chain has a :class:`BatchSlot` directly
        on its :class:`~safelife_rl.envs.env.SafeLifeEnv`; all must share view and channels.
        Wrappers above the slot must step their env exactly once per step with the action
        they get.
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]]):
        super().__init__(env_fns)
        self.slots = [_slot(env) for env in self.envs]
        first: SafeLifeEnv = self.slots[0].env  # type: ignore[assignment]
        self._view = (first.view_shape, first.channels, first.remove_white_goals)
        for slot in self.slots[1:]:
            other = slot.env
            if (other.view_shape, other.channels, other.remove_white_goals) != self._view:
                raise ValueError("the envs of a batch must share view_shape and channels")
        shapes = {level.shape for slot in self.slots for level in slot.env.levels}
        if len(shapes) > 1:  # fixed level lists; procedural levels are checked as they come
            raise ValueError(
                f"vec_env=batched plays all boards in one array, but the levels have shapes "
                f"{sorted(shapes)}; use vec_env=dummy"
            )
        self.batch = SlotBatch(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        actions = np.asarray(self.actions, np.int64).reshape(self.num_envs)
        for i, slot in enumerate(self.slots):
            if slot.needs_adoption:
                self.batch.adopt(i, slot.env.game)
                slot.needs_adoption = False
            game = slot.env.game
            if not game.active[0, 0] or game.num_steps >= slot.env.time_limit:
                raise RuntimeError("the episode has ended; call reset()")
        rewards, dones = self.batch.step(actions)
        observations = self.batch.observe(*self._view)
        for i, slot in enumerate(self.slots):
            slot.deliver(int(actions[i]), observations[i], float(rewards[i, 0]),
                         bool(dones[i, 0]))

        obs_out = np.empty((self.num_envs, *self.observation_space.shape),
                           self.observation_space.dtype)
        infos = []
        for i, env in enumerate(self.envs):
            obs, self.buf_rews[i], terminated, truncated, info = env.step(actions[i])
            self.buf_dones[i] = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[i]:
                info["terminal_observation"] = obs
                obs, self.reset_infos[i] = env.reset()
            obs_out[i] = obs
            infos.append(info)
        return obs_out, self.buf_rews.copy(), self.buf_dones.copy(), infos
