"""Stable-Baselines3 DQN, PPO and A2C as semi-deterministic agents (Definition 7).

Each agent *is* an SB3 algorithm (a subclass of ``DQN``, ``PPO`` or ``A2C``) that learns from
the transitions handed to ``train`` instead of from ``learn()``: it does what SB3's
``collect_rollouts`` does for one environment step (fill SB3's own replay or rollout buffer,
advance ``num_timesteps``, the progress schedule and ``_on_step``) and calls SB3's own gradient
update (``DQN.train`` / ``PPO.train`` / ``A2C.train``) whenever SB3 would.

Semi-determinism:

- every instance owns a ``torch.Generator`` (which seeds its network initialisation, run inside
  ``torch.random.fork_rng`` so the process-wide torch generator is left as it was) and two NumPy
  generators spawned from its seed: one for minibatch sampling (:mod:`.sb3_buffers`), one
  for the per-step draws of :mod:`.draws` used for exploration and for sampling actions;
- ``act`` never changes the agent, so simulated copies may be asked anything any number of times;
- nothing reads or advances NumPy's or torch's global random state.

Speed: an instance's state is then a function of its binding and training history, so copies
trained like the true agent load its update results and reuse its forward passes instead of
recomputing them (:mod:`.shared_updates`).

Observations: an int ``n_obs`` becomes ``Discrete(n_obs)`` (SB3 one-hot encodes it); a ``Box``
is used as it is. Extended environments are continuing; where a step ends an episode (the
``terminated``/``truncated`` flags of a Gymnasium combination), the agents do what SB3 does at
an episode end: DQN stores the final observation with ``done = terminated`` (a truncated
episode still bootstraps from it), PPO and A2C mark the next step as an episode start and, when
truncated, add ``gamma * V(final observation)`` to the reward. The hyperparameters are
the SB3 constructor's (same defaults) plus ``total_timesteps``, the horizon over which SB3's
schedules (DQN's exploration rate, any learning-rate schedule) run, as ``learn(total_timesteps)``
would set it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import Logger

from extended_envs.agents.draws import StepDraws
from extended_envs.agents.sb3_buffers import SeededReplayBuffer, SeededRolloutBuffer
from extended_envs.agents.shared_updates import SHARED_UPDATES, History
from extended_envs.checks import check
from extended_envs.core import Agent, Obs, ObsSpec, obs_key
from extended_envs.hyperparams import (
    COUNT,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_UNIT,
    UNIT,
    Allowed,
    Flag,
    Interval,
    Keywords,
)

# Ranges of the hyperparameters the three agents share (SB3's own checks come later or never).
SHARED_RANGES: dict[str, Allowed] = {
    "learning_rate": POSITIVE,
    "gamma": UNIT,
    "max_grad_norm": Interval(0, open_low=True),  # inf: no clipping
    "policy_kwargs": Keywords(),
    "total_timesteps": COUNT,
}
ON_POLICY_RANGES: dict[str, Allowed] = {
    **SHARED_RANGES,
    "gae_lambda": UNIT,
    "ent_coef": NON_NEGATIVE,
    "vf_coef": NON_NEGATIVE,
    "normalize_advantage": Flag(),
}


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one thread inside, restoring the caller's setting after.

    These networks are tiny: on a busy 2-core machine DQN trains about 7x slower on 2 threads
    than on 1, and reductions split over threads round differently, so results would also
    depend on the thread count.
    """
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class SB3Agent(Agent):
    """Shared set-up of the SB3 agents; concrete classes also subclass an SB3 algorithm."""

    sb3_class: ClassVar[type[BaseAlgorithm]]

    def __init__(
        self, n_actions: int, n_obs: ObsSpec, seed: int | None = None, **hyperparams: Any
    ) -> None:
        Agent.__init__(self, n_actions, n_obs, seed, **hyperparams)
        agent_seed = self.seed
        draws_seed, buffer_seed = np.random.SeedSequence(agent_seed).spawn(2)
        self.np_rng = np.random.default_rng(buffer_seed)
        self.torch_rng = torch.Generator().manual_seed(agent_seed)
        sb3_kwargs = dict(self.hyperparams)
        self.total_timesteps = int(sb3_kwargs.pop("total_timesteps"))
        # seed=None: SB3 would otherwise seed the global generators.
        self.sb3_class.__init__(
            self, "MlpPolicy", None, device="cpu", seed=None, _init_setup_model=False,
            **sb3_kwargs, **self.buffer_kwargs(),
        )  # fmt: skip
        self.discrete_obs = not isinstance(n_obs, spaces.Box)
        self.observation_space = spaces.Discrete(n_obs) if self.discrete_obs else n_obs
        self.action_space = spaces.Discrete(n_actions)
        self.n_envs = 1
        with torch.random.fork_rng(devices=[]), one_torch_thread():
            torch.manual_seed(int(torch.randint(2**62, (1,), generator=self.torch_rng)))
            try:
                self._setup_model()
            except (TypeError, ValueError, KeyError, RuntimeError) as error:
                # policy_kwargs is the one hyperparameter whose contents only SB3 and torch check
                allowed = f"keyword arguments the policy takes ({error})"
                check.refuse(
                    f"{type(self).__name__} hyperparameter policy_kwargs",
                    self.hyperparams["policy_kwargs"],
                    allowed,
                )
        # Set only now: _setup_model seeds the global generators with self.seed unless None.
        self.seed = agent_seed
        self.policy.set_training_mode(False)
        self.set_logger(Logger(folder=None, output_formats=[]))
        self.draws = StepDraws(np.random.default_rng(draws_seed), width=2)
        self._last_episode_starts = np.ones(1, dtype=np.float32)  # as SB3's first step
        unbound = getattr(type(self), "unbound", type(self))
        self.history = History(
            (unbound.__module__, unbound.__qualname__, n_actions, repr(n_obs), agent_seed,
             sorted(self.hyperparams.items()))
        )  # fmt: skip
        # network outputs per observation until the next update, shared by identical copies
        self.cache: dict[Any, Any] = SHARED_UPDATES.outputs_for(self.history.key())

    def update(self, sb3_train: Callable[[], None]) -> None:
        """SB3's update, shared with identically trained instances (:mod:`.shared_updates`)."""
        key = self.history.key()
        with one_torch_thread():
            SHARED_UPDATES.run(key, self, sb3_train)
        if self.policy.training:  # SB3's train() leaves it on
            self.policy.set_training_mode(False)
        self.cache = SHARED_UPDATES.outputs_for(key)

    def cached(self, name: str, obs: Obs, compute: Callable[[torch.Tensor], Any]) -> Any:
        """``compute(obs as a tensor)``, remembered until the networks next change."""
        key = (name, obs_key(obs))
        if key not in self.cache:
            with torch.no_grad(), one_torch_thread():
                self.cache[key] = compute(self.obs_tensor(obs))
        return self.cache[key]

    def buffer_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError

    def obs_array(self, obs: Obs) -> np.ndarray:
        """``obs`` as a batch of one, the layout SB3's buffers take."""
        if self.discrete_obs:
            return np.array([obs], dtype=np.int64)
        return np.asarray(obs, dtype=np.float32).reshape(1, -1)

    def obs_tensor(self, obs: Obs) -> torch.Tensor:
        return torch.as_tensor(self.obs_array(obs), device=self.device)


