"""Plain PPO (or the algorithm chosen) on the env's reward and the chosen wrappers:
``method=ppo``, the baseline every comparison includes."""

from safelife_rl.training.methods.plugin import Method

METHODS = (Method("ppo"),)
