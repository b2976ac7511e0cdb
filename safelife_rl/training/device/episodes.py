"""The finished episodes of a rollout, kept where the env reports them and read once at its
end: a device env's per-step ``final_info`` tensors stay on the device (no per-step copy or
sync), and its side effects are scored then; a NumPy env's info dicts stay as they are."""

from __future__ import annotations

from typing import Any

import torch

from safelife_rl.envs.vector_env import PendingSideEffects
from safelife_rl.training.device.adapters import TensorStep, ended_infos


class EpisodeRecorder:
    """Collects each step's ended episodes; :meth:`read` gives them in step order, each with the
    step count at which it ended, in one host copy for the whole rollout.

    :param level_names: the names of a device env's level indices (``info["level"]``), if any.
    """

    def __init__(self, level_names: list[str] | None = None):
        self.level_names = level_names
        self._device: list[tuple[int, dict[str, Any], torch.Tensor]] = []
        self._host: list[tuple[int, int, dict[str, Any]]] = []

    def add(self, timesteps: int, step: TensorStep) -> None:
        """Keep the episodes that ended in ``step``, which left the count at ``timesteps``."""
        if step.final_info is not None:
            self._device.append((timesteps, step.final_info, step.ended))
        self._host.extend((timesteps, k, info) for k, info in step.infos.items())

    def read(self) -> list[tuple[int, dict[str, Any]]]:
        """The recorded episodes as ``(timesteps, info)``: :meth:`read_by_env` without the env
        indices."""
        return [(t, info) for t, _, info in self.read_by_env()]

    def read_by_env(self) -> list[tuple[int, int, dict[str, Any]]]:
        """The recorded episodes as ``(timesteps, env index, info)`` in the order they ended
        (by step, then env index), and forget them. A device env's pending side effects
        (:class:`~safelife_rl.envs.vector_env.PendingSideEffects`) are scored here, once: each
        env's last measured episode gets its report."""
        episodes = [(t, k, info) for t, k, info in self._host]
        if self._device:
            num_envs = len(self._device[0][2])
            pending, final_infos = _without_pending([info for _, info, _ in self._device])
            flat = ended_infos(
                _concatenated(final_infos), torch.cat([ended for _, _, ended in self._device])
            )
            last_measured: dict[int, dict[str, Any]] = {}
            for index, info in flat.items():
                if self.level_names is not None and "level" in info:
                    info["level"] = self.level_names[info["level"]]
                if info.pop("side_effects", False):  # measured: the mask in its place
                    last_measured[index % num_envs] = info
                episodes.append((self._device[index // num_envs][0], index % num_envs, info))
            if pending is not None:
                for k, report in pending.read().items():
                    if k in last_measured:
                        last_measured[k]["side_effects"] = report
        self._device, self._host = [], []
        episodes.sort(key=lambda episode: episode[:2])
        return episodes


def _without_pending(
    final_infos: list[dict[str, Any]],
) -> tuple[PendingSideEffects | None, list[dict[str, Any]]]:
    """The steps' pending side effects, if any, and their ``final_info``s with each step's
    measured mask (``_side_effects``) where the pending reports were."""
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
    return pending, [{**info, "side_effects": info["_side_effects"]} for info in final_infos]


def _concatenated(final_infos: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``final_info`` of the steps' ``final_infos`` end to end (tensors or arrays)."""
    first = final_infos[0]
    joined: dict[str, Any] = {}
    for key, value in first.items():
        parts = [info[key] for info in final_infos]
        if isinstance(value, dict):
            joined[key] = _concatenated(parts)
        elif isinstance(value, torch.Tensor):
            joined[key] = torch.cat(parts)
        else:
            joined[key] = [item for part in parts for item in part]
    return joined
