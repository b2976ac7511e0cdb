"""Exact resume: what a checkpoint holds beyond SB3's save so that a resumed run ends bit for bit
where the uninterrupted run ends.

SB3 saves the weights, the optimizer and the step counters, but not the envs (their games, level
streams and generators), the rollout or replay buffer, the random generators or the values
logged since the last dump. A run saves its models only at rollout boundaries (after ``train``
has used every step counted), with :class:`RolloutRecord`'s entries:

- :data:`ACTIONS_ENTRY` and :data:`STARTS_ENTRY`: every action the run sent to its envs, and
  the steps at which its rollouts started (``.npy`` arrays, read without pickle);
- :data:`STATE_ENTRY`: the random generators (torch, numpy, Python, the action space), the
  values logged since the last dump and the number of rollouts done (JSON), and the record's
  :func:`digest`, so that a record changed since the run saved it (actions edited within the
  action space replay without complaint, and train other weights) is refused.

:func:`restore` replays the actions through fresh envs, seeded as the run seeded them, telling
the scheduled wrappers the step count at each rollout start as the run did: the envs end in the
state they had, and SB3's episode statistics and replay buffer are refilled on the way. Then the
generators and the logged values are set back. Replaying costs env steps only (no network).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import zipfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.device.episodes import EpisodeRecorder, add_episode_infos
from safety_rl_common.errors import UserError

STATE_ENTRY = "rollout_state.json"
ACTIONS_ENTRY = "rollout_actions.npy"
STARTS_ENTRY = "rollout_starts.npy"
MAX_STATE_BYTES = 1 << 20
DIGEST_KEY = "digest"


@dataclass
class Boundary:
    """The run at a rollout boundary: what it had done and what it held that SB3 does not
    save."""

    steps: int  # model.num_timesteps
    n_actions: int  # vector-env steps sent so far
    n_rollouts: int  # rollouts collected and trained on
    state: dict[str, Any]  # generators and pending logged values (JSON)


def _logged_value(value: Any) -> list | None:
    """A value recorded in SB3's logger as ``[type, value]`` JSON (``None``: not a number)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (np.floating, np.integer)):
        return [value.dtype.name, value.item()]
    if isinstance(value, (int, float)):
        return [type(value).__name__, value]
    return None


def _logger_state(logger: Logger) -> dict[str, Any]:
    values = {k: _logged_value(v) for k, v in logger.name_to_value.items()}
    return {
        "values": {k: v for k, v in values.items() if v is not None},
        "counts": {k: int(v) for k, v in logger.name_to_count.items() if k in values},
        "excluded": {
            k: list(v) for k, v in logger.name_to_excluded.items() if k in values and v is not None
        },
    }


def _space_state(space: spaces.Space) -> dict[str, Any] | None:
    generator = space._np_random  # None: never seeded nor sampled
    return None if generator is None else generator.bit_generator.state


def capture(
    model: BaseAlgorithm,
    n_actions: int,
    n_rollouts: int,
    streams: tuple[torch.Generator, np.random.RandomState] | None = None,
) -> Boundary:
    """The run's boundary now; ``streams``: its own torch stream (on its device) and NumPy
    stream in place of the global ones (a population member's, saved where a single run saves
    the global ones, so that the member resumes alone as it would in the population)."""
    numpy_state = (
        np.random.get_state(legacy=False) if streams is None else streams[1].get_state(legacy=False)
    )
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    version, internal, gauss = random.getstate()
    on_cuda = model.device.type == "cuda"
    if streams is not None:
        main = streams[0].get_state()
    else:
        main = torch.cuda.get_rng_state(model.device) if on_cuda else torch.get_rng_state()
    state = {
        "torch": (torch.get_rng_state() if on_cuda else main).tolist(),
        "cuda": main.tolist() if on_cuda else None,
        "numpy": numpy_state,
        "python": [version, list(internal), gauss],
        "action_space": _space_state(model.action_space),
        "logger": _logger_state(model.logger),
        # steps counted without a recorded action (e.g. AUP's first phase, before the rollouts)
        "offset": model.num_timesteps - n_actions * model.n_envs,
    }
    return Boundary(model.num_timesteps, n_actions, n_rollouts, state)


