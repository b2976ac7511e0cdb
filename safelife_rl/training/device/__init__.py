"""SB3 learning without leaving the torch device: PPO whose rollouts (observations, actions,
buffer) stay tensors on the training device, stepped from a tensor vector env, trained by one
trainer over a member axis (:mod:`.trainer`: a single run is P = 1, a population P > 1)."""

from safelife_rl.training.device.adapters import (
    GymnasiumTensorVecEnv,
    NumpyToTorchArrays,
    NumpyView,
    TensorStep,
    TensorVecEnv,
    tensor_vec_env,
)
from safelife_rl.training.device.algorithms import DevicePPO
from safelife_rl.training.device.buffer import TensorRolloutBuffer
from safelife_rl.training.device.trainer import MemberTrainer

__all__ = [
    "DevicePPO",
    "GymnasiumTensorVecEnv",
    "MemberTrainer",
    "NumpyToTorchArrays",
    "NumpyView",
    "TensorRolloutBuffer",
    "TensorStep",
    "TensorVecEnv",
    "tensor_vec_env",
]
