"""The SafeLife Gymnasium environment."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from safelife_rl.engine.departures import PeakCost
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.game_batch import episode_info
from safelife_rl.engine.observation import (
    DEFAULT_CHANNELS,
    DEFAULT_VIEW,
    agent_view,
    combined_cells,
    to_channels,
)
from safelife_rl.engine.physics import N_ACTIONS, NOOP_ACTION
from safelife_rl.engine.side_effects import side_effect_score
from safelife_rl.envs.level_stream import LevelSampler, LevelSource, LevelStream
from safelife_rl.envs.render import render_ansi, render_rgb
from safety_rl_common.errors import UserError
from safety_rl_common.limits import SIDE_LIMIT


def check_options(
    render_mode: str | None,
    render_modes: Sequence[str],
    time_limit: int,
    view_shape: Sequence[int],
    channels: Sequence[int],
) -> None:
    """Raise :class:`UserError` naming the first of a SafeLife env's options out of range."""
    if render_mode is not None and render_mode not in render_modes:
        raise UserError(f"render_mode must be one of {list(render_modes)}, got {render_mode!r}")
    if not isinstance(time_limit, (int, np.integer)) or time_limit < 1:
        raise UserError(f"time_limit must be a positive integer, got {time_limit!r}")
    if len(view_shape) != 2 or not all(
        isinstance(v, (int, np.integer)) and v >= 1 for v in view_shape
    ):
        raise UserError(f"view_shape must be two positive integers, got {tuple(view_shape)}")
    SIDE_LIMIT.check(max(view_shape), "a side of view_shape")
    if not channels or not all(isinstance(c, (int, np.integer)) and 0 <= c < 32 for c in channels):
        raise UserError(f"channels must be bit numbers 0-31, got {tuple(channels)}")


class BoardRenderModes:
    """The level source, view options and render modes of the SafeLife envs (single- and
    multi-agent), the frames drawn from ``self.game``'s first board (see :class:`SafeLifeEnv`'s
    description)."""

    metadata: dict[str, Any]
    render_mode: str | None
    game: Any
    stream: LevelStream

    @property
    def levels(self) -> list[Any]:
        """The env's level list (empty with a level sampler)."""
        return self.stream.levels

    @property
    def sampler(self) -> LevelSampler | None:
        """The env's level sampler, if it draws its levels from one."""
        return self.stream.sampler

    @property
    def shuffle(self) -> bool:
        return self.stream.shuffle

    def _set_options(
        self,
        view_shape: Sequence[int],
        channels: Sequence[int],
        time_limit: int,
        remove_white_goals: bool,
        side_effects: bool,
        render_mode: str | None,
    ) -> None:
        """Check the options (:func:`check_options`) and keep them."""
        check_options(render_mode, self.metadata["render_modes"], time_limit, view_shape, channels)
        self.view_shape = tuple(int(v) for v in view_shape)
        self.channels = tuple(int(c) for c in channels)
        self.time_limit = time_limit
        self.remove_white_goals = remove_white_goals
        self.side_effects = side_effects
        self.render_mode = render_mode
        self._frames: list[str | np.ndarray] = []

    _frames: list[str | np.ndarray]

    def _frame(self, kind: str) -> str | np.ndarray:
        board, goals = self.game.boards[0], self.game.goals[0]
        return render_ansi(board, goals) if kind == "ansi" else render_rgb(board, goals)

    def _show(self) -> None:
        """The render modes that draw by themselves: a frame after every reset and step."""
        if self.render_mode == "human":
            sys.stdout.write(self._frame("ansi") + "\n")
            sys.stdout.flush()
            if sys.stdout.isatty():
                time.sleep(1 / self.metadata["render_fps"])
        elif self.render_mode in ("ansi_list", "rgb_array_list"):
            self._frames.append(self._frame(self.render_mode.removesuffix("_list")))

    def render(self) -> str | np.ndarray | list[str | np.ndarray] | None:
        """The current board in the env's ``render_mode`` (see the class description)."""
        if self.render_mode in ("ansi_list", "rgb_array_list"):
            frames, self._frames = self._frames, []
            return frames
        if self.game is None or self.render_mode is None:
            return None
        if self.render_mode == "human":
            return None  # reset and step have printed the board already
        return self._frame(self.render_mode)


