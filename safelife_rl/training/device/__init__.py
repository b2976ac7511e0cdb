"""SB3 learning without leaving the torch device: PPO and A2C whose rollouts (observations,
actions, buffer) stay tensors on the training device, stepped from a tensor vector env."""

from safelife_rl.training.device.adapters import (
    GymnasiumTensorVecEnv,
    NumpyToTorchArrays,
    NumpyView,
    TensorStep,
    TensorVecEnv,
    tensor_vec_env,
)
from safelife_rl.training.device.algorithms import (
    DeviceA2C,
    DevicePPO,
    DeviceRollouts,
    device_algorithm,
)
from safelife_rl.training.device.buffer import TensorRolloutBuffer

__all__ = [
    "DeviceA2C",
    "DevicePPO",
    "DeviceRollouts",
    "GymnasiumTensorVecEnv",
    "NumpyToTorchArrays",
    "NumpyView",
    "TensorRolloutBuffer",
    "TensorStep",
    "TensorVecEnv",
    "device_algorithm",
    "tensor_vec_env",
]
