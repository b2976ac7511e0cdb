"""Count what a callable asks of a torch device: kernel launches, host syncs and copies.

Counting runs the callable under a ``TorchDispatchMode``, which sees every aten operation that
reaches a kernel. On a GPU each such operation is at least one launch; some make the host wait
for the device (a *sync*: the host needs a value or a shape computed there) and some move data
between host and device (a *copy*). The counts are the same on any device, so a test on the
CPU holds the GPU path to "0 syncs, 0 copies":

- **syncs**: ``_local_scalar_dense`` (``.item()``, ``bool(t)``, ``int(t)``), ``nonzero`` and the
  operations whose output shape depends on the data (``masked_select``, ``unique``, boolean
  indexing), ``equal`` and ``is_nonzero``;
- **copies**: a host value made into a tensor (``lift_fresh``: ``torch.tensor(list)``,
  ``torch.as_tensor(array)``), a tensor moved to another device (``_to_copy``/``copy_`` across
  devices), and, counted by patching the tensor methods while counting, ``.numpy()`` and
  ``.tolist()`` (which bypass the dispatcher on the CPU);
- **kernels**: every other operation that computes (views and metadata-only operations such as
  ``view``, ``expand``, ``t`` and ``_unsafe_view`` launch nothing and are not counted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_SYNC_OPS = frozenset({
    "_local_scalar_dense", "nonzero", "nonzero_static", "masked_select", "equal", "is_nonzero",
    "_unique", "_unique2", "unique_dim", "unique_consecutive", "item",
})
_COPY_OPS = frozenset({"lift_fresh", "lift_fresh_copy"})
_CROSS_DEVICE_OPS = frozenset({"_to_copy", "copy_", "to"})
_HOST_READS = ("numpy", "tolist")


@dataclass
class OpCounts:
    """What one run of a callable asked of the device (see the module docstring)."""

    kernels: int = 0
    syncs: int = 0
    copies: int = 0
    #: the name of each counted sync and copy, with how often it came
    named: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        return f"{self.kernels} kernel ops, {self.syncs} syncs, {self.copies} copies"


def _is_view(func: torch._ops.OpOverload) -> bool:
    schema = func._schema
    return bool(schema.returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in schema.returns
    )


def _devices(values: Any) -> set[torch.device]:
    found: set[torch.device] = set()

    def visit(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            found.add(value.device)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, torch.device):
            found.add(value)

    visit(values)
    return found


class _Counting(TorchDispatchMode):
    def __init__(self, counts: OpCounts):
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        counts = self.counts
        if name in _SYNC_OPS or (name == "index" and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool
                for i in (args[1] if len(args) > 1 else ()))):
            counts.syncs += 1
            counts.named[name] += 1
        elif name in _COPY_OPS or (name in _CROSS_DEVICE_OPS
                                   and len(_devices((args, kwargs))) > 1):
            counts.copies += 1
            counts.named[name] += 1
        elif not _is_view(func):
            counts.kernels += 1
        return func(*args, **kwargs)


@contextmanager
def counting() -> Iterator[OpCounts]:
    """Count the operations run inside the ``with`` block: ``with counting() as counts: ...``."""
    counts = OpCounts()
    originals = {name: getattr(torch.Tensor, name) for name in _HOST_READS}

    def host_read(name: str) -> Callable[..., Any]:
        original = originals[name]

        def read(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            counts.copies += 1
            counts.named[name] += 1
            return original(self, *args, **kwargs)

        return read

    try:
        for name in _HOST_READS:
            setattr(torch.Tensor, name, host_read(name))
        with _Counting(counts):
            yield counts
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def count_ops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> OpCounts:
    """Run ``fn(*args, **kwargs)`` once and count what it asked of the device."""
    with counting() as counts:
        fn(*args, **kwargs)
    return counts
