"""rl-zoo3 hyperparameters: PPO with the SafeLife CNN on every SafeLife id. From the project root::

    python -m rl_zoo3.train --algo ppo --env safelife_rl/PruneStill-v1 --gym-packages safelife_rl
        --conf-file docs/rl_zoo3/ppo_safelife.py

The original SafeLife PPO settings (those of ``safelife_rl/conf/algo/ppo.yaml``,
``safelife_rl/conf/policy/safelife_cnn.yaml`` and ``safelife_rl/conf/wrappers/safelife.yaml``): 16
envs x 20 steps, 4 minibatches of 80, 3 epochs, gamma 0.97, GAE lambda 0.95, lr 3e-4, entropy 0.01,
value coefficient 0.5, policy and value clipping 0.2, the SafeLife CNN with linear heads, the
movement and exit bonuses and the exit curriculum (kept on schedule by ``TrainingClock``), 2M steps.
A Python file because the policy needs the ``SafeLifeCNN`` class itself, which a YAML file's
``policy_kwargs`` string could not name.
"""

from safelife_rl.envs.registration import TASKS
from safelife_rl.training import SafeLifeCNN

SAFELIFE_PPO = {
    "n_timesteps": 2_000_000,
    "policy": "CnnPolicy",
    "policy_kwargs": {"features_extractor_class": SafeLifeCNN, "net_arch": []},
    "n_envs": 16,
    "n_steps": 20,
    "batch_size": 80,
    "n_epochs": 3,
    "gamma": 0.97,
    "gae_lambda": 0.95,
    "learning_rate": 3e-4,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "clip_range": 0.2,
    "clip_range_vf": 0.2,
    "normalize_advantage": False,
    "max_grad_norm": 0.5,
    # innermost first, as in safelife_rl/conf/wrappers/safelife.yaml (the impact penalty is off
    # there too)
    "env_wrapper": [
        "safelife_rl.training.MovementBonus",
        "safelife_rl.training.ExitBonus",
        "safelife_rl.training.ExitCurriculum",
    ],
    "callback": "safelife_rl.training.TrainingClock",
}

hyperparams = {env_id: dict(SAFELIFE_PPO) for env_id in TASKS.values()}
