"""Building training and evaluation environments from plain config dictionaries.

Everything here takes plain Python containers (not OmegaConf nodes) so that the env factories
pickle into ``AsyncVectorEnv`` workers. An env id may name the module that registers it, as
Gymnasium allows: ``drest:drest/Example-v0`` imports :mod:`drest` first (in every worker too).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import partial
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, VectorEnv
from hydra.utils import instantiate
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv

from safelife_rl.envs.batch_slot import BatchSlot
from safelife_rl.envs.batched_vector_env import BatchedVectorEnv
from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.gymnasium_vec_env import (
    GymnasiumVecEnv,
    WideningAsyncVectorEnv,
    WideningSyncVectorEnv,
    reachable,
)
from safety_rl_common.errors import UserError
from safety_rl_common.workers import InWorker

VEC_ENV_KINDS = ("auto", "batched", "subproc", "dummy", "device")


def registered_id(env_id: str) -> str:
    """Import the module named before ``:`` in ``env_id`` (if any) and return the bare id.

    :mod:`safelife_rl` is always imported, so its ids need no module. The multi-agent SafeLife
    ids (PettingZoo envs, outside Gymnasium's registry, see :func:`multi_agent_task`) are known.
    """
    import safelife_rl  # noqa: F401  (registers the SafeLife ids in a fresh worker process)

    if multi_agent_task(env_id) is not None:
        return env_id

    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise UserError(
                f"env id {env_id!r} names module {module!r}, which cannot be imported: {error}"
            ) from error
    if name not in gym.registry:
        raise UserError(f"no env {name!r} is registered (from env id {env_id!r})")
    return name


def _make(env_id: str, kwargs: Mapping[str, Any] | None) -> gym.Env:
    name = registered_id(env_id)
    kwargs = instantiate(dict(kwargs or {}), _convert_="all")
    try:
        return gym.make(name, disable_env_checker=True, **kwargs)
    except TypeError as error:  # a keyword or a value of the wrong type: the user's env kwargs
        raise UserError(
            f"{name} does not take the env kwargs {sorted(kwargs)}: {error} (the default "
            "experiment=main sets SafeLife's view_shape, time_limit and bank: choose another "
            "experiment, e.g. experiment=paper or one made for this env)"
        ) from error


def multi_agent_task(env_id: str) -> str | None:
    """The multi-agent SafeLife task of ``env_id`` (e.g. ``build_coop_v0``), or ``None`` for a
    Gymnasium id (see :func:`safelife_rl.envs.multi_agent_env.multi_agent_task`)."""
    from safelife_rl.envs.multi_agent_env import multi_agent_task as task_of

    return task_of(env_id)


def _make_multi_agent(
    task: str,
    kwargs: Mapping[str, Any] | None,
    wrappers: Mapping[str, Mapping[str, Any] | None] | None,
) -> Any:
    from safelife_rl.envs.multi_agent_env import make_parallel_env

    if any(config is not None for config in (wrappers or {}).values()):
        raise UserError(
            "the training wrappers are single-agent: train multi-agent envs with "
            "wrappers=none (experiment=multi sets it)"
        )
    kwargs = instantiate(dict(kwargs or {}), _convert_="all")
    kwargs.pop("bank", None)  # level banks are single-agent; the configs' default is null
    return make_parallel_env(task, **kwargs)


def make_env(
    env_id: str,
    kwargs: Mapping[str, Any] | None = None,
    wrappers: Mapping[str, Mapping[str, Any] | None] | None = None,
    batch_slot: bool = False,
) -> gym.Env:
    """``gym.make(env_id, **kwargs)`` (values with ``_target_`` instantiated first), then each
    wrapper config in order (``None`` skips one), then SB3's ``Monitor`` for episode totals.
    A multi-agent id gives its PettingZoo env (no wrappers, no ``Monitor``).

    :param batch_slot: put a :class:`~safelife_rl.envs.batch_slot.BatchSlot` directly on the
        SafeLife env, for :class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv`.
    """
    task = multi_agent_task(env_id)
    if task is not None:
        return _make_multi_agent(task, kwargs, wrappers)
    env = _make(env_id, kwargs)
    if batch_slot:
        slot = BatchSlot(env.unwrapped)  # checks that it is a SafeLife env
        # a SafeLife env's spec gives its own time_limit; another limit is an outer TimeLimit
        if env.spec is not None and env.spec.max_episode_steps not in (None, slot.env.time_limit):
            raise ValueError(f"vec_env=batched cannot keep the registered time limit of {env_id}")
        env = slot
    for config in (wrappers or {}).values():
        if config is not None:
            env = instantiate(config, env, _convert_="all")
    return Monitor(env)


def batchable(env_id: str, kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether ``env_id`` makes a SafeLife env, whose games can step as one batch."""
    from safelife_rl.envs.env import SafeLifeEnv

    probe = _make(env_id, kwargs)
    try:
        return isinstance(probe.unwrapped, SafeLifeEnv)
    finally:
        probe.close()


def make_vec_env(
    env_id: str,
    kwargs: Mapping[str, Any] | None,
    wrappers: Mapping[str, Mapping[str, Any] | None] | None,
    n_envs: int,
    kind: str = "auto",
    start_method: str | None = "fork",
    device: str = "cpu",
    compile: bool | str = False,
) -> VecEnv:
    """``n_envs`` copies of :func:`make_env`. Seed them through the algorithm.

    :param kind: each a Gymnasium vector env under SB3's
        :class:`~safelife_rl.training.gymnasium_vec_env.GymnasiumVecEnv`: ``"batched"``: in this
        process, the SafeLife games of all envs stepped as one batch
        (:class:`~safelife_rl.envs.batched_vector_env.BatchedVectorEnv`, SafeLife envs only);
        ``"subproc"``: one worker process per env (``AsyncVectorEnv``, when ``n_envs`` > 1);
        ``"dummy"``: in this process one after the other (``SyncVectorEnv``); ``"auto"``:
        batched for SafeLife envs, else subproc;
        ``"device"``: a :class:`~safelife_rl.training.device.TensorVecEnv` on ``device`` for
        the device algorithms (:func:`make_device_vec_env`).
    :param device: torch device of a ``"device"`` vector env.
    :param compile: how a ``"device"`` vector env of SafeLife envs steps (its ``compile``:
        eager, ``True`` or ``"cudagraphs"``).

    A multi-agent id gives a
    :class:`~safelife_rl.training.shared_policy_vec_env.SharedPolicyVecEnv`: one slot per agent of
    each of the ``n_envs`` envs, for one policy shared by all agents.
    """
    kind = getattr(kind, "value", kind)  # the config schema's enum, or its plain string
    if kind not in VEC_ENV_KINDS:
        raise ValueError(f"vec_env must be one of {VEC_ENV_KINDS}, got {kind!r}")
    if n_envs < 1:
        raise ValueError(f"n_envs must be positive, got {n_envs}")
    task = multi_agent_task(env_id)
    if task is not None:
        from safelife_rl.training.shared_policy_vec_env import SharedPolicyVecEnv

        if kind not in ("auto", "dummy"):
            raise UserError(f"vec_env={kind} does not step multi-agent envs; use vec_env=auto")
        return SharedPolicyVecEnv(
            [partial(_make_multi_agent, task, kwargs, wrappers) for _ in range(n_envs)]
        )
    if kind == "device":
        return make_device_vec_env(env_id, kwargs, wrappers, n_envs, device, compile)
    if kind == "auto":
        kind = "batched" if batchable(env_id, kwargs) else "subproc"
    factories = [
        partial(make_env, env_id, kwargs, wrappers, kind == "batched") for _ in range(n_envs)
    ]
    if kind == "batched":
        return GymnasiumVecEnv(BatchedVectorEnv(factories, AutoresetMode.SAME_STEP))
    if kind == "subproc" and n_envs > 1:
        workers = [InWorker(partial(reachable, f, i)) for i, f in enumerate(factories)]
        vector: VectorEnv = WideningAsyncVectorEnv(
            workers, context=start_method, autoreset_mode=AutoresetMode.SAME_STEP
        )
    else:
        vector = WideningSyncVectorEnv(factories, autoreset_mode=AutoresetMode.SAME_STEP)
    return GymnasiumVecEnv(vector)


def make_device_vec_env(
    env_id: str,
    kwargs: Mapping[str, Any] | None,
    wrappers: Mapping[str, Mapping[str, Any] | None] | None,
    n_envs: int,
    device: str = "cpu",
    compile: bool | str = False,
    groups: int = 1,
) -> TensorVecEnv:
    """``n_envs`` envs stepped with tensors on ``device``, for the device trainer
    (:class:`~safelife_rl.training.device.DevicePPO`, a population): SafeLife envs as one
    :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` (games, observations and rewards
    stay on the device; the wrappers applied there in batch), other envs of :func:`make_env`
    stepped in this process by Gymnasium's ``SyncVectorEnv``
    (:func:`~safelife_rl.training.device.tensor_vec_env`); ``compile`` and ``groups`` (the
    vector env's: a population's members) are only for SafeLife envs.
    """
    from safelife_rl.training.device import GymnasiumTensorVecEnv, tensor_vec_env

    if not batchable(env_id, kwargs):
        if groups != 1:
            raise UserError(f"a population trains SafeLife envs on the device, not {env_id}")
        if compile:
            raise UserError(
                f"compile={compile} compiles the SafeLife vector env's step; "
                f"{env_id} steps as separate NumPy envs: leave compile=false"
            )
        factories = [partial(make_env, env_id, kwargs, wrappers) for _ in range(n_envs)]
        return tensor_vec_env(factories, device)
    vector = gym.make_vec(
        registered_id(env_id),
        num_envs=n_envs,
        vectorization_mode="vector_entry_point",
        device=device,
        training_wrappers=wrappers,
        compile=compile,
        groups=groups,
        **instantiate(dict(kwargs or {}), _convert_="all"),
    )
    return GymnasiumTensorVecEnv(vector)
