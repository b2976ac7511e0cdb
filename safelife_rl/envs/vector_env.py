"""SafeLife as a Gymnasium ``VectorEnv`` whose games live on a torch device.

:class:`SafeLifeVectorEnv` plays ``num_envs`` SafeLife episodes as one :class:`.TorchGame`:
boards, observations, rewards and dones stay tensors on the device, finished envs restart in
the same step, and the training wrappers (:mod:`safelife_rl.envs.wrappers`) are applied in
batch by :mod:`.torch_wrappers`. Each env plays exactly the episodes a
:class:`~safelife_rl.envs.env.SafeLifeEnv` under those wrappers plays on the same levels with the
same actions (``tests/safelife/test_vector_env.py``), apart from the spawners' random numbers,
which come from the batch's torch generator.

The registered ids make it with ``gymnasium.make_vec``::

    envs = gymnasium.make_vec("safelife_rl/PruneStill-v1", num_envs=4096,
                              vectorization_mode="vector_entry_point", device="cuda",
                              bank={"size": 1000}, training_wrappers=WRAPPERS)

``training_wrappers`` is a wrapper config as in ``conf/wrappers/safelife.yaml`` (name ->
``{"_target_": ..., settings}``, innermost first, ``None`` skips one). What stays on the CPU:
drawing the levels of the envs that restart (a level list, a bank or a generator) and copying
them to the device, the earth mover's distances of the side-effect scores, and one
device-to-host sync per step to learn whether any env has finished.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from safelife_rl.common.errors import UserError
from safelife_rl.engine.levels import Level
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.engine.torch_observation import agent_views
from safelife_rl.engine.torch_side_effects import side_effect_scores
from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.torch_wrappers import RULES, BatchedRule

# Rough peak bytes a step takes per board cell (the board update's packed int64 neighbourhood
# sums, the observations' exit search, scoring) and per observed cell and channel; used only to
# refuse batches far too large for the device, with a margin for the caching allocator.
_BYTES_PER_CELL = 200
_BYTES_PER_VIEW_CELL = 48


def torch_device(device: torch.device | str) -> torch.device:
    """``device`` as a torch device that can hold tensors here, or a :class:`UserError`."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:
        raise UserError(f"unknown torch device {device!r}: {error}") from error
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as error:
        raise UserError(f"torch device {str(device)!r} is not available here: {error}") from error
    return device


