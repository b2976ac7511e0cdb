"""What a method plug-in declares (:class:`Method`) and the registry that finds them: every
sub-package of :mod:`safelife_rl.training.methods` with a ``METHODS`` tuple."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from safety_rl_common.errors import UserError

#: The method of a config without ``method.name``: plain PPO (the algorithm chosen).
DEFAULT = "ppo"


def _nothing(cfg: Any) -> None:
    """No check."""


@dataclass(frozen=True)
class HostBuffer:
    """A buffer a run allocates in host memory, estimated before it is: ``what`` it is (for
    the message), its size in ``bytes``, and the ``setting`` that sizes it."""

    what: str
    bytes: int
    setting: str


def observation_bytes(space: Any) -> int:
    """Bytes of one observation of ``space`` in its own dtype."""
    return int(np.prod(space.shape)) * np.dtype(space.dtype).itemsize


def replay_buffer(what: str, setting: str, size: int, space: Any) -> HostBuffer:
    """SB3's replay buffer of ``size`` steps: observations and next observations in their
    dtype, and a few numbers per step."""
    return HostBuffer(what, int(size) * (2 * observation_bytes(space) + 64), setting)


def _no_buffers(cfg: Any, env: Any) -> list[HostBuffer]:
    return []


@dataclass(frozen=True)
class Method:
    """A training method as the run sees it.

    :param name: the config's ``method.name`` (and its file ``conf/method/NAME.yaml``).
    :param check: refuses bad settings of the composed config (``method.*`` and what the
        method reads elsewhere), before anything is built or written.
    :param check_env: refuses an env the method cannot train on (it may make one env).
    :param device_algorithms: the ``_target_`` of each of the method's SB3 algorithms -> that
        of its twin that trains on the device vector env (``vec_env=device``).
    :param device_wrappers: the same for the method's vec-env wrappers (``method.vec_env_wrapper``).
    :param cost_limit: whether the method takes the config's ``cost_limit`` (a per-episode
        budget of ``info["cost"]``); every other method refuses one.
    :param buffers: the host buffers the method allocates for ``(cfg, env)`` (the run's
        composed config and its built training envs), checked against the free memory first.
    """

    name: str
    check: Callable[[Any], None] = _nothing
    check_env: Callable[[Any], None] = _nothing
    device_algorithms: Mapping[str, str] = field(default_factory=dict)
    device_wrappers: Mapping[str, str] = field(default_factory=dict)
    cost_limit: bool = False
    buffers: Callable[[Any, Any], list[HostBuffer]] = _no_buffers


@cache
def registry() -> dict[str, Method]:
    """Every method of every plug-in folder, by name."""
    found: dict[str, Method] = {}
    folder = Path(__file__).resolve().parent
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda i: i.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        for method in getattr(module, "METHODS", ()):
            if method.name in found:
                raise RuntimeError(f"two plug-ins define method {method.name!r}")
            found[method.name] = method
    return found


def method_of(cfg: Any) -> Method:
    """The method a composed training config asks for (``method.name``; plain PPO without)."""
    name = OmegaConf.select(cfg, "method.name") if OmegaConf.is_config(cfg) else None
    name = DEFAULT if name is None else name
    methods = registry()
    if name not in methods:
        raise UserError(
            f"method.name must be a method of safelife_rl.training.methods "
            f"({', '.join(methods)}), got {name!r}"
        )
    return methods[name]


def device_twins(kind: str) -> dict[str, str]:
    """Every method's device twins of ``kind`` (``"algorithms"`` or ``"wrappers"``: see
    :class:`Method`), by the NumPy piece's ``_target_``."""
    twins: dict[str, str] = {}
    for method in registry().values():
        twins.update(getattr(method, f"device_{kind}"))
    return twins
