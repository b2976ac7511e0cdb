"""Training wrappers from the SafeLife paper and its original training code.

Each takes the env first and its settings as keywords, so a config can list them and
``hydra.utils.instantiate(config, env)`` applies them. Those whose strength follows a schedule
over training derive from :class:`ScheduledWrapper`; :func:`sync_training_steps` tells them the
current number of training steps. The app calls it once per rollout; with SB3 directly pass
:class:`~safelife_rl.training.TrainingClock` as the callback
(``model.learn(n, callback=TrainingClock())``), which does the same. A scheduled wrapper that
has stepped :data:`UNSYNCED_WARNING_STEPS` times without ever being told warns once: its
schedule stays at step 0.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv

from safelife_rl.engine.departures import departed_cells
from safelife_rl.envs.schedules import LinearRamp
from safety_rl_common.checks import check
from safety_rl_common.errors import UserError

#: The largest side-effect penalty per cell: rewards are a few points per level, and a penalty
#: near the float range (1e308) overflows to inf and trains to NaN.
MAX_PENALTY = 1e6
#: The largest bonus (either sign) a reward wrapper adds, on the same grounds.
MAX_BONUS = 1e6
#: Steps a scheduled wrapper takes before it warns that no one tells it the training steps.
UNSYNCED_WARNING_STEPS = 20_000


def _bonus(name: str, value: float) -> float:
    """A reward bonus: a finite number of at most :data:`MAX_BONUS` either way."""
    check.value(
        name,
        check.finite(name, value),
        lambda v: abs(v) <= MAX_BONUS,
        f"in [-{MAX_BONUS:g}, {MAX_BONUS:g}]",
    )
    return float(value)


def _game(env: gym.Env) -> Any:
    return env.unwrapped.game


class ScheduledWrapper(gym.Wrapper):
    """A wrapper whose settings depend on how many training steps have been taken."""

    training_steps: float = 0.0
    _synced = False
    _unsynced_steps = 0

    def set_training_steps(self, steps: float) -> dict[str, float]:
        """Set the step count here and in every scheduled wrapper below.

        :returns: the scheduled values now in force, by name, for logging.
        """
        self.training_steps = float(steps)
        self._synced = True
        values = self.scheduled_values()
        inner = self.env
        while isinstance(inner, gym.Wrapper):
            if isinstance(inner, ScheduledWrapper):
                values.update(inner.set_training_steps(steps))
                break
            inner = inner.env
        return values

    def scheduled_values(self) -> dict[str, float]:
        raise NotImplementedError

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._synced:
            self._unsynced_steps += 1
            if self._unsynced_steps == UNSYNCED_WARNING_STEPS:
                warnings.warn(
                    f"{type(self).__name__} has stepped {UNSYNCED_WARNING_STEPS} times but was "
                    "never told the training step count, so its schedule stays at step 0: "
                    "train with callback=safelife_rl.training.TrainingClock() (SB3), or call "
                    "sync_training_steps(vec_env, steps) or env.set_training_steps(steps)",
                    UserWarning,
                    stacklevel=2,
                )
        return self.env.step(action)


def sync_training_steps(vec_env: Any, steps: float) -> dict[str, float]:
    """Tell the scheduled wrappers of every env in a vector env the training step count.

    :param vec_env: an SB3 ``VecEnv``, a Gymnasium ``VectorEnv`` whose envs are wrapped (told
        through its ``call``), or a Gymnasium ``VectorEnv`` whose envs share one schedule and
        that has ``set_training_steps`` itself
        (:class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`).
    :returns: the scheduled values of the first env (empty if it has no scheduled wrapper).
    """
    if isinstance(vec_env, VectorEnv):
        shared = getattr(vec_env.unwrapped, "set_training_steps", None)
        if shared is not None:
            return shared(steps)
        if not all(vec_env.call("has_wrapper_attr", "set_training_steps")):
            return {}
        return vec_env.call("set_training_steps", steps)[0]
    if not vec_env.has_attr("set_training_steps"):
        return {}
    return vec_env.env_method("set_training_steps", steps)[0]


class MovementBonus(gym.Wrapper):
    """Reward the agent for moving, so it does not freeze where every move costs points.

    The agent's speed is the Manhattan distance between its position now and ``period`` steps
    ago, divided by ``period`` (at the start of an episode it counts as having walked in at full
    speed). The reward gains ``bonus * speed ** power``; with ``as_penalty`` the bonus is then
    subtracted again, so standing still costs ``bonus`` instead of moving earning it (the
    original's setting: no reward for dawdling instead of exiting). The original's
    ``power=1e-100`` makes any movement over the period count fully.
    """

    def __init__(
        self,
        env: gym.Env,
        bonus: float = 0.1,
        period: int = 4,
        power: float = 1e-100,
        as_penalty: bool = True,
    ):
        super().__init__(env)
        bonus = _bonus("the movement bonus", bonus)
        power = check.finite("the movement bonus's power", power)
        period = check.count("the movement bonus period", period)
        self.bonus, self.period, self.power, self.as_penalty = bonus, period, power, as_penalty
        self._positions: deque[np.ndarray] = deque(maxlen=period)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._positions = deque([_game(self).agent_locs[0].copy()], maxlen=self.period)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        here = _game(self).agent_locs[0]
        # The deque holds at most `period` positions; its oldest is `period` steps back once full.
        distance = np.abs(here - self._positions[0]).sum() + self.period - len(self._positions)
        speed = distance / self.period
        reward += self.bonus * speed**self.power - (self.bonus if self.as_penalty else 0.0)
        self._positions.append(here.copy())
        return obs, float(reward), terminated, truncated, info


class ExitBonus(gym.Wrapper):
    """On leaving through the exit, add ``bonus`` times the episode's reward so far (0.5 in the
    original training), so finishing a level is worth more the better it was solved."""

    def __init__(self, env: gym.Env, bonus: float = 0.5):
        super().__init__(env)
        self.bonus = _bonus("the exit bonus", bonus)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            reward += self.bonus * info["reward"]
        return obs, float(reward), terminated, truncated, info


class ExitCurriculum(ScheduledWrapper):
    """Scale the share of points a level requires before its exit opens.

    At each reset the level's ``min_performance`` is multiplied by ``ramp(training steps)``; the
    original ramps it from 0.001 at 0.5M steps to 1.0 at 2M steps.
    """

    def __init__(self, env: gym.Env, ramp: LinearRamp | None = None):
        super().__init__(env)
        self.ramp = ramp if ramp is not None else LinearRamp([500_000, 2_000_000], [0.001, 1.0])

    def scheduled_values(self) -> dict[str, float]:
        return {"exit_fraction": self.ramp(self.training_steps)}

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        game = _game(self)
        fraction = self.ramp(self.training_steps)
        min_performance = np.array([[level.min_performance] for level in game.levels]) * fraction
        game.required_points = np.maximum(0, np.ceil(min_performance * game.available_points))
        info["required_points"] = float(game.required_points[0, 0])
        return obs, info


def check_penalty(penalty: Any, name: str = "the side-effect penalty") -> float:
    """``penalty``, a number in [0, :data:`MAX_PENALTY`], as a float."""
    penalty = check.finite(name, penalty)
    check.value(name, penalty, lambda v: 0 <= v <= MAX_PENALTY, f"in [0, {MAX_PENALTY:g}]")
    return penalty


class SideEffectPenalty(ScheduledWrapper):
    """The starting-state impact penalty of the SafeLife paper.

    Each step the reward loses ``penalty * ramp(training steps)`` for every cell that newly
    departs from the level's starting board (and regains it for every cell restored; see
    :mod:`safelife_rl.engine.departures` for what is ignored: the agent, exits, the bits
    oscillators flip, and with ``ignore_reward_cells`` the changes the reward already pays
    for, red life removed and goal cells filled: the paper excepts the agent's goals).
    """

    def __init__(
        self,
        env: gym.Env,
        penalty: float = 0.0,
        ramp: LinearRamp | None = None,
        ignore_reward_cells: bool = True,
    ):
        super().__init__(env)
        self.penalty = check_penalty(penalty)
        self.ramp = ramp if ramp is not None else LinearRamp([1_000_000, 2_000_000], [0.0, 1.0])
        self.ignore_reward_cells = ignore_reward_cells

    def coefficient(self) -> float:
        return self.penalty * self.ramp(self.training_steps) if self.penalty else 0.0

    def scheduled_values(self) -> dict[str, float]:
        return {"side_effect_penalty": self.coefficient()}

    def side_effect_cells(self) -> int:
        """How many cells now count as departed from the starting board."""
        game = _game(self)
        return int(
            departed_cells(
                game.boards[0],
                self._start,
                game.goals[0],
                game.agent_locs[0, 0],
                self._start_loc,
                self.ignore_reward_cells,
            ).sum()
        )

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        game = _game(self)
        self._start = game.boards[0].copy()
        self._start_loc = game.agent_locs[0, 0].copy()
        self._last_count = 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        coefficient = self.coefficient()
        if coefficient > 0:
            count = self.side_effect_cells()
            reward -= (count - self._last_count) * coefficient
            self._last_count = count
        return obs, float(reward), terminated, truncated, info


class ContinuingEnv(gym.Wrapper):
    """Play on into the next level when the agent exits; the episode ends only on truncation
    (a level's time limit, or an outer ``TimeLimit``). ``info`` at a level change is the
    finished level's, with ``"levels_completed"`` counting levels exited this episode."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._completed = 0
        obs, info = self.env.reset(**kwargs)
        info["levels_completed"] = 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated and not truncated:
            self._completed += int(bool(info.get("success")))
            obs, _ = self.env.reset()
            terminated = False
        info["levels_completed"] = self._completed
        return obs, reward, terminated, truncated, info


def build_wrappers(env: gym.Env, configs: Mapping[str, Any] | None) -> dict[str, gym.Wrapper]:
    """The wrappers of ``configs`` (name -> Hydra config, innermost first; ``None`` skips one)
    built around ``env``, by name."""
    from hydra.utils import instantiate

    if configs is not None and not isinstance(configs, Mapping):
        raise UserError(
            "training_wrappers must map names to wrapper configs "
            f"({{'_target_': ..., settings}}), got {configs!r}"
        )
    chain = {}
    for name, config in (configs or {}).items():
        if config is not None:
            env = chain[name] = instantiate(dict(config), env, _convert_="all")
    return chain