class DQNAgent(SB3Agent, DQN):
    """SB3 DQN: epsilon-greedy on its Q-network, replay buffer, target network."""

    sb3_class = DQN
    default_hyperparams: ClassVar[dict[str, Any]] = {
        "learning_rate": 1e-4,
        "buffer_size": 1_000_000,
        "learning_starts": 100,
        "batch_size": 32,
        "tau": 1.0,
        "gamma": 0.99,
        "train_freq": 4,
        "gradient_steps": 1,
        "target_update_interval": 10_000,
        "exploration_fraction": 0.1,
        "exploration_initial_eps": 1.0,
        "exploration_final_eps": 0.05,
        "max_grad_norm": 10.0,
        "policy_kwargs": None,
        "total_timesteps": 100_000,
    }
    hyperparam_ranges: ClassVar[dict[str, Allowed]] = {
        **SHARED_RANGES,
        "buffer_size": COUNT,
        "learning_starts": Interval(0, ints=True),
        "batch_size": COUNT,
        "tau": POSITIVE_UNIT,
        "train_freq": COUNT,
        "gradient_steps": Interval(-1, ints=True),  # -1: as many as steps since the last update
        "target_update_interval": COUNT,
        "exploration_fraction": POSITIVE_UNIT,
        "exploration_initial_eps": UNIT,
        "exploration_final_eps": UNIT,
    }

    def buffer_kwargs(self) -> dict[str, Any]:
        return {
            "replay_buffer_class": SeededReplayBuffer,
            "replay_buffer_kwargs": {"rng": self.np_rng},
        }

    def act(self, obs: Obs) -> int:
        explore, pick = self.draws.current
        # As SB3's _sample_action: uniform before learning_starts, then epsilon-greedy.
        if self.num_timesteps < self.learning_starts or explore < self.exploration_rate:
            return int(pick * self.n_actions)
        return self.cached("greedy", obs, lambda o: int(self.q_net(o).argmax()))

    def train(  # type: ignore[override]
        self,
        o_prev: Obs,
        a: int,
        r: float,
        o_next: Obs,
        terminated: bool = False,
        truncated: bool = False,
    ) -> None:
        self.history.add(o_prev, a, r, o_next, terminated, truncated)
        self.num_timesteps += 1
        self.replay_buffer.add(
            self.obs_array(o_prev), self.obs_array(o_next), np.array([a]),
            np.array([r], dtype=np.float32), np.array([terminated], dtype=np.float32), [{}],
        )  # fmt: skip
        self._update_current_progress_remaining(self.num_timesteps, self.total_timesteps)
        self._on_step()
        frequency = self.train_freq.frequency
        if self.num_timesteps > self.learning_starts and self.num_timesteps % frequency == 0:
            steps = self.gradient_steps if self.gradient_steps >= 0 else frequency
            self.update(lambda: DQN.train(self, gradient_steps=steps, batch_size=self.batch_size))
        self.draws.advance()


