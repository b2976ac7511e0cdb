"""Attainable utility preservation (Turner, Ratzlaff & Tadepalli, "Avoiding Side Effects in
Complex Environments", NeurIPS 2020) as SB3 components.

:class:`AUPPenalty` (a vec-env wrapper) takes ``lambda * |Q_aux(s, a) - Q_aux(s, noop)|`` off
each reward; :class:`AuxiliaryPhase` (a callback) first learns ``Q_aux``: it plays random
actions to collect observations, fits an auxiliary reward to them
(:mod:`~safelife_rl.training.auxiliary_rewards`), trains a DQN agent on that reward, saves
both into the run folder and hands the Q-network to the wrapper; then it ramps ``lambda`` over
the rest of the run. ``safelife-rl train method=aup`` (or ``method=aup_proj``) puts them in
(``docs/safelife/methods.md``)::

    env = AUPPenalty(make_vec_env(...))
    model = PPO("CnnPolicy", env)
    model.learn(total, callback=[AuxiliaryPhase(run_dir, total_timesteps=total), ...])
"""

from __future__ import annotations

import math
import os
import pickle
import time
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
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn
from torch import nn
from tqdm.auto import trange

from safelife_rl.common.errors import UserError
from safelife_rl.common.files import atomic_path, check_readable_file
from safelife_rl.envs.schedules import LinearRamp
from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.auxiliary_rewards import (
    KINDS,
    AuxiliaryRewardVecEnv,
    build_auxiliary_reward,
    fit_auxiliary_reward,
)
from safelife_rl.training.callbacks import TrainingClock
from safelife_rl.training.device.adapters import (
    Forwarding,
    NumpyView,
    TensorStep,
    TensorVecEnv,
)

AUXILIARY_FILE = "aup_auxiliary.pt"


def attainable_utility_penalty(
    q_values: torch.Tensor, actions: torch.Tensor, noop_action: int
) -> torch.Tensor:
    """``|Q(s, a) - Q(s, noop)|`` for each row of ``q_values`` (``(n, n_actions)``) and its
    action."""
    taken = q_values.gather(1, actions.long().view(-1, 1))[:, 0]
    return (taken - q_values[:, noop_action]).abs()


def noop_action_of(venv: VecEnv, noop_action: int | None = None) -> int:
    """The no-op action of ``venv``'s envs (their ``noop_action`` attribute) or the one given,
    checked against the action space."""
    if not isinstance(venv, VecEnv):
        raise UserError(f"AUP wraps SB3 vec envs or tensor vec envs, not {type(venv).__name__}")
    space = venv.action_space
    if not isinstance(space, spaces.Discrete):
        raise UserError(f"AUP compares discrete actions with doing nothing; the env's actions "
                        f"are {space}")
    if noop_action is None:
        if not venv.has_attr("noop_action"):
            raise UserError(
                "AUP compares every action with doing nothing, but the env has no no-op action "
                "(no noop_action attribute); name one with method.noop_action=N if it has one")
        noop_action = venv.get_attr("noop_action", [0])[0]
    if not isinstance(noop_action, (int, np.integer)) or not 0 <= noop_action < space.n:
        raise UserError(f"method.noop_action must be an action 0-{space.n - 1}, got "
                        f"{noop_action!r}")
    return int(noop_action)