class RolloutRecord(BaseCallback):
    """Record the actions a run sends to its envs and capture its state at every rollout
    boundary, for checkpoints that resume exactly (see the module docstring).

    The run adds it to every training run; :class:`~safelife_rl.training.AtomicCheckpoint` and
    the run's stop checkpoint and final model save :meth:`entries` of :attr:`boundary`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.actions: list[Any] = []
        self.starts: list[int] = []  # index of the first action of each rollout
        self.boundary: Boundary | None = None
        self.in_rollout = False

    def continue_from(self, actions: np.ndarray, starts: np.ndarray) -> None:
        """Carry on the record of a restored run."""
        self.actions = list(actions)
        self.starts = [int(s) for s in starts]

    def _n_actions(self) -> int:
        """Vector-env steps recorded so far."""
        return len(self.actions)

    def _taken(self, n_actions: int) -> np.ndarray:
        """The first ``n_actions`` steps' actions, ``(steps, n_envs, *action shape)``."""
        space = self.model.action_space
        return _stacked(self.actions[:n_actions], (0, self.model.n_envs, *space.shape), space.dtype)

    def _capture(self) -> None:
        self.boundary = capture(self.model, self._n_actions(), len(self.starts))

    def _on_training_start(self) -> None:
        self._capture()

    def _on_rollout_start(self) -> None:
        self.in_rollout = True
        self._capture()
        self.starts.append(self._n_actions())

    def _on_step(self) -> bool:
        actions = self.locals.get("clipped_actions", self.locals.get("actions"))
        self.actions.append(actions)
        return True

    def _on_rollout_end(self) -> None:
        self.in_rollout = False

    def _on_training_end(self) -> None:
        if not self.in_rollout:  # the last rollout was trained on: a boundary
            self._capture()

    def entries(self, boundary: Boundary) -> dict[str, bytes]:
        """The checkpoint entries of the run at ``boundary``."""
        taken = self._taken(boundary.n_actions)
        starts = [s for s in self.starts if s < boundary.n_actions]
        state = {**boundary.state, "steps": boundary.steps, "rollouts": boundary.n_rollouts}
        actions = _npy_bytes(taken)
        starts_bytes = _npy_bytes(np.asarray(starts, np.int64))
        state[DIGEST_KEY] = digest(actions, starts_bytes, state)
        return {
            ACTIONS_ENTRY: actions,
            STARTS_ENTRY: starts_bytes,
            STATE_ENTRY: json.dumps(state).encode(),
        }


def digest(actions: bytes, starts: bytes, state: dict[str, Any]) -> str:
    """The SHA-256 of a record's entries (``state`` without its digest, as sorted JSON): a
    checkpoint's record must still have the digest the run saved in its state."""
    content = {k: v for k, v in state.items() if k != DIGEST_KEY}
    hashed = hashlib.sha256()
    for part in (actions, starts, json.dumps(content, sort_keys=True).encode()):
        hashed.update(len(part).to_bytes(8, "little"))
        hashed.update(part)
    return hashed.hexdigest()


