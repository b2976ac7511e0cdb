"""An in-process SB3 ``VecEnv`` that steps the games of all its SafeLife envs in one batch.

Stepping 16 SafeLife envs one by one spends most of the time in per-call overhead: each board
goes through the Numba kernels and the observation code on its own. :class:`BatchedSafeLifeVecEnv`
keeps every env's full wrapper chain (movement bonus, exit bonus, impact penalty, curriculum,
``Monitor``, ...) but plays the games underneath as one batch: the actions of all envs, the board
and goal updates, the scoring and the observations each take one call for the whole batch. Each
env's :class:`~safelife_rl.env.SafeLifeEnv` still resets itself (its own seeded level stream and
game random generator), so every env plays exactly the episodes it would play on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numba
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from .. import cells
from ..env import SafeLifeEnv
from ..game import SafeLifeGame
from ..observation import combined_cells
from ..physics import advance_board, execute_actions
from ..scoring import update_exits


@numba.njit(cache=True)
def _observe_kernel(combined, centers, shifts, out):
    n, bh, bw = combined.shape
    h, w = out.shape[1], out.shape[2]
    view = np.empty((h, w), np.uint32)
    for k in range(n):
        y0, x0 = centers[k, 0], centers[k, 1]
        for i in range(h):
            row = (i + y0 - h // 2) % bh
            for j in range(w):
                view[i, j] = combined[k, row, (j + x0 - w // 2) % bw]
        for y in range(bh):  # exits, in row-major order as agent_view draws them
            for x in range(bw):
                cell = combined[k, y, x]
                if (cell & (cells.EXIT | cells.AGENT)) == cells.EXIT:
                    dy = (y - y0 + bh // 2) % bh - bh // 2
                    dx = (x - x0 + bw // 2) % bw - bw // 2
                    view[min(max(dy + h // 2, 0), h - 1), min(max(dx + w // 2, 0), w - 1)] = cell
        for i in range(h):
            for j in range(w):
                for c in range(len(shifts)):
                    out[k, i, j, c] = (view[i, j] >> shifts[c]) & 1


def batch_observations(
    combined: np.ndarray,
    centers: np.ndarray,
    view_shape: tuple[int, int],
    channels: Sequence[int],
) -> np.ndarray:
    """``to_channels(agent_view(combined[k], centers[k], view_shape), channels)`` of every
    board ``k`` of ``combined`` (N, H, W) (see :mod:`safelife_rl.observation`), in one call."""
    out = np.empty((len(combined), *view_shape, len(channels)), np.uint8)
    _observe_kernel(np.ascontiguousarray(combined, np.uint32), np.ascontiguousarray(centers,
                    np.int64), np.asarray(channels, np.uint32), out)
    return out


class GameBatch:
    """The state of N single-board games in stacked arrays, stepped together.

    :meth:`adopt` takes over a freshly reset :class:`~safelife_rl.game.SafeLifeGame` of one
    board into slot ``i``: its state arrays become views of the batch's, so the game object
    (which the env, its wrappers, rendering and side-effect scoring read) always shows the
    current state. Each slot keeps its game's own random generator and step count, which a
    batched ``SafeLifeGame`` (one generator, one step count) cannot.
    """

    def __init__(self, size: int):
        self.size = size
        self.games: list[SafeLifeGame | None] = [None] * size
        self.boards: np.ndarray | None = None

    def _allocate(self, shape: tuple[int, int]) -> None:
        n = self.size
        self.boards = np.zeros((n, *shape), np.uint16)
        self.goals = np.zeros((n, *shape), np.uint16)
        self.agent_locs = np.zeros((n, 2), np.int64)
        self.spawn_prob = np.zeros(n, np.float64)
        self.points_table = np.zeros((n, 8, 9), np.float64)
        self.initial_counts = np.zeros((n, 8, 9), np.int64)
        self.required_points = np.zeros(n, np.float64)
        self.points = np.zeros(n, np.float64)
        self.can_exit = np.zeros(n, bool)
        self.active = np.zeros(n, bool)
        self.moving_goals = np.zeros(n, bool)

    def adopt(self, index: int, game: SafeLifeGame) -> None:
        """Put a one-board ``game`` into slot ``index`` (replacing the game there)."""
        if len(game) != 1:
            raise ValueError(f"a batch slot holds one board, got a game of {len(game)}")
        shape = game.boards.shape[1:]
        if self.boards is None:
            self._allocate(shape)
        elif shape != self.boards.shape[1:]:
            raise ValueError(
                f"vec_env=batched plays all boards in one array, but a level of shape {shape} "
                f"came after boards of shape {self.boards.shape[1:]}; use vec_env=dummy"
            )
        for name in ("boards", "goals", "agent_locs", "required_points", "points",
                     "can_exit", "active"):
            batch = getattr(self, name)
            batch[index] = getattr(game, name)[0]
            setattr(game, name, batch[index : index + 1])
        self.spawn_prob[index] = game.spawn_prob[0]
        self.points_table[index] = game.points_table[0]
        self.initial_counts[index] = game.initial_counts[0]
        goals = self.goals[index]
        self.moving_goals[index] = bool((goals & cells.SPAWNING).any()) or not np.array_equal(
            advance_board(goals, self.spawn_prob[index]), goals
        )
        self.games[index] = game

    def _advance(self, boards: np.ndarray, which: np.ndarray) -> None:
        """Advance ``boards[which]`` in place: boards without spawners in one call, each board
        with spawners on its own game's generator (drawing what the game alone would draw)."""
        spawning = (boards[which] & cells.SPAWNING).any(axis=(1, 2))
        plain, random = which[~spawning], which[spawning]
        if len(plain):
            boards[plain] = advance_board(boards[plain], self.spawn_prob[plain])
        for k in random:
            boards[k] = advance_board(boards[k], self.spawn_prob[k], self.games[k].rng)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step of every slot, as :meth:`SafeLifeGame.step` steps a game.

        :returns: rewards (float32, zero for inactive agents) and whether each agent is now
            inactive.
        """
        if any(game is None for game in self.games):
            raise RuntimeError("every slot needs a game before the batch steps")
        execute_actions(self.boards, self.agent_locs, actions)
        self._advance(self.boards, np.arange(self.size))
        self._advance(self.goals, np.flatnonzero(self.moving_goals))
        for game in self.games:
            game.num_steps += 1
        points, self.can_exit[:] = update_exits(
            self.boards, self.goals, self.agent_locs, self.points_table,
            self.initial_counts, self.required_points,
        )
        rewards = ((points - self.points) * self.active).astype(np.float32)
        self.points[:] = points
        present = self.boards[np.arange(self.size), self.agent_locs[:, 0], self.agent_locs[:, 1]]
        self.active &= (present & cells.AGENT) > 0
        return rewards, ~self.active

    def observe(
        self, view_shape: tuple[int, int], channels: Sequence[int], remove_white_goals: bool
    ) -> np.ndarray:
        """Every slot's observation, as :class:`SafeLifeEnv` observes its game."""
        combined = combined_cells(self.boards, self.goals, remove_white_goals)
        return batch_observations(combined, self.agent_locs, view_shape, channels)


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
        on its :class:`~safelife_rl.env.SafeLifeEnv`; all must share view and channels.
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
        self.batch = GameBatch(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        actions = np.asarray(self.actions, np.int64).reshape(self.num_envs)
        for i, slot in enumerate(self.slots):
            if slot.needs_adoption:
                self.batch.adopt(i, slot.env.game)
                slot.needs_adoption = False
            game = slot.env.game
            if not game.active[0] or game.num_steps >= slot.env.time_limit:
                raise RuntimeError("the episode has ended; call reset()")
        rewards, dones = self.batch.step(actions)
        observations = self.batch.observe(*self._view)
        for i, slot in enumerate(self.slots):
            slot.deliver(int(actions[i]), observations[i], float(rewards[i]), bool(dones[i]))

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
