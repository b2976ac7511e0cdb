"""The wrapper through which a batch of SafeLife games steps one env's game.

:class:`BatchSlot` sits directly on a :class:`~safelife_rl.envs.env.SafeLifeEnv` whose game a
batch (:class:`~safelife_rl.engine.numba_batch.SlotBatch`) steps together with others: the
batch computes every game's step at once and hands each slot its result, and the env's wrappers
above the slot step as they would on the env alone. Used by the Gymnasium vector env
:class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` (SB3's ``vec_env=batched``
through :class:`~safelife_rl.training.gymnasium_vec_env.GymnasiumVecEnv`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from safelife_rl.envs.env import SafeLifeEnv


class BatchSlot(gym.Wrapper):
    """Sits directly on a :class:`SafeLifeEnv` whose game a batch steps. ``reset`` is the
    env's own; ``step`` returns what the batch computed for this env, with the env's episode
    bookkeeping (``info``, truncation, side effects) done as :meth:`SafeLifeEnv.step` does it.
    """

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


def slot_of(env: gym.Env) -> BatchSlot:
    """The :class:`BatchSlot` in ``env``'s wrapper chain."""
    while not isinstance(env, BatchSlot):
        if not isinstance(env, gym.Wrapper):
            raise TypeError("each env of a batch of SafeLife games needs a BatchSlot")
        env = env.env
    return env


def shared_view(slots: list[BatchSlot]) -> tuple[tuple[int, int], Any, bool]:
    """The observation settings (view shape, channels, white goals removed) of the slots'
    envs, which a batch observes in one call; a ValueError if they differ, or if fixed level
    lists hold boards of several shapes (procedural levels are checked as they come)."""
    first: SafeLifeEnv = slots[0].env  # type: ignore[assignment]
    view = (first.view_shape, first.channels, first.remove_white_goals)
    for slot in slots[1:]:
        other = slot.env
        if (other.view_shape, other.channels, other.remove_white_goals) != view:
            raise ValueError("the envs of a batch must share view_shape and channels")
    shapes = {level.shape for slot in slots for level in slot.env.levels}
    if len(shapes) > 1:
        raise ValueError(
            f"vec_env=batched plays all boards in one array, but the levels have shapes "
            f"{sorted(shapes)}; use vec_env=dummy"
        )
    return view
