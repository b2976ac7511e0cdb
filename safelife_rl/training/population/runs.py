"""A population's members trained into their own run folders, each as ``safelife_rl train``
leaves a run (config, TensorBoard, checkpoints, final model, evaluation, learning curve), so
that ``benchmark``, ``resume=`` and SB3's ``PPO.load`` take each member's folder as a single
run's.

The members' configs may differ only in their seed and impact penalty (the reproduction's
grid of a task); everything else is what the batched update shares. A member's folder records
``vec_env=device`` (the algorithm it trained with, DevicePPO's updates), so a member resumed on
its own (``resume=FOLDER``) continues as a single run.
"""

from __future__ import annotations

import inspect
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from stable_baselines3.common.callbacks import CallbackList

from safelife_rl.envs.vector_env import bytes_per_env, free_memory
from safelife_rl.training.callbacks import (
    RunStopped,
    StopOnSignal,
    checkpoint_steps,
    checkpoints,
    flush_tensorboard,
)
from safelife_rl.training.config import (
    check_device,
    check_settings,
    user_errors_of_instantiate,
)
from safelife_rl.training.cost_critic import CostCritic
from safelife_rl.training.device import DevicePPO
from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.envs import make_device_vec_env
from safelife_rl.training.files import save_model_atomic
from safelife_rl.training.logs import run_logger
from safelife_rl.training.methods import method_of
from safelife_rl.training.methods.ppo_lagrangian.algorithm import LagrangianMixin
from safelife_rl.training.model_files import load_model
from safelife_rl.training.models import training_target
from safelife_rl.training.population.record import (
    MemberRecord,
    joined_rollouts,
    set_member_state,
)
from safelife_rl.training.population.trainer import PopulationPPO
from safelife_rl.training.precision import PAPER, apply_precision
from safelife_rl.training.resume import (
    CONFIG_FILE,
    SavedModel,
    check_resumable,
    remove_stale_temporaries,
)
from safelife_rl.training.rollout_record import SavedRollouts, read_rollouts
from safelife_rl.training.run import (
    LOCK_FILE,
    Learnt,
    cudnn_kernels,
    evaluate_run,
    plain,
    run_callbacks,
)
from safety_rl_common.errors import UserError
from safety_rl_common.files import write_text
from safety_rl_common.locks import PidLock

#: What the members of a population may differ in: seed, impact penalty and budget (their
#: method only by name: PPO and PPO with the impact penalty, whose configs differ in the
#: penalty).
VARYING = (
    "seed",
    "wrappers.side_effect_penalty.penalty",
    "cost_limit",
    "algo.cost_limit",
    "method.name",
)


def member_config(cfg: DictConfig) -> DictConfig:
    """A member's run config: ``cfg`` trained on the device path."""
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    with open_dict(cfg):
        cfg.vec_env = "device"
    return cfg


def _without_varying(cfg: DictConfig) -> dict[str, Any]:
    shared = OmegaConf.to_container(cfg, resolve=True)
    shared.pop("seed")
    shared.pop("cost_limit", None)
    shared["algo"].pop("cost_limit", None)
    shared["wrappers"]["side_effect_penalty"].pop("penalty")
    (shared.get("method") or {}).pop("name", None)
    return shared


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{where}.{key}" if where else key)
            if found:
                return found
        return ""
    return where if a != b else ""


def check_population(cfgs: Sequence[DictConfig]) -> None:
    """Refuse, in one line and before anything is built, members that a single run would
    refuse or that cannot train as one batch (another algorithm, a method with its own
    wrapper or callbacks, differences beyond the seed, the impact penalty and the budget)."""
    if not cfgs:
        raise UserError("a population needs at least one member")
    for cfg in cfgs:
        check_settings(cfg)
        method_of(cfg).check_env(cfg)
        method = cfg.get("method") or {}
        if method.get("vec_env_wrapper") or method.get("callbacks"):
            name = method.get("name", cfg.algo._target_)
            raise UserError(
                "a population trains PPO, PPO with the impact penalty and PPO-Lagrangian; "
                f"{name} trains one run per process"
            )
        if OmegaConf.select(cfg, "wrappers.side_effect_penalty") is None:
            raise UserError("a population's members need the side_effect_penalty wrapper")
    first = _without_varying(cfgs[0])
    for k, cfg in enumerate(cfgs[1:], 1):
        differs = _first_difference(first, _without_varying(cfg))
        if differs:
            raise UserError(
                f"member {k} differs from member 0 in {differs}: a population's members "
                f"differ only in {' and '.join(VARYING)}"
            )