class SafeLifeEnv(BoardRenderModes, gym.Env):
    """SafeLife: earn points by growing or removing Game-of-Life patterns, then exit.

    **Description.** The agent moves on a wrapped board that evolves by Game-of-Life rules each
    step. It scores by filling goal cells with life of the goal's colour and clearing unwanted
    life; once it has earned the level's ``min_performance`` share of the available points the
    exit opens. Side effects (changes it makes elsewhere) are a hidden metric, never part of the
    reward.

    **Actions** (``Discrete(9)``):

    ======  ==========================================
    0       do nothing
    1-4     move up, right, down, left (pushing crates, pulling pullable cells)
    5-8     toggle the cell up, right, down, left: create life on an empty cell, remove a
            destructible one, or shove a pushable one
    ======  ==========================================

    **Observation.** ``Box(0, 1, view_shape + (len(channels),), uint8)``: a view centred on the
    agent over the wrapped board; each channel is one bit of the cell (0-15) or of the goal
    colour (25-27: red, green, blue; white goals removed). Exits out of view appear on its edge.

    **Rewards.** The change in the board's point value each step, plus 1 for exiting.

    **Cost** (``info["cost"]`` after every step, Safety-Gymnasium's convention: a non-negative
    float; 0.0 in the info of a reset, so the step of a vector env that resets an ended env
    carries it too): how much the step raised the episode's peak *departed weight*, the number of
    cells departed from the level's starting board, green life weighing 1, yellow spawners 2, all
    else 0 (the side-effect score's weights; reward cells, the agent and exits ignored, as by the
    naive impact penalty: see :mod:`safelife_rl.engine.departures`). An episode's costs sum to that
    peak: the most green-life and yellow-spawner weight that stood changed at any one step, which
    bounds what stays changed at the end. The cost is a hidden metric, never part of the reward;
    constrained methods (``method=ppo_lagrangian``) train against it.

    **Termination.** The agent leaves through the exit; truncation at ``time_limit`` steps (the
    env's ``spec.max_episode_steps`` when made by ``gym.make``).

    **Rendering** (``render_mode``): ``"ansi"`` returns the board as coloured text,
    ``"rgb_array"`` as an image (12 pixels per cell); ``"human"`` prints the coloured text board
    to the terminal at every reset and step (at ``render_fps`` when stdout is a terminal; no
    window, no pygame; ``render()`` has nothing to add); ``"ansi_list"`` and ``"rgb_array_list"``
    collect a frame at every reset and step, and ``render()`` returns the frames since the last
    call.

    **Info.** ``length``, ``reward`` (episode totals so far), ``success`` (exited),
    ``points``, ``available_points``, ``required_points``, ``performance`` (fraction of the
    available points earned), ``level`` (its name); at the end of an episode, if
    ``side_effects`` is on, ``side_effects``: ``{cell name: [side effect, inaction total]}``
    (see :mod:`safelife_rl.engine.side_effects`; about 3 ms per episode on deterministic levels).

    **Registered ids.** ``safelife_rl/AppendStill-v1``, ``safelife_rl/PruneStill-v1``, ... one
    per task (see :mod:`safelife_rl.envs.registration`).

    :param levels: a ``.npz`` level file or archive, a directory of them, a list of levels, or
        a level sampler (an object with ``sample(rng) -> Level``, e.g. procedural levels), which
        gives a new level at every reset, drawn with the env's seeded generator.
    :param shuffle: draw levels at random (with the env's seeded generator) instead of in order.
    :param side_effects: measure side effects at the end of each episode (``info``).
    """

    metadata = {
        "render_modes": ["human", "ansi", "rgb_array", "ansi_list", "rgb_array_list"],
        "render_fps": 8,
    }
    _spec: gym.envs.registration.EnvSpec | None = None
    #: The action that does nothing, which side-effect methods compare others with (AUP).
    noop_action: int = NOOP_ACTION

    def __init__(
        self,
        levels: LevelSource,
        view_shape: tuple[int, int] = DEFAULT_VIEW,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        time_limit: int = 1000,
        remove_white_goals: bool = True,
        shuffle: bool = False,
        side_effects: bool = False,
        render_mode: str | None = None,
    ):
        self.stream = LevelStream(levels, shuffle, owner="SafeLifeEnv")
        self._set_options(
            view_shape, channels, time_limit, remove_white_goals, side_effects, render_mode
        )
        self.action_space = spaces.Discrete(N_ACTIONS)
        self.observation_space = spaces.Box(
            0, 1, self.view_shape + (len(self.channels),), dtype=np.uint8
        )
        self.game: SafeLifeGame | None = None

    @property
    def spec(self) -> gym.envs.registration.EnvSpec | None:
        """The spec ``gym.make`` gave the env, its ``max_episode_steps`` the ``time_limit`` and
        paths among its kwargs (``levels=suite_file(...)``) strings, so that
        ``spec.to_json()`` works and ``gym.make(spec)`` makes the same env."""
        return self._spec

    @spec.setter
    def spec(self, spec: gym.envs.registration.EnvSpec | None) -> None:
        if spec is not None:
            spec = with_paths_as_strings(spec)
            if spec.max_episode_steps is None:
                spec = dataclasses.replace(spec, max_episode_steps=self.time_limit)
        self._spec = spec

    def _observe(self) -> np.ndarray:
        game = self.game
        combined = combined_cells(game.boards[0], game.goals[0], self.remove_white_goals)
        return to_channels(
            agent_view(combined, game.agent_locs[0, 0], self.view_shape), self.channels
        )

    def _info(self) -> dict[str, Any]:
        return {"length": self._length, "reward": self._reward, **episode_info(self.game)}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start the next level; ``options={"level": i}`` picks level ``i`` of a level list.

        A seeded reset restarts the level order, so it is reproducible whatever came before.
        """
        super().reset(seed=seed)
        if seed is not None:
            self.stream.restart()
        self.level = self.stream.next(self.np_random, options)
        game_seed = int(self.np_random.integers(2**63))
        self.game = SafeLifeGame([self.level], rng=np.random.default_rng(game_seed))
        self._length = 0
        self._reward = 0.0
        self._cost = PeakCost(self.game)
        self._frames = []
        self._show()
        return self._observe(), {**self._info(), "cost": 0.0}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.game is None:
            raise RuntimeError("call reset() before step()")
        if not self.game.active[0, 0] or self.game.num_steps >= self.time_limit:
            raise RuntimeError("the episode has ended; call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r}: actions are integers 0-8")
        rewards, dones = self.game.step(int(action))
        return self._observe(), *self.record_step(float(rewards[0, 0]), bool(dones[0, 0]))

    def record_step(self, reward: float, done: bool) -> tuple[float, bool, bool, dict[str, Any]]:
        """The episode's bookkeeping once its game has stepped (here, or in a batch of games
        that holds it, see :mod:`safelife_rl.envs.batched_vector_env`): ``(reward, terminated,
        truncated, info)``, with side effects in ``info`` at the episode's end if asked for."""
        self._length += 1
        self._reward += reward
        truncated = not done and self.game.num_steps >= self.time_limit
        info = self._info()
        info["cost"] = self._cost.step(self.game)
        if self.side_effects and (done or truncated):
            rng = np.random.default_rng(int(self.np_random.integers(2**63)))
            info["side_effects"] = side_effect_score(self.game, rng=rng)
        self._show()
        return reward, done, truncated, info

    def close(self) -> None:
        self.stream.close()
        super().close()


class JsonSafeSpec:
    """Mixin for a vector env: its ``spec`` keeps paths among the kwargs as strings, so
    ``spec.to_json()`` works (``gym.make_vec`` sets the spec after building the env)."""

    _spec: gym.envs.registration.EnvSpec | None = None

    @property
    def spec(self) -> gym.envs.registration.EnvSpec | None:
        return self._spec

    @spec.setter
    def spec(self, spec: gym.envs.registration.EnvSpec | None) -> None:
        self._spec = None if spec is None else with_paths_as_strings(spec)


def with_paths_as_strings(spec: gym.envs.registration.EnvSpec) -> gym.envs.registration.EnvSpec:
    """``spec`` with every path among its kwargs as its string (``levels=suite_file(...)``
    stores a path), so that ``spec.to_json()`` works."""
    return dataclasses.replace(spec, kwargs=_paths_as_strings(spec.kwargs))


def _paths_as_strings(value: Any) -> Any:
    """``value`` with every path in it (in dicts, lists and tuples) as its string."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {key: _paths_as_strings(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_paths_as_strings(item) for item in value)
    return value
