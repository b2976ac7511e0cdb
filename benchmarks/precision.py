"""The precision a measurement runs at, set once and stated beside every figure, so that figures
compare like for like:

- ``fp32``: FP32 throughout, cuDNN's convolutions too (TF32 off for cuDNN and for matmuls);
- ``tf32``: FP32 tensors, convolutions and matrix products in TF32 (CUDA, compute capability
  8.0 or newer);
- ``bf16``: bfloat16 autocast (FP32 master weights and Adam), TF32 off.

torch's own default is neither: cuDNN convolutions in TF32, matrix products in FP32, so the
members' convolutions under ``vmap`` ran in TF32 while ``unfold``'s products and every linear
layer ran in FP32. SB3 also turns on cuDNN's deterministic, non-autotuned kernels whenever it
seeds a model on CUDA; every figure states the cuDNN flags it ran with (:func:`flags_text`).

    python benchmarks/precision.py [--device DEVICE] [--precisions P ...] [OTHER ...]

exits 2 with one line if the device or a precision is not available here (``gpu_lease.sh``
asks before anything runs; options it does not know are ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable

import torch
from omegaconf import DictConfig, OmegaConf

from safelife_rl.training.precision import check_precision
from safety_rl_common.errors import UserError


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def refusal(device: str, precisions: Iterable[str] = ()) -> str | None:
    """Why ``device`` or one of ``precisions`` cannot run here, in one line (``None``: they
    can; a precision as a training run checks it, :func:`check_precision`)."""
    try:
        where = torch.device(device)
    except RuntimeError:
        return f"unknown device {device!r} (cpu, cuda or cuda:N)"
    if where.type not in ("cpu", "cuda"):
        return f"--device {device}: the measurements run on cpu or cuda"
    if where.type == "cuda":
        if not torch.cuda.is_available():
            return f"--device {device}, but torch sees no CUDA device on this machine"
        if where.index is not None and where.index >= torch.cuda.device_count():
            return f"--device {device}, but this machine has {torch.cuda.device_count()} GPU(s)"
    for precision in precisions:
        try:
            check_precision(precision, where)
        except UserError as error:
            return str(error)
    return None


def with_precision(cfg: DictConfig, precision: str) -> DictConfig:
    """A training config ``cfg`` at ``precision``: the trainer sets the flags, and the SafeLife
    CNN's body for bf16, as a run does (:func:`apply_precision`)."""
    return OmegaConf.merge(cfg, {"precision": precision})


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bfloat16 autocast for ``bf16``, nothing otherwise."""
    if precision != "bf16":
        return contextlib.nullcontext()
    # no cache of cast weights: a CUDA graph cannot capture one (eager runs the same)
    return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)


def flags() -> dict[str, bool]:
    """The cuDNN and matmul flags in force."""
    return {
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
    }


def flags_text(now: dict[str, bool] | None = None) -> str:
    """:func:`flags` (or ``now``, as it gave them) in a few words, for a report's row."""
    now = flags() if now is None else now
    on = {True: "on", False: "off"}
    return (
        f"cuDNN benchmark {on[now['cudnn_benchmark']]}, deterministic "
        f"{on[now['cudnn_deterministic']]}, TF32 {on[now['cudnn_allow_tf32']]}; "
        f"matmul TF32 {on[now['matmul_allow_tf32']]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--precisions", "--precision", nargs="+", default=[])
    args, _ = parser.parse_known_args(argv)
    reason = refusal(args.device, args.precisions)
    if reason:
        print(f"gpu_lease.sh: {reason}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
