"""The device path's one PPO trainer, written once over a leading member axis: P runs trained
together in one process (a population), or one run (P = 1: every ``vec_env=device`` PPO run,
:class:`~.algorithms.DevicePPO` and PPO-Lagrangian's device algorithm).

Each member is an ordinary SB3 model (a :class:`~.algorithms.DevicePPO`) with its own seed,
callbacks, logger and files; :class:`MemberTrainer` drives them in lockstep as SB3's ``learn``
drives one: a rollout of every member's envs (one vector-env step and one batched forward pass
per step) into one rollout buffer ``(steps, P * n_envs)``, then one PPO update of every member
(each member's own minibatch order, advantages, losses, gradient clipping and Adam moments,
computed as stacked tensors: :mod:`.stacked`). A method's own parts of a rollout and an update
(PPO-Lagrangian's cost critics and multipliers) plug in as the member class's
``member_axis_parts``; a population's grouped env, its resets and exact resume are
:class:`~safelife_rl.training.population.PopulationPPO`'s.

**Exactness.** At P = 1 the update is stock SB3 PPO's bit for bit from the same rollout (same
float32 operations in the same order: ``tests/safelife/test_device_training.py``). Each
member's actions are drawn by one batched :class:`~.sampler.ActionSampler` from its seed and
step count, its minibatches from its own NumPy stream (``permutations``). Run member by member
(``batching="loop"``, the CPU's default and a single run's), each member makes its single
run's updates bit for bit. Batched with ``torch.func.vmap`` (CUDA's default for P > 1), the
convolutions and products of all members run in other kernels, whose sums round otherwise:
about 1e-9 relative per forward pass, a few 1e-7 in the weights after a few updates.

**Callbacks.** Nothing in a rollout step waits for the device. At each step a member's
callback sees ``locals["actions"]`` (its actions, on the device), ``locals["step"]`` (the whole
:class:`~.adapters.TensorStep`) and empty ``infos`` and ``dones``; its ``on_step`` runs once a
vector-env step, after ``num_timesteps`` has moved on by its ``n_envs``, so SB3's
``CheckpointCallback`` and the project's step-counted callbacks fire at the step counts they
fire at on the NumPy path. The episodes that ended in the rollout come together at its end: in
``on_rollout_end``, ``locals["episodes"]`` is a list of ``(timesteps, info)`` in the order they
ended (read from the device in one copy), and SB3's ``ep_info_buffer`` gets them then too.

**CUDA graphs** (``graphs``: :mod:`.graphs`). The rollout's body (:meth:`MemberTrainer._rollout`)
and the update's (:meth:`MemberTrainer._update`) are the same code eager and captured; a
replayed rollout's callback steps run after it, each at its step count (a callback that stops
the run stops it at the same count, the env then some steps further on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import explained_variance
from torch.distributions import Categorical
from tqdm import tqdm

from safelife_rl.training.device.adapters import TensorStep, TensorVecEnv
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.device.captured_policy import CapturedPolicy
from safelife_rl.training.device.episodes import EpisodeRecorder, add_episode_infos
from safelife_rl.training.device.graphs import CapturedCall, check_graphs
from safelife_rl.training.device.sampler import ActionSampler, run_seed
from safelife_rl.training.device.stacked import (
    PolicyHeads,
    StackedNetworks,
    StackedOptimizer,
    set_lr,
)
from safety_rl_common.errors import UserError

#: The PPO settings every member must share (they shape the batched update).
SHARED = (
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "normalize_advantage",
    "target_kl",
    "n_envs",
    "use_sde",
)


def check_trainable(model: Any) -> None:
    """Refuse, in one line, a PPO model the trainer cannot train: continuous actions or
    ``target_kl`` (an update that stops early), which the NumPy path trains."""
    space = model.action_space
    if space is not None and not isinstance(space, spaces.Discrete):
        raise UserError(
            f"vec_env=device trains discrete actions, not {type(space).__name__} ones: "
            "use vec_env=batched"
        )
    if model.target_kl is not None:
        raise UserError(
            "vec_env=device trains PPO without target_kl (no run stops its update early): "
            "use vec_env=batched"
        )


#: The episodes of each member that ended in a rollout, as ``(timesteps, info)``.
Episodes = list[list[tuple[int, dict[str, Any]]]]
_NO_DONES = np.zeros(0, dtype=bool)


class Rollout(NamedTuple):
    """What a rollout's body leaves beside the buffer: the actions sent ``(steps, P * n)``
    and each step's :class:`~.adapters.TensorStep` (a captured rollout's: rewritten by each
    replay)."""

    actions: torch.Tensor
    steps: list[TensorStep]


#: What an update's body leaves: its per-minibatch statistics by name and its last losses,
#: ``(P,)`` tensors (a captured update's: rewritten by each replay).
Update = tuple[dict[str, list[torch.Tensor]], torch.Tensor]


class Clip(NamedTuple):
    """PPO's clip range of an update and the bounds it makes: Python floats (as SB3 computes
    them), or device tensors a captured update reads; ``vf_low``/``vf_high`` ``None``
    without value clipping."""

    range: Any
    low: Any
    high: Any
    vf_low: Any = None
    vf_high: Any = None

    @classmethod
    def of(cls, clip_range: float, clip_range_vf: float | None) -> Clip:
        if clip_range_vf is None:
            return cls(clip_range, 1 - clip_range, 1 + clip_range)
        return cls(clip_range, 1 - clip_range, 1 + clip_range, -clip_range_vf, clip_range_vf)


class MemberTrainer:
    """P PPO members trained together (P = 1: one run); see the module docstring.

    :param venv: the tensor vector env of all members' envs, member ``k``'s the ``k``-th
        ``n_envs`` of it.
    :param members: the members' models (:class:`~.algorithms.DevicePPO`s of one class and the
        :data:`SHARED` settings).
    :param permutations: each member's draw of its minibatch order (``np.random.permutation``
        for a single run, as SB3's buffer draws it).
    :param batching: how the members' networks run together (:data:`~.stacked.BATCHING`).
    :param graphs: which bodies replay as one CUDA graph (:data:`~.graphs.GRAPHS`).
    :param replay: how they replay (:data:`~.graphs.REPLAYS`: ``eager`` is the CPU's
        stand-in the tests use).
    """

    def __init__(
        self,
        venv: TensorVecEnv,
        members: Sequence[Any],
        permutations: Sequence[Callable[[int], np.ndarray]],
        batching: str = "auto",
        graphs: str = "none",
        replay: str = "graph",
    ):
        self.venv = venv
        self.members = list(members)
        self.permutations = list(permutations)
        self.size, self.n_envs = len(self.members), self.members[0].n_envs
        self._check_members()
        first = self.members[0]
        self.device = first.device
        self.sampler = ActionSampler(
            [run_seed(member) for member in self.members],
            self.n_envs,
            int(first.action_space.n),
            self.device,
        )
        self.stacked = StackedNetworks([PolicyHeads(m.policy) for m in self.members], batching)
        self.optimizer = StackedOptimizer(self.stacked, [m.policy.optimizer for m in self.members])
        #: a method's parts (PPO-Lagrangian's costs), from the member class's ``member_axis_parts``
        self.costs: Any = None
        parts = getattr(first, "member_axis_parts", None)
        if parts is not None:
            self.costs = parts(self.members, self.n_envs, self.stacked.batching)
        if self.size == 1:  # a single run's own buffer
            self.buffer = first.rollout_buffer
        else:
            self.buffer = type(first.rollout_buffer)(
                first.n_steps,
                first.observation_space,
                first.action_space,
                self.device,
                gae_lambda=first.gae_lambda,
                gamma=first.gamma,
                n_envs=self.size * self.n_envs,
            )
        self.buffer.reset()
        #: a single run's network replayed as a CUDA graph when its env replays its step as one
        self._captured = None
        if self.size == 1 and getattr(venv, "cuda_graphs", False):
            self._captured = CapturedPolicy(first.policy)
        #: the most times a time limit can cut one env's episodes in a rollout (cuts come at
        #: least ``episode_limit`` steps apart; without a limit, at every step)
        limit = getattr(venv, "episode_limit", None)
        steps = first.n_steps
        self.cut_rounds = steps if limit is None else min(steps, -(-steps // limit))
        #: the episodes that end in a rollout, in one device buffer read at its end
        self.recorder = EpisodeRecorder(venv.level_names, steps)
        #: each member's steps at the last rollout boundary (trained on every step it counts)
        self.trained_steps = 0
        self._last_obs: torch.Tensor | None = None
        self._last_starts: torch.Tensor | None = None
        self._rollout_start = 0
        check_graphs(graphs, torch.device(self.device), replay)
        self.graphs, self.graph_replay = graphs, replay
        self._rollout_call: CapturedCall[Rollout | None] | None = None
        self._update_call: CapturedCall[Update] | None = None
        if graphs in ("rollout", "all"):
            self._check_capturable("rollout")
            self.venv.keep_state()  # refused here by an env whose step cannot be captured
            self._rollout_call = CapturedCall(self._rollout, "rollout", replay)
        if graphs in ("update", "all"):
            self._check_capturable("update")
            self._update_call = self._captured_update(replay)

    def _check_capturable(self, body: str) -> None:
        """Refuse, in one line, what a captured ``body`` cannot replay."""
        if self.costs is not None:
            raise UserError(
                f"graphs={self.graphs} captures PPO's {body}; "
                f"{type(self.members[0]).__name__}'s cost critics train eagerly: use graphs=none"
            )
        if getattr(self.venv, "cuda_graphs", False):
            raise UserError(
                f"graphs={self.graphs} captures the {body} whole: compile the env's step with "
                "compile=true, not compile=cudagraphs (a graph of its own)"
            )

    def _captured_update(self, replay: str) -> CapturedCall[Update]:
        """The update's body captured over tensors the trainer fills before each replay: the
        minibatch orders, the clip ranges and (in the optimizers, which must be fused Adam
        made capturable) the learning rate."""
        first = self.members[0]
        total = self.buffer.buffer_size * self.n_envs
        self._orders = torch.zeros(
            (first.n_epochs, self.size, total), dtype=torch.int64, device=self.device
        )
        self._clip = torch.zeros(5, dtype=torch.float32, device=self.device)
        values = self._clip.unbind()
        clip = Clip(*values) if first.clip_range_vf is not None else Clip(*values[:3])
        # fused Adam reads a learning rate tensor on CUDA as float32 (its eager step reads the
        # float in double: a captured update's rate is rounded, relatively by 6e-8 at most);
        # elsewhere as a double, which is the eager step's
        dtype = torch.float32 if torch.device(self.device).type == "cuda" else torch.float64
        for optimizer in self.optimizer.stepping():
            for group in optimizer.param_groups:
                if not group.get("fused"):
                    raise UserError(
                        f"graphs={self.graphs} captures the optimizer's step: it must be "
                        f"torch.optim.Adam(fused=True) (the device path's), got "
                        f"{type(optimizer).__name__} with fused={group.get('fused')}"
                    )
                group["capturable"] = True
                group["lr"] = torch.tensor(float(group["lr"]), dtype=dtype, device=self.device)
        return CapturedCall(partial(self._update, self._orders, clip), "update", replay)

    def _check_members(self) -> None:
        first = self.members[0]
        check_trainable(first)
        if not isinstance(first.rollout_buffer, TensorRolloutBuffer):
            raise UserError("the device trainer keeps its rollouts in a TensorRolloutBuffer")
        for k, member in enumerate(self.members):
            if type(member) is not type(first):
                raise UserError(
                    f"member {k} is a {type(member).__name__}, member 0 a "
                    f"{type(first).__name__}: a population's members train one algorithm"
                )
            for name in SHARED:
                if getattr(member, name) != getattr(first, name):
                    raise UserError(
                        f"the members differ in {name} ({getattr(first, name)!r} and "
                        f"{getattr(member, name)!r}): a population batches them as one"
                    )
        if self.venv.num_envs != self.size * self.n_envs:
            raise UserError(
                f"{self.size} members of {self.n_envs} envs need {self.size * self.n_envs} "
                f"envs, got {self.venv.num_envs}"
            )

    # -- learning -----------------------------------------------------------------------------

    def _reset_envs(self) -> None:
        """Before the members start afresh: a single run's env is reset by SB3's setup."""

    def setup(
        self,
        total_timesteps: int,
        callbacks: Sequence[BaseCallback | None] | None = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
    ) -> tuple[int, list[BaseCallback]]:
        """SB3's setup of every member's learning (step count, episode statistics, logger,
        callbacks, first observations: ``_setup_learn``), the envs reset where the members
        start afresh; the step count to train to and each member's callback, ready for
        :meth:`collect_rollouts`."""
        callbacks = list(callbacks or [None] * self.size)
        if len(callbacks) != self.size:
            raise UserError(f"need one callback per member ({self.size}), got {len(callbacks)}")
        if reset_num_timesteps or any(m._last_obs is None for m in self.members):
            self._reset_envs()
        started = []
        for member, callback in zip(self.members, callbacks):
            # SB3's setup: step count, episode statistics, logger, callbacks, first observations
            total, started_callback = member._setup_learn(
                total_timesteps, callback, reset_num_timesteps, tb_log_name, False
            )
            started.append(started_callback)
        self._set_last(
            torch.cat([torch.as_tensor(m._last_obs).to(self.device) for m in self.members]),
            torch.cat(
                [
                    torch.as_tensor(m._last_episode_starts, dtype=torch.bool).to(self.device)
                    for m in self.members
                ]
            ),
        )
        return total, started

    def learn(
        self,
        total_timesteps: int,
        callbacks: Sequence[BaseCallback | None] | None = None,
        log_interval: int = 1,
        progress_bar: bool = False,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
    ) -> MemberTrainer:
        """Train every member ``total_timesteps`` more steps of its own, as
        ``model.learn(total_timesteps, callback, reset_num_timesteps=...)`` trains one (the
        step counts from 0, or on from the members' own, all equal).

        :param callbacks: one per member (or ``None``), each seeing its member's model, steps,
            episodes (``locals["episodes"]`` at a rollout's end) and logger.
        """
        total, started = self.setup(total_timesteps, callbacks, reset_num_timesteps, tb_log_name)
        for callback in started:
            callback.on_training_start(locals(), globals())
        iteration = 0
        first = self.members[0]
        self.trained_steps = first.num_timesteps
        bar = tqdm(total=total, initial=self.trained_steps, disable=not progress_bar, unit="steps")
        while first.num_timesteps < total:
            if not self.collect_rollouts(started):
                break
            iteration += 1
            bar.update(self.n_envs * first.n_steps)
            progress = 1.0 - float(first.num_timesteps) / float(total)
            for member in self.members:
                member._current_progress_remaining = progress
                if log_interval and iteration % log_interval == 0:
                    member.dump_logs(iteration)
            self.train()
            self.trained_steps = first.num_timesteps
        bar.close()
        for callback in started:
            callback.on_training_end()
        return self

    def _part(self, tensor: torch.Tensor, k: int) -> torch.Tensor:
        return tensor[k * self.n_envs : (k + 1) * self.n_envs]

    def _by_member(self, tensor: torch.Tensor) -> torch.Tensor:
        """A tensor of all envs ``(P * n, ...)`` as ``(P, n, ...)``."""
        return tensor.view(self.size, self.n_envs, *tensor.shape[1:])

    def _heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every member's action logits and values of its observations (all envs'
        ``(P * n, ...)``), ``(P, n, ...)`` each."""
        if self._captured is not None:
            logits, values = self._captured(obs)
            return logits[None], values[None]
        return self.stacked(self._by_member(obs))

    def _sample(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's actions, drawn in one batch as its single run draws them, and their
        log-probabilities: ``(P, n)`` each (the distribution's argument checks, a host read
        each, left out)."""
        distribution = Categorical(logits=logits, validate_args=False)
        actions = self.sampler(distribution.logits)
        return actions, distribution.log_prob(actions)

    def _set_training_mode(self, mode: bool) -> None:
        for member in self.members:
            member.policy.set_training_mode(mode)
        self.stacked.set_training_mode(mode)
        if self.costs is not None:
            self.costs.set_training_mode(mode)

    def _record_rollout(self, actions: torch.Tensor) -> None:
        """A rollout's actions ``(steps, P * n)`` sent to the envs (a population keeps them)."""

    def collect_rollouts(self, callbacks: list[BaseCallback]) -> bool:
        """One rollout of every member, into the stacked buffer: :meth:`_rollout` run eagerly
        with the callbacks at every step, or replayed as one CUDA graph (``graphs=rollout``)
        and the callbacks' steps run after it."""
        first, n = self.members[0], self.n_envs
        start = self._prepare_rollout()
        for callback in callbacks:
            callback.on_rollout_start()
        if self._rollout_call is None:
            rollout = self._rollout(partial(self._on_step, callbacks))
            if rollout is None:
                return False
        else:
            self.venv.keep_state()  # a reset or a side-effect read since: back in its place
            rollout = self._rollout_call()
            assert rollout is not None
            # the bookkeeping the body's Python did at its capture only
            self.buffer.pos, self.buffer.full = self.buffer.buffer_size, True
            self.recorder.replayed([start + (t + 1) * n for t in range(first.n_steps)])
            for actions, step in zip(rollout.actions, rollout.steps):
                if not self._on_step(callbacks, self._by_member(actions), step):
                    return False
        self.venv.check_actions()
        self._record_rollout(rollout.actions)
        for episodes, callback in zip(self._deliver_episodes(self.recorder), callbacks):
            callback.update_locals({"episodes": episodes})
            callback.on_rollout_end()
        if self.costs is not None:
            self.buffer.compute_cost_returns_and_advantage(
                self.costs.values(self._by_member(self._last_obs)), self._last_starts
            )
        return True

    def _prepare_rollout(self) -> int:
        """Evaluation mode, an empty buffer and episode record, and the draws at the members'
        step count, which it returns: what :meth:`_rollout` starts from."""
        self._set_training_mode(False)
        self.buffer.reset()
        self.recorder.clear()
        self._rollout_start = self.members[0].num_timesteps
        self.sampler.start(self._rollout_start)
        return self._rollout_start

    def _on_step(
        self, callbacks: list[BaseCallback], actions: torch.Tensor, step: TensorStep
    ) -> bool:
        """Every member's step count moved on by one vector-env step and its callback's
        ``on_step`` (``actions``: ``(P, n)``); whether to go on."""
        for member in self.members:
            member.num_timesteps += self.n_envs
        for k, callback in enumerate(callbacks):
            # the episodes come at the rollout's end, none per step
            callback.update_locals(
                {"actions": actions[k], "step": step, "infos": [], "dones": _NO_DONES}
            )
            if not callback.on_step():
                return False
        return True

    def _rollout(
        self, on_step: Callable[[torch.Tensor, TensorStep], bool] | None = None
    ) -> Rollout | None:
        """The body of a rollout: ``n_steps`` steps of every member's envs into the buffer
        (calling ``on_step`` after each, ``None`` if it says stop), the time limits'
        bootstraps, the returns and advantages, and where the next rollout starts. All on the
        device: without ``on_step``, no sync and no copy (what :class:`~.graphs.CapturedCall`
        captures)."""
        first, buffer, recorder = self.members[0], self.buffer, self.recorder
        obs, starts = self._last_obs, self._last_starts
        assert obs is not None and starts is not None
        taken, steps = [], []
        for t in range(first.n_steps):
            with torch.no_grad():
                logits, values = self._heads(obs)
                actions, log_probs = self._sample(logits)
            taken.append(actions.flatten())
            step = self.venv.step(taken[-1].to(self.venv.device))
            steps.append(step)
            recorder.add(self._rollout_start + (t + 1) * self.n_envs, step)
            if on_step is not None and not on_step(actions, step):
                return None
            if self.costs is not None:
                self.costs.record(buffer, self._by_member(obs), step)
            truncated, terminated = step.truncated.to(self.device), step.terminated.to(self.device)
            final = step.final_observations
            buffer.add_timeouts(truncated, None if final is None else final.to(self.device))
            buffer.add(
                obs,
                actions.reshape(-1, 1),
                step.rewards.to(self.device, torch.float32),
                starts,
                values.flatten(),
                log_probs.flatten(),
            )
            obs, starts = step.observations.to(self.device), terminated | truncated
        self._bootstrap_timeouts()
        with torch.no_grad():
            last_values = self._heads(obs)[1]
        buffer.compute_returns_and_advantage(last_values.flatten(), starts)
        self._set_last(obs, starts)
        if self.graphs in ("rollout", "all"):  # the env's state into the tensors replays read
            self.venv.keep_state()
        return Rollout(torch.stack(taken), steps)

    def _set_last(self, obs: torch.Tensor, starts: torch.Tensor) -> None:
        """Where the next rollout starts, written into the trainer's tensors (which keep their
        addresses, as a captured rollout reads them); each member's view of them."""
        if self._last_obs is None or self._last_obs.shape != obs.shape:
            self._last_obs, self._last_starts = obs.clone(), starts.clone()
        else:
            assert self._last_starts is not None
            self._last_obs.copy_(obs)
            self._last_starts.copy_(starts)
        for k, member in enumerate(self.members):
            member._last_obs = self._part(self._last_obs, k)
            member._last_episode_starts = self._part(self._last_starts, k)

    def _deliver_episodes(self, recorder: EpisodeRecorder) -> Episodes:
        """The episodes ``recorder`` holds (one read), into each member's SB3 episode
        statistics; each member's as ``(timesteps, info)``."""
        by_member: Episodes = [[] for _ in range(self.size)]
        for timesteps, index, info in recorder.read_by_env():
            by_member[index // self.n_envs].append((timesteps, info))
        for member, episodes in zip(self.members, by_member):
            add_episode_infos(member, [info for _, info in episodes])
        return by_member

    def _bootstrap_timeouts(self) -> None:
        """``gamma * V(final observation)`` added to the rewards (and the costs, under the cost
        critics) where a time limit cut an episode, as SB3 does for ``TimeLimit.truncated``
        (GitHub issue #633), in fixed shapes and without a read: one stacked pass of every
        env's final observation per round of :meth:`~.buffer.TensorRolloutBuffer.cuts` (its
        :attr:`cut_rounds`: one where the time limit is at least the rollout, the paper's
        runs), added where it cut. A round is a pass of its own, not rows of one pass of all
        rounds: a pass of other rows may round a value's last bit otherwise (CPU matrix
        products choose their kernels by the rows), and each value stays the one it was."""
        buffer, gamma = self.buffer, self.members[0].gamma
        envs = torch.arange(buffer.n_envs, device=self.device)
        steps, cut, final = buffer.cuts(self.cut_rounds)
        with torch.no_grad():
            for k in range(self.cut_rounds):
                values = self._heads(final[k])[1].flatten()
                buffer.rewards[steps[k], envs] += torch.where(cut[k], gamma * values, 0.0)
                if self.costs is not None:
                    cost_values = self.costs.values(self._by_member(final[k]))
                    buffer.costs[steps[k], envs] += torch.where(cut[k], gamma * cost_values, 0.0)

    def orders(self) -> np.ndarray:
        """Each epoch's minibatch order of each member, drawn from its own stream as SB3 draws
        a run's (epoch by epoch), over SB3's env-major flattening of the rollout:
        ``(epochs, P, steps * n_envs)``."""
        total = self.buffer.buffer_size * self.n_envs
        return np.stack(
            [
                np.stack([permutation(total) for permutation in self.permutations])
                for _ in range(self.members[0].n_epochs)
            ]
        )

    def minibatches(self, order: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One epoch's minibatches of the members' ``order`` (one epoch of :meth:`orders`, on
        the device): the (steps, envs) indices ``(P, batch_size)`` of each."""
        steps_per_rollout, batch_size = self.buffer.buffer_size, self.members[0].batch_size
        offsets = (torch.arange(self.size, device=self.device) * self.n_envs)[:, None]
        for start in range(0, order.shape[1], batch_size):
            flat = order[:, start : start + batch_size]
            yield flat % steps_per_rollout, flat // steps_per_rollout + offsets

    def set_learning_rates(
        self, optimizers: Sequence[torch.optim.Optimizer], progress: float
    ) -> float:
        """Each member's learning rate now into its optimizer of ``optimizers`` (and logged,
        as SB3 logs it); the first member's, which a batched optimizer takes."""
        for member, optimizer in zip(self.members, optimizers):
            lr = member.lr_schedule(progress)
            member.logger.record("train/learning_rate", lr)
            set_lr(optimizer, lr)
        return self.members[0].lr_schedule(progress)

    def train(self) -> None:
        """One update of every member: SB3's ``PPO.train`` batched over members (after a
        method's own steps, e.g. PPO-Lagrangian's multiplier updates and penalised advantages,
        and followed by its cost critics' regression): :meth:`_update` run eagerly, or
        replayed as one CUDA graph (``graphs=update``) from the orders and clip ranges copied
        into its tensors."""
        first, buffer = self.members[0], self.buffer
        progress = first._current_progress_remaining
        reports = self.costs.penalise(buffer) if self.costs is not None else None
        self._set_training_mode(True)
        lr = self.set_learning_rates([m.policy.optimizer for m in self.members], progress)
        self.optimizer.set_lr(lr)
        clip_range = first.clip_range(progress)
        clip_range_vf = first.clip_range_vf(progress) if first.clip_range_vf is not None else None
        clip = Clip.of(clip_range, clip_range_vf)
        orders = torch.as_tensor(self.orders())
        if self._update_call is None:
            stats, loss = self._update(orders.to(self.device), clip)
        else:
            self._orders.copy_(orders)
            self._clip.copy_(torch.tensor([0.0 if v is None else float(v) for v in clip]))
            stats, loss = self._update_call()
        for member in self.members:
            member._n_updates += first.n_epochs
        self.optimizer.link_member_states()
        self._log_training(stats, loss, clip_range, clip_range_vf)
        if self.costs is not None:
            assert reports is not None
            losses = self.costs.train(self, progress)
            self.costs.log(reports, losses)

    def _update(self, orders: torch.Tensor, clip: Clip) -> Update:
        """The body of an update: every epoch's minibatches (``orders``, :meth:`orders` on the
        device) of every member, each one forward pass, the PPO losses, one backward pass and
        one step of the stacked optimizer; the per-minibatch statistics and the last losses,
        ``(P,)`` tensors. All on the device: no sync and no copy (what
        :class:`~.graphs.CapturedCall` captures)."""
        first, buffer = self.members[0], self.buffer
        stats: dict[str, list[torch.Tensor]] = {
            key: [] for key in ("entropy", "pg", "value", "kl", "clip")
        }
        loss = torch.zeros(self.size, device=self.device)
        for order in orders:
            stats["kl"] = []  # SB3 logs the last epoch's approximate KL
            for steps, envs in self.minibatches(order):
                obs = buffer.observations[steps, envs]
                actions = buffer.actions[steps, envs].to(torch.float32).long().flatten(1)
                old_values = buffer._values[steps, envs]
                old_log_prob = buffer.log_probs[steps, envs]
                advantages, returns = buffer.advantages[steps, envs], buffer._returns[steps, envs]
                logits, values = self.stacked(obs)
                values = values.flatten(1)
                distribution = Categorical(logits=logits, validate_args=False)  # (no host read)
                log_prob, entropy = distribution.log_prob(actions), distribution.entropy()
                if first.normalize_advantage and advantages.shape[1] > 1:
                    advantages = (advantages - advantages.mean(1, keepdim=True)) / (
                        advantages.std(1, keepdim=True) + 1e-8
                    )
                ratio = torch.exp(log_prob - old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * torch.clamp(ratio, clip.low, clip.high)
                policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean(1)
                clip_fraction = torch.mean((torch.abs(ratio - 1) > clip.range).float(), 1)
                values_pred = values
                if clip.vf_low is not None:
                    values_pred = old_values + torch.clamp(
                        values - old_values, clip.vf_low, clip.vf_high
                    )
                value_loss = F.mse_loss(returns, values_pred, reduction="none").mean(1)
                entropy_loss = -torch.mean(entropy, 1)
                loss = policy_loss + first.ent_coef * entropy_loss + first.vf_coef * value_loss
                with torch.no_grad():
                    log_ratio = log_prob - old_log_prob
                    kl = torch.mean((torch.exp(log_ratio) - 1) - log_ratio, 1)
                for key, value in zip(
                    stats, (entropy_loss, policy_loss, value_loss, kl, clip_fraction)
                ):
                    stats[key].append(value.detach())
                self.optimizer.zero_grad()
                loss.sum().backward()
                self.optimizer.step(first.max_grad_norm)
        return stats, loss.detach()

    def adopt_member_states(self) -> None:
        """Take the members' optimizer states into the stacked optimizers, after their weights
        (in place, in the stacks) and optimizer states were loaded from their checkpoints."""
        self.optimizer.adopt_member_states()
        if self.costs is not None:
            self.costs.optimizer.adopt_member_states()

    def _log_training(
        self,
        stats: dict[str, list[torch.Tensor]],
        loss: torch.Tensor,
        clip_range: float,
        clip_range_vf: float | None,
    ) -> None:
        """Each member's ``train/`` scalars as SB3's PPO records them, read in one copy."""
        means = [_in_order_mean(values) for values in stats.values()]
        host = torch.stack([*means, loss]).cpu().numpy()
        values = self.buffer._values.view(self.buffer.buffer_size, self.size, self.n_envs)
        returns = self.buffer._returns.view(self.buffer.buffer_size, self.size, self.n_envs)
        values, returns = values.cpu().numpy(), returns.cpu().numpy()
        names = ("entropy_loss", "policy_gradient_loss", "value_loss", "approx_kl", "clip_fraction")
        for k, member in enumerate(self.members):
            logger = member.logger
            for row, name in enumerate(names):
                logger.record(f"train/{name}", float(host[row, k]))
            logger.record("train/loss", float(host[-1, k]))
            logger.record(
                "train/explained_variance",
                explained_variance(values[:, k].flatten(), returns[:, k].flatten()),
            )
            logger.record("train/n_updates", member._n_updates, exclude="tensorboard")
            logger.record("train/clip_range", clip_range)
            if clip_range_vf is not None:
                logger.record("train/clip_range_vf", clip_range_vf)


def _in_order_mean(values: list[torch.Tensor]) -> torch.Tensor:
    """The mean of per-minibatch values ``(P,)`` as SB3's ``np.mean`` of its per-minibatch
    Python floats makes it: summed in order, then divided, in their precision."""
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total / len(values)
