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


def _cannot(precision: str, device: torch.device) -> str | None:
    """Why ``device`` cannot do ``precision`` (``None``: it can)."""
    if precision not in PRECISIONS:
        return f"precision={precision!r}: give one of {', '.join(PRECISIONS)}"
    if precision == "tf32" and (
        device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 0)
    ):
        return (
            "precision=tf32 is TensorFloat-32 of CUDA GPUs of compute capability 8.0 or newer "
            f"(Ampere and later), not of device {device}"
        )
    if (
        precision == "bf16"
        and device.type == "cuda"
        and not torch.cuda.is_bf16_supported(including_emulation=False)
    ):
        name = torch.cuda.get_device_name(device)
        return f"precision=bf16: this GPU ({name}) has no bfloat16 arithmetic"
    return None


def available(device: str | torch.device) -> list[str]:
    """The precisions ``device`` can do."""
    return [p for p in PRECISIONS if _cannot(p, torch.device(device)) is None]


def check_precision(precision: str, device: str | torch.device) -> None:
    """Refuse a precision that ``device`` cannot do, before anything is built, naming those
    it can."""
    reason = _cannot(precision, torch.device(device))
    if reason is not None:
        others = [p for p in available(device) if p != precision]
        raise UserError(
            reason if precision not in PRECISIONS else f"{reason}; give {' or '.join(others)}"
        )


def set_tensorfloat(precision: str) -> None:
    """Torch's TensorFloat-32 flags for ``precision``: on for ``tf32``, off otherwise (cuDNN's
    convolutions included, which torch lets use TF32 by default)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def apply_precision(precision: str, policy: nn.Module) -> None:
    """Set torch's TensorFloat-32 flags for ``precision`` and the compute type of the SafeLife
    CNN bodies in ``policy`` (refused for ``bf16`` where it has none: only that body runs in
    bfloat16)."""
    set_tensorfloat(precision)
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
