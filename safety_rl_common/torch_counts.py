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
  ``view``, ``expand``, ``t`` and ``_unsafe_view`` launch nothing and are not counted, nor are
  allocations: ``empty``, ``empty_strided``, ``resize_``).

**Nested operations.** An operation's kernel may run others through the dispatcher: one
``torch.multinomial`` is some thirty (checks, an exponential draw, a division, an argmax), a
convolution picks its backend's. Each operation given a tensor is run with the counter still
watching, so what it runs is counted too: an operation that runs countable others counts as
them (a composite is its parts), one that runs none counts as one kernel. Syncs are counted
where the code asks for them, not inside a kernel (the CPU's checks read their own memory,
e.g. ``_assert_async``, which on CUDA checks on the device); copies wherever they are; a
factory without tensor arguments counts as one operation, as before.
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
#: allocations and queries: they launch nothing
_FREE_OPS = frozenset({"empty", "empty_strided", "empty_like", "resize_", "_nnpack_available"})
#: the dispatch keys below the one a ``TorchDispatchMode`` runs at
_BELOW_PYTHON = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
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


def _tensor_keys(values: Any) -> torch._C.DispatchKeySet | None:
    """The dispatch keys of the tensors among ``values`` (``None``: no tensor)."""
    keys = None
    for value in values:
        if isinstance(value, torch.Tensor):
            own = torch._C._dispatch_keys(value)
            keys = own if keys is None else keys | own
        elif isinstance(value, (list, tuple)):
            inner = _tensor_keys(value)
            if inner is not None:
                keys = inner if keys is None else keys | inner
    return keys


def _numbers_as_tensors(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> tuple:
    """``args`` and ``kwargs`` with each host number given where ``func`` takes a tensor (a
    scalar that a kernel wrapped for an operation it runs, seen by Python as the number)
    made a 0-dim tensor of the type the operation computes in with it, which Python can
    dispatch."""
    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]

    def tensor(value: Any, argument: Any) -> Any:
        if not isinstance(value, (bool, int, float, complex)) or str(argument.type) != "Tensor":
            return value
        dtype = torch.result_type(tensors[0], value) if tensors else None
        return torch.tensor(value, dtype=dtype)

    arguments = func._schema.arguments
    by_name = {argument.name: argument for argument in arguments}
    return (
        tuple(tensor(value, argument) for value, argument in zip(args, arguments)),
        {name: tensor(value, by_name[name]) for name, value in kwargs.items()},
    )


class _Counting(TorchDispatchMode):
    def __init__(self, counts: OpCounts):
        super().__init__()
        self.counts = counts
        self.reading = False
        self.nested = False  # inside an operation's kernel

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        counts = self.counts
        if self.reading:  # inside a counted host read: its own copy is counted already
            return func(*args, **kwargs)
        args, kwargs = _numbers_as_tensors(func, args, kwargs)
        if name in _SYNC_OPS or _data_shaped(name, args, kwargs):
            if self.nested:  # a kernel reading its own backend's memory (e.g. a CPU check)
                return func(*args, **kwargs)
            counts.syncs += 1
            counts.named[name] += 1
            return func(*args, **kwargs)
        if name in _COPY_OPS or (name in _CROSS_DEVICE_OPS and len(_devices((args, kwargs))) > 1):
            counts.copies += 1
            counts.named[name] += 1
            return func(*args, **kwargs)
        if _is_view(func) or name in _FREE_OPS:
            return func(*args, **kwargs)
        keys = _tensor_keys((*args, *kwargs.values()))
        if keys is None:
            counts.kernels += 1
            return func(*args, **kwargs)
        before, nested = (counts.kernels, counts.copies), self.nested
        self.nested = True
        try:
            with self:  # the operations its kernel runs come back here
                result = func.redispatch(keys & _BELOW_PYTHON, *args, **kwargs)
        finally:
            self.nested = nested
        if (counts.kernels, counts.copies) == before:
            counts.kernels += 1
        return result


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
