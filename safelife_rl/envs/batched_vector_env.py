"""SafeLife as a NumPy Gymnasium ``VectorEnv`` whose games step as one Numba batch.

``gymnasium.make_vec(id, n)`` of a SafeLife id without a ``device`` gives a
:class:`BatchedVectorEnv`: NumPy in and out, Gymnasium's default autoreset (``NEXT_STEP``, as
``SyncVectorEnv``), so every ``gymnasium.wrappers.vector`` wrapper applies. With
``autoreset_mode=SAME_STEP`` it resets an ended env in the step that ended it, as SB3's vector
envs do: ``vec_env=batched`` is :class:`~safelife_rl.training.gymnasium_vec_env.GymnasiumVecEnv`
over it. Each env keeps its
own :class:`~safelife_rl.envs.env.SafeLifeEnv` (seeded level stream and game generator) and its
wrappers, and plays exactly what a ``SyncVectorEnv`` of the same envs plays
(``tests/packages/test_vector_wrappers.py``); only the games' steps and observations are
computed for all envs at once (:class:`~safelife_rl.engine.numba_batch.SlotBatch`), which on
the CPU is several times faster than stepping them one by one (``docs/speed.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from safelife_rl.engine.numba_batch import SlotBatch
from safelife_rl.envs.batch_slot import BatchSlot, shared_view, slot_of
from safelife_rl.envs.env import JsonSafeSpec
from safelife_rl.envs.registration import make_task_env
from safelife_rl.envs.vector_conventions import check_action_batch, check_reset_mask
from safelife_rl.envs.wrappers import build_wrappers
from safety_rl_common.errors import UserError


class BatchedVectorEnv(JsonSafeSpec, VectorEnv):
    """``len(env_fns)`` SafeLife envs whose games step together.

    :param env_fns: each builds one env whose wrapper chain has a
        :class:`~safelife_rl.envs.batch_slot.BatchSlot` directly on its SafeLife env; all share
        view and channels, and wrappers above the slot step their env once per step with the
        action they get (as the reward wrappers and ``TimeLimit`` do).
    :param autoreset_mode: ``NEXT_STEP`` (Gymnasium's default) or ``SAME_STEP`` (an ended env's
        last observation and info go under ``final_obs`` and ``final_info`` of its reset info).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
    ):
        if autoreset_mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(
                f"BatchedVectorEnv autoresets NEXT_STEP or SAME_STEP, not {autoreset_mode}"
            )
        self.envs = [make() for make in env_fns]
        self.num_envs = len(self.envs)
        self.slots = [slot_of(env) for env in self.envs]
        self._view = shared_view(self.slots)
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": autoreset_mode}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self.batch = SlotBatch(self.num_envs)
        self._autoreset = np.zeros(self.num_envs, bool)
        self._observations = np.zeros(
            self.observation_space.shape, self.single_observation_space.dtype
        )

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:  # fmt: skip
        """Reset every env, or those of ``options["reset_mask"]`` (the others keep their
        observation), as ``SyncVectorEnv`` does; an int ``seed`` seeds env ``i`` with
        ``seed + i``."""
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset got {len(seeds)} seeds for {self.num_envs} envs")
        resetting = np.ones(self.num_envs, bool)
        if options is not None and "reset_mask" in options:
            options = dict(options)
            resetting = check_reset_mask(options.pop("reset_mask"), self.num_envs)
        self._observations = self._observations.copy()  # the last step's stay the caller's
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(resetting).tolist():
            self._observations[i], infos[i] = self.envs[i].reset(seed=seeds[i], options=options)
        self._autoreset[resetting] = False
        return self._observations.copy(), batch_infos(infos)

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions)
        check_action_batch(actions.shape, self.num_envs)
        ints = actions.astype(np.int64)
        space = self.single_action_space  # action_space.contains(ints) as two bounds
        if not (space.start <= ints.min() and ints.max() < space.start + space.n):
            raise ValueError(
                f"actions must be {self.num_envs} ints in range({space.n}), got {actions!r}"
            )
        steps = self.step_envs(ints, ~self._autoreset)
        obs_out = np.empty(
            (self.num_envs, *self.single_observation_space.shape),
            self.single_observation_space.dtype,
        )
        reward_out = np.zeros(self.num_envs, np.float64)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        infos: list[dict[str, Any]] = []
        same_step = self.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        for i, (env, step) in enumerate(zip(self.envs, steps)):
            if step is None:
                obs, info = env.reset()
            else:
                obs, reward_out[i], terminated[i], truncated[i], info = step
                if same_step and (step[2] or step[3]):  # terminated or truncated
                    final_obs, final_info = obs, info
                    obs, info = env.reset()
                    info = {**info, "final_obs": final_obs, "final_info": final_info}
            obs_out[i] = obs
            infos.append(info)
        if not same_step:
            self._autoreset = terminated | truncated
        self._observations = obs_out
        return obs_out, reward_out, terminated, truncated, batch_infos(infos)

    def step_envs(self, actions: np.ndarray, stepping: np.ndarray) -> list[tuple | None]:
        """Step every game of the batch at once, then each env ``i`` where ``stepping[i]``
        through its wrappers: ``env.step(actions[i])``'s five values, ``None`` for the others.

        The games of envs not stepping are stepped too (their envs reset them next; each game
        draws from its own generator, so nothing else changes)."""
        stepped_envs = stepping.tolist()
        for i, (slot, stepped) in enumerate(zip(self.slots, stepped_envs)):
            game = slot.env.game
            if stepped and (not game.active[0, 0] or game.num_steps >= slot.env.time_limit):
                raise RuntimeError("the episode has ended; call reset()")
            if slot.needs_adoption:
                self.batch.adopt(i, game)
                slot.needs_adoption = False
        rewards, dones = self.batch.step(actions)
        observations = self.batch.observe(*self._view)
        steps: list[tuple | None] = []
        for env, slot, stepped, action, obs, reward, done in zip(
            self.envs, self.slots, stepped_envs, actions, observations,
            rewards[:, 0].tolist(), dones[:, 0].tolist(),
        ):  # fmt: skip
            if stepped:
                slot.deliver(int(action), obs, reward, done)
                steps.append(env.step(action))
            else:
                steps.append(None)
        return steps

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Each env's seed, as ``SyncVectorEnv`` gives them."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each env's generator, as ``SyncVectorEnv`` gives them."""
        return self.get_attr("np_random")

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each env's method ``name`` called (an attribute that is not callable: its value),
        found anywhere in its wrapper chain, as ``SyncVectorEnv.call``."""
        results = []
        for env in self.envs:
            attribute = env.get_wrapper_attr(name)
            results.append(attribute(*args, **kwargs) if callable(attribute) else attribute)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Each env's attribute ``name`` (a method is called, as ``SyncVectorEnv.get_attr``)."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` on each env's wrapper chain: ``values`` one per env (a list or tuple), or
        one value for all."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr got {len(values)} values for {self.num_envs} envs")
        for env, value in zip(self.envs, values):
            env.set_wrapper_attr(name, value)

    def render(self) -> tuple[Any, ...] | None:
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def batch_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The envs' infos as Gymnasium's ``VectorEnv._add_info`` batches them (``final_obs`` and
    objects in object arrays, scalars and arrays stacked with the dtype of the first env's value
    where every env's value fits it, else widened (:func:`_scalar_dtype`),
    nested dicts batched alike, ``_key`` marks the envs with ``key``), one array per key rather
    than one call per env: with 64 envs that call took a tenth of a step. In most steps every
    env has the same keys (no episode ended), and then no env is asked which keys it has."""
    keys: Iterable[str] = infos[0].keys()
    every = all(info.keys() == keys for info in infos)
    if every:
        everyone = np.ones(len(infos), bool)
    else:
        keys = dict.fromkeys(key for info in infos for key in info)
    batched: dict[str, Any] = {}
    for key in keys:
        if every:
            has, first = everyone.copy(), infos[0][key]
        else:
            present = [key in info for info in infos]
            has, first = np.array(present), infos[present.index(True)][key]
        dtype = None
        if key != "final_obs" and (
            type(first) in (int, float, bool) or isinstance(first, np.number)
        ):
            dtype = _scalar_dtype([info[key] for info in infos if key in info])
        if key != "final_obs" and isinstance(first, dict):
            array: Any = batch_infos([info.get(key, {}) for info in infos])
        elif dtype is not None and dtype.kind != "O":
            array = np.array([info.get(key, 0) for info in infos], dtype)
        elif dtype is None and key != "final_obs" and isinstance(first, np.ndarray):
            array = np.zeros((len(infos), *first.shape), first.dtype)
            for i, info in enumerate(infos):
                if key in info:
                    array[i] = info[key]
        else:
            array = np.fromiter([info.get(key) for info in infos], object, len(infos))
        batched[key], batched[f"_{key}"] = array, has
    return batched


def _scalar_dtype(values: list[Any]) -> np.dtype:
    """The dtype of the envs' scalar ``values`` of one key: Gymnasium's (the type they all have)
    or, where an env's value would not fit the first one's type (an int beside a float, a
    number beside ``None``), one that holds each exactly: Gymnasium would cast it."""
    types = set(map(type, values))
    if len(types) == 1:
        return np.dtype(types.pop())
    return np.result_type(*(np.asarray(value).dtype for value in values))


def make_task_vector_env(
    num_envs: int,
    task: str,
    device: Any = None,
    training_wrappers: Any = None,
    max_episode_steps: int | None = None,
    **kwargs: Any,
) -> gym.vector.VectorEnv:
    """Vector entry point of the registered ids: ``num_envs`` envs of
    :func:`~safelife_rl.envs.registration.make_task_env`
    ``(task, **kwargs)``, with ``training_wrappers`` (name -> wrapper config, innermost first)
    around each and ``max_episode_steps`` a ``TimeLimit`` outside them.

    Without a ``device``, Gymnasium's convention and the fastest CPU path: a NumPy
    :class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` (the games stepped as one
    Numba batch). With one, the tensors of
    :func:`safelife_rl.envs.vector_env.make_task_vector_env` on that device.
    """
    if device is not None:
        from safelife_rl.envs import vector_env

        return vector_env.make_task_vector_env(
            num_envs, task, device=device, training_wrappers=training_wrappers,
            max_episode_steps=max_episode_steps, **kwargs,
        )  # fmt: skip
    device_options = sorted({"compile", "check_actions", "groups"} & set(kwargs))
    if device_options:
        raise UserError(
            f"{', '.join(device_options)}: options of the device vector env; give "
            "a device (device='cpu' or 'cuda')"
        )

    def make() -> gym.Env:
        env: gym.Env = BatchSlot(make_task_env(task, **kwargs))
        env = list(build_wrappers(env, training_wrappers).values() or [env])[-1]
        if max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps)
        return env

    return BatchedVectorEnv([make] * num_envs)
