"""AUP's first phase and its ``lambda`` schedule: the :class:`AuxiliaryPhase` callback, which
learns the auxiliary Q-network that :class:`~.penalty.AUPPenalty` compares actions with."""

from __future__ import annotations

import os
import pickle
import time
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import set_random_seed
from torch import nn
from tqdm.auto import trange

from safelife_rl.envs.schedules import LinearRamp
from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.callbacks import TrainingClock
from safelife_rl.training.device.adapters import NumpyView, TensorVecEnv
from safelife_rl.training.methods.aup.auxiliary_rewards import (
    AuxiliaryRewardVecEnv,
    build_auxiliary_reward,
    fit_auxiliary_reward,
)
from safelife_rl.training.methods.aup.checks import check_aup_settings
from safelife_rl.training.methods.aup.penalty import AUPPenalty, DeviceAUPPenalty, find_wrapper
from safety_rl_common.errors import UserError
from safety_rl_common.files import atomic_path, check_readable_file

AUXILIARY_FILE = "aup_auxiliary.pt"


def _round_up(steps: int, n: int) -> int:
    return -(-steps // n) * n


class AuxiliaryPhase(BaseCallback):
    """AUP's first phase, run when training starts, and its ``lambda`` schedule after.

    Phase 1, on the training envs beneath the model's :class:`AUPPenalty` (or
    :class:`DeviceAUPPenalty`, through a :class:`~safelife_rl.training.device.NumpyView`:
    SB3's DQN keeps its replay buffer on the host and reads every step there, so the phase
    steps the device env with one host copy per step): ``buffer_steps``
    env steps of uniformly random actions whose observations fit the auxiliary reward
    (``reward``: ``"cb_vae"`` or ``"projection"``), then ``aux_steps`` steps of SB3 DQN on that
    reward. The reward and the Q-network go to ``<run_dir>/aup_auxiliary.pt`` (tensors only)
    and the run's step count moves past the phase (it counts every env step). A run that
    finds the file (resumed after phase 1) loads it instead; either way the random generators
    are reseeded with the model's seed and the envs reset, so phase 2 is the same bit for bit.

    Phase 2: at each rollout ``lambda`` (``coefficient``) ramps linearly from
    ``lambda_values[0]`` at the end of phase 1 to ``lambda_values[1]`` at ``lambda_ramp_end``
    (the authors': 0.001 to 0.1 over the whole second phase). Logged: ``aup/lambda``, and per
    rollout ``aup/penalty`` and ``aup/q_difference`` (means over its steps), and on an env
    that reports ``info["cost"]`` ``aup/q_difference_costly`` and ``aup/q_difference_cost_free``
    (the means over its costly and cost-free steps: whether the penalty singles out the steps
    with side effects).

    Place it before callbacks that read the step count when they start (the app builds the
    method's callbacks first).

    :param aux_agent: settings of the DQN (``gamma``, ``buffer_size``, ...).
    :param policy, policy_kwargs: the DQN's policy (the run's: the SafeLife CNN).
    :param vae: settings of :func:`~safelife_rl.training.methods.aup.cb_vae.train_vae`.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        total_timesteps: int,
        reward: str = "cb_vae",
        buffer_steps: int = 100_000,
        aux_steps: int = 1_000_000,
        lambda_values: Sequence[float] = (1e-3, 0.1),
        lambda_ramp_end: int | None = None,
        vae: dict[str, Any] | None = None,
        aux_agent: dict[str, Any] | None = None,
        policy: str = "CnnPolicy",
        policy_kwargs: dict[str, Any] | None = None,
        progress_bar: bool = False,
    ):
        super().__init__()
        check_aup_settings(
            {
                "reward": reward,
                "buffer_steps": buffer_steps,
                "aux_steps": aux_steps,
                "lambda_values": list(lambda_values),
                "lambda_ramp_end": lambda_ramp_end,
                "vae": vae or {},
                "aux_agent": aux_agent or {},
            },
            total_timesteps,
        )
        self.run_dir = Path(run_dir)
        self.settings = {"reward": reward, "buffer_steps": buffer_steps, "aux_steps": aux_steps}
        self.lambda_values = tuple(float(v) for v in lambda_values)
        self.lambda_ramp_end = total_timesteps if lambda_ramp_end is None else lambda_ramp_end
        self.vae = dict(vae or {})
        self.aux_agent = dict(aux_agent or {})
        self.policy, self.policy_kwargs = policy, dict(policy_kwargs or {})
        self.progress_bar = progress_bar
        self.summary: dict[str, float] = {}

    @property
    def path(self) -> Path:
        return self.run_dir / AUXILIARY_FILE

    def _init_callback(self) -> None:
        self.penalty: AUPPenalty | DeviceAUPPenalty = find_wrapper(
            self.training_env, (AUPPenalty, DeviceAUPPenalty)
        )
        if self.penalty is None:
            raise UserError("AuxiliaryPhase needs the model's env wrapped in AUPPenalty")
        n = self.training_env.num_envs
        self.phase_steps = _round_up(self.settings["buffer_steps"], n) + _round_up(
            self.settings["aux_steps"], n
        )
        end = max(self.lambda_ramp_end, self.phase_steps + 1)
        self.ramp = LinearRamp([self.phase_steps, end], self.lambda_values)
        starting = self.model.num_timesteps < self.phase_steps
        if self.path.is_file():
            q_network = self._load()
        elif starting:
            q_network = self._run_phase()
        else:
            raise UserError(
                f"{self.path} is missing: the run's auxiliary model, which it "
                "needs to continue past AUP's first phase"
            )
        self.penalty.q_network = q_network.to(self.model.device).eval()
        if starting:
            self._start_phase_two()

    def _q_network(self, observation_space: spaces.Space) -> nn.Module:
        """The DQN's Q-network as the run configures it (untrained)."""
        policy = DQN.policy_aliases.get(self.policy, self.policy)
        return policy(
            observation_space, self.training_env.action_space, lambda _: 0.0, **self.policy_kwargs
        ).q_net

    def _run_phase(self) -> nn.Module:
        seed = self.model.seed if self.model.seed is not None else 0
        set_random_seed(seed)
        inner = self.penalty.venv
        if isinstance(inner, TensorVecEnv):
            inner = NumpyView(inner)
        n, space = inner.num_envs, inner.observation_space
        buffer_rounds = _round_up(self.settings["buffer_steps"], n) // n
        observations = np.empty((buffer_rounds * n, *space.shape), space.dtype)
        rng = np.random.default_rng(seed)
        sync_training_steps(inner, 0)
        obs = inner.reset()
        for t in trange(buffer_rounds, desc="AUP: random actions", disable=not self.progress_bar):
            observations[t * n : (t + 1) * n] = obs
            obs = inner.step(rng.integers(inner.action_space.n, size=n))[0]
        reward, self.summary = fit_auxiliary_reward(
            self.settings["reward"], observations, space, seed, self.vae, self.progress_bar
        )
        del observations
        agent = DQN(
            self.policy,
            AuxiliaryRewardVecEnv(inner, reward),
            seed=seed,
            device=self.model.device,
            policy_kwargs=self.policy_kwargs,
            verbose=0,
            **self.aux_agent,
        )
        agent.learn(
            self.settings["aux_steps"],
            callback=TrainingClock(offset=buffer_rounds * n),
            progress_bar=self.progress_bar,
        )
        q_network = agent.q_net.cpu()
        with atomic_path(self.path) as temporary:
            torch.save(
                {
                    "settings": self.settings,
                    "reward": reward.state_dict(),
                    "q_network": q_network.state_dict(),
                    "summary": self.summary,
                },
                temporary,
            )
        return q_network

    def _load(self) -> nn.Module:
        """The saved auxiliary model; its networks are built (their initial weights drawn, then
        overwritten) without touching torch's generator, which a resumed run has set back to
        where the run was."""
        check_readable_file(self.path)
        try:
            with warnings.catch_warnings():  # torch's about a pickle protocol: the refusal says it
                warnings.simplefilter("ignore", UserWarning)
                saved = torch.load(self.path, map_location="cpu", weights_only=True)
        except (
            OSError,
            RuntimeError,
            EOFError,
            ValueError,
            pickle.UnpicklingError,
            zipfile.BadZipFile,
        ) as error:
            what = "empty" if isinstance(error, EOFError) else "not a torch file of tensors"
            raise UserError(
                f"{self.path}: not this run's auxiliary model ({what}); delete it "
                "to train the auxiliary phase again"
            ) from None
        try:
            settings = saved["settings"]
            with torch.random.fork_rng(devices=[]):
                q_network = self._q_network(self.training_env.observation_space)
                reward = build_auxiliary_reward(
                    settings["reward"],
                    self.training_env.observation_space,
                    hidden=self.vae.get("hidden", (512, 512, 256, 128)),
                )
            q_network.load_state_dict(saved["q_network"])
            reward.load_state_dict(saved["reward"])
        except (OSError, RuntimeError, KeyError, TypeError, ValueError) as error:
            raise UserError(
                f"{self.path}: not this run's auxiliary model "
                f"({' '.join(str(error).split())[:200]})"
            ) from None
        if settings != self.settings:
            raise UserError(
                f"{self.path} was made with {settings}, the run asks for {self.settings}"
            )
        self.summary = dict(saved.get("summary", {}))
        return q_network

    def _start_phase_two(self) -> None:
        """Move the step count past phase 1 and start phase 2 from reseeded generators and
        freshly reset envs, whether phase 1 ran now or was loaded."""
        model, n = self.model, self.training_env.num_envs
        model.num_timesteps = model._num_timesteps_at_start = self.phase_steps
        model.start_time = time.time_ns()  # SB3's fps counts from here
        sync_training_steps(self.training_env, self.phase_steps)
        model.set_random_seed(model.seed)
        model._last_obs = self.training_env.reset()
        model._last_episode_starts = np.ones((n,), dtype=bool)
        for key, value in self.summary.items():
            self.logger.record(f"aup/{key}", value)

    def _on_rollout_start(self) -> None:
        self.penalty.coefficient = self.ramp(self.model.num_timesteps)
        self.logger.record("aup/lambda", self.penalty.coefficient)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        for name, value in (self.penalty.take_statistics() or {}).items():
            self.logger.record(f"aup/{name}", value)
