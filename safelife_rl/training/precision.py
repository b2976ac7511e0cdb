"""The arithmetic a run trains in, ``precision=fp32|tf32|bf16`` (docs/training.md):

- ``fp32``: every matrix product and convolution in FP32, as the SafeLife paper trained; torch
  lets cuDNN's convolutions use TensorFloat-32 by default, so this turns that off as well;
- ``tf32``: matrix products and cuDNN's convolutions in TensorFloat-32 (CUDA on Ampere or
  later: FP32's range, a 10-bit mantissa), everything else FP32;
- ``bf16``: the SafeLife CNN's convolutions and dense layer in bfloat16 under autocast, its
  features handed on in FP32: the weights, Adam's state, the heads, the log-softmax and the
  values stay FP32.

Only ``fp32`` is the paper's; the others are recorded in the run's config, its HParams and the
reproduction's report as a deviation from it.
"""

from __future__ import annotations

import torch
from torch import nn

from safelife_rl.training.features import SafeLifeCNN
from safety_rl_common.errors import UserError

PRECISIONS = ("fp32", "tf32", "bf16")
#: The paper's precision, and the default.
PAPER = "fp32"


def check_precision(precision: str, device: str | torch.device) -> None:
    """Refuse a precision that ``device`` cannot do, before anything is built."""
    device = torch.device(device)
    if precision not in PRECISIONS:
        raise UserError(f"precision={precision!r}: give one of {', '.join(PRECISIONS)}")
    if precision == "tf32" and device.type != "cuda":
        raise UserError(
            f"precision=tf32 is TensorFloat-32 of CUDA GPUs (Ampere or later), not of "
            f"device {device}; give fp32 or bf16"
        )
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError(
            f"precision=bf16: this GPU ({torch.cuda.get_device_name(device)}) has no "
            "bfloat16 arithmetic; give fp32 or tf32"
        )


def apply_precision(precision: str, policy: nn.Module) -> None:
    """Set torch's TensorFloat-32 flags for ``precision`` and the compute type of the SafeLife
    CNN bodies in ``policy`` (refused for ``bf16`` where it has none: only that body runs in
    bfloat16)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    bodies = [m for m in policy.modules() if isinstance(m, SafeLifeCNN)]
    if precision == "bf16" and not bodies:
        raise UserError(
            "precision=bf16 runs the SafeLife CNN's body in bfloat16; this policy has none "
            "(policy=safelife_cnn has it)"
        )
    for body in bodies:
        body.compute_dtype = torch.bfloat16 if precision == "bf16" else None


def paper_deviation(precision: str) -> str | None:
    """A report's note where ``precision`` is not the paper's FP32 (``None`` where it is)."""
    if precision == PAPER:
        return None
    name = {"tf32": "TensorFloat-32", "bf16": "bfloat16 (the CNN's body)"}[precision]
    return f"Trained in {name} (`precision={precision}`); the paper trained in FP32."
