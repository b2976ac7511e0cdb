"""Plain PPO (or the algorithm chosen) on the env's reward and the chosen wrappers:
``method=ppo``, the baseline every comparison includes. On the device path SB3's PPO trains as
:class:`~safelife_rl.training.device.DevicePPO` (the device trainer at P = 1)."""

from safelife_rl.training.methods.plugin import Method

_DEVICE = "safelife_rl.training.device.DevicePPO"
METHODS = (
    Method(
        "ppo",
        device_algorithms={"stable_baselines3.PPO": _DEVICE, "stable_baselines3.ppo.PPO": _DEVICE},
    ),
)
