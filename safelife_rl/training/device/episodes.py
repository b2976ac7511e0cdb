"""The finished episodes of a rollout, kept where the env reports them and read once at its
end: a device env's per-step ``final_info`` tensors are written into one preallocated device
buffer (no per-step copy or sync) and read in one copy, and its side effects are scored then;
separate envs' ``final_info`` arrays stay on the host as Gymnasium batches them."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from safelife_rl.envs.vector_env import PendingSideEffects
from safelife_rl.training.device.adapters import TensorStep, ended_infos

#: a key's place in a (nested) ``final_info``
Path = tuple[str, ...]


class EpisodeRecorder:
    """Collects each step's ended episodes; :meth:`read` gives them in step order, each with the
    step count at which it ended, in one host copy for the whole rollout.

    A device env's steps (every ``final_info`` entry a tensor, on the device of ``ended``) go
    into a buffer ``(steps, columns, num_envs)`` of float64 allocated once (exact for the
    counts and float32 statistics), one column per entry and mask and one for ``ended``, one
    write a step; :meth:`read_by_env` copies it to the host once. It grows, should a read
    come later than ``steps`` steps.

    :param level_names: the names of a device env's level indices (``info["level"]``), if any.
    :param steps: the steps the buffer holds before it grows (a rollout's).
    """

    def __init__(self, level_names: list[str] | None = None, steps: int = 1):
        self.level_names = level_names
        self._steps: list[tuple[int, dict[str, Any], torch.Tensor]] = []
        #: the device env's: its entries' layout, its buffer, the steps written, their counts
        self._layout: tuple[tuple[Path, tuple[Path, ...]], ...] | None = None
        self._columns: list[Path] = []
        self._kinds: list[type] = []
        self._buffer: torch.Tensor | None = None
        self._capacity = max(1, steps)
        self._times: list[int] = []
        self._pending: PendingSideEffects | None = None

    def add(self, timesteps: int, step: TensorStep) -> None:
        """Keep the episodes that ended in ``step``, which left the count at ``timesteps``."""
        if step.final_info is None:
            return
        ended = step.ended
        pending, (final_info,) = _without_pending([step.final_info])
        layout, columns = _columns(final_info, ended)
        on_device = (
            isinstance(ended, torch.Tensor)
            and not self._steps
            and all(
                isinstance(c, torch.Tensor) and c.device == ended.device for c in columns.values()
            )
        )
        if not on_device:
            self._steps.append((timesteps, step.final_info, ended))  # type: ignore[arg-type]
            return
        assert isinstance(ended, torch.Tensor)
        if self._layout is None:
            self._layout, self._columns = layout, list(columns)
            self._kinds = [_python_type(columns[path]) for path in self._columns]
        elif layout != self._layout or list(columns) != self._columns:
            raise ValueError("a device env's final_info changed its entries between steps")
        self._pending = pending
        t = len(self._times)
        buffer = self._buffer
        if buffer is None or t == len(buffer):
            grown = torch.zeros(
                (max(self._capacity, 2 * t), 1 + len(columns), len(ended)),
                dtype=torch.float64,
                device=ended.device,
            )
            if buffer is not None:
                grown[:t] = buffer
            buffer = self._buffer = grown
        torch.stack([ended, *columns.values()], out=buffer[t])
        self._times.append(timesteps)

    def clear(self) -> None:
        """Forget the recorded episodes (a rollout stopped by a callback leaves its own)."""
        self._steps, self._times = [], []

    def replayed(self, times: list[int]) -> None:
        """The device buffer's rows rewritten by a rollout's replay (a CUDA graph, which runs
        no Python: :mod:`.graphs`), each at its step count of ``times``; as :meth:`add` would
        have kept them."""
        if self._buffer is None or len(times) > len(self._buffer):
            raise ValueError("a replayed rollout writes rows that a device env's steps made")
        self._times = list(times)

    def read(self) -> list[tuple[int, dict[str, Any]]]:
        """The recorded episodes as ``(timesteps, info)``: :meth:`read_by_env` without the env
        indices."""
        return [(t, info) for t, _, info in self.read_by_env()]

    def read_by_env(self) -> list[tuple[int, int, dict[str, Any]]]:
        """The recorded episodes as ``(timesteps, env index, info)`` in the order they ended
        (by step, then env index), and forget them. A device env's pending side effects
        (:class:`~safelife_rl.envs.vector_env.PendingSideEffects`) are scored here, once: each
        env's last measured episode gets its report."""
        if self._times:
            episodes, pending = self._read_buffer(), self._pending
        elif self._steps:
            episodes, pending = self._read_steps()
        else:
            return []
        self.clear()
        last_measured: dict[int, dict[str, Any]] = {}
        for _, index, info in episodes:
            if self.level_names is not None and "level" in info:
                info["level"] = self.level_names[info["level"]]
            if info.pop("side_effects", False):  # measured: the mask in its place
                last_measured[index] = info
        if pending is not None:
            for k, report in pending.read().items():
                if k in last_measured:
                    last_measured[k]["side_effects"] = report
        return episodes

    def _read_buffer(self) -> list[tuple[int, int, dict[str, Any]]]:
        """The device buffer's episodes, in one copy to the host."""
        assert self._buffer is not None and self._layout is not None
        host = self._buffer[: len(self._times)].numpy(force=True)
        steps, envs = np.nonzero(host[:, 0])
        place = {path: 1 + c for c, path in enumerate(self._columns)}
        kinds = dict(zip(self._columns, self._kinds))
        infos: list[dict[str, Any]] = [{} for _ in steps]
        for path, marks in self._layout:
            values = host[steps, place[path], envs]
            convert = kinds[path]
            present = np.ones(len(steps), dtype=bool)
            for mark in marks:
                present &= host[steps, place[mark], envs] != 0
            for info, value, given in zip(infos, values.tolist(), present.tolist()):
                if given:
                    for key in path[:-1]:
                        info = info.setdefault(key, {})
                    info[path[-1]] = convert(value)
        times = self._times
        return [(times[t], e, info) for t, e, info in zip(steps.tolist(), envs.tolist(), infos)]

    def _read_steps(
        self,
    ) -> tuple[list[tuple[int, int, dict[str, Any]]], PendingSideEffects | None]:
        """Separate envs' episodes (their ``final_info`` arrays on the host, or tensors of
        another device than their ``ended``), and the pending side effects, if any."""
        num_envs = len(self._steps[0][2])
        pending, final_infos = _without_pending([info for _, info, _ in self._steps])
        endeds = [ended for _, _, ended in self._steps]
        flat = ended_infos(_concatenated(final_infos, endeds), torch.cat(endeds))
        episodes = [
            (self._steps[index // num_envs][0], index % num_envs, info)
            for index, info in flat.items()
        ]
        return episodes, pending


def _columns(
    final_info: dict[str, Any], ended: Any
) -> tuple[tuple[tuple[Path, tuple[Path, ...]], ...], dict[Path, Any]]:
    """A ``final_info``'s layout, each entry's path with the paths of the ``_key`` masks it is
    given under (a mask that is ``ended`` itself left out), and its columns by path: the
    entries' and the masks' values."""
    layout: list[tuple[Path, tuple[Path, ...]]] = []
    columns: dict[Path, Any] = {}

    def collect(values: dict[str, Any], path: Path, marks: tuple[Path, ...]) -> None:
        for key, value in values.items():
            if key.startswith("_"):
                continue
            mask = values.get(f"_{key}")
            own = marks
            if mask is not None and mask is not ended:
                columns[(*path, f"_{key}")] = mask
                own = (*marks, (*path, f"_{key}"))
            if isinstance(value, dict):
                collect(value, (*path, key), own)
            else:
                layout.append(((*path, key), own))
                columns[(*path, key)] = value

    collect(final_info, (), ())
    return tuple(layout), columns


def _python_type(column: torch.Tensor) -> type:
    """The Python type of a column's values (as :func:`~.adapters.ended_infos` gives them)."""
    if column.dtype == torch.bool:
        return bool
    return float if column.is_floating_point() else int


def _without_pending(
    final_infos: list[dict[str, Any]],
) -> tuple[PendingSideEffects | None, list[dict[str, Any]]]:
    """The steps' pending side effects, if any, and their ``final_info``s with each step's
    measured mask (``_side_effects``) in the pending reports' place."""
    pending = next(
        (
            info["side_effects"]
            for info in final_infos
            if isinstance(info.get("side_effects"), PendingSideEffects)
        ),
        None,
    )
    if pending is None:
        return None, final_infos
    measured = []
    for info in final_infos:
        info = dict(info)
        info["side_effects"] = info.pop("_side_effects")
        measured.append(info)
    return pending, measured


def _concatenated(final_infos: list[dict[str, Any]], endeds: list[Any]) -> dict[str, Any]:
    """One ``final_info`` of the steps' ``final_infos`` end to end (tensors, arrays or lists),
    ``endeds`` the steps' ``ended`` masks. A key that some steps lack (separate envs' infos have
    the keys of the envs that ended) is ``None`` there, its ``_key`` mask false; a mask that is
    its step's ``ended`` (a device env's) is left out, as :func:`~.adapters.ended_infos` would
    leave it."""
    joined: dict[str, Any] = {}
    for key in dict.fromkeys(key for info in final_infos for key in info):
        parts = [info.get(key) for info in final_infos]
        if key.startswith("_") and all(p is e for p, e in zip(parts, endeds)):
            continue
        if any(isinstance(p, dict) for p in parts):
            joined[key] = _concatenated([{} if p is None else p for p in parts], endeds)
        elif all(isinstance(p, torch.Tensor) for p in parts):
            joined[key] = torch.cat(parts)  # type: ignore[arg-type]
        else:
            missing = False if key.startswith("_") else None
            filled = [
                np.full(len(e), missing, object) if p is None else p for p, e in zip(parts, endeds)
            ]
            if all(isinstance(p, np.ndarray) for p in filled):
                joined[key] = np.concatenate(filled)
            else:
                joined[key] = [item for part in filled for item in part]
    return joined


def add_episode_infos(model: Any, infos: list[dict[str, Any]]) -> None:
    """The final infos of ended episodes into an SB3 model's episode statistics, as its
    rollouts add them (``info["episode"]`` to ``ep_info_buffer``, ``info["is_success"]`` to
    ``ep_success_buffer``)."""
    for info in infos:
        episode, success = info.get("episode"), info.get("is_success")
        if episode is not None:
            model.ep_info_buffer.append(episode)
        if success is not None:
            model.ep_success_buffer.append(success)
