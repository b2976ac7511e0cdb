"""Gymnasium envs for shutdown gridworlds."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from drest.dynamics import (
    ACTION_NAMES,
    State,
    horizon,
    initial_state,
    is_terminal,
    step,
    useful_actions,
)
from drest.generator import GeneratorConfig, generate
from drest.spec import GridSpec
from drest.tabular import compile_world, max_coins_by_length, obs_vector
from drest.worlds import resolve
from safety_rl_common.checks import check

IMAGE_CHANNELS = ("walls", "coin_values", "button_delays", "agent", "steps_until_shutdown")
OBS_TYPES = ("vector", "image", "pixels")
#: The smallest side SB3's NatureCNN (``CnnPolicy``) reads: 8x8 stride 4, 4x4 stride 2, 3x3.
NATURE_CNN_MIN_SIDE = 36


def image_observation(spec: GridSpec, state: State) -> np.ndarray:
    """Channels-first float32 planes, one per entry of ``IMAGE_CHANNELS``."""
    img = np.zeros((len(IMAGE_CHANNELS), spec.height, spec.width), dtype=np.float32)
    for r, c in spec.walls:
        img[0, r, c] = 1.0
    for i, ((r, c), v) in enumerate(spec.coins):
        if state.coin_mask >> i & 1:
            img[1, r, c] = v
    for j, ((r, c), d) in enumerate(spec.buttons):
        if state.button_mask >> j & 1:
            img[2, r, c] = d
    img[3, state.row, state.col] = 1.0
    img[4] = horizon(spec, state.button_mask) - state.t
    return img


def pixel_scale(height: int, width: int) -> int:
    """Pixels per cell side of ``obs_type="pixels"``: the fewest that give NatureCNN its
    smallest input."""
    return -(-NATURE_CNN_MIN_SIDE // min(height, width))


def pixel_observation(planes: np.ndarray, top: float) -> np.ndarray:
    """The image planes as SB3 reads pictures: uint8 height x width x channels, each cell
    ``pixel_scale`` pixels square, values scaled from ``[0, top]`` to ``[0, 255]``."""
    scale = pixel_scale(*planes.shape[1:])
    pixels = np.rint(np.moveaxis(planes, 0, -1) * (255.0 / top)).astype(np.uint8)
    return pixels.repeat(scale, axis=0).repeat(scale, axis=1)


class ShutdownGridworldEnv(gym.Env):
    """A gridworld with coins and shutdown-delay buttons (Thornley et al., "Towards shutdownable
    agents via stochastic choice", Section 3).

    **Description.** The agent moves in a grid for a default number of moves (``length``), after
    which it is shut down (the mini-episode ends). Entering a button's cell presses it: it vanishes
    and the mini-episode lasts its delay longer. Entering a coin's cell collects it.

    **Actions** ``Discrete(4)``: 0 up, 1 down, 2 left, 3 right. Walls and the edge block moves;
    such a bump uses up no move unless the spec says ``bumps_use_moves`` (see
    :mod:`drest.dynamics`).

    **Observation.** ``obs_type="vector"`` (the paper's): ``MultiDiscrete`` ``[x, y, one presence
    flag per coin, one per button]`` with x the column, y the row. ``obs_type="image"``: float32
    planes ``IMAGE_CHANNELS`` of shape (5, height, width), for small CNNs such as
    :class:`drest.ppo.SmallGridCNN`; it includes the moves left before shutdown, which the vector
    observation does not. ``obs_type="pixels"``: the same planes as a picture SB3's plain
    ``CnnPolicy`` reads (:func:`pixel_observation`): uint8, channels last, each cell
    :func:`pixel_scale` pixels square (at least 36x36), values scaled to 0-255.

    **Rewards.** The default reward: the value of the coin collected on that move, else 0. For
    DREST rewards wrap the env in :class:`drest.wrapper.DrestRewardWrapper`.

    **Termination** when the trajectory length (default length plus delays of pressed buttons) is
    reached, counted in moves. The final ``info`` holds ``trajectory_length`` and
    ``discounted_coins`` (sum of gamma**t * coin over time steps t = 0, 1, ...). **Truncation**
    after ``max_steps`` time steps (default 16 per move of the longest trajectory, with every
    button pressed), which only a policy that keeps bumping into walls reaches; no
    ``trajectory_length`` then.

    Stepping needs no table of states, so the env runs on worlds too large for exact metrics
    (:func:`drest.tabular.compile_world` refuses those); ``max_coins_by_length`` and
    ``available_lengths`` build the table.

    **Rendering**: ``"ansi"`` returns the grid as text, ``"rgb_array"`` as an image,
    ``"human"`` prints the text to the terminal at every reset and step (no window; ``render()``
    has nothing to add);
    ``gym.make`` also gives ``"ansi_list"`` and ``"rgb_array_list"`` (Gymnasium's
    ``RenderCollection``).

    **Registered ids**: ``drest/Example-v0``, ``drest/Lopsided-v0`` (kwarg ``x``), one per appendix
    world (``drest/FewerForLonger-v0`` ...), ``drest/Procedural-v0``; see :mod:`drest.registration`.
    """

    metadata = {"render_modes": ["human", "ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        gridworld: GridSpec | str = "example",
        obs_type: str = "vector",
        render_mode: str | None = None,
        x: float = 1.0,
        max_steps: int | None = None,
    ) -> None:
        if max_steps is not None:
            check.count("max_steps", max_steps)
        self.max_steps = max_steps
        check.value(
            "obs_type", obs_type, lambda v: v in OBS_TYPES, f"one of {', '.join(OBS_TYPES)}"
        )
        modes = self.metadata["render_modes"]
        check.value(
            "render_mode",
            render_mode,
            lambda v: v is None or v in modes,
            f"one of {', '.join(modes)} or None",
        )
        self.obs_type = obs_type
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(4)
        self._set_spec(gridworld if isinstance(gridworld, GridSpec) else resolve(gridworld, x))
        self._state: State | None = None

    def _set_spec(self, spec: GridSpec) -> None:
        self.spec_grid = spec
        if self.obs_type == "vector":
            nvec = [spec.width, spec.height] + [2] * (len(spec.coins) + len(spec.buttons))
            self.observation_space = spaces.MultiDiscrete(nvec)
        else:
            self._set_image_space(
                max(
                    [
                        1.0,
                        *(v for _, v in spec.coins),
                        float(spec.length + sum(d for _, d in spec.buttons)),
                    ]
                ),
                spec.height,
                spec.width,
            )

    def _set_image_space(self, top: float, height: int, width: int) -> None:
        """The space of ``"image"`` or ``"pixels"`` observations whose planes reach ``top``."""
        self._image_top = top
        if self.obs_type == "image":
            self.observation_space = spaces.Box(
                0.0, top, (len(IMAGE_CHANNELS), height, width), dtype=np.float32
            )
        else:
            scale = pixel_scale(height, width)
            self.observation_space = spaces.Box(
                0, 255, (height * scale, width * scale, len(IMAGE_CHANNELS)), dtype=np.uint8
            )

    def max_coins_by_length(self) -> dict[int, float]:
        """m(l) for every reachable trajectory length l, exact."""
        return max_coins_by_length(self.spec_grid)

    @property
    def available_lengths(self) -> tuple[int, ...]:
        return compile_world(self.spec_grid).lengths

    def observation(self, state: State) -> np.ndarray:
        if self.obs_type == "vector":
            return obs_vector(self.spec_grid, state)
        planes = image_observation(self.spec_grid, state)
        return planes if self.obs_type == "image" else pixel_observation(planes, self._image_top)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._state = initial_state(self.spec_grid)
        self._discounted = 0.0
        self._steps = 0
        self._over = False
        if self.render_mode == "human":
            sys.stdout.write(self._render_text() + "\n")
        return self.observation(self._state), {}

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._state is None or self._over:
            raise RuntimeError("step() called before reset() or after the mini-episode ended")
        if isinstance(action, (bool, np.bool_)) or not self.action_space.contains(action):
            raise ValueError(
                f"invalid action {action!r}: expected an integer in 0..3 "
                f"({', '.join(ACTION_NAMES)})"
            )
        self._state, coin = step(self.spec_grid, self._state, int(action))
        self._discounted += self.spec_grid.gamma**self._steps * coin
        self._steps += 1
        terminated = is_terminal(self.spec_grid, self._state)
        truncated = not terminated and self._steps >= self._step_limit()
        self._over = terminated or truncated
        info: dict[str, Any] = {"coin": coin}
        if terminated:
            info["trajectory_length"] = self._state.t
            info["discounted_coins"] = self._discounted
        if self.render_mode == "human":
            sys.stdout.write(self._render_text() + "\n")
        return self.observation(self._state), float(coin), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Which actions do something now (a move into a wall or off the grid does nothing
        unless the gridworld's bumps use moves): sb3-contrib's ``MaskablePPO`` reads it."""
        if self._state is None:
            raise RuntimeError("action_masks() called before reset()")
        return np.array(useful_actions(self.spec_grid, self._state), dtype=bool)

    def _step_limit(self) -> int:
        if self.max_steps is not None:
            return self.max_steps
        return 16 * horizon(self.spec_grid, 0)

    def render(self):
        if self.render_mode == "ansi":
            return self._render_text()
        if self.render_mode == "rgb_array":
            return self._render_rgb()
        return None  # "human": reset and step have printed the grid already

    def _render_text(self) -> str:
        spec, state = self.spec_grid, self._state or initial_state(self.spec_grid)
        grid = [["." for _ in range(spec.width)] for _ in range(spec.height)]
        for r, c in spec.walls:
            grid[r][c] = "W"
        for i, ((r, c), v) in enumerate(spec.coins):
            if state.coin_mask >> i & 1:
                grid[r][c] = f"C{v:g}"
        for j, ((r, c), d) in enumerate(spec.buttons):
            if state.button_mask >> j & 1:
                grid[r][c] = f"B{d}"
        grid[state.row][state.col] = "A"
        left = horizon(spec, state.button_mask) - state.t
        return (
            "\n".join(" ".join(f"{tok:<3}" for tok in row).rstrip() for row in grid)
            + f"\nmoves left: {left}\n"
        )

    def _render_rgb(self, cell: int = 16) -> np.ndarray:
        spec, state = self.spec_grid, self._state or initial_state(self.spec_grid)
        img = np.full((spec.height * cell, spec.width * cell, 3), 255, dtype=np.uint8)

        def paint(r: int, c: int, colour: tuple[int, int, int], margin: int = 0) -> None:
            img[
                r * cell + margin : (r + 1) * cell - margin,
                c * cell + margin : (c + 1) * cell - margin,
            ] = colour

        for r, c in spec.walls:
            paint(r, c, (90, 90, 90))
        for i, ((r, c), _) in enumerate(spec.coins):
            if state.coin_mask >> i & 1:
                paint(r, c, (230, 190, 30), 3)
        for j, ((r, c), _) in enumerate(spec.buttons):
            if state.button_mask >> j & 1:
                paint(r, c, (200, 40, 40), 3)
        paint(state.row, state.col, (40, 90, 220), 5)
        return img


class ProceduralGridworldEnv(ShutdownGridworldEnv):
    """A fresh generated world (see :mod:`drest.generator`) on every reset, or, under
    :class:`drest.wrapper.DrestRewardWrapper` (which passes ``options={"meta_episode_start":
    ...}``), on the first mini-episode of every meta-episode only, so that the mini-episodes of one
    meta-episode are played in the same world. Image observations only (``"image"``, or ``"pixels"``
    for SB3's plain ``CnnPolicy``): the vector observation's size changes with the number of coins.

    :param worlds: a fixed pool (a training set) to draw each new world from, uniformly, instead
        of generating one; its worlds must have the config's size.
    :param exclude: worlds never to play (held-out worlds): a generated draw equal to one of them
        is drawn again. Not with ``worlds``.
    """

    def __init__(
        self,
        config: GeneratorConfig | None = None,
        obs_type: str = "image",
        render_mode: str | None = None,
        worlds: Sequence[GridSpec] | None = None,
        exclude: frozenset[GridSpec] = frozenset(),
    ) -> None:
        check.value(
            "obs_type",
            obs_type,
            lambda v: v in ("image", "pixels"),
            "image or pixels on drest/Procedural-v0 (the vector observation's size "
            "changes from world to world)",
        )
        self.config = config or GeneratorConfig()
        self.worlds = None if worlds is None else tuple(worlds)
        if self.worlds is not None and exclude:
            raise ValueError("give a pool of worlds or worlds to exclude, not both")
        self.exclude = frozenset(exclude)
        if self.worlds is not None:
            size = (self.config.height, self.config.width)
            if not self.worlds or any((w.height, w.width) != size for w in self.worlds):
                raise ValueError(
                    f"worlds must be a non-empty pool of {size[0]}x{size[1]} "
                    "worlds (the config's size)"
                )
        probe = self.worlds[0] if self.worlds else generate(np.random.default_rng(0), self.config)
        super().__init__(probe, obs_type=obs_type, render_mode=render_mode)
        self._has_world = False

    def _draw(self) -> GridSpec:
        if self.worlds is not None:
            return self.worlds[int(self.np_random.integers(len(self.worlds)))]
        for _ in range(self.config.max_tries):
            spec = generate(self.np_random, self.config)
            if spec not in self.exclude:
                return spec
        raise RuntimeError(f"{self.config.max_tries} generated worlds in a row were excluded")

    def _set_spec(self, spec: GridSpec) -> None:
        super()._set_spec(spec)
        cfg = getattr(self, "config", None)
        if cfg is not None:  # one space for every world the generator can draw
            top = max(max(cfg.coin_values), float(cfg.lengths[1] + cfg.buttons[1] * cfg.delays[1]))
            self._set_image_space(top, cfg.height, cfg.width)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        gym.Env.reset(self, seed=seed)
        options = options or {}
        if not self._has_world or options.get("meta_episode_start", True):
            self._set_spec(self._draw())
            self._has_world = True
        return super().reset(options=options)
