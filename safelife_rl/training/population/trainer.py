"""Population training: P independent PPO runs in one process, their envs one grouped SafeLife
vector env, trained by the device path's one trainer (:class:`~safelife_rl.training.device.
trainer.MemberTrainer`, of which a single ``vec_env=device`` run is P = 1).

:class:`PopulationPPO` adds what a population has beyond one run: its members built on views of
the grouped env (:class:`~.members.MemberEnv`) with their own random streams, their impact
penalties and shared schedules, the grouped env's seeded reset, the record of every action
sent (for exact resume) and the replay of that record (:meth:`PopulationPPO.replay`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np
import torch

from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.training.device.adapters import GymnasiumTensorVecEnv, TensorVecEnv
from safelife_rl.training.device.algorithms import DevicePPO
from safelife_rl.training.device.episodes import EpisodeRecorder
from safelife_rl.training.device.trainer import MemberTrainer
from safelife_rl.training.population.members import (
    MemberEnv,
    MemberRandom,
    SharedSchedules,
)
from safelife_rl.training.population.record import RecordedActions
from safety_rl_common.errors import UserError


class PopulationPPO(MemberTrainer):
    """P PPO members trained together; see the module docstring.

    :param env: a :class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` of ``P`` groups
        (one per member, ``n_envs`` envs each).
    :param make_member: builds member ``k``'s model on its env view and seed, as its single
        run would build it (a :class:`~safelife_rl.training.device.DevicePPO`, or
        PPO-Lagrangian's ``DevicePPOLagrangian``).
    :param seeds: the members' seeds.
    :param penalties: the members' impact penalties (``None``: the env's wrapper's, for all).
    :param batching: how the members' networks run together
        (:data:`~safelife_rl.training.device.stacked.BATCHING`: ``unfold`` on CUDA, member by
        member elsewhere by default).
    :param graphs: the trainer's bodies replayed as CUDA graphs, and ``replay`` how
        (:mod:`~safelife_rl.training.device.graphs`).
    """

    def __init__(
        self,
        env: SafeLifeVectorEnv,
        make_member: Callable[[TensorVecEnv, int], DevicePPO],
        seeds: Sequence[int],
        penalties: Sequence[float] | None = None,
        batching: str = "auto",
        graphs: str = "none",
        replay: str = "graph",
    ):
        if env.groups != len(seeds):
            raise UserError(f"{len(seeds)} members need an env of {len(seeds)} groups")
        self.env = env
        venv = GymnasiumTensorVecEnv(env)
        if penalties is not None:
            env.set_group_penalties(penalties)
        members: list[DevicePPO] = []
        self.random: list[MemberRandom] = []
        self.schedules = SharedSchedules(env)
        for k, seed in enumerate(seeds):
            member = make_member(MemberEnv(venv, k, env.group_size, self.schedules), int(seed))
            if not isinstance(member, DevicePPO):
                raise UserError(f"member {k} is a {type(member).__name__}, not a DevicePPO")
            self.random.append(MemberRandom.capture(member.device))
            members.append(member)
        if members[0].n_envs != env.group_size:
            raise UserError(
                f"the members have {members[0].n_envs} envs, their groups {env.group_size}"
            )
        super().__init__(
            venv, members, [r.numpy.permutation for r in self.random], batching, graphs, replay
        )
        #: every action sent to the envs (the members' rollout records read their columns)
        self.recorded = RecordedActions(self.size * self.n_envs)

    def _reset_envs(self) -> None:
        """The grouped env reset with each member's seed; each member's first observations."""
        obs, _ = self.env.reset(seed=[m.env.given_seed for m in self.members])
        obs = torch.as_tensor(obs, device=self.device)
        for k, member in enumerate(self.members):
            member.env.first_obs = self._part(obs, k)

    def _record_rollout(self, actions: torch.Tensor) -> None:
        self.recorded.add(actions)

    def replay(self, actions: np.ndarray, starts: set[int], offset: int) -> None:
        """Bring the fresh envs to where the members' saved records left them: step them with
        the recorded ``actions`` ``(steps, P * n_envs)`` as the population stepped them (the
        schedules told the step count at each rollout start in ``starts``), refilling each
        member's episode statistics. :meth:`learn` (``reset_num_timesteps=False``) goes on
        from there."""
        n = self.n_envs
        for member in self.members:
            member.ep_info_buffer = deque(maxlen=member._stats_window_size)
            member.ep_success_buffer = deque(maxlen=member._stats_window_size)
        self.schedules.set_training_steps(0)
        obs, _ = self.env.reset(seed=[m.env.given_seed for m in self.members])
        obs = torch.as_tensor(obs, device=self.device)
        ended = torch.ones(len(obs), dtype=torch.bool, device=self.device)
        recorder = EpisodeRecorder(self.venv.level_names)
        for t, taken in enumerate(actions):
            if t in starts:
                self._deliver_episodes(recorder)
                self.schedules.set_training_steps(offset + t * n)
            step = self.venv.step(torch.as_tensor(taken, device=self.device))
            recorder.add(offset + (t + 1) * n, step)
            if self.costs is not None:  # the episodes in progress (those ended were used)
                self.costs.count(step)
            obs, ended = step.observations, step.terminated | step.truncated
        if self.costs is not None:
            self.costs.ended.zero_()
        self._deliver_episodes(recorder)
        self._set_last(obs, ended)
        self.recorded.continue_from(actions)
