"""Exact resume of a population: each member's checkpoints hold the rollout record a single
run's hold (:mod:`~safelife_rl.training.rollout_record`: its actions, rollout starts, random
streams and pending logged values), so a member's folder resumes exactly on its own
(``train resume=FOLDER``) and the members' folders resume exactly together.

The actions are kept once for the whole population (:class:`RecordedActions`: one
``(steps, P * n_envs)`` block per rollout, not one tensor per step per member), and each
member's record (:class:`MemberRecord`) reads its columns when a checkpoint is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from safelife_rl.training.population.members import MemberRandom
from safelife_rl.training.rollout_record import (
    RolloutRecord,
    SavedRollouts,
    capture,
    set_generators,
    set_logged,
)
from safety_rl_common.errors import UserError


class RecordedActions:
    """Every action a population sent to its envs: rollouts added as device tensors (no sync),
    brought to the host in one copy when a checkpoint reads them, kept there as uint8."""

    def __init__(self, width: int):
        self.width = width
        self._host = np.zeros((0, width), np.uint8)
        self._count = 0  # rows of _host in use
        self._pending: list[torch.Tensor] = []
        self._pending_steps = 0

    @property
    def steps(self) -> int:
        """Vector-env steps recorded."""
        return self._count + self._pending_steps

    def add(self, actions: torch.Tensor) -> None:
        """A rollout's actions, ``(steps, width)`` (integers 0-255)."""
        self._pending.append(actions.to(torch.uint8))
        self._pending_steps += len(actions)

    def continue_from(self, actions: np.ndarray) -> None:
        """Start from a restored population's actions ``(steps, width)``."""
        self._host, self._count = actions.astype(np.uint8), len(actions)
        self._pending, self._pending_steps = [], 0

    def _flush(self) -> None:
        if not self._pending:
            return
        new = torch.cat(self._pending).cpu().numpy()
        need = self._count + len(new)
        if need > len(self._host):  # room for as many again: amortized copies
            grown = np.zeros((max(need, 2 * len(self._host)), self.width), np.uint8)
            grown[: self._count] = self._host[: self._count]
            self._host = grown
        self._host[self._count : need] = new
        self._count, self._pending, self._pending_steps = need, [], 0

    def columns(self, first: int, count: int, steps: int) -> np.ndarray:
        """Columns ``first:first + count`` of the first ``steps`` steps, as int64 (a single
        device run's record's dtype)."""
        self._flush()
        return self._host[:steps, first : first + count].astype(np.int64)


class MemberRecord(RolloutRecord):
    """A population member's :class:`~safelife_rl.training.rollout_record.RolloutRecord`: its
    boundaries hold its own random streams, its actions are its columns of the population's
    :class:`RecordedActions`."""

    def __init__(self, actions: RecordedActions, index: int, n_envs: int, random: MemberRandom):
        super().__init__()
        self.recorded, self.index, self.n_envs, self.random = actions, index, n_envs, random

    def _n_actions(self) -> int:
        return self.recorded.steps

    def _taken(self, n_actions: int) -> np.ndarray:
        return self.recorded.columns(self.index * self.n_envs, self.n_envs, n_actions)

    def _capture(self) -> None:
        streams = (self.random.torch, self.random.numpy)
        self.boundary = capture(self.model, self._n_actions(), len(self.starts), streams)

    def _on_step(self) -> bool:  # the population records the actions
        return True

    def continue_from(self, actions: np.ndarray, starts: np.ndarray) -> None:
        self.starts = [int(s) for s in starts]


def joined_rollouts(saved: Sequence[SavedRollouts], paths: Sequence[Path]) -> np.ndarray:
    """The members' saved actions side by side, ``(steps, P * n_envs)``; a
    :class:`UserError` for records that were not made together (other rollout starts or
    step offsets)."""
    first = saved[0]
    for rollouts, path in zip(saved[1:], paths[1:]):
        if (
            not np.array_equal(rollouts.starts, first.starts)
            or rollouts.state.get("offset", 0) != first.state.get("offset", 0)
            or len(rollouts.actions) != len(first.actions)
        ):
            raise UserError(
                f"{path}: its rollout record does not match {paths[0]}'s (other rollouts): "
                "these members did not train together; resume each on its own"
            )
    return np.concatenate([rollouts.actions for rollouts in saved], axis=1)


def set_member_state(
    rollouts: SavedRollouts, member: object, random: MemberRandom, path: Path
) -> None:
    """Member's random streams and pending logged values as its checkpoint saved them."""
    try:
        set_generators(rollouts.state, member, (random.torch, random.numpy))  # type: ignore[arg-type]
        set_logged(rollouts.state["logger"], member.logger)  # type: ignore[attr-defined]
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as error:
        raise UserError(f"{path}: damaged rollout state ({error})") from None
