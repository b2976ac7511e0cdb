"""SB3 PPO with the DREST meta-episode wrapper, on a fixed gridworld or on procedurally
generated ones, with exact USEFULNESS/NEUTRALITY of the network policy (its action
probabilities evaluated in every reachable state)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import DummyVecEnv

from drest.env import ProceduralGridworldEnv, ShutdownGridworldEnv, image_observation
from drest.generator import GeneratorConfig, generate
from drest.metrics import Metrics, exact_metrics, mean_metric
from drest.reward import check_lambda
from drest.spec import GridSpec
from drest.tabular import compile_world, obs_vector
from drest.wrapper import DrestRewardWrapper
from safety_rl_common.checks import check

#: Envs one PPO run may step (SB3's DummyVecEnv steps them in turn).
MAX_ENVS = 4096
#: Steps one rollout may hold: 2**20 image observations of a generated world take about 2 GB.
MAX_ROLLOUT = 2**20


@dataclass(frozen=True)
class PPOSettings:
    total_timesteps: int = 100_000
    obs_type: str = "vector"  # "vector" or "image" ("image" forced when procedural)
    procedural: bool = False  # train on a new generated world per meta-episode
    meta_episode_size: int = 32
    lam: float = 0.9
    n_envs: int = 4
    n_steps: int = 256
    batch_size: int = 256
    n_epochs: int = 4
    learning_rate: float = 3e-4
    gamma: float = 0.99
    ent_coef: float = 0.01
    eval_freq: int = 10_000  # env steps between metric evaluations
    heldout_worlds: int = 20  # generated worlds for evaluation when procedural

    def __post_init__(self) -> None:
        check.types(self)
        check.counts(
            self,
            (
                "total_timesteps",
                "meta_episode_size",
                "n_envs",
                "n_steps",
                "n_epochs",
                "eval_freq",
                "heldout_worlds",
            ),
        )
        check.value(
            "obs_type", self.obs_type, lambda v: v in ("vector", "image"), "vector or image"
        )
        check.value("batch_size", self.batch_size, lambda v: v >= 2, "an integer >= 2")
        check.value(
            "n_envs",
            self.n_envs,
            lambda v: v <= MAX_ENVS,
            f"at most {MAX_ENVS} (the envs step one after another in this process)",
        )
        check.value(
            "n_steps",
            self.n_steps,
            lambda v: 2 <= v * self.n_envs <= MAX_ROLLOUT,
            f"from 2 to {MAX_ROLLOUT} once multiplied by n_envs (the rollout buffer "
            "holds n_envs x n_steps observations)",
        )
        check_lambda(self.lam, "lam")
        check.value("learning_rate", self.learning_rate, lambda v: 0 < v <= 1, "in (0, 1]")
        check.value("gamma", self.gamma, lambda v: 0 < v <= 1, "in (0, 1]")
        check.value("ent_coef", self.ent_coef, lambda v: 0 <= v <= 1, "in [0, 1]")


class SmallGridCNN(BaseFeaturesExtractor):
    """Two 3x3 same-padding convolutions and a linear layer: for grids far smaller than the
    36x36 that SB3's NatureCNN needs."""

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 128) -> None:
        super().__init__(observation_space, features_dim)
        c, h, w = observation_space.shape
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(c, 32, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(32, 32, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(32 * h * w, features_dim),
            torch.nn.ReLU(),
        )

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations)


def make_env(
    spec: GridSpec | None, reward: str, settings: PPOSettings, heldout: Sequence[GridSpec] = ()
) -> Callable[[], gym.Env]:
    """Factory of one training env: ``spec=None`` means procedural worlds, never one of
    ``heldout``."""

    def factory() -> gym.Env:
        if spec is None:
            env: gym.Env = ProceduralGridworldEnv(
                GeneratorConfig(gamma=0.9), exclude=frozenset(heldout)
            )
        else:
            env = ShutdownGridworldEnv(spec, obs_type=settings.obs_type)
        if reward == "default":
            return env
        return DrestRewardWrapper(env, settings.meta_episode_size, reward=reward, lam=settings.lam)

    return factory


def state_policy(model: PPO, spec: GridSpec, obs_type: str) -> np.ndarray:
    """The network's action probabilities in every reachable state of ``spec``."""
    world = compile_world(spec)
    if obs_type == "vector":
        obs = np.stack([obs_vector(spec, s) for s in world.states])
    else:
        obs = np.stack([image_observation(spec, s) for s in world.states])
    with torch.no_grad():
        tensor, _ = model.policy.obs_to_tensor(obs)
        probs = model.policy.get_distribution(tensor).distribution.probs
    probs = probs.cpu().numpy().astype(np.float64)
    return probs / probs.sum(axis=1, keepdims=True)  # float32 rows may sum to 1 + 1e-7


def evaluate(model: PPO, specs: Sequence[GridSpec], obs_type: str) -> list[Metrics]:
    return [exact_metrics(compile_world(s), state_policy(model, s, obs_type)) for s in specs]


def heldout_specs(n: int, seed: int = 10_000) -> list[GridSpec]:
    """Generated worlds drawn from a seed stream apart from training's; the training envs
    never play them (:func:`make_env`)."""
    rng = np.random.default_rng(seed)
    return [generate(rng, GeneratorConfig(gamma=0.9), name=f"heldout-{i}") for i in range(n)]


class MetricsCallback(BaseCallback):
    """Every ``eval_freq`` env steps, log mean exact metrics over ``specs`` under ``safety/``."""

    def __init__(self, specs: Sequence[GridSpec], obs_type: str, eval_freq: int) -> None:
        super().__init__()
        self.specs, self.obs_type, self.eval_freq = list(specs), obs_type, eval_freq
        self._next = 0

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next = self.num_timesteps + self.eval_freq
            results = evaluate(self.model, self.specs, self.obs_type)
            for key in ("usefulness", "neutrality", "neutrality_normalized"):
                value = mean_metric(results, key)
                if value is not None:
                    self.logger.record(f"safety/{key}", value)
        return True


def train_ppo(
    spec: GridSpec | None,
    reward: str,
    settings: PPOSettings,
    seed: int,
    tensorboard_dir: str | None = None,
    progress_bar: bool = False,
) -> tuple[PPO, list[GridSpec]]:
    """Train; returns the model and the worlds it is evaluated on (``[spec]``, or held-out
    generated worlds when ``spec`` is None)."""
    obs_type = "image" if spec is None else settings.obs_type
    torch.set_num_threads(1)  # tiny networks: extra threads only contend
    specs = [spec] if spec is not None else heldout_specs(settings.heldout_worlds)
    heldout = specs if spec is None else ()
    venv = DummyVecEnv([make_env(spec, reward, settings, heldout) for _ in range(settings.n_envs)])
    venv.seed(seed)
    policy_kwargs = {"features_extractor_class": SmallGridCNN} if obs_type == "image" else {}
    model = PPO(
        "MlpPolicy",
        venv,
        learning_rate=settings.learning_rate,
        n_steps=settings.n_steps,
        batch_size=settings.batch_size,
        n_epochs=settings.n_epochs,
        gamma=settings.gamma,
        ent_coef=settings.ent_coef,
        policy_kwargs=policy_kwargs,
        seed=seed,
        verbose=0,
        tensorboard_log=tensorboard_dir,
        device="cpu",
    )
    model.learn(
        settings.total_timesteps,
        callback=MetricsCallback(specs, obs_type, settings.eval_freq),
        progress_bar=progress_bar,
        tb_log_name="ppo",
    )
    return model, specs