class OnPolicyAgent(SB3Agent):
    """PPO and A2C: sample from the policy, update when the rollout buffer is full."""

    def buffer_kwargs(self) -> dict[str, Any]:
        return {
            "rollout_buffer_class": SeededRolloutBuffer,
            "rollout_buffer_kwargs": {"rng": self.np_rng},
        }

    def log_probs(self, obs: Obs) -> list[float]:
        """Log-probabilities of the actions at ``obs``."""

        def compute(o: torch.Tensor) -> list[float]:
            return self.policy.get_distribution(o).distribution.logits[0].tolist()

        return self.cached("log_probs", obs, compute)

    def value(self, obs: Obs) -> torch.Tensor:
        return self.cached("value", obs, self.policy.predict_values)

    def act(self, obs: Obs) -> int:
        u, _ = self.draws.current
        cumulative = 0.0
        for action, log_p in enumerate(self.log_probs(obs)):
            cumulative += float(np.exp(log_p))
            if u < cumulative:
                return action
        return self.n_actions - 1

    def train(  # type: ignore[override]
        self,
        o_prev: Obs,
        a: int,
        r: float,
        o_next: Obs,
        terminated: bool = False,
        truncated: bool = False,
    ) -> None:
        self.history.add(o_prev, a, r, o_next, terminated, truncated)
        log_prob = self.log_probs(o_prev)[a]
        value = self.value(o_prev)
        self.num_timesteps += 1
        if truncated:  # as SB3's collect_rollouts: bootstrap a time limit's cut
            r = r + self.gamma * float(self.value(o_next))
        self.rollout_buffer.add(
            self.obs_array(o_prev), np.array([a]), np.array([r], dtype=np.float32),
            self._last_episode_starts, value, torch.tensor([log_prob]),
        )  # fmt: skip
        self._last_episode_starts = np.array([terminated or truncated], dtype=np.float32)
        if self.rollout_buffer.full:
            last_value = self.value(o_next)
            self.rollout_buffer.compute_returns_and_advantage(
                last_value, dones=self._last_episode_starts
            )
            self._update_current_progress_remaining(self.num_timesteps, self.total_timesteps)
            self.update(lambda: self.sb3_class.train(self))
            self.rollout_buffer.reset()
        self.draws.advance()


class PPOAgent(OnPolicyAgent, PPO):
    """SB3 PPO; the importance ratio uses the log-probability of the action trained on."""

    sb3_class = PPO
    default_hyperparams: ClassVar[dict[str, Any]] = {
        "learning_rate": 3e-4,
        "n_steps": 2048,
        "batch_size": 64,
        "n_epochs": 10,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "clip_range_vf": None,
        "normalize_advantage": True,
        "ent_coef": 0.0,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "target_kl": None,
        "policy_kwargs": None,
        "total_timesteps": 100_000,
    }
    hyperparam_ranges: ClassVar[dict[str, Allowed]] = {
        **ON_POLICY_RANGES,
        "n_steps": Interval(2, ints=True),  # SB3 normalises advantages over the rollout
        "batch_size": Interval(2, ints=True),  # and over minibatches
        "n_epochs": COUNT,
        "clip_range": POSITIVE,
        "clip_range_vf": Interval(0, open_low=True, open_high=True, none=True),
        "target_kl": Interval(0, open_low=True, open_high=True, none=True),
    }


class A2CAgent(OnPolicyAgent, A2C):
    """SB3 A2C (RMSprop, ``n_steps=5``)."""

    sb3_class = A2C
    default_hyperparams: ClassVar[dict[str, Any]] = {
        "learning_rate": 7e-4,
        "n_steps": 5,
        "gamma": 0.99,
        "gae_lambda": 1.0,
        "ent_coef": 0.0,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        "rms_prop_eps": 1e-5,
        "use_rms_prop": True,
        "normalize_advantage": False,
        "policy_kwargs": None,
        "total_timesteps": 100_000,
    }
    hyperparam_ranges: ClassVar[dict[str, Allowed]] = {
        **ON_POLICY_RANGES,
        "n_steps": COUNT,
        "rms_prop_eps": POSITIVE,
        "use_rms_prop": Flag(),
    }
