"""Training SafeLife agents with Stable-Baselines3: the SafeLife CNN, TensorBoard callbacks,
resuming, model files and the run logic behind ``python -m safelife_rl train`` (the training
wrappers of the original code live on the envs floor and are re-exported here)."""

from omegaconf import OmegaConf

from safelife_rl.envs.schedules import LinearRamp
from safelife_rl.envs.wrappers import (
    ContinuingEnv,
    ExitBonus,
    ExitCurriculum,
    MovementBonus,
    ScheduledWrapper,
    SideEffectPenalty,
    sync_training_steps,
)
from safelife_rl.training import config  # noqa: F401  (registers the train_schema config)
from safelife_rl.training.callbacks import (
    AtomicCheckpoint,
    EpisodeLogger,
    PeriodicEvaluation,
    TrainingClock,
)
from safelife_rl.training.env_configs import store_task_configs
from safelife_rl.training.features import SafeLifeCNN
from safelife_rl.training.methods.aup import AUPPenalty, AuxiliaryPhase
from safelife_rl.training.methods.ppo_lagrangian import PPOLagrangian


def _minibatch_size(n_envs: int, n_steps: int, n_minibatches: int) -> int:
    """Config resolver: a rollout of ``n_envs * n_steps`` split into ``n_minibatches``."""
    rollout = int(n_envs) * int(n_steps)
    if rollout % int(n_minibatches):
        raise ValueError(
            f"a rollout of {n_envs} envs x {n_steps} steps does not split into "
            f"{n_minibatches} minibatches"
        )
    return rollout // int(n_minibatches)


def _steps_share(total: int, share: float, cap: int, floor: int = 0) -> int:
    """Config resolver: ``share`` of a run of ``total`` steps, at most ``cap`` and at least
    ``floor`` (a phase that is the paper's length in a long run and in proportion in a short
    one, never shorter than what it must fill)."""
    return min(int(cap), max(int(floor), round(int(total) * float(share))))


store_task_configs()  # env=TASK for every SafeLife task, from the task tables

for _name, _resolver in (("minibatch_size", _minibatch_size), ("steps_share", _steps_share)):
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _resolver)

__all__ = [
    "AUPPenalty",
    "AtomicCheckpoint",
    "AuxiliaryPhase",
    "ContinuingEnv",
    "EpisodeLogger",
    "ExitBonus",
    "ExitCurriculum",
    "LinearRamp",
    "MovementBonus",
    "PPOLagrangian",
    "PeriodicEvaluation",
    "SafeLifeCNN",
    "ScheduledWrapper",
    "SideEffectPenalty",
    "TrainingClock",
    "sync_training_steps",
]
