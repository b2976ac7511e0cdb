"""PPO trained without leaving the torch device (``vec_env=device``).

:class:`DevicePPO` is SB3's ``PPO`` as a model: its settings, policy, optimizer, logger,
saving and loading (``PPO.load`` reads its files). Its ``learn`` is the device path's one
trainer (:class:`~.trainer.MemberTrainer`) with P = 1 over a
:class:`~.adapters.TensorVecEnv`: the rollouts stay tensors on the device and the update is
SB3's ``PPO.train`` batched over a member axis, which at P = 1 makes stock SB3's updates bit
for bit (``tests/safelife/test_device_training.py``). A population trains many of them with
the same trainer (:class:`~safelife_rl.training.population.PopulationPPO`).

**Actions.** Discrete actions only, drawn by :class:`~.sampler.ActionSampler` (Gumbel-max over
a hash of the run's seed, step count, env and action: no generator, the same draws as the
run's as a population member's). **Callbacks**: see :mod:`.trainer`.

A2C trains on the NumPy path only (``vec_env=batched``); so do PPO with ``target_kl`` and
continuous actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from torch.utils._pytree import tree_map

from safelife_rl.training.device.adapters import TensorVecEnv
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.device.trainer import MemberTrainer, check_trainable


class DevicePPO(PPO):
    """SB3's PPO trained from a :class:`~.adapters.TensorVecEnv` on the device by the member
    trainer at P = 1 (see the module docstring). Adam is fused (no host read of its step
    count) unless ``policy_kwargs["optimizer_kwargs"]`` says otherwise."""

    #: the seed of the action draws of a run made without a seed (:func:`~.sampler.run_seed`)
    action_seed: int | None = None
    #: the trainer's bodies replayed as CUDA graphs (a run's ``graphs``: :mod:`.graphs`) and
    #: how (``eager``: the CPU's stand-in the tests use); settings of a run, not saved
    graphs: str = "none"
    graph_replay: str = "graph"
    _trainer: MemberTrainer | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rollout_buffer_class", TensorRolloutBuffer)
        policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
        if policy_kwargs.get("optimizer_class", torch.optim.Adam) is torch.optim.Adam:
            policy_kwargs["optimizer_kwargs"] = {
                "fused": True,
                **(policy_kwargs.get("optimizer_kwargs") or {}),
            }
        kwargs["policy_kwargs"] = policy_kwargs
        super().__init__(*args, **kwargs)
        check_trainable(self)  # as it is built: a run refuses it before it writes

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_trainer", "graphs", "graph_replay"]

    def get_parameters(self) -> dict[str, dict]:
        """SB3's, each tensor a copy: the weights and Adam moments are views of the trainer's
        stacked tensors (a population's, for a member), and a file holds only the run's own."""
        return tree_map(
            lambda value: value.clone() if isinstance(value, torch.Tensor) else value,
            super().get_parameters(),
        )

    def trainer(self) -> MemberTrainer:
        """The run's trainer (P = 1), made on its first use and again for a new env or
        policy."""
        if not isinstance(self.env, TensorVecEnv):
            raise TypeError(
                f"{type(self).__name__} steps a TensorVecEnv (e.g. tensor_vec_env(env_fns) "
                f"of safelife_rl.training.device), got {type(self.env).__name__}"
            )
        trainer = self._trainer
        if (
            trainer is None
            or trainer.venv is not self.env
            or trainer.members[0].policy is not self.policy
            or (trainer.graphs, trainer.graph_replay) != (self.graphs, self.graph_replay)
        ):
            # a single run's minibatch order: SB3's, from NumPy's global stream
            self._trainer = MemberTrainer(
                self.env, [self], [np.random.permutation], "loop", self.graphs, self.graph_replay
            )
        return self._trainer

    def learn(  # type: ignore[override]
        self,
        total_timesteps: int,
        callback: BaseCallback | None = None,
        log_interval: int = 1,
        tb_log_name: str = "PPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> DevicePPO:
        """SB3's ``learn``, by the member trainer (one rollout loop and one update for the
        device path)."""
        self.trainer().learn(
            total_timesteps,
            [callback],
            log_interval,
            progress_bar,
            reset_num_timesteps,
            tb_log_name,
        )
        return self