def _stacked(actions: list[Any], empty_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The steps' actions as one array; a device run's (tensors) come to the host in one copy
    (the record keeps them where they were made, so a rollout step never waits for them)."""
    if not actions:
        return np.zeros(empty_shape, dtype)
    if isinstance(actions[0], torch.Tensor):
        return torch.stack(actions).cpu().numpy()
    return np.stack(actions)


def _npy_bytes(array: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, array, allow_pickle=False)
    return stream.getvalue()


def _npy_array(data: bytes, name: str, path: Path) -> np.ndarray:
    """A ``.npy`` array read without pickle, its header checked against its size first (a
    crafted header cannot ask for more memory than the entry holds)."""
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(stream)
        if dtype.hasobject or int(np.prod(shape, dtype=np.int64)) * dtype.itemsize > len(data):
            raise ValueError(f"its header ({shape}, {dtype}) does not fit its {len(data)} bytes")
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise UserError(f"{path}: damaged {name} ({error})") from None


@dataclass
class SavedRollouts:
    """A checkpoint's record, checked against the model and env it restores."""

    actions: np.ndarray  # (steps, n_envs, *action shape)
    starts: np.ndarray  # rollout starts, increasing
    state: dict[str, Any]


def _entry(archive: zipfile.ZipFile, name: str, limit: int, path: Path) -> bytes:
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise UserError(
            f"{path}: its {name} has {info.file_size} bytes, over the {limit} its step count needs"
        )
    return archive.read(info)


def read_rollouts(path: Path, model: BaseAlgorithm) -> SavedRollouts | None:
    """The record saved in the checkpoint at ``path`` (``None``: saved without one, by an
    earlier version), checked against ``model`` (loaded from it, on its env)."""
    space = model.action_space
    n_steps = model.num_timesteps // model.n_envs  # at most; the offset read below takes some
    limit = 4096 + n_steps * model.n_envs * int(np.prod(space.shape)) * 8
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if not {ACTIONS_ENTRY, STARTS_ENTRY, STATE_ENTRY} <= names:
                return None
            state = json.loads(_entry(archive, STATE_ENTRY, MAX_STATE_BYTES, path))
            actions_bytes = _entry(archive, ACTIONS_ENTRY, limit, path)
            starts_bytes = _entry(archive, STARTS_ENTRY, limit, path)
    except (zipfile.BadZipFile, OSError, KeyError, ValueError, EOFError) as error:
        raise UserError(f"{path}: damaged rollout record ({error})") from None
    if not (
        isinstance(state, dict)
        and state.get(DIGEST_KEY) == digest(actions_bytes, starts_bytes, state)
    ):
        raise UserError(
            f"{path}: its rollout record does not match the digest the run saved with it "
            "(changed or damaged since, or saved before records carried one); resume from "
            "another checkpoint, or start the run again"
        )
    actions = _npy_array(actions_bytes, ACTIONS_ENTRY, path)
    starts = _npy_array(starts_bytes, STARTS_ENTRY, path)
    offset = state.get("offset", 0)
    if not isinstance(offset, int) or not 0 <= offset <= model.num_timesteps:
        raise UserError(f"{path}: damaged rollout state (offset {offset!r})")
    n_steps = (model.num_timesteps - offset) // model.n_envs
    expected = (n_steps, model.n_envs, *space.shape)
    if (
        state.get("steps") != model.num_timesteps
        or actions.shape != expected
        or offset + n_steps * model.n_envs != model.num_timesteps
    ):
        raise UserError(
            f"{path}: its rollout record does not match its {model.num_timesteps} "
            f"steps of {model.n_envs} envs (actions {actions.shape})"
        )
    if (
        isinstance(space, spaces.Discrete)
        and actions.size
        and not (
            np.issubdtype(actions.dtype, np.integer)
            and space.start <= actions.min()
            and actions.max() < space.start + space.n
        )
    ):
        raise UserError(f"{path}: its rollout record holds actions outside {space}")
    if (
        starts.ndim != 1
        or not np.issubdtype(starts.dtype, np.integer)
        or np.any(np.diff(starts) <= 0)
        or (starts.size and not 0 <= starts[0])
        or (starts.size and starts[-1] >= max(n_steps, 1))
    ):
        raise UserError(f"{path}: its rollout record has bad rollout starts")
    return SavedRollouts(actions, starts, state)


def set_generators(
    state: dict[str, Any],
    model: BaseAlgorithm,
    streams: tuple[torch.Generator, np.random.RandomState] | None = None,
) -> None:
    """Set the generators back as :func:`capture` saved them in ``state`` (``streams``: the
    run's own torch and NumPy streams in place of the global ones)."""
    on_cuda = state["cuda"] is not None and model.device.type == "cuda"
    if streams is None:
        torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
        if on_cuda:
            torch.cuda.set_rng_state(torch.tensor(state["cuda"], dtype=torch.uint8), model.device)
    else:
        own = state["cuda"] if on_cuda else state["torch"]
        streams[0].set_state(torch.tensor(own, dtype=torch.uint8))
    numpy_state = state["numpy"]
    numpy_state["state"]["key"] = np.asarray(numpy_state["state"]["key"], np.uint32)
    (np.random if streams is None else streams[1]).set_state(numpy_state)
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if state["action_space"] is not None:
        model.action_space.np_random.bit_generator.state = state["action_space"]


def set_logged(logged: dict[str, Any], logger: Logger) -> None:
    for key, (kind, value) in logged["values"].items():
        if kind in ("int", "float"):
            logger.name_to_value[key] = {"int": int, "float": float}[kind](value)
            continue
        dtype = np.dtype(kind)
        if dtype.kind not in "iuf":
            raise ValueError(f"logged value {key} of type {kind}")
        logger.name_to_value[key] = dtype.type(value)
    logger.name_to_count.update(logged["counts"])
    logger.name_to_excluded.update({k: tuple(v) for k, v in logged["excluded"].items()})


def _replay(
    model: BaseAlgorithm, env: VecEnv, actions: np.ndarray, starts: set[int], offset: int
) -> None:
    """Step a NumPy ``env`` with the recorded ``actions`` as the run stepped it."""
    off_policy = isinstance(model, OffPolicyAlgorithm)
    replayed = getattr(model, "replayed_step", None)
    obs = env.reset()
    dones = np.ones((model.n_envs,), dtype=bool)
    for t, taken in enumerate(actions):
        if t in starts:
            sync_training_steps(env, offset + t * model.n_envs)
        model._last_obs = obs
        new_obs, rewards, dones, infos = env.step(taken)
        model._update_info_buffer(infos, dones)
        if off_policy:
            model._store_transition(model.replay_buffer, taken, new_obs, rewards, dones, infos)
        if replayed is not None:
            replayed({"infos": infos, "dones": dones})
        obs = new_obs
    model._last_obs = obs
    model._last_episode_starts = dones


def _replay_tensors(
    model: Any, env: TensorVecEnv, actions: np.ndarray, starts: set[int], offset: int
) -> None:
    """Step a tensor ``env`` (``vec_env=device``) with the recorded ``actions`` as the device
    algorithm stepped it: each rollout's episodes reach SB3's statistics at its end."""
    n = model.n_envs
    replayed = getattr(model, "replayed_step", None)
    recorder = EpisodeRecorder(env.level_names)
    obs = env.reset()
    ended = torch.ones(n, dtype=torch.bool, device=env.device)
    for t, taken in enumerate(actions):
        if t in starts:
            add_episode_infos(model, [info for _, info in recorder.read()])
            sync_training_steps(env, offset + t * n)
        step = env.step(torch.as_tensor(taken, device=env.device))
        recorder.add(offset + (t + 1) * n, step)
        if replayed is not None:
            replayed({"step": step})
        obs, ended = step.observations, step.terminated | step.truncated
    add_episode_infos(model, [info for _, info in recorder.read()])
    model._last_obs = obs
    model._last_episode_starts = ended.to(model.device)


def restore(
    model: BaseAlgorithm, env: Any, saved: SavedRollouts, record: RolloutRecord, path: Path
) -> None:
    """Bring fresh ``env`` and the just-loaded ``model`` to where the run was when it saved
    ``saved``: replay its actions (through a NumPy or a tensor vector env), refill SB3's
    episode statistics (and replay buffer) and what the model counts from its steps (its
    ``replayed_step(locals)``, given what a rollout's callback sees: PPO-Lagrangian's episode
    costs), set the generators and pending logged values back, and let ``record`` carry on."""
    model.ep_info_buffer = deque(maxlen=model._stats_window_size)
    model.ep_success_buffer = deque(maxlen=model._stats_window_size)
    sync_training_steps(env, 0)
    replay = _replay_tensors if isinstance(env, TensorVecEnv) else _replay
    replay(model, env, saved.actions, set(saved.starts.tolist()), saved.state.get("offset", 0))
    try:
        set_generators(saved.state, model)
        set_logged(saved.state["logger"], model.logger)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as error:
        raise UserError(f"{path}: damaged rollout state ({error})") from None
    record.continue_from(saved.actions, saved.starts)
