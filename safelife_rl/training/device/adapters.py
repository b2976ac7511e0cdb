"""The tensor vector-env interface the device algorithms step, and its adapters.

:class:`TensorVecEnv` is an SB3 ``VecEnv`` (so SB3's constructors, seeding and
``sync_training_steps`` take it as they are) whose ``reset()`` and ``step(actions)`` take and
give torch tensors on :attr:`~TensorVecEnv.device`, as a :class:`TensorStep`. A device env's
episode statistics stay on the device until the rollout ends.

- :class:`NumpyVecEnvAdapter` makes any SB3 NumPy ``VecEnv`` one (tests compare the device
  algorithms with stock SB3 through it; non-SafeLife envs train with ``vec_env=device`` so);
- :class:`GymnasiumTensorVecEnv` makes one of a Gymnasium ``VectorEnv`` that already steps
  tensors with same-step autoreset, such as
  :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`;
- :class:`NumpyView` goes the other way: a tensor env as a NumPy ``VecEnv`` for SB3's own
  algorithms (one host copy per step).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from gymnasium.vector import VectorEnv
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices


class TensorStep(NamedTuple):
    """One step of all envs, tensors on the env's device (first dimension ``num_envs``).

    :ivar observations: the next observations (an ended env's first one of its new episode).
    :ivar rewards: float32 rewards.
    :ivar terminated: bool, the episode reached a terminal state.
    :ivar truncated: bool, the episode was cut short (a time limit); not where ``terminated``.
    :ivar final_observations: the observations before the restarts, valid where
        ``terminated | truncated``; ``None`` when no env ended.
    :ivar infos: a host env's SB3-style info dicts (``"episode"``: ``{"r", "l"}``, the env's
        statistics) of the envs that ended, by env index (empty for a device env).
    :ivar final_info: a device env's episode statistics as per-env tensors (Gymnasium's
        ``final_info``, valid where ``ended``), or ``None``; read them once per rollout
        (:class:`~.episodes.EpisodeRecorder`), not at every step.
    :ivar ended: bool, the envs whose episodes ended, where ``final_info`` is given.
    :ivar costs: float64 per-env step costs (``info["cost"]``, Safety-Gymnasium's convention),
        or ``None`` where the env reports none.
    """

    observations: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_observations: torch.Tensor | None
    infos: dict[int, dict[str, Any]]
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

    def check_actions(self) -> None:
        """Raise if an invalid action was given since the last reset, for envs that remember
        them on the device (the device algorithms call it once per rollout)."""

    @property
    def cuda_graphs(self) -> bool:
        """Whether the env replays its step as a CUDA graph (the device algorithms then
        capture the policy's network too)."""
        return False

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

    def check_actions(self) -> None:
        self.venv.check_actions()


class NumpyVecEnvAdapter(Forwarding, TensorVecEnv):
    """An SB3 NumPy ``VecEnv`` as a :class:`TensorVecEnv`: actions go to the CPU, observations
    and rewards come back as tensors on ``device``; timeouts (``TimeLimit.truncated``) become
    ``truncated``, ``terminal_observation`` the final observations.

    :param venv: the vector env (e.g. a ``DummyVecEnv``).
    :param device: where the tensors go.
    """

    def __init__(self, venv: VecEnv, device: torch.device | str = "cpu"):
        self.venv = venv
        super().__init__(venv.num_envs, venv.observation_space, venv.action_space, device)

    def reset(self) -> torch.Tensor:  # type: ignore[override]
        return torch.as_tensor(self.venv.reset(), device=self.device)

    def step(self, actions: torch.Tensor) -> TensorStep:  # type: ignore[override]
        observations, rewards, dones, infos = self.venv.step(actions.cpu().numpy())
        truncated = np.array(
            [
                bool(done and info.get("TimeLimit.truncated", False))
                for done, info in zip(dones, infos)
            ]
        )
        ended = {int(k): infos[k] for k in np.flatnonzero(dones)}
        final = None
        if ended:
            final = np.array(observations)
            for k, info in ended.items():
                if info.get("terminal_observation") is not None:
                    final[k] = info["terminal_observation"]
            final = torch.as_tensor(final, device=self.device)
        costs = None
        if all("cost" in info for info in infos):
            costs = torch.tensor(
                [info["cost"] for info in infos], dtype=torch.float64, device=self.device
            )
        return TensorStep(
            torch.as_tensor(observations, device=self.device),
            torch.as_tensor(rewards, device=self.device),
            torch.as_tensor(dones & ~truncated, device=self.device),
            torch.as_tensor(truncated, device=self.device),
            final,
            ended,
            costs=costs,
        )


def ended_infos(final_info: dict[str, Any], ended: torch.Tensor) -> dict[int, dict[str, Any]]:
    """The single-env infos of the envs ``ended`` (a bool tensor) from a vector env's
    ``final_info`` (per-env tensors, arrays, or dicts of them; ``_``-keys are masks), with
    Python values; ``None`` entries (e.g. side effects not measured) are left out. All tensors
    come to the host in one copy."""
    leaves: dict[tuple[str, ...], Any] = {}

    def collect(values: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, value in values.items():
            if isinstance(value, dict):
                collect(value, (*path, key))
            elif not key.startswith("_"):
                leaves[(*path, key)] = value

    collect(final_info, ())
    index = ended.nonzero()[:, 0]
    tensors = {path: v for path, v in leaves.items() if isinstance(v, torch.Tensor)}
    columns = torch.stack(
        [index.to(torch.float64), *(v[index].to(torch.float64) for v in tensors.values())]
    ).cpu()
    rows = columns[0].long().tolist()
    values: dict[tuple[str, ...], list[Any]] = {}
    for column, (path, tensor) in zip(columns[1:].tolist(), tensors.items()):
        convert = (
            bool if tensor.dtype == torch.bool else float if tensor.is_floating_point() else int
        )
        values[path] = [convert(x) for x in column]  # exact: counts stay under 2**53
    for path, array in leaves.items():
        if path not in tensors:
            values[path] = list(np.asarray(array, dtype=object)[rows])
    infos: dict[int, dict[str, Any]] = {k: {} for k in rows}
    for path, column in values.items():
        for k, value in zip(rows, column):
            if value is not None:
                info = infos[k]
                for key in path[:-1]:
                    info = info.setdefault(key, {})
                info[path[-1]] = value
    return infos


class GymnasiumTensorVecEnv(TensorVecEnv):
    """A Gymnasium ``VectorEnv`` that steps tensors with same-step autoreset (``info`` keys
    ``final_obs`` and ``final_info``, the latter a dict of per-env tensors or arrays) as a
    :class:`TensorVecEnv`, e.g. :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`.

    Each step's ``final_info`` stays as the env gives it (device tensors, valid where
    ``ended``); :class:`~.episodes.EpisodeRecorder` turns the rollout's into info dicts with
    Python values (``None`` entries, e.g. side effects not measured, left out), as the single
    env's last info gives them, and level indices into names.

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

    def reset(self) -> torch.Tensor:  # type: ignore[override]
        observations, _ = self.venv.reset(seed=self._seed)
        self._seed = None
        return torch.as_tensor(observations, device=self.device)

    def step(self, actions: torch.Tensor) -> TensorStep:  # type: ignore[override]
        observations, rewards, terminated, truncated, info = self.venv.step(actions)
        terminated = torch.as_tensor(terminated, device=self.device)
        truncated = torch.as_tensor(truncated, device=self.device) & ~terminated
        observations = torch.as_tensor(observations, device=self.device)
        rewards = torch.as_tensor(rewards, device=self.device)
        costs = info.get("cost")
        if costs is not None:
            costs = torch.as_tensor(costs, dtype=torch.float64, device=self.device)
        if "final_obs" not in info:
            return TensorStep(observations, rewards, terminated, truncated, None, {}, costs=costs)
        return TensorStep(
            observations,
            rewards,
            terminated,
            truncated,
            torch.as_tensor(info["final_obs"], device=self.device),
            {},
            info["final_info"],
            torch.as_tensor(info["_final_info"], device=self.device),
            costs,
        )

    @property
    def level_names(self) -> list[str] | None:
        return getattr(self.venv, "level_names", None)

    @property
    def cuda_graphs(self) -> bool:
        return bool(getattr(self.venv, "cuda_graphs", False))

    def check_actions(self) -> None:
        check = getattr(self.venv, "check_actions", None)
        if check is not None:
            check()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next :meth:`reset` (one seed for the whole batch)."""
        self._seed = seed
        return [seed] * self.num_envs

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

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self._owner(attr_name), attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        results = self.venv.call(method_name, *method_args, **method_kwargs)
        return [results[k] for k in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(self._get_indices(indices))

    def has_attr(self, attr_name: str) -> bool:
        """Whether the envs have ``attr_name``: the vector env itself (e.g.
        :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv`'s ``set_training_steps``), the
        single env they all play (:meth:`_owner`), or else every env under its wrappers
        (Gymnasium's ``has_wrapper_attr``, through the vector env's ``call``)."""
        if hasattr(self.venv, attr_name) or self._owner(attr_name) is not self.venv:
            return True
        return all(self.venv.call("has_wrapper_attr", attr_name))


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
        ended = dict(step.infos)
        if step.final_info is not None and bool(dones.any()):
            ended.update(ended_infos(step.final_info, step.ended))
        final = step.final_observations.cpu().numpy() if dones.any() else None
        for k in np.flatnonzero(dones):
            infos[k].update(ended.get(int(k), {}))
            infos[k]["terminal_observation"] = final[k]
            infos[k]["TimeLimit.truncated"] = bool(truncated[k])
        return observations, rewards, dones, infos

    def close(self) -> None:
        pass  # the envs are borrowed
