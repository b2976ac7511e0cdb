"""The tensor vector-env interface the device algorithms step, and its adapters.

:class:`TensorVecEnv` is an SB3 ``VecEnv`` (so SB3's constructors, seeding and
``sync_training_steps`` take it as they are) whose ``reset()`` and ``step(actions)`` take and
give torch tensors on :attr:`~TensorVecEnv.device`, as a :class:`TensorStep`. A device env's
episode statistics stay on the device until the rollout ends.

- :class:`GymnasiumTensorVecEnv` makes one of a Gymnasium ``VectorEnv`` that steps tensors
  with same-step autoreset: :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`, or
  separate envs made by :func:`tensor_vec_env` (Gymnasium's ``SyncVectorEnv`` under
  :class:`NumpyToTorchArrays`; tests compare the device algorithms with stock SB3 through it,
  and non-SafeLife envs train with ``vec_env=device`` so);
- :class:`NumpyView` goes the other way: a tensor env as a NumPy ``VecEnv`` for SB3's own
  algorithms (one host copy per step).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.wrappers.vector import NumpyToTorch
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices

from safelife_rl.training.gymnasium_vec_env import WideningSyncVectorEnv, serve
from safety_rl_common.errors import UserError


class TensorStep(NamedTuple):
    """One step of all envs, tensors on the env's device (first dimension ``num_envs``).

    :ivar observations: the next observations (an ended env's first one of its new episode).
    :ivar rewards: float32 rewards.
    :ivar terminated: bool, the episode reached a terminal state.
    :ivar truncated: bool, the episode was cut short (a time limit); not where ``terminated``.
    :ivar final_observations: the observations before the restarts, valid where
        ``terminated | truncated``; ``None`` when no env ended.
    :ivar final_info: the ended episodes' last infos as the vector env gives them (Gymnasium's
        ``final_info``: per-env tensors, e.g. a device env's episode statistics, or a NumPy
        env's per-env arrays with ``_key`` masks; valid where ``ended``), or ``None``; read
        them once per rollout (:class:`~.episodes.EpisodeRecorder`), not at every step.
    :ivar ended: bool, the envs whose episodes ended, where ``final_info`` is given (on the
        device of ``final_info``'s tensors; on the host for a NumPy env's).
    :ivar costs: float64 per-env step costs (``info["cost"]``, Safety-Gymnasium's convention),
        or ``None`` where the env reports none.
    """

    observations: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_observations: torch.Tensor | None
    final_info: dict[str, Any] | None = None
    ended: torch.Tensor | None = None
    costs: torch.Tensor | None = None


class Forwarding:
    """The rest of SB3's ``VecEnv`` interface, forwarded to the wrapped env ``self.venv``
    (listed before the ``VecEnv`` base, whose abstract methods it provides)."""

    venv: Any

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        return self.venv.seed(seed)

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self.venv.get_attr(attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self.venv.set_attr(attr_name, value, indices)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices)

    def has_attr(self, attr_name: str) -> bool:
        return self.venv.has_attr(attr_name)


class TensorVecEnv(VecEnv):
    """A vector env stepped with tensors on :attr:`device`; see the module docstring.

    ``step_async``/``step_wait`` are not used: the device algorithms call :meth:`step`.
    """

    def __init__(
        self, num_envs: int, observation_space: Any, action_space: Any, device: torch.device | str
    ):
        self.device = torch.device(device)
        super().__init__(num_envs, observation_space, action_space)

    @abstractmethod
    def reset(self) -> torch.Tensor:  # type: ignore[override]
        """Restart every env (with the seed given to :meth:`seed`, if any); the observations."""

    @abstractmethod
    def step(self, actions: torch.Tensor) -> TensorStep:  # type: ignore[override]
        """Step every env with ``actions`` (a tensor on :attr:`device`, ``(num_envs,)`` for
        discrete actions)."""

    @property
    def level_names(self) -> list[str] | None:
        """The names of the level indices in ``final_info["level"]``, if the env has them."""
        return None

    @property
    def episode_limit(self) -> int | None:
        """The most steps an episode lasts before a time limit cuts it, if every env has one
        (the device trainer bounds a rollout's cuts by it), else ``None``."""
        return None

    def check_actions(self) -> None:
        """Raise if an invalid action was given since the last reset, for envs that remember
        them on the device (the device algorithms call it once per rollout)."""

    @property
    def cuda_graphs(self) -> bool:
        """Whether the env replays its step as a CUDA graph (the device algorithms then
        capture the policy's network too)."""
        return False

    def keep_state(self) -> None:
        """Write the state the env's step reads into the tensors it kept the first time
        (and make them its state): the device trainer's rollout captured as one CUDA graph
        (``graphs=rollout``) reads them at every replay. An env that cannot keep its state so
        refuses here (the default: a wrapper's own Python state would not replay)."""
        raise UserError(
            f"graphs=rollout captures the env's step; {type(self).__name__} cannot be replayed "
            "as a CUDA graph (the SafeLife device env without wrappers around it can): use "
            "graphs=none or graphs=update"
        )

    def step_async(self, actions: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__} steps with tensors: call step()")

    def step_wait(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} steps with tensors: call step()")


class TensorVecEnvWrapper(Forwarding, TensorVecEnv):
    """A :class:`TensorVecEnv` over another (``self.venv``), as SB3's ``VecEnvWrapper`` is over
    a ``VecEnv``: everything but :meth:`step` forwarded."""

    def __init__(self, venv: TensorVecEnv):
        self.venv = venv  # before TensorVecEnv's constructor asks it for attributes
        TensorVecEnv.__init__(
            self, venv.num_envs, venv.observation_space, venv.action_space, venv.device
        )

    def reset(self) -> torch.Tensor:  # type: ignore[override]
        return self.venv.reset()

    @property
    def level_names(self) -> list[str] | None:
        return self.venv.level_names

    @property
    def cuda_graphs(self) -> bool:
        return self.venv.cuda_graphs

    @property
    def episode_limit(self) -> int | None:
        return self.venv.episode_limit

    def check_actions(self) -> None:
        self.venv.check_actions()


def ended_infos(final_info: dict[str, Any], ended: torch.Tensor) -> dict[int, dict[str, Any]]:
    """The single-env infos of the envs ``ended`` (a bool tensor) from a vector env's
    ``final_info`` (per-env tensors, arrays or lists, or dicts of them), with Python values. A
    ``_key`` entry marks the envs that have ``key`` (Gymnasium's masks: an env's info lacks the
    keys its own final info did not have); ``None`` entries (e.g. side effects not measured)
    are left out too. All tensors come to the host in one copy."""
    leaves: dict[tuple[str, ...], Any] = {}
    masks: dict[tuple[str, ...], list[Any]] = {}

    def collect(values: dict[str, Any], path: tuple[str, ...], marks: list[Any]) -> None:
        for key, value in values.items():
            if key.startswith("_"):
                continue
            mask = values.get(f"_{key}")
            own = marks if mask is None or mask is ended else [*marks, mask]
            if isinstance(value, dict):
                collect(value, (*path, key), own)
            else:
                leaves[(*path, key)] = value
                masks[(*path, key)] = own

    collect(final_info, (), [])
    columns = {id(c): c for c in [*leaves.values(), *(m for ms in masks.values() for m in ms)]}
    tensors = {k: c for k, c in columns.items() if isinstance(c, torch.Tensor)}
    index = ended.nonzero()[:, 0]
    stacked = torch.stack(
        [index.to(torch.float64), *(c[index].to(torch.float64) for c in tensors.values())]
    ).cpu()
    rows = stacked[0].long().tolist()
    read: dict[int, list[Any]] = {}
    for column, (key, tensor) in zip(stacked[1:].tolist(), tensors.items()):
        convert = (
            bool if tensor.dtype == torch.bool else float if tensor.is_floating_point() else int
        )
        read[key] = [convert(x) for x in column]  # exact: counts stay under 2**53
    for key, column in columns.items():
        if key not in read:
            read[key] = _host_rows(column, rows)
    infos: dict[int, dict[str, Any]] = {k: {} for k in rows}
    for path, leaf in leaves.items():
        present = [all(row) for row in zip(*(read[id(m)] for m in masks[path]))] or None
        for n, (k, value) in enumerate(zip(rows, read[id(leaf)])):
            if value is not None and (present is None or present[n]):
                info = infos[k]
                for key in path[:-1]:
                    info = info.setdefault(key, {})
                info[path[-1]] = value
    return infos


def _host_rows(column: Any, rows: list[int]) -> list[Any]:
    """The entries ``rows`` of a per-env array or list, NumPy scalars as Python's."""
    array = column if isinstance(column, np.ndarray) else np.asarray(column, dtype=object)
    picked = array[rows]
    if picked.ndim > 1:
        return list(picked)
    return [v.item() if isinstance(v, np.generic) else v for v in picked.tolist()]


class GymnasiumTensorVecEnv(TensorVecEnv):
    """A Gymnasium ``VectorEnv`` that steps tensors with same-step autoreset (``info`` keys
    ``final_obs`` and ``final_info``) as a :class:`TensorVecEnv`: one that steps a batch, e.g.
    :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` (its ``final_obs`` one tensor, its
    ``final_info`` per-env tensors), or separate envs (:func:`tensor_vec_env`: Gymnasium's
    per-env infos, ``final_obs`` a per-env object array, the arrays masked by ``_key``).

    Each step's ``final_info`` stays as the env gives it (device tensors or host arrays, valid
    where ``ended``); :class:`~.episodes.EpisodeRecorder` turns the rollout's into info dicts
    with Python values (``None`` entries, e.g. side effects not measured, left out), as the
    single env's last info gives them, and level indices into names. ``info["cost"]`` becomes
    the step's costs: a batch's tensor as it is; of separate envs, each env's step cost (an
    ended env's from its ``final_info``: Gymnasium puts its new episode's reset info at the
    top), or ``None`` unless every env reported one.

    ``get_attr``, ``set_attr``, ``env_method``, ``env_is_wrapped`` and ``has_attr`` reach each
    of separate envs (the vector env's ``envs``, as SB3's ``DummyVecEnv`` reaches them), or
    the vector env that steps a batch and the single env all its envs play.

    :param venv: the vector env; its ``device`` attribute (if any) is the tensors' device.
    """

    def __init__(self, venv: VectorEnv):
        self.venv = venv
        self._seed: int | None = None
        super().__init__(
            venv.num_envs,
            venv.single_observation_space,
            venv.single_action_space,
            getattr(venv, "device", "cpu"),
        )

    def _envs(self) -> list[gym.Env] | None:
        """The vector env's separate envs (``SyncVectorEnv.envs``), or ``None`` for a vector
        env that steps a batch."""
        return getattr(self.venv.unwrapped, "envs", None)

    def reset(self) -> torch.Tensor:  # type: ignore[override]
        observations, _ = self.venv.reset(seed=self._seed)
        self._seed = None
        return torch.as_tensor(observations, device=self.device)

    def step(self, actions: torch.Tensor) -> TensorStep:  # type: ignore[override]
        observations, rewards, terminated, truncated, info = self.venv.step(actions)
        terminated = torch.as_tensor(terminated, device=self.device)
        truncated = torch.as_tensor(truncated, device=self.device)
        observations = torch.as_tensor(observations, device=self.device)
        rewards = torch.as_tensor(rewards, device=self.device)
        if rewards.dtype != torch.float32:
            rewards = rewards.float()
        costs = self._costs(info)
        if "final_obs" not in info:  # no env ended
            return TensorStep(observations, rewards, terminated, truncated, None, costs=costs)
        return TensorStep(
            observations,
            rewards,
            terminated,
            truncated & ~terminated,
            self._final_observations(info["final_obs"]),
            info["final_info"],
            torch.as_tensor(info["_final_info"]),
            costs,
        )

    def _final_observations(self, final_obs: Any) -> torch.Tensor:
        """``info["final_obs"]`` as one tensor: a batch's as it is; Gymnasium's per-env object
        array (``None`` where no env ended) stacked, zeros where ``None``."""
        if isinstance(final_obs, np.ndarray) and final_obs.dtype == object:
            space = self.observation_space
            stacked = np.zeros((self.num_envs, *space.shape), space.dtype)  # type: ignore[misc]
            for k, obs in enumerate(final_obs):
                if obs is not None:
                    stacked[k] = obs
            final_obs = torch.from_numpy(stacked)
        return torch.as_tensor(final_obs, device=self.device)

    def _costs(self, info: dict[str, Any]) -> torch.Tensor | None:
        """The step's costs, float64 on the device (see the class docstring)."""
        costs = info.get("cost")
        if costs is not None and "_cost" not in info:  # a batch's tensor: every env's
            return torch.as_tensor(costs, dtype=torch.float64, device=self.device)
        final = info.get("final_info", {})
        if costs is None and not isinstance(final.get("cost"), np.ndarray):
            return None  # no env reported one
        ended = np.asarray(info.get("_final_info", False))
        values, given = np.zeros(self.num_envs), np.zeros(self.num_envs, bool)
        for infos, envs in ((info, ~ended), (final, ended)):
            if "cost" in infos:
                take = envs & np.asarray(infos.get("_cost", True))
                values[take] = np.asarray(infos["cost"])[take]
                given |= take
        return torch.as_tensor(values, device=self.device) if given.all() else None

    @property
    def level_names(self) -> list[str] | None:
        return getattr(self.venv, "level_names", None)

    @property
    def cuda_graphs(self) -> bool:
        return bool(getattr(self.venv, "cuda_graphs", False))

    @property
    def episode_limit(self) -> int | None:
        """A vector env's that steps a batch (its ``episode_limit``), if it has one."""
        return getattr(self.venv, "episode_limit", None)

    def check_actions(self) -> None:
        check = getattr(self.venv, "check_actions", None)
        if check is not None:
            check()

    def keep_state(self) -> None:
        """The vector env's (:meth:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv.
        keep_state`), if it keeps its state in tensors."""
        keep = getattr(self.venv, "keep_state", None)
        if keep is None:
            super().keep_state()
        else:
            keep()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next :meth:`reset`: separate envs as SB3 seeds them (env ``i`` gets
        ``seed + i``), a vector env that steps a batch with the one seed."""
        self._seed = seed
        if seed is None or self._envs() is None:
            return [seed] * self.num_envs
        return [seed + i for i in range(self.num_envs)]

    def close(self) -> None:
        self.venv.close()

    def _owner(self, attr_name: str) -> Any:
        """The vector env, or for an attribute it lacks the single env all its envs play (its
        ``env``, as :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` keeps it: e.g.
        ``noop_action``)."""
        single = getattr(self.venv, "env", None)
        if not hasattr(self.venv, attr_name) and hasattr(single, attr_name):
            return single
        return self.venv

    def _ask(self, indices: VecEnvIndices, op: str, name: str, *args: Any, **kwargs: Any) -> list:
        """``op`` (:func:`~safelife_rl.training.gymnasium_vec_env.serve`) on the separate envs
        at ``indices``."""
        envs = self._envs()
        assert envs is not None
        return [serve(envs[i], op, name, args, kwargs) for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if self._envs() is not None:
            return self._ask(indices, "get", attr_name)
        return [getattr(self._owner(attr_name), attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if self._envs() is None:
            setattr(self.venv, attr_name, value)
            return
        self._ask(indices, "set", attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        if self._envs() is not None:
            return self._ask(indices, "call", method_name, *method_args, **method_kwargs)
        results = self.venv.call(method_name, *method_args, **method_kwargs)
        return [results[k] for k in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        if self._envs() is not None:
            return self._ask(indices, "is_wrapped", "", wrapper_class)
        return [False] * len(self._get_indices(indices))

    def has_attr(self, attr_name: str) -> bool:
        """Whether the envs have ``attr_name``: each of separate envs under its wrappers; else
        the vector env itself (e.g. :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`'s
        ``set_training_steps``), the single env they all play (:meth:`_owner`), or every env
        under its wrappers (Gymnasium's ``has_wrapper_attr``, through the vector env's
        ``call``)."""
        if self._envs() is not None:
            return all(self._ask(None, "has", attr_name))
        if hasattr(self.venv, attr_name) or self._owner(attr_name) is not self.venv:
            return True
        return all(self.venv.call("has_wrapper_attr", attr_name))


class NumpyToTorchArrays(NumpyToTorch):
    """Gymnasium's ``NumpyToTorch`` for the arrays of a step (observations, rewards as
    float32, as SB3's vector envs give them, terminations, truncations; the actions back to
    NumPy), the infos left as the NumPy vector env gives them. ``NumpyToTorch`` converts the
    infos too: it cannot convert an object array (same-step autoreset's ``final_obs`` per env,
    any info that is not a number), and a step's infos are read on the host anyway
    (:class:`GymnasiumTensorVecEnv` reads the costs and final observations,
    :class:`~.episodes.EpisodeRecorder` the episodes once per rollout).

    :param env: the NumPy vector env.
    :param device: where the tensors go.
    """

    def __init__(self, env: VectorEnv, device: torch.device | str = "cpu"):
        super().__init__(env, device=torch.device(device))

    def _to_torch(self, value: Any) -> torch.Tensor:
        """``value`` as a tensor on the device (on the CPU sharing the array, as NumpyToTorch's
        DLPack conversion does; ``from_numpy`` is the fastest way there)."""
        if isinstance(value, np.ndarray) and value.flags.writeable:
            tensor = torch.from_numpy(value)
            return tensor if self.device.type == "cpu" else tensor.to(self.device)
        return torch.as_tensor(value, device=self.device)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        observations, info = self.env.reset(seed=seed, options=options)
        return self._to_torch(observations), info

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        observations, rewards, terminated, truncated, info = self.env.step(
            actions.numpy(force=True)
        )
        return (
            self._to_torch(observations),
            self._to_torch(np.asarray(rewards, np.float32)),
            self._to_torch(terminated),
            self._to_torch(truncated),
            info,
        )


def tensor_vec_env(
    env_fns: Sequence[Callable[[], gym.Env]], device: torch.device | str = "cpu"
) -> GymnasiumTensorVecEnv:
    """The envs of ``env_fns`` as a :class:`TensorVecEnv` on ``device``: stepped one after the
    other in this process (Gymnasium's ``SyncVectorEnv``, same-step autoreset, infos widened
    as needed: as SB3's ``DummyVecEnv`` steps them), their arrays converted by
    :class:`NumpyToTorchArrays`.
    Seeded as SB3 seeds: env ``i`` gets ``seed + i``."""
    vector = WideningSyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
    return GymnasiumTensorVecEnv(NumpyToTorchArrays(vector, device))


class NumpyView(Forwarding, VecEnv):
    """A :class:`TensorVecEnv` as an SB3 NumPy ``VecEnv``, for SB3's own algorithms on a device
    env (AUP's auxiliary DQN, whose replay buffer is NumPy on the host): each step's actions go
    to the device and its results come back to the host, with SB3's ``terminal_observation``,
    ``TimeLimit.truncated``, ``episode`` and ``cost`` infos. Closing it leaves ``venv`` open
    (it borrows the envs).

    :param venv: the tensor vector env.
    """

    def __init__(self, venv: TensorVecEnv):
        self.venv = venv
        self._actions: torch.Tensor | None = None
        super().__init__(venv.num_envs, venv.observation_space, venv.action_space)

    def reset(self) -> np.ndarray:
        return self.venv.reset().cpu().numpy()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = torch.as_tensor(np.asarray(actions), device=self.venv.device)

    def step_wait(self) -> Any:
        assert self._actions is not None, "step_async first"
        step = self.venv.step(self._actions)
        observations = step.observations.cpu().numpy()
        rewards = step.rewards.cpu().numpy().astype(np.float32)
        terminated, truncated = step.terminated.cpu().numpy(), step.truncated.cpu().numpy()
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if step.costs is not None:
            for info, cost in zip(infos, step.costs.tolist()):
                info["cost"] = cost
        ended: dict[int, dict[str, Any]] = {}
        if step.final_info is not None and bool(dones.any()):
            ended = ended_infos(step.final_info, step.ended)
        final = step.final_observations.cpu().numpy() if dones.any() else None
        for k in np.flatnonzero(dones):
            infos[k].update(ended.get(int(k), {}))
            infos[k]["terminal_observation"] = final[k]
            infos[k]["TimeLimit.truncated"] = bool(truncated[k])
        return observations, rewards, dones, infos

    def close(self) -> None:
        pass  # the envs are borrowed
