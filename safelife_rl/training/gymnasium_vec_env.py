"""SB3's ``VecEnv`` over a Gymnasium NumPy ``VectorEnv``: the one NumPy adapter.

Gymnasium's ``VectorEnv`` is the env API; SB3's algorithms take a ``VecEnv``. A vector env whose
autoreset mode is ``SAME_STEP`` (an ended env is reset in the step that ended it, its last
observation and info under ``final_obs`` and ``final_info``) steps as SB3's vector envs do, so
:class:`GymnasiumVecEnv` only translates: per-env info dicts with ``terminal_observation`` and
``TimeLimit.truncated``, the reset infos in ``reset_infos``, ``float32`` rewards, SB3's seeding.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from safelife_rl.envs.batched_vector_env import batch_infos


class GymnasiumVecEnv(VecEnv):
    """SB3's ``VecEnv`` over ``vector``, which resets ended envs in the same step.

    ``get_attr``, ``set_attr``, ``env_method`` and ``env_is_wrapped`` (SB3's ``evaluate_policy``
    looks for ``Monitor``) reach each env's wrapper chain: directly where the vector env holds
    its envs in this process (``vector.envs``, as ``SyncVectorEnv`` and
    :class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv` do), else through Gymnasium's
    ``call`` (``AsyncVectorEnv``), whose envs must then be made by :func:`reachable`.

    :param vector: a NumPy ``VectorEnv`` with ``autoreset_mode`` ``SAME_STEP``.
    """

    def __init__(self, vector: VectorEnv):
        mode = vector.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"GymnasiumVecEnv needs autoreset_mode=SAME_STEP, got {mode}")
        self.vector = vector
        self._envs: list[gym.Env] | None = getattr(vector, "envs", None)
        if self._envs is None and not all(vector.call("has_wrapper_attr", _SERVE)):
            raise ValueError(
                f"the envs of {type(vector).__name__} live in other processes: make each with "
                "safelife_rl.training.gymnasium_vec_env.reachable(factory, index)"
            )
        super().__init__(
            vector.num_envs, vector.single_observation_space, vector.single_action_space
        )
        self._actions: Any = None
        self._started = False  # reset once: Gymnasium's reset_mask works from then on

    def reset(self) -> VecEnvObs:
        """Reset every env with its seed and options (SB3's ``seed`` and ``set_options``).

        Envs whose options differ are reset apart, each group by Gymnasium's ``reset_mask``.
        A Gymnasium vector env cannot reset only some envs before its first reset, so then all
        envs are reset with env 0's options first, and those with other options again with
        their own (and their seeds: with SB3's ``seed``, the same start as one reset)."""
        groups: list[tuple[dict[str, Any], np.ndarray]] = []  # options, the envs that have them
        for i, options in enumerate(self._options):
            mask = next((mask for same, mask in groups if same == options), None)
            if mask is None:
                mask = np.zeros(self.num_envs, bool)
                groups.append((options, mask))
            mask[i] = True
        seeds = list(self._seeds)
        if len(groups) == 1 or not self._started:
            obs, infos = self.vector.reset(seed=seeds, options=groups[0][0] or None)
            self.reset_infos = unbatch_infos(infos, self.num_envs)
            groups = groups[1:]
        for options, mask in groups:
            obs, infos = self.vector.reset(seed=seeds, options={**options, "reset_mask": mask})
            for i, info in enumerate(unbatch_infos(infos, self.num_envs)):
                if mask[i]:
                    self.reset_infos[i] = info
        self._started = True
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
        return self._ask(indices, "get", attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._ask(indices, "set", attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:  # fmt: skip
        return self._ask(indices, "call", method_name, *method_args, **method_kwargs)

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        return self._ask(indices, "is_wrapped", "", wrapper_class)

    def has_attr(self, attr_name: str) -> bool:
        return all(self._ask(None, "has", attr_name))

    def _ask(self, indices: VecEnvIndices, op: str, name: str, *args: Any, **kwargs: Any) -> list:
        """``op`` (see :func:`serve`) on the envs at ``indices``, in their order."""
        every = range(self.num_envs)  # a negative index counts from the end, as in a list
        chosen = [every[i] for i in self._get_indices(indices)]
        if self._envs is not None:
            return [serve(self._envs[i], op, name, args, kwargs) for i in chosen]
        answers = self.vector.call(_SERVE, frozenset(chosen), op, name, args, kwargs)
        for answer in answers:
            if isinstance(answer, Failed):
                raise answer.error
        return [answers[i] for i in chosen]


def serve(env: gym.Env, op: str, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    """One of SB3's requests to a single env, as ``DummyVecEnv`` answers it: ``"get"`` an
    attribute or ``"call"`` a method anywhere in the wrapper chain, ``"set"`` an attribute on
    the outermost wrapper, whether the chain ``"has"`` an attribute or ``"is_wrapped"`` by the
    class ``args[0]``."""
    if op == "get":
        return env.get_wrapper_attr(name)
    if op == "call":
        return env.get_wrapper_attr(name)(*args, **kwargs)
    if op == "set":
        return setattr(env, name, args[0])
    if op == "has":
        return env.has_wrapper_attr(name)
    if op == "is_wrapped":
        return is_wrapped(env, args[0])
    raise ValueError(f"unknown request {op!r}")


_SERVE = "serve_sb3"


class Failed(NamedTuple):
    """A worker's answer that raised: raised again in the main process, as an env in this
    process would raise it (Gymnasium ends a worker whose ``call`` raises)."""

    error: Exception


class Reachable(gym.Wrapper):
    """The outermost wrapper of env ``index`` of a vector env in worker processes: answers
    :class:`GymnasiumVecEnv`'s requests (:func:`serve`, on the env inside it) that reach it
    through Gymnasium's ``call``, which asks every env; the others answer ``None``."""

    def __init__(self, env: gym.Env, index: int):
        super().__init__(env)
        self.index = index

    def serve_sb3(
        self, indices: frozenset[int], op: str, name: str, args: tuple, kwargs: dict[str, Any]
    ) -> Any:
        if self.index not in indices:
            return None
        try:
            return serve(self.env, op, name, args, kwargs)
        except Exception as error:  # raised again in the main process
            return Failed(error)


def reachable(factory: Callable[[], gym.Env], index: int) -> Reachable:
    """``factory()`` as env ``index`` of an ``AsyncVectorEnv`` under :class:`GymnasiumVecEnv`."""
    return Reachable(factory(), index)


class OneBatchOfInfos:
    """For Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``: each env's infos of a step are
    kept as they are and batched once, by
    :func:`~safelife_rl.envs.batched_vector_env.batch_infos`, where Gymnasium batches them env
    by env (``_add_info``, most of a vector step's own cost). The same batched dict, except that
    a value that the first env's type cannot hold exactly (an int cost, then a float one; a
    number, then ``None``) widens its array rather than being cast into it: each env's values
    reach SB3 as ``DummyVecEnv`` gives them (an int beside a float comes back as that float)."""

    num_envs: int

    def _add_info(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        envs = vector_infos.setdefault(_PER_ENV, [{} for _ in range(self.num_envs)])
        envs[env_num].update(env_info)  # an ended env: its final info, then its reset info
        return vector_infos

    def _batched(self, result: tuple) -> tuple:
        """``result`` (a step's or reset's) with its infos batched."""
        *arrays, infos = result
        per_env = infos.get(_PER_ENV)
        return (*arrays, batch_infos(per_env) if per_env else {})


_PER_ENV = "per env"


class WideningSyncVectorEnv(OneBatchOfInfos, SyncVectorEnv):
    """Gymnasium's ``SyncVectorEnv`` with :class:`OneBatchOfInfos`."""

    def reset(self, **kwargs: Any) -> tuple:
        return self._batched(super().reset(**kwargs))

    def step(self, actions: Any) -> tuple:
        return self._batched(super().step(actions))


class WorkerFailed(RuntimeError):
    """An env worker process raised, or ended (killed, say): its vector env cannot step on. The
    message is one line; ``trace``: the worker's traceback, where it raised."""

    def __init__(self, message: str, trace: str | None = None):
        super().__init__(message)
        self.trace = trace


class WideningAsyncVectorEnv(OneBatchOfInfos, AsyncVectorEnv):
    """Gymnasium's ``AsyncVectorEnv`` with :class:`OneBatchOfInfos`, whose failing workers raise
    :class:`WorkerFailed` (one line; Gymnasium logs the worker's traceback and raises its
    exception's type, or a bare ``EOFError`` or ``BrokenPipeError`` for a worker that died) and
    which ends its other workers on closing after a failure, rather than waiting on them."""

    def reset_async(self, *args: Any, **kwargs: Any) -> None:
        with self._workers_answering():
            super().reset_async(*args, **kwargs)

    def reset_wait(self, *args: Any, **kwargs: Any) -> tuple:
        with self._workers_answering():
            return self._batched(super().reset_wait(*args, **kwargs))

    def step_async(self, actions: Any) -> None:
        with self._workers_answering():
            super().step_async(actions)

    def step_wait(self, *args: Any, **kwargs: Any) -> tuple:
        with self._workers_answering():
            return self._batched(super().step_wait(*args, **kwargs))

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        with self._workers_answering():
            super().call_async(name, *args, **kwargs)

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        with self._workers_answering():
            return super().call_wait(timeout)

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        if terminate or not all(process.is_alive() for process in self.processes):
            # a worker ended (nothing more will answer) or the caller ends them: all end before
            # their pipes close, so that none wakes to a closed pipe and prints a traceback
            self._state = AsyncState.DEFAULT
            for process in self.processes:
                if process.is_alive():
                    process.terminate()
            for process in self.processes:
                process.join()
            terminate = True
        super().close_extras(timeout, terminate)

    @contextmanager
    def _workers_answering(self) -> Iterator[None]:
        """Raise :class:`WorkerFailed` for a worker whose pipe closed (it ended) or that
        failed before."""
        failed = [index for index, pipe in enumerate(self.parent_pipes) if pipe is None]
        if failed:
            raise WorkerFailed(f"env worker {failed[0]} failed before; close this vector env")
        try:
            yield
        except (EOFError, ConnectionError) as error:
            self._state = AsyncState.DEFAULT
            ended = wait([process.sentinel for process in self.processes], timeout=1.0)
            for index, process in enumerate(self.processes):
                if process.sentinel in ended:
                    process.join()
                    raise WorkerFailed(f"env worker {index} {_ended(process.exitcode)}") from error
            raise WorkerFailed(f"an env worker's pipe closed ({type(error).__name__})") from error

    def _raise_if_errors(self, successes: Iterable[bool]) -> None:
        """As Gymnasium's (the failed workers' pipes closed; they end), raising
        :class:`WorkerFailed` without logging."""
        failures = [self.error_queue.get() for success in successes if not success]
        if not failures:
            return
        for index, *_ in failures:
            self.parent_pipes[index].close()
            self.parent_pipes[index] = None
        self._state = AsyncState.DEFAULT
        index, kind, value, trace = failures[-1]
        text = " ".join(str(value).split())
        raise WorkerFailed(f"env worker {index} failed: {kind.__name__}: {text}", trace)


def _ended(exitcode: int) -> str:
    """How a process with ``exitcode`` (``multiprocessing``'s: minus a signal's number) ended."""
    if exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with status {exitcode}"


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