class _Penalty:
    """What both AUP wrappers hold and compute: ``q_network`` and ``coefficient`` (set by
    :class:`AuxiliaryPhase`), the no-op action, the penalties of a batch of steps as tensors,
    and their sums since the last :meth:`take_statistics`, kept on the network's device."""

    def __init__(self, venv: VecEnv, noop_action: int | None):
        self.noop_action = noop_action_of(venv, noop_action)
        self.q_network: nn.Module | None = None
        self.coefficient = 0.0
        # q differences, penalties, steps; of the steps with a known cost: q differences,
        # steps, and both again of the costly ones among them
        self._sums: torch.Tensor | None = None

    def penalties(self, obs: Any, actions: Any, costs: Any = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """``|Q_aux(s, a) - Q_aux(s, noop)|`` of observations and actions (arrays or tensors),
        and ``coefficient`` times it, as float32 tensors on the Q-network's device. The steps'
        ``costs`` (``info["cost"]``, ``None`` where the env reports none) only split the
        statistics into costly and cost-free steps."""
        if self.q_network is None:
            raise RuntimeError("AUP's penalty has no auxiliary Q-network yet: train with the "
                               "AuxiliaryPhase callback, or set q_network")
        device = next(self.q_network.parameters(), torch.empty(0)).device
        with torch.no_grad():
            q_values = self.q_network(torch.as_tensor(obs, device=device))
            differences = attainable_utility_penalty(
                q_values, torch.as_tensor(actions, device=device), self.noop_action).float()
        penalties = self.coefficient * differences
        sums = [differences.sum(dtype=torch.float64), penalties.sum(dtype=torch.float64),
                torch.full((), float(len(differences)), dtype=torch.float64, device=device)]
        if costs is None:
            sums += [torch.zeros((), dtype=torch.float64, device=device)] * 4
        else:  # products, not masked indexing, which would wait for the mask's count
            costly = torch.as_tensor(costs, device=device) > 0
            sums += [sums[0], sums[2], (differences * costly).sum(dtype=torch.float64),
                     costly.sum(dtype=torch.float64)]
        step = torch.stack(sums)
        self._sums = step if self._sums is None else self._sums + step
        return differences, penalties

    def take_statistics(self) -> dict[str, float] | None:
        """Means over the steps since the last call (one read), ``None`` if there were none:
        ``q_difference`` and ``penalty``, and, of the steps whose env reported a cost, the
        ``q_difference`` of the ``costly`` ones (cost above 0) and of the ``cost_free`` ones
        where there were any: the penalty can only lower side effects if it is larger on the
        steps that cause them."""
        if self._sums is None:
            return None
        differences, penalties, steps, known, known_steps, costly, costly_steps = (
            self._sums.tolist())
        self._sums = None
        statistics = {"q_difference": differences / steps, "penalty": penalties / steps}
        if costly_steps:
            statistics["q_difference_costly"] = costly / costly_steps
        if known_steps > costly_steps:
            statistics["q_difference_cost_free"] = (known - costly) / (known_steps - costly_steps)
        return statistics


class AUPPenalty(_Penalty, VecEnvWrapper):
    """Rewards less ``coefficient * |Q_aux(s_t, a_t) - Q_aux(s_t, noop)|``, where ``s_t`` is
    the observation the action ``a_t`` was taken in, on an SB3 NumPy ``VecEnv``
    (:class:`DeviceAUPPenalty` is its twin on a tensor env, ``vec_env=device``).

    ``q_network`` maps a batch of observations (a tensor) to Q-values ``(n, n_actions)``;
    :class:`AuxiliaryPhase` sets it and ``coefficient`` (lambda). Until it is set (a resumed
    run replaying its steps before the callback starts) rewards pass unchanged. Each step's
    ``info`` gets ``aup_q_difference`` (``|Q(s,a) - Q(s,noop)|``) and ``aup_penalty`` (what was
    taken off).

    :param noop_action: the action that does nothing (``None``: the envs' ``noop_action``).
    :raises UserError: the env has no no-op action, or no discrete actions.
    """

    def __init__(self, venv: VecEnv, noop_action: int | None = None):
        _Penalty.__init__(self, venv, noop_action)
        VecEnvWrapper.__init__(self, venv)
        self._obs: np.ndarray | None = None
        self._actions: np.ndarray | None = None

    def reset(self) -> Any:
        self._obs = self.venv.reset()
        return self._obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        if self.q_network is None:  # a resume's replay, before the callback loads it: the
            self._obs = obs  # rewards of replayed steps are not trained on
            return obs, rewards, dones, infos
        costs = ([info["cost"] for info in infos]
                 if all("cost" in info for info in infos) else None)
        differences, penalties = (x.cpu().numpy()
                                  for x in self.penalties(self._obs, self._actions, costs))
        penalties = penalties.astype(rewards.dtype)
        for info, difference, penalty in zip(infos, differences, penalties):
            info["aup_q_difference"] = float(difference)
            info["aup_penalty"] = float(penalty)
        self._obs = obs
        return obs, rewards - penalties, dones, infos


class DeviceAUPPenalty(_Penalty, Forwarding, TensorVecEnv):
    """:class:`AUPPenalty` on a :class:`~safelife_rl.training.device.TensorVecEnv`
    (``vec_env=device``): the penalty is computed on the device from the step's tensors and
    taken off its reward tensor, so a step waits for nothing; the statistics stay on the
    device until :class:`AuxiliaryPhase` reads them once per rollout (no per-step infos).

    :param venv: the tensor vector env.
    :param noop_action: the action that does nothing (``None``: the envs' ``noop_action``).
    """

    def __init__(self, venv: TensorVecEnv, noop_action: int | None = None):
        _Penalty.__init__(self, venv, noop_action)
        self.venv = venv  # before TensorVecEnv's constructor asks it for attributes
        TensorVecEnv.__init__(self, venv.num_envs, venv.observation_space, venv.action_space,
                              venv.device)
        self._obs: torch.Tensor | None = None

    def reset(self) -> torch.Tensor:  # type: ignore[override]
        self._obs = self.venv.reset()
        return self._obs

    def step(self, actions: torch.Tensor) -> TensorStep:  # type: ignore[override]
        step = self.venv.step(actions)
        acted_in, self._obs = self._obs, step.observations
        if self.q_network is None:  # a resume's replay, as AUPPenalty's
            return step
        penalties = self.penalties(acted_in, actions, step.costs)[1].to(step.rewards.device)
        return step._replace(rewards=step.rewards - penalties.to(step.rewards.dtype))

    @property
    def level_names(self) -> list[str] | None:
        return self.venv.level_names

    @property
    def cuda_graphs(self) -> bool:
        return self.venv.cuda_graphs

    def check_actions(self) -> None:
        self.venv.check_actions()


#: The twin of each AUP wrapper on a tensor env (``vec_env=device``), by ``_target_``.
DEVICE_WRAPPERS = {
    "safelife_rl.training.AUPPenalty": "safelife_rl.training.aup.DeviceAUPPenalty",
    "safelife_rl.training.aup.AUPPenalty": "safelife_rl.training.aup.DeviceAUPPenalty",
}


def device_wrapper(target: str) -> str:
    """The ``_target_`` of the tensor-env twin of the vec-env wrapper ``target``, or a
    :class:`~safelife_rl.common.errors.UserError` for a wrapper without one."""
    if target in DEVICE_WRAPPERS.values():
        return target
    if target not in DEVICE_WRAPPERS:
        raise UserError(f"vec_env=device has no tensor twin of the vec-env wrapper {target}; "
                        "use another vec_env")
    return DEVICE_WRAPPERS[target]


def find_wrapper(venv: Any, kind: type | tuple[type, ...]) -> Any:
    """The first ``kind`` in a chain of vec-env wrappers (``None`` if there is none)."""
    while venv is not None and not isinstance(venv, kind):
        venv = getattr(venv, "venv", None)
    return venv


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
    :param vae: settings of :func:`~safelife_rl.training.cb_vae.train_vae`.
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
        if reward not in KINDS:
            raise UserError(f"method.reward must be one of {', '.join(KINDS)}, got {reward!r}")
        for name, value in (("buffer_steps", buffer_steps), ("aux_steps", aux_steps)):
            if not isinstance(value, int) or value < 1:
                raise UserError(f"method.{name} must be a positive integer, got {value!r}")
        if buffer_steps + aux_steps >= total_timesteps:
            raise UserError(
                f"AUP's auxiliary phase (method.buffer_steps {buffer_steps} + method.aux_steps "
                f"{aux_steps}) must be shorter than the run (total_timesteps {total_timesteps})")
        batch = (vae or {}).get("batch_size", 64)
        if reward == "cb_vae" and buffer_steps < batch:
            raise UserError(f"method.buffer_steps ({buffer_steps}) must fill at least one VAE "
                            f"batch (method.vae.batch_size {batch})")
        starts = (aux_agent or {}).get("learning_starts", 100)
        if starts >= aux_steps:
            raise UserError(f"the auxiliary agent would never learn: method.aux_agent."
                            f"learning_starts ({starts}) must be below method.aux_steps "
                            f"({aux_steps})")
        if len(lambda_values) != 2 or not all(
                math.isfinite(v) and v >= 0 for v in lambda_values):
            raise UserError(f"method.lambda_values must be two non-negative numbers, got "
                            f"{list(lambda_values)}")
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
            self.training_env, (AUPPenalty, DeviceAUPPenalty))
        if self.penalty is None:
            raise UserError("AuxiliaryPhase needs the model's env wrapped in AUPPenalty")
        n = self.training_env.num_envs
        self.phase_steps = (_round_up(self.settings["buffer_steps"], n)
                            + _round_up(self.settings["aux_steps"], n))
        end = max(self.lambda_ramp_end, self.phase_steps + 1)
        self.ramp = LinearRamp([self.phase_steps, end], self.lambda_values)
        starting = self.model.num_timesteps < self.phase_steps
        if self.path.is_file():
            q_network = self._load()
        elif starting:
            q_network = self._run_phase()
        else:
            raise UserError(f"{self.path} is missing: the run's auxiliary model, which it "
                            "needs to continue past AUP's first phase")
        self.penalty.q_network = q_network.to(self.model.device).eval()
        if starting:
            self._start_phase_two()

    def _q_network(self, observation_space: spaces.Space) -> nn.Module:
        """The DQN's Q-network as the run configures it (untrained)."""
        policy = DQN.policy_aliases.get(self.policy, self.policy)
        return policy(observation_space, self.training_env.action_space, lambda _: 0.0,
                      **self.policy_kwargs).q_net

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
            observations[t * n:(t + 1) * n] = obs
            obs = inner.step(rng.integers(inner.action_space.n, size=n))[0]
        reward, self.summary = fit_auxiliary_reward(
            self.settings["reward"], observations, space, seed, self.vae, self.progress_bar)
        del observations
        agent = DQN(self.policy, AuxiliaryRewardVecEnv(inner, reward), seed=seed,
                    device=self.model.device, policy_kwargs=self.policy_kwargs, verbose=0,
                    **self.aux_agent)
        agent.learn(self.settings["aux_steps"], callback=TrainingClock(offset=buffer_rounds * n),
                    progress_bar=self.progress_bar)
        q_network = agent.q_net.cpu()
        with atomic_path(self.path) as temporary:
            torch.save({"settings": self.settings, "reward": reward.state_dict(),
                        "q_network": q_network.state_dict(), "summary": self.summary},
                       temporary)
        return q_network

    def _load(self) -> nn.Module:
        """The saved auxiliary model; its networks are built (their initial weights drawn, then
        overwritten) without touching torch's generator, which a resumed run has set back to
        where the run was."""
        check_readable_file(self.path)
        try:
            saved = torch.load(self.path, map_location="cpu", weights_only=True)
        except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError,
                zipfile.BadZipFile) as error:
            what = "empty" if isinstance(error, EOFError) else "not a torch file of tensors"
            raise UserError(f"{self.path}: not this run's auxiliary model ({what}); delete it "
                            "to train the auxiliary phase again") from None
        try:
            settings = saved["settings"]
            with torch.random.fork_rng(devices=[]):
                q_network = self._q_network(self.training_env.observation_space)
                reward = build_auxiliary_reward(
                    settings["reward"], self.training_env.observation_space,
                    hidden=self.vae.get("hidden", (512, 512, 256, 128)))
            q_network.load_state_dict(saved["q_network"])
            reward.load_state_dict(saved["reward"])
        except (OSError, RuntimeError, KeyError, TypeError, ValueError) as error:
            raise UserError(f"{self.path}: not this run's auxiliary model "
                            f"({' '.join(str(error).split())[:200]})") from None
        if settings != self.settings:
            raise UserError(f"{self.path} was made with {settings}, the run asks for "
                            f"{self.settings}")
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
