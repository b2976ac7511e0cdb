"""Count what a callable asks of a torch device: kernel launches, host syncs and copies.

Counting runs the callable under a ``TorchDispatchMode``, which sees every aten operation that
reaches a kernel. On a GPU each such operation is at least one launch; some make the host wait
for the device (a *sync*: the host needs a value or a shape computed there) and some move data
between host and device (a *copy*). The counts are the same on any device, so a test on the
CPU holds the GPU path to "0 syncs, 0 copies":

- **syncs**: ``_local_scalar_dense`` (``.item()``, ``bool(t)``, ``int(t)``), ``nonzero`` and the
  operations whose output shape depends on the data (``masked_select``, ``unique``, boolean
  indexing and boolean-mask assignment ``t[mask] = v``, ``repeat_interleave`` by a tensor of
  repeats without ``output_size``, ``bincount``), ``histc`` (its range read from the data),
  the comparisons that answer on the host (``equal``, ``allclose``) and ``is_nonzero``;
- **copies**: a host value made into a tensor (``lift_fresh``: ``torch.tensor(list)``,
  ``torch.as_tensor(array)``), a tensor moved to another device (``_to_copy``/``copy_`` across
  devices), and, counted as tensor functions (a ``TorchFunctionMode``), ``.numpy()``,
  ``.tolist()`` and ``.cpu()`` (which do not reach the dispatcher for a CPU tensor; a CUDA
  tensor's ``.cpu()`` is counted once, as that method);
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
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_SYNC_OPS = frozenset(
    {
        "_local_scalar_dense",
        "nonzero",
        "nonzero_static",
        "masked_select",
        "equal",
        "is_nonzero",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "item",
        "bincount",
        "histc",
        "allclose",
    }
)
_MASKED_OPS = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})
_COPY_OPS = frozenset({"lift_fresh", "lift_fresh_copy"})
_CROSS_DEVICE_OPS = frozenset({"_to_copy", "copy_", "to"})
_HOST_READS = {torch.Tensor.numpy: "numpy", torch.Tensor.tolist: "tolist", torch.Tensor.cpu: "cpu"}


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


def _data_shaped(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether the operation's output shape (or work) depends on tensor data the host reads."""
    if name in _MASKED_OPS:
        indices = args[1] if len(args) > 1 else ()
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    if name == "repeat_interleave":
        return kwargs.get("output_size") is None
    return False


class _Counting(TorchDispatchMode):
    def __init__(self, counts: OpCounts):
        super().__init__()
        self.counts = counts
        self.reading = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        counts = self.counts
        if self.reading:  # inside a counted host read: its own copy is counted already
            return func(*args, **kwargs)
        if name in _SYNC_OPS or _data_shaped(name, args, kwargs):
            counts.syncs += 1
            counts.named[name] += 1
        elif name in _COPY_OPS or (name in _CROSS_DEVICE_OPS and len(_devices((args, kwargs))) > 1):
            counts.copies += 1
            counts.named[name] += 1
        elif not _is_view(func):
            counts.kernels += 1
        return func(*args, **kwargs)


class _HostReads(TorchFunctionMode):
    """Counts the tensor methods that read a tensor into host memory, seen as functions (a
    CPU tensor's ``.cpu()`` never reaches the dispatcher), each once: what they dispatch is not
    counted again. Modes entered inside (the device path's deferred scalars) see them first."""

    def __init__(self, counts: OpCounts, dispatch: _Counting):
        super().__init__()
        self.counts, self.dispatch = counts, dispatch

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = _HOST_READS.get(func)
        if name is None or self.dispatch.reading:
            return func(*args, **kwargs)
        self.counts.copies += 1
        self.counts.named[name] += 1
        self.dispatch.reading = True
        try:
            return func(*args, **kwargs)
        finally:
            self.dispatch.reading = False


@contextmanager
def counting() -> Iterator[OpCounts]:
    """Count the operations run inside the ``with`` block: ``with counting() as counts: ...``."""
    counts = OpCounts()
    dispatch = _Counting(counts)
    with _HostReads(counts, dispatch), dispatch:
        yield counts


def count_ops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> OpCounts:
    """Run ``fn(*args, **kwargs)`` once and count what it asked of the device."""
    with counting() as counts:
        fn(*args, **kwargs)
    return counts