def activation_floats(network: torch.nn.Module, forward: Callable[[], Any]) -> int:
    """Floats of every layer's output of ``network`` in ``forward()`` (a pass of one
    observation; a training pass keeps them)."""
    total = 0

    def count(module: torch.nn.Module, inputs: Any, output: Any) -> None:
        nonlocal total
        if isinstance(output, torch.Tensor):
            total += output[0].numel()

    leaves = [m for m in network.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            forward()
    finally:
        for hook in hooks:
            hook.remove()
    return total


def _algo_setting(cfg: DictConfig, name: str) -> Any:
    """``cfg.algo``'s ``name``, or its algorithm's default."""
    if name in cfg.algo:
        return cfg.algo[name]
    return inspect.signature(get_class(cfg.algo._target_)).parameters[name].default


def _networks(
    cfg: DictConfig, observation_space: spaces.Space, action_space: spaces.Space
) -> list[tuple[torch.nn.Module, Callable[[], Any]]]:
    """A member's networks as ``cfg`` builds them (its policy; a PPO-Lagrangian member's cost
    critic too), on the CPU and on torch's streams left as they were, each with a pass of one
    observation through it."""
    policy_class = get_class(cfg.algo._target_).policy_aliases[cfg.policy.name]
    with torch.random.fork_rng(devices=[]):
        policy = policy_class(
            observation_space,
            action_space,
            lambda _: 0.0,  # its optimizer's learning rate: counted, never stepped
            **instantiate(cfg.policy.kwargs, _convert_="all"),
        )
        obs = torch.as_tensor(observation_space.sample()[None])
        passes = [(policy, lambda: policy.evaluate_actions(obs, torch.zeros(1)))]
        if issubclass(get_class(training_target(cfg)), LagrangianMixin):
            critic = CostCritic.like(policy)
            passes.append((critic, lambda: critic(obs)))
    return passes


def population_bytes(
    cfg: DictConfig,
    members: int,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    board: tuple[int, int],
) -> int:
    """Device memory a population of ``members`` with ``cfg``'s settings needs (estimated, from
    the config and one env's spaces and board alone, so before anything is built): its envs,
    its rollout (observations kept three times: the stacked steps, their final observations
    and each member's own SB3 buffer, which the population leaves unused), its stacked
    parameters with their gradients and Adam moments, and a minibatch's activations (forward
    and backward); a PPO-Lagrangian member's cost critic too."""
    space = observation_space
    obs_floats = int(np.prod(space.shape))
    obs_bytes = obs_floats * np.dtype(space.dtype).itemsize
    envs = members * cfg.n_envs
    passes = _networks(cfg, observation_space, action_space)
    params = sum(p.numel() for network, _ in passes for p in network.parameters())
    activations = sum(activation_floats(network, forward) for network, forward in passes)
    return (
        envs * bytes_per_env(board, space.shape[:2], space.shape[-1])
        + 3 * envs * _algo_setting(cfg, "n_steps") * obs_bytes
        + members * params * 4 * 4
        + members * _algo_setting(cfg, "batch_size") * (activations + obs_floats) * 4 * 3
    )


def check_population_memory(
    cfg: DictConfig,
    members: int,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    board: tuple[int, int],
) -> None:
    """Refuse a population of ``members`` (:func:`population_bytes`) that its device cannot
    hold, saying how many members fit."""
    device = torch.device(check_device(cfg.device))
    free = free_memory(device)
    need = population_bytes(cfg, members, observation_space, action_space, board)
    if free is not None and need > free:
        most = max(int(free // (need / members)), 0)
        raise UserError(
            f"a population of {members} needs about {need / 2**30:.1f} GiB on {device}, "
            f"which has {free / 2**30:.1f} GiB free: at most about {most} members fit"
        )


def build_population(cfgs: Sequence[DictConfig], batching: str = "auto") -> PopulationPPO:
    """The members ``cfgs`` (checked; one config per member, as ``train`` takes it) built
    with their env on their device, untrained; ``batching``: how their networks run together
    (:data:`~.stacked.BATCHING`)."""
    cfgs = [member_config(cfg) for cfg in cfgs]
    check_population(cfgs)
    first = cfgs[0]
    device = check_device(first.device)
    torch.set_num_threads(first.torch_threads)
    with user_errors_of_instantiate():
        venv = make_device_vec_env(
            first.env.id,
            plain(first.env.kwargs),
            plain(first.wrappers),
            first.n_envs * len(cfgs),
            device,
            first.get("compile", False),
            groups=len(cfgs),
        )
    vector = venv.venv.unwrapped  # type: ignore[attr-defined]
    # each member its single run's device algorithm (DevicePPO, DevicePPOLagrangian)
    algos = iter(OmegaConf.merge(cfg.algo, {"_target_": training_target(cfg)}) for cfg in cfgs)
    policy_kwargs = instantiate(first.policy.kwargs, _convert_="all")

    def make_member(view: TensorVecEnv, seed: int) -> DevicePPO:
        member = instantiate(
            next(algos), policy=first.policy.name, env=view, policy_kwargs=policy_kwargs,
            seed=seed, device=device, verbose=0, _convert_="all",
        )  # fmt: skip
        apply_precision(first.get("precision", PAPER), member.policy)  # before it is stacked
        return member

    penalties = [float(cfg.wrappers.side_effect_penalty.penalty) for cfg in cfgs]
    try:
        # before any member is built: each allocates its own rollout buffer
        check_population_memory(
            first,
            len(cfgs),
            vector.single_observation_space,
            vector.single_action_space,
            vector.levels.shape,
        )
        with user_errors_of_instantiate():
            trainer = PopulationPPO(
                vector,
                make_member,
                [int(c.seed) for c in cfgs],
                penalties,
                batching,
                first.get("graphs", "none"),
            )
    except BaseException:
        venv.close()
        raise
    cudnn_kernels(first.get("cudnn_deterministic", False))
    return trainer


def common_checkpoint(folders: Sequence[Path]) -> int | None:
    """The most steps at which every run in ``folders`` saved a checkpoint (``None``: none)."""
    steps = [{checkpoint_steps(p) for p in checkpoints(f / "checkpoints")} for f in folders]
    shared = set.intersection(*steps) if steps else set()
    return max(shared) if shared else None


def _load_members(
    trainer: PopulationPPO, cfgs: list[DictConfig], folders: list[Path], steps: int
) -> Restored:
    """Each member as its checkpoint of ``steps`` steps left it: weights (into the stacks),
    Adam moments, step counts (and a PPO-Lagrangian member's multiplier state); and the
    checkpoints' rollout records, which :func:`_train` replays (``None`` if one lacks its
    record, an earlier version's: then the envs and random streams start afresh there)."""
    paths, records = [], []
    for cfg, folder, member in zip(cfgs, folders, trainer.members):
        saved = SavedModel(folder / "checkpoints" / f"model_{steps}_steps.zip", steps, False)
        check_resumable(cfg, saved)
        with user_errors_of_instantiate():
            loaded = load_model(saved.path, cfg, member.env, str(member.device))
        # in place: the weights stay views of the stacks
        member.set_parameters(loaded.get_parameters(), device=member.device)
        for name in member._get_torch_save_params()[1]:  # the multiplier state
            getattr(member, name).copy_(getattr(loaded, name))
        member.num_timesteps, member._n_updates = loaded.num_timesteps, loaded._n_updates
        paths.append(saved.path)
        records.append(read_rollouts(saved.path, loaded))
    trainer.adopt_member_states()
    if any(record is None for record in records):
        return Restored(steps, None, paths)
    return Restored(steps, records, paths)  # type: ignore[arg-type]


class Restored(NamedTuple):
    """The checkpoints a resumed population starts from."""

    steps: int
    rollouts: list[SavedRollouts] | None  # None: one was saved without its record
    paths: list[Path]


def _restore(trainer: PopulationPPO, restored: Restored, records: list[MemberRecord]) -> None:
    """The envs, random streams and pending logged values where the checkpoints left them,
    replayed from their rollout records."""
    saved = restored.rollouts
    assert saved is not None
    actions = joined_rollouts(saved, restored.paths)
    offset = saved[0].state.get("offset", 0)
    trainer.replay(actions, set(saved[0].starts.tolist()), offset)
    for k, (member, rollouts, path) in enumerate(zip(trainer.members, saved, restored.paths)):
        set_member_state(rollouts, member, trainer.random[k], path)
        records[k].continue_from(rollouts.actions, rollouts.starts)


def train_population(
    cfgs: Sequence[DictConfig], folders: Sequence[str | Path], resume: bool = False
) -> list[dict[str, Any]]:
    """Train the members ``cfgs`` (one config per member, as ``train`` takes it) together, each
    into its folder of ``folders``; their final summaries, as ``train`` returns them.

    :param resume: the folders hold the members' runs, stopped: continue them together from the
        newest checkpoint they all saved (else: new runs).
    :raises RunStopped: a signal stopped training; each member saved a checkpoint at the last
        rollout boundary (``resume=True`` continues them together, ``train`` each alone).
    """
    folders = [Path(folder) for folder in folders]
    if len(folders) != len(cfgs):
        raise UserError(f"{len(cfgs)} members need {len(cfgs)} folders, got {len(folders)}")
    steps = None
    for folder in folders:
        if (folder / CONFIG_FILE).exists() != resume:
            raise UserError(
                f"{folder} holds a run already: resume it, or give a new folder"
                if not resume
                else f"{folder} holds no run to resume"
            )
    if resume:
        for folder in folders:
            remove_stale_temporaries(folder)
        steps = common_checkpoint(folders)
        if steps is None:
            raise UserError(
                "the members share no checkpoint to resume from together: resume each on its "
                "own (safelife-rl train resume=FOLDER)"
            )
    trainer = build_population(cfgs)
    cfgs = [member_config(cfg) for cfg in cfgs]
    locks = [PidLock(folder / LOCK_FILE, "being trained") for folder in folders]
    try:
        restored = None
        if steps is not None:
            for lock in locks:  # before reading a run another process may be training
                lock.acquire()
            restored = _load_members(trainer, cfgs, folders, steps)
        return _train(trainer, cfgs, folders, locks, restored)
    finally:
        trainer.env.close()
        for lock in locks:
            lock.release()


def _train(
    trainer: PopulationPPO,
    cfgs: list[DictConfig],
    folders: list[Path],
    locks: list[PidLock],
    restored: Restored | None,
) -> list[dict[str, Any]]:
    first = cfgs[0]
    resumed_at = restored.steps if restored is not None else None
    exact = restored is not None and restored.rollouts is not None
    run_configs = [OmegaConf.to_yaml(cfg, resolve=True) for cfg in cfgs]
    records = [
        MemberRecord(trainer.recorded, k, trainer.n_envs, trainer.random[k])
        for k in range(trainer.size)
    ]
    callbacks = []
    with StopOnSignal() as stop:
        for k, (cfg, folder, member, run_config, lock) in enumerate(
            zip(cfgs, folders, trainer.members, run_configs, locks)
        ):
            with user_errors_of_instantiate():
                callbacks.append(run_callbacks(cfg, folder, run_config, records[k]))
            lock.acquire()  # once the callbacks took their settings: a refusal leaves nothing
            write_text(folder / CONFIG_FILE, run_config)
            iterations = restored.rollouts[k].state.get("rollouts", 0) if exact else 0
            member.set_logger(run_logger(folder / "tensorboard", resumed_at, iterations))
        if exact:
            _restore(trainer, restored, records)
        stop.phase = "training"
        trainer.learn(
            first.total_timesteps - (resumed_at or 0),
            [CallbackList([stop, *callbacks[0]])] + [CallbackList(c) for c in callbacks[1:]],
            first.log_interval,
            first.progress_bar,
            reset_num_timesteps=resumed_at is None,
        )
        for member in trainer.members:
            flush_tensorboard(member.logger)
        if stop.stopped:
            _save_stop_checkpoints(trainer, folders, run_configs, stop, records)
        stop.phase = "saving the final models"
        for member, folder, run_config, record in zip(
            trainer.members, folders, run_configs, records
        ):
            entries = record.entries(record.boundary) if record.boundary is not None else None
            save_model_atomic(member, folder / "final_model.zip", run_config, entries)
        n_actions = int(trainer.env.single_action_space.n)
        summaries = []
        for cfg, folder, member, member_callbacks in zip(cfgs, folders, trainer.members, callbacks):
            summary = {
                "env": cfg.env.id,
                "algo": cfg.algo._target_.rsplit(".", 1)[-1],
                "timesteps": member.num_timesteps,
                "population": len(cfgs),
            }
            learnt = Learnt(member, member_callbacks, summary, n_actions, True)
            summaries.append(evaluate_run(cfg, folder, learnt, stop))
    return summaries


def _save_stop_checkpoints(
    trainer: PopulationPPO,
    folders: list[Path],
    run_configs: list[str],
    stop: StopOnSignal,
    records: list[MemberRecord],
) -> None:
    """Every member saved at the last rollout boundary; then :class:`RunStopped`."""
    stop.phase = "saving the stop checkpoints"
    name = f"model_{trainer.trained_steps}_steps.zip"
    for member, folder, run_config, record in zip(trainer.members, folders, run_configs, records):
        assert record.boundary is not None and record.boundary.steps == trainer.trained_steps
        member.num_timesteps = trainer.trained_steps
        entries = record.entries(record.boundary)
        save_model_atomic(member, folder / "checkpoints" / name, run_config, entries)
    signame = signal.Signals(stop.signum or signal.SIGTERM).name
    raise RunStopped(
        stop.signum or signal.SIGTERM,
        f"stopped by {signame} at {trainer.trained_steps} steps a member (saved "
        f"checkpoints/{name} in each member's folder)",
    )
