"""The typed schema of ``safelife_rl/conf/train.yaml``'s run settings, so Hydra rejects a bad
value (say ``n_envs=many`` or ``vec_env=threads``) with its own message before anything runs,
and the checks of the values a schema cannot type (ranges, finite numbers, the device, the
memory a run needs), which refuse a run before it writes anything."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.errors import InstantiationException
from hydra.utils import get_class
from omegaconf import OmegaConf

from safelife_rl.training.methods import method_of, registry, replay_buffer
from safelife_rl.training.models import device_algorithm
from safelife_rl.training.precision import PAPER, check_precision
from safety_rl_common.checks import check, is_int, is_number
from safety_rl_common.errors import UserError
from safety_rl_common.limits import ENV_LIMIT, EPOCH_LIMIT, Limit, check_limits


class VecEnvKind(str, Enum):
    auto = "auto"
    batched = "batched"
    subproc = "subproc"
    dummy = "dummy"
    device = "device"


@dataclass
class TrainSchema:
    env: Any = None
    algo: Any = None
    policy: Any = None
    wrappers: Any = None
    callbacks: Any = None
    method: Any = None
    cost_limit: float | None = None  # method=ppo_lagrangian's per-episode cost budget
    total_timesteps: int = 2_000_000
    n_envs: int = 16
    seed: int = 0
    device: str = "cpu"
    vec_env: VecEnvKind = VecEnvKind.auto
    compile: Any = False  # vec_env=device: False, True or "cudagraphs" (COMPILE_MODES)
    graphs: str = "none"  # vec_env=device on CUDA: none | rollout | update | all (GRAPHS)
    cudnn_deterministic: bool = False  # CUDA: cuDNN's deterministic kernels (see run.py)
    precision: str = "fp32"  # fp32 | tf32 | bf16 (safelife_rl.training.precision)
    torch_threads: int = 1
    log_interval: int = 1
    progress_bar: bool = True
    resume: str | None = None
    trust_pickle: bool = False  # resume: load the checkpoint with SB3's full (pickle) load


ConfigStore.instance().store(name="train_schema", node=TrainSchema)


#: Ranges of the SB3 algorithm settings a config may give (a key outside an algorithm's
#: constructor is refused on its own).
_POSITIVE = (
    "n_steps",
    "batch_size",
    "n_epochs",
    "buffer_size",
    "train_freq",
    "target_update_interval",
    "learning_rate",
    "clip_range",
    "max_grad_norm",
)
_NON_NEGATIVE = ("learning_starts", "clip_range_vf", "tau")
#: Weights of the entropy and value losses: beside a policy loss of about 1, a weight past 1000
#: drowns it (and at 10^12 the loss overflows float32).
_WEIGHTS = ("ent_coef", "vf_coef")
_UNIT = ("gamma", "gae_lambda", "exploration_initial_eps", "exploration_final_eps",
         "exploration_fraction")  # fmt: skip
_RANGES = ((_POSITIVE, lambda v: v > 0, "positive"),
           (_NON_NEGATIVE, lambda v: v >= 0, "non-negative"),
           (_UNIT, lambda v: 0 <= v <= 1, "in [0, 1]"),
           (_WEIGHTS, lambda v: 0 <= v <= 1000, "in [0, 1000]"))  # fmt: skip
#: The algorithm settings that count (steps, samples, passes); the others of the ranges above
#: are numbers.
_COUNTS = (
    "n_steps",
    "batch_size",
    "n_epochs",
    "buffer_size",
    "train_freq",
    "target_update_interval",
    "learning_starts",
)


#: Float32 numbers a rollout buffer keeps per step and env beside the observation (action,
#: reward, episode start, value, log-probability, advantage, return) and margin.
_BUFFER_FLOATS = 16
#: The seeds SB3 takes (NumPy's legacy ``np.random.seed``).
MAX_SEED = 2**32 - 1


def check_device(device: str) -> str:
    """The torch device a run trains on: ``auto`` is CUDA when this machine has it, else the
    CPU; any other name must be a device torch can use here (``device=cuda`` without CUDA would
    otherwise train on the CPU while the config says ``cuda``)."""
    import torch

    from safelife_rl.envs.vector_env import torch_device

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    check.value(
        "device",
        device,
        lambda v: v.split(":")[0] in ("cpu", "cuda", "mps"),
        "cpu, cuda, cuda:N, mps or auto (CUDA when there is a GPU, else the CPU)",
    )
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(
            f"device={device}, but torch finds no CUDA GPU on this machine; use "
            "device=cpu, or device=auto to take a GPU only where there is one"
        )
    return str(torch_device(device))


def _settings(cls: type) -> list[str]:
    """The keyword settings of ``cls``'s constructor, with those its ``**kwargs`` passes on to
    its base class (e.g. PPOLagrangian's PPO settings)."""
    names: list[str] = []
    for klass in cls.__mro__:
        parameters = inspect.signature(klass.__init__).parameters.values()
        names += [
            p.name
            for p in parameters
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            and p.name != "self"
            and p.name not in names
        ]
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return names


def check_settings(cfg: Any) -> None:
    """Refuse run settings that would train nonsense or fail deep inside SB3, naming the key."""
    check_limits()
    check.finite_everywhere(OmegaConf.to_container(cfg, resolve=True))
    _check_method(cfg)
    check.counts(cfg, ("total_timesteps", "n_envs", "torch_threads", "log_interval"))
    ENV_LIMIT.check(cfg.n_envs, "n_envs")
    most = 4 * (os.cpu_count() or 1)
    check.value(
        "torch_threads", cfg.torch_threads, lambda v: v <= most, f"at most {most} (4 per CPU core)"
    )
    check.value(
        "seed",
        cfg.seed,
        lambda v: 0 <= v <= MAX_SEED,
        f"an integer in [0, {MAX_SEED}] (SB3 seeds NumPy)",
    )
    check_precision(cfg.get("precision", PAPER), check_device(cfg.device))
    _check_compile(cfg)
    _check_graphs(cfg)
    check.value(
        "algo",
        cfg.algo,
        lambda v: v is not None and "_target_" in v,
        "an SB3 algorithm with _target_ (e.g. algo=ppo)",
    )
    if cfg.get("vec_env") == "device":  # an algorithm the device trainer trains
        device_algorithm(cfg.algo._target_)
    algo = get_class(cfg.algo._target_)
    aliases = tuple(getattr(algo, "policy_aliases", {}))
    check.value(
        "policy.name",
        OmegaConf.select(cfg, "policy.name"),
        lambda v: v in aliases,
        f"one of {algo.__name__}'s policies ({', '.join(aliases)})",
    )
    parameters = [p for p in _settings(algo) if p not in ("policy", "env")]
    check.keys((key for key in cfg.algo if key != "_target_"), parameters, "algo.")
    for key, value in cfg.algo.items():
        for keys, ok, allowed in _RANGES:
            if key in keys:
                kind = "an integer" if key in _COUNTS else "a number"
                check.value(f"algo.{key}", value, is_int if key in _COUNTS else is_number, kind)
                check.value(f"algo.{key}", value, ok, allowed)
    if "n_epochs" in cfg.algo:
        EPOCH_LIMIT.check(cfg.algo.n_epochs, "algo.n_epochs")
    if "learning_rate" in cfg.algo:
        check.learning_rate("algo.learning_rate", cfg.algo.learning_rate)
    check.value(
        "algo.gradient_steps",
        cfg.algo.get("gradient_steps", 1),
        lambda v: is_int(v) and (v == -1 or v >= 1),
        "a positive integer, or -1 for as many as the env steps taken",
    )


@contextmanager
def user_errors_of_instantiate() -> Iterator[None]:
    """Report a :class:`UserError` raised by a class Hydra instantiates (a callback refusing
    its settings) as itself, not inside Hydra's ``InstantiationException``."""
    try:
        yield
    except InstantiationException as error:
        if isinstance(error.__cause__, UserError):
            raise error.__cause__ from None
        raise


def check_rollout_memory(cfg: Any, env: Any) -> None:
    """Refuse an on-policy run whose rollout buffer (``n_envs`` x ``algo.n_steps``
    observations) cannot fit in the memory left once the envs are built, before allocating it.
    The device path keeps observations in their own dtype on the training device; SB3's buffer
    keeps float32 copies in host memory."""
    import numpy as np
    import torch

    from safelife_rl.envs.vector_env import free_memory

    n_steps = cfg.algo.get("n_steps")
    if n_steps is None:  # off-policy: its replay buffer is check_host_buffers'
        return
    on_device = cfg.get("vec_env") == "device"
    device = torch.device(check_device(cfg.device) if on_device else "cpu")
    item = np.dtype(env.observation_space.dtype).itemsize if on_device else 4
    per_env = n_steps * (int(np.prod(env.observation_space.shape)) * item + _BUFFER_FLOATS * 4)
    free = free_memory(device)
    need = per_env * env.num_envs
    if free is not None and need > free:
        raise UserError(
            f"the rollout buffer of n_envs={env.num_envs} x algo.n_steps={n_steps} needs about "
            f"{need / 2**30:.1f} GiB on {device}, which has {free / 2**30:.1f} GiB free after "
            f"the envs; use fewer algo.n_steps"
            + (f" or at most about {free // per_env} envs" if free >= per_env else "")
        )


#: Host memory the run's buffers may take, in MiB (default: what the machine has free).
HOST_MEMORY = "SAFELIFE_MAX_HOST_MB"


def check_host_buffers(cfg: Any, env: Any) -> None:
    """Refuse a run whose host buffers (an off-policy algorithm's replay buffer, the method's
    own: :attr:`~safelife_rl.training.methods.Method.buffers`) would not fit in the host's
    free memory (or ``$SAFELIFE_MAX_HOST_MB``), before any is allocated, naming the largest
    and the setting that sizes it."""
    import torch

    from safelife_rl.envs.vector_env import free_memory

    buffers = list(method_of(cfg).buffers(cfg, env))
    if cfg.algo.get("buffer_size") is not None:
        buffers.append(
            replay_buffer(
                "the replay buffer", "algo.buffer_size", cfg.algo.buffer_size, env.observation_space
            )
        )
    if not buffers:
        return
    need = sum(b.bytes for b in buffers)
    given = os.environ.get(HOST_MEMORY)
    if given:
        limit = Limit(HOST_MEMORY, 1, "MiB").get() * 2**20
        where = f"the {limit / 2**30:.1f} GiB of ${HOST_MEMORY}"
    else:
        limit = free_memory(torch.device("cpu"))
        where = f"the {limit / 2**30:.1f} GiB free on this machine" if limit else ""
    if limit is not None and need > limit:
        largest = max(buffers, key=lambda b: b.bytes)
        raise UserError(
            f"{largest.what} needs about {largest.bytes / 2**30:.1f} GiB of host memory "
            f"({need / 2**30:.1f} GiB with the run's other buffers), over {where}; lower "
            f"{largest.setting}, or set ${HOST_MEMORY} to allow more"
        )


def _check_compile(cfg: Any) -> None:
    """``compile`` is a setting of the device vector env: one of its modes, with
    ``vec_env=device`` (its device is checked where the env is built)."""
    from safelife_rl.envs.vector_env import COMPILE_MODES

    mode = cfg.get("compile", False)
    check.value("compile", mode, lambda v: v in COMPILE_MODES, "one of false, true, cudagraphs")
    if mode and cfg.get("vec_env") != VecEnvKind.device:
        raise UserError(
            f"compile={str(mode).lower()} compiles the device vector env's step; "
            f"add vec_env=device (vec_env={getattr(cfg.vec_env, 'value', cfg.vec_env)} "
            "steps on the host)"
        )


def _check_graphs(cfg: Any) -> None:
    """``graphs`` is a setting of the device trainer: one of its values, with ``vec_env=device``
    on a CUDA device."""
    import torch

    from safelife_rl.training.device.graphs import GRAPHS, check_graphs

    graphs = cfg.get("graphs", "none")
    check.value("graphs", graphs, lambda v: v in GRAPHS, f"one of {', '.join(GRAPHS)}")
    if graphs != "none" and cfg.get("vec_env") != VecEnvKind.device:
        raise UserError(
            f"graphs={graphs} replays the device trainer's rollout and update as CUDA graphs; "
            f"add vec_env=device (vec_env={getattr(cfg.vec_env, 'value', cfg.vec_env)} "
            "steps on the host)"
        )
    check_graphs(graphs, torch.device(check_device(cfg.device)))


def _check_method(cfg: Any) -> None:
    """The method's own settings (its plug-in's check); a cost budget only for a method that
    takes one."""
    method = method_of(cfg)
    if not method.cost_limit:
        takers = ", ".join(f"method={m.name}" for m in registry().values() if m.cost_limit)
        check.value(
            "cost_limit",
            cfg.get("cost_limit"),
            lambda v: v is None,
            f"null (unset) with method={method.name} (a budget only for {takers})",
        )
    method.check(cfg)