def free_memory(device: torch.device) -> int | None:
    """Bytes free on ``device`` (the host's available memory for ``cpu``), or ``None`` if
    torch cannot tell."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type == "cpu" and hasattr(os, "sysconf"):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def bytes_per_env(board_shape: tuple[int, int], view_shape: tuple[int, int],
                  channels: int) -> int:
    """A rough upper estimate of the device memory one env takes while stepping."""
    return (board_shape[0] * board_shape[1] * _BYTES_PER_CELL
            + view_shape[0] * view_shape[1] * (_BYTES_PER_VIEW_CELL + channels))


def _wrapper_chain(env: gym.Env, configs: Mapping[str, Any] | None) -> list[gym.Wrapper]:
    """The wrappers of ``configs`` built around ``env`` (innermost first); a
    :class:`UserError` names those the device path cannot apply."""
    from hydra.utils import instantiate

    if configs is not None and not isinstance(configs, Mapping):
        raise UserError("training_wrappers must map names to wrapper configs "
                        f"({{'_target_': ..., settings}}), got {configs!r}")
    chain, unsupported = [], []
    for name, config in (configs or {}).items():
        if config is None:
            continue
        env = instantiate(dict(config), env, _convert_="all")
        if type(env) not in RULES and type(env) is not gym.wrappers.TimeLimit:
            unsupported.append(f"{name} ({type(env).__module__}.{type(env).__qualname__})")
        chain.append(env)
    if unsupported:
        supported = ", ".join(sorted(c.__name__ for c in RULES)) + ", TimeLimit"
        raise UserError(f"the device vector env cannot apply the wrapper(s) "
                        f"{', '.join(unsupported)}; it applies {supported}")
    return chain


class SafeLifeVectorEnv(VectorEnv):
    """``num_envs`` SafeLife envs stepped together on a torch device.

    :param env: the single env whose levels (list, shuffled list or sampler), view, channels,
        ``time_limit``, white goals and side-effect setting every env plays; it is never
        stepped itself.
    :param num_envs: number of envs.
    :param device: torch device of the games (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...).
    :param training_wrappers: wrapper configs (see the module docstring): movement bonus, exit
        bonus, impact penalty, exit curriculum and ``gymnasium.wrappers.TimeLimit``.

    **Spaces.** ``single_observation_space`` and ``single_action_space`` are the env's;
    observations come back as uint8 tensors ``(num_envs,) + view + (channels,)`` on ``device``,
    rewards as float32 (summed in float64 as the wrappers do), terminations and truncations as
    bool tensors; actions may be a tensor, an array or a list of ``num_envs`` integers 0-8.

    **Autoreset** (:attr:`AutoresetMode.SAME_STEP`): an env whose episode ends restarts in the
    same step; the step returns its new first observation, and ``info["final_obs"]`` holds
    every env's observation before the restarts (valid where ``info["_final_obs"]``).

    **Levels.** A level list is played in order: the first reset gives env ``i`` level ``i``,
    and envs that restart in a step take the next levels in the order of their index; with
    ``shuffle`` or a sampler each restart draws from the env's seeded generator, on the CPU.
    ``reset(seed=s)`` restarts the level order and seeds the spawners' torch generator.

    **Episode statistics**, in ``info["final_info"]`` at a step where envs end (valid where
    ``info["_final_info"]``): tensors ``length``, ``reward`` (unshaped total), ``success``,
    ``points``, ``available_points``, ``required_points``, ``performance``, ``episode``
    (``{"r": shaped total, "l": length}``), and arrays ``level`` (names) and, with
    ``side_effects``, ``side_effects`` (``{cell name: [side effect, inaction total]}`` where the
    single env reports them: when it terminates or reaches its ``time_limit``, not at a shorter
    outer ``TimeLimit``), all as the single env and its wrappers report them.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []
    }

    def __init__(
        self,
        env: SafeLifeEnv,
        num_envs: int,
        device: torch.device | str = "cpu",
        training_wrappers: Mapping[str, Any] | None = None,
    ):
        if not isinstance(env, SafeLifeEnv):
            raise UserError(f"SafeLifeVectorEnv plays SafeLife envs, got {env!r}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) \
                or num_envs < 1:
            raise UserError(f"num_envs must be a positive integer, got {num_envs!r}")
        if env.render_mode is not None:
            raise UserError("the device vector env does not render; leave render_mode unset "
                            f"(got {env.render_mode!r})")
        self.env = env
        self.num_envs = int(num_envs)
        self.device = torch_device(device)
        self.chain = _wrapper_chain(env, training_wrappers)
        limits = [w._max_episode_steps for w in self.chain if type(w) is gym.wrappers.TimeLimit]
        self.max_episode_steps = min(limits, default=None)
        if env.sampler is None and len({level.shape for level in env.levels}) > 1:
            raise UserError("the device vector env plays all boards in one tensor, but the "
                            f"levels have shapes {sorted({lv.shape for lv in env.levels})}")
        shape = (env.levels[0] if env.sampler is None
                 else env.sampler.sample(np.random.default_rng(0))).shape
        self._check_memory(shape)

        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(env.observation_space, self.num_envs)
        self.action_space = batch_space(env.action_space, self.num_envs)
        self.render_mode = None
        self.game: TorchGame | None = None
        self.rules: list[BatchedRule] = []
        self._next_level = 0

    def _check_memory(self, board_shape: tuple[int, int]) -> None:
        env = self.env
        need = self.num_envs * bytes_per_env(board_shape, env.view_shape, len(env.channels))
        free = free_memory(self.device)
        if free is not None and need > free:
            most = free // bytes_per_env(board_shape, env.view_shape, len(env.channels))
            raise UserError(
                f"num_envs={self.num_envs} envs of {board_shape[0]}x{board_shape[1]} boards need "
                f"about {need / 2**30:.1f} GiB on {self.device}, which has "
                f"{free / 2**30:.1f} GiB free; use at most about {most} envs"
            )

    # -- levels and restarts ------------------------------------------------------------------

    def _draw_levels(self, count: int) -> list[Level]:
        env = self.env
        if env.sampler is not None:
            return [env.sampler.sample(self.np_random) for _ in range(count)]
        if env.shuffle:
            picks = self.np_random.integers(len(env.levels), size=count)
        else:
            picks = (self._next_level + np.arange(count)) % len(env.levels)
            self._next_level += count
        return [env.levels[int(k)] for k in picks]

    def _start(self, index: torch.Tensor, levels: Sequence[Level]) -> None:
        self._length[index] = 0
        self._reward[index] = 0
        self._return[index] = 0
        for rule in self.rules:
            rule.reset(self.game, index, levels)

    def _observe(self, index: torch.Tensor | None = None) -> torch.Tensor:
        game, env = self.game, self.env
        boards, goals, locs = game.boards, game.goals, game.agent_locs
        if index is not None:
            boards, goals, locs = boards[index], goals[index], locs[index]
        views = agent_views(boards, goals, locs, env.view_shape, env.channels,
                            env.remove_white_goals)
        return views[:, 0]

    # -- the Gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Restart every env; a seed restarts the level order and seeds all randomness."""
        if options:
            raise UserError(f"the device vector env takes no reset options, got {options!r}")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise UserError(f"seed must be an integer (one for all envs), got {seed!r}")
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
            self._next_level = 0
        levels = self._draw_levels(self.num_envs)
        if len({level.shape for level in levels}) > 1:
            raise UserError("the device vector env plays all boards in one tensor, but the "
                            f"levels drawn have shapes {sorted({lv.shape for lv in levels})}")
        self.game = TorchGame(levels, seed=int(self.np_random.integers(2**63)),
                              device=self.device)
        n, device = self.num_envs, self.device
        self._length = torch.zeros(n, dtype=torch.int64, device=device)
        self._reward = torch.zeros(n, dtype=torch.float64, device=device)
        self._return = torch.zeros(n, dtype=torch.float64, device=device)
        self.rules = [RULES[type(w)](w, self.game) for w in self.chain if type(w) in RULES]
        everyone = torch.arange(n, device=device)
        self._start(everyone, levels)
        return self._observe(), {}

    def step(
        self, actions: torch.Tensor | np.ndarray | Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        game = self.game
        if game is None:
            raise RuntimeError("call reset() before step()")
        actions = torch.as_tensor(actions, device=self.device)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"need one action per env, shape ({self.num_envs},); got shape "
                             f"{tuple(actions.shape)}")
        rewards, dones = game.step(actions[:, None])
        self._length += 1
        reward = rewards[:, 0].to(torch.float64)
        self._reward += reward
        terminated = dones[:, 0]
        at_limit = ~terminated & (self._length >= self.env.time_limit)
        truncated = at_limit
        if self.max_episode_steps is not None:
            truncated = truncated | (self._length >= self.max_episode_steps)
        for rule in self.rules:
            reward = rule.step(game, reward, terminated, self._reward)
        self._return += reward
        observations = self._observe()
        ended = terminated | truncated
        infos: dict[str, Any] = {}
        if ended.any():
            index = ended.nonzero()[:, 0]
            infos = {
                "final_obs": observations.clone(), "_final_obs": ended,
                "final_info": self._final_info(ended, terminated | at_limit),
                "_final_info": ended,
            }
            levels = self._draw_levels(len(index))
            try:
                game.replace(index, levels)
            except ValueError as error:
                raise UserError(f"the device vector env plays all boards in one tensor: "
                                f"{error}") from error
            self._start(index, levels)
            observations[index] = self._observe(index)
        return observations, reward.to(torch.float32), terminated, truncated, infos

    def _final_info(self, ended: torch.Tensor, measured: torch.Tensor) -> dict[str, Any]:
        """Each env's episode statistics as its single env's last ``info`` (valid where
        ``ended``), side effects where ``measured`` too."""
        game = self.game
        info: dict[str, Any] = {
            "length": self._length.clone(),
            "reward": self._reward.clone(),
            "success": game.has_exited()[:, 0],
            "points": game.points_earned()[:, 0],
            "available_points": game.available_points[:, 0].clone(),
            "required_points": game.required_points[:, 0].clone(),
            "performance": game.performance()[:, 0],
            "level": np.array([level.name for level in game.levels], dtype=object),
            "episode": {"r": self._return.clone(), "l": self._length.clone(),
                        "_r": ended, "_l": ended},
        }
        for key in list(info):
            info[f"_{key}"] = ended
        if self.env.side_effects:
            scored = ended & measured
            info["side_effects"] = self._side_effects(scored)
            info["_side_effects"] = scored
        return info

    def _side_effects(self, which: torch.Tensor) -> np.ndarray:
        """Side-effect reports of envs ``which`` (``None`` elsewhere), simulated on the device
        for the envs of each episode length together."""
        reports = np.full(self.num_envs, None, dtype=object)
        index = which.nonzero()[:, 0]
        lengths = self._length[index]
        for length in lengths.unique().tolist():
            group = index[lengths == length]
            games = self.game.select(group)
            games.num_steps = int(length)
            scores = side_effect_scores(games, seed=int(self.np_random.integers(2**63)))
            for k, score in zip(group.tolist(), scores):
                reports[k] = score
        return reports

    # -- the training schedule ----------------------------------------------------------------

    def set_training_steps(self, steps: float) -> dict[str, float]:
        """Tell the scheduled wrappers (impact penalty, exit curriculum) the training step count,
        as :meth:`ScheduledWrapper.set_training_steps
        <safelife_rl.envs.wrappers.ScheduledWrapper.set_training_steps>` does for one env.

        :returns: the scheduled values now in force, by name (empty without such wrappers).
        """
        from safelife_rl.envs.wrappers import ScheduledWrapper

        for wrapper in reversed(self.chain):
            if isinstance(wrapper, ScheduledWrapper):
                return wrapper.set_training_steps(steps)
        return {}

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """One result per env, as ``SyncVectorEnv.call`` gives (all envs share one wrapper
        chain): so :func:`~safelife_rl.envs.wrappers.sync_training_steps` reaches it."""
        if name == "has_wrapper_attr":
            from safelife_rl.envs.wrappers import ScheduledWrapper

            scheduled = any(isinstance(w, ScheduledWrapper) for w in self.chain)
            found = scheduled if args[0] == "set_training_steps" else hasattr(self, args[0])
            return (found,) * self.num_envs
        attribute = getattr(self, name)
        result = attribute(*args, **kwargs) if callable(attribute) else attribute
        return (result,) * self.num_envs

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()


def make_task_vector_env(
    num_envs: int,
    task: str,
    device: torch.device | str = "cpu",
    training_wrappers: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    **kwargs: Any,
) -> SafeLifeVectorEnv:
    """Vector entry point of the registered ids: ``num_envs`` envs of
    :func:`~safelife_rl.envs.registration.make_task_env` ``(task, **kwargs)`` (procedural levels,
    ``levels=``, ``bank=``, ``time_limit=``, ...) on ``device``; ``max_episode_steps`` adds a
    ``TimeLimit``."""
    from safelife_rl.envs.registration import make_task_env

    if max_episode_steps is not None:
        training_wrappers = {
            **(training_wrappers or {}),
            "max_episode_steps": {"_target_": "gymnasium.wrappers.TimeLimit",
                                  "max_episode_steps": max_episode_steps},
        }
    return SafeLifeVectorEnv(make_task_env(task, **kwargs), num_envs, device, training_wrappers)
