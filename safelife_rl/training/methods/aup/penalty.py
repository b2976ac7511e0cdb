"""AUP's penalty on the rewards: :class:`AUPPenalty` (an SB3 vec-env wrapper) and its twin on
the device vector env, :class:`DeviceAUPPenalty`, computing the same penalties as tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn
from torch import nn

from safelife_rl.training.device.adapters import TensorStep, TensorVecEnv, TensorVecEnvWrapper
from safety_rl_common.errors import UserError


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
        raise UserError(
            f"AUP compares discrete actions with doing nothing; the env's actions are {space}"
        )
    if noop_action is None:
        if not venv.has_attr("noop_action"):
            raise UserError(
                "AUP compares every action with doing nothing, but the env has no no-op action "
                "(no noop_action attribute); name one with method.noop_action=N if it has one"
            )
        noop_action = venv.get_attr("noop_action", [0])[0]
    if not isinstance(noop_action, (int, np.integer)) or not 0 <= noop_action < space.n:
        raise UserError(
            f"method.noop_action must be an action 0-{space.n - 1}, got {noop_action!r}"
        )
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

    def penalties(
        self, obs: Any, actions: Any, costs: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``|Q_aux(s, a) - Q_aux(s, noop)|`` of observations and actions (arrays or tensors),
        and ``coefficient`` times it, as float32 tensors on the Q-network's device. The steps'
        ``costs`` (``info["cost"]``, ``None`` where the env reports none) only split the
        statistics into costly and cost-free steps."""
        if self.q_network is None:
            raise RuntimeError(
                "AUP's penalty has no auxiliary Q-network yet: train with the "
                "AuxiliaryPhase callback, or set q_network"
            )
        device = next(self.q_network.parameters(), torch.empty(0)).device
        with torch.no_grad():
            q_values = self.q_network(torch.as_tensor(obs, device=device))
            differences = attainable_utility_penalty(
                q_values, torch.as_tensor(actions, device=device), self.noop_action
            ).float()
        penalties = self.coefficient * differences
        sums = [
            differences.sum(dtype=torch.float64),
            penalties.sum(dtype=torch.float64),
            torch.full((), float(len(differences)), dtype=torch.float64, device=device),
        ]
        if costs is None:
            sums += [torch.zeros((), dtype=torch.float64, device=device)] * 4
        else:  # products, not masked indexing, which would wait for the mask's count
            costly = torch.as_tensor(costs, device=device) > 0
            sums += [
                sums[0],
                sums[2],
                (differences * costly).sum(dtype=torch.float64),
                costly.sum(dtype=torch.float64),
            ]
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
            self._sums.tolist()
        )
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
        costs = [info["cost"] for info in infos] if all("cost" in info for info in infos) else None
        differences, penalties = (
            x.cpu().numpy() for x in self.penalties(self._obs, self._actions, costs)
        )
        penalties = penalties.astype(rewards.dtype)
        for info, difference, penalty in zip(infos, differences, penalties):
            info["aup_q_difference"] = float(difference)
            info["aup_penalty"] = float(penalty)
        self._obs = obs
        return obs, rewards - penalties, dones, infos


class DeviceAUPPenalty(_Penalty, TensorVecEnvWrapper):
    """:class:`AUPPenalty` on a :class:`~safelife_rl.training.device.TensorVecEnv`
    (``vec_env=device``): the penalty is computed on the device from the step's tensors and
    taken off its reward tensor, so a step waits for nothing; the statistics stay on the
    device until :class:`AuxiliaryPhase` reads them once per rollout (no per-step infos).

    :param venv: the tensor vector env.
    :param noop_action: the action that does nothing (``None``: the envs' ``noop_action``).
    """

    def __init__(self, venv: TensorVecEnv, noop_action: int | None = None):
        _Penalty.__init__(self, venv, noop_action)
        TensorVecEnvWrapper.__init__(self, venv)
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


def find_wrapper(venv: Any, kind: type | tuple[type, ...]) -> Any:
    """The first ``kind`` in a chain of vec-env wrappers (``None`` if there is none)."""
    while venv is not None and not isinstance(venv, kind):
        venv = getattr(venv, "venv", None)
    return venv
