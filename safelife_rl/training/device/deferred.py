"""SB3's own ``PPO.train`` and ``A2C.train`` without a host sync per minibatch.

SB3 logs its losses by calling ``.item()`` (and ``.cpu().numpy()`` for the approximate KL) on
every minibatch, which makes the host wait for the device each time. Under
:func:`deferred_scalars`, those calls made *by SB3's train functions themselves* (nothing
else: a policy's or optimizer's ``.item()`` is untouched) return a :class:`DeferredScalar`,
which keeps the value on the device. SB3 then averages them with ``np.mean`` (additions and a
division, which stay on the device) and records the results in its logger;
:func:`read_deferred` reads every deferred value of the logger in one copy once ``train``
returns. A value that Python must see at once (``target_kl``'s early-stopping test, a
``float()``, a format) is read then, as before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from stable_baselines3 import A2C, PPO
from torch.overrides import TorchFunctionMode

#: The functions whose ``.item()``/``.cpu()`` calls are deferred: SB3's loss code, kept as is.
_DEFERRING_CODE = frozenset({PPO.train.__code__, A2C.train.__code__})


class DeferredScalar:
    """A scalar still on the device that acts as a number: sums and quotients stay on the
    device; anything else (comparison, ``float``, formatting) reads it."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor.detach()

    @staticmethod
    def _value(other: Any) -> Any:
        return other.tensor if isinstance(other, DeferredScalar) else other

    def __add__(self, other: Any) -> DeferredScalar:
        return DeferredScalar(self.tensor + self._value(other))

    __radd__ = __add__

    def __truediv__(self, other: Any) -> DeferredScalar:
        return DeferredScalar(self.tensor / self._value(other))

    def numpy(self) -> DeferredScalar:
        """``.cpu().numpy()`` of SB3's approximate KL: still deferred."""
        return self

    def __float__(self) -> float:
        return float(self.tensor)

    def __bool__(self) -> bool:
        return bool(self.tensor)

    def __lt__(self, other: Any) -> bool:
        return float(self) < float(other)

    def __gt__(self, other: Any) -> bool:
        return float(self) > float(other)

    def __le__(self, other: Any) -> bool:
        return float(self) <= float(other)

    def __ge__(self, other: Any) -> bool:
        return float(self) >= float(other)

    def __format__(self, spec: str) -> str:
        return format(float(self), spec)

    def __repr__(self) -> str:
        return f"DeferredScalar({self.tensor!r})"


class _Deferring(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if (
            (func is torch.Tensor.item or func is torch.Tensor.cpu)
            and args[0].dim() == 0
            and sys._getframe(1).f_code in _DEFERRING_CODE
        ):
            return DeferredScalar(args[0])
        return func(*args, **(kwargs or {}))


@contextmanager
def deferred_scalars() -> Iterator[None]:
    """Defer the scalar reads of SB3's ``train`` run inside the block (module docstring)."""
    with _Deferring():
        yield


def read_deferred(values: dict[str, Any]) -> None:
    """Replace every :class:`DeferredScalar` of ``values`` (a logger's ``name_to_value``) with
    its float, all read in one copy."""
    keys = [key for key, value in values.items() if isinstance(value, DeferredScalar)]
    if not keys:
        return
    read = torch.stack([values[k].tensor.to(torch.float64) for k in keys]).tolist()
    values.update(zip(keys, read))


@contextmanager
def no_argument_checks() -> Iterator[None]:
    """Turn off ``torch.distributions``' argument validation (each check reads a device value)
    inside the block, and restore the setting after."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)
