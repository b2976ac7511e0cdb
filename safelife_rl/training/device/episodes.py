"""The finished episodes of a rollout, kept where the env reports them and read once at its
end: a device env's per-step ``final_info`` tensors stay on the device (no per-step copy or
sync), and its side effects are scored then; separate envs' ``final_info`` arrays stay on the
host as Gymnasium batches them."""

from __future__ import annotations

from typing import Any

import numpy as np
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
        self._steps: list[tuple[int, dict[str, Any], torch.Tensor]] = []

    def add(self, timesteps: int, step: TensorStep) -> None:
        """Keep the episodes that ended in ``step``, which left the count at ``timesteps``."""
        if step.final_info is not None:
            self._steps.append((timesteps, step.final_info, step.ended))  # type: ignore[arg-type]

    def read(self) -> list[tuple[int, dict[str, Any]]]:
        """The recorded episodes as ``(timesteps, info)``: :meth:`read_by_env` without the env
        indices."""
        return [(t, info) for t, _, info in self.read_by_env()]

    def read_by_env(self) -> list[tuple[int, int, dict[str, Any]]]:
        """The recorded episodes as ``(timesteps, env index, info)`` in the order they ended
        (by step, then env index), and forget them. A device env's pending side effects
        (:class:`~safelife_rl.envs.vector_env.PendingSideEffects`) are scored here, once: each
        env's last measured episode gets its report."""
        episodes: list[tuple[int, int, dict[str, Any]]] = []
        if self._steps:
            num_envs = len(self._steps[0][2])
            pending, final_infos = _without_pending([info for _, info, _ in self._steps])
            endeds = [ended for _, _, ended in self._steps]
            flat = ended_infos(_concatenated(final_infos, endeds), torch.cat(endeds))
            last_measured: dict[int, dict[str, Any]] = {}
            for index, info in flat.items():
                if self.level_names is not None and "level" in info:
                    info["level"] = self.level_names[info["level"]]
                if info.pop("side_effects", False):  # measured: the mask in its place
                    last_measured[index % num_envs] = info
                episodes.append((self._steps[index // num_envs][0], index % num_envs, info))
            if pending is not None:
                for k, report in pending.read().items():
                    if k in last_measured:
                        last_measured[k]["side_effects"] = report
        self._steps = []
        return episodes


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
