"""The device trainer's rollout and update each replayed as one CUDA graph (``graphs=``).

A body is a method of :class:`~.trainer.MemberTrainer` whose work is all on the device (no
sync, no copy: ``tests/safelife/test_captured_bodies.py`` counts them on the CPU) and whose
inputs and outputs are tensors that keep their addresses from call to call (the rollout
buffer, the env's state, the sampler's step count, the minibatch orders, the learning rate and
clip ranges as device tensors). :class:`CapturedCall` runs it eagerly once (the warm-up: a
real rollout or update, whose results are used, on a side stream as PyTorch's graph recipe
does it), captures it at its second call (``torch.cuda.graph``) and replays the capture from
then on: one launch where the rollout of 72 members was some 20 x 300 kernels. The body's
Python (its bookkeeping: the buffer's position, the episode recorder's step counts) runs at
the warm-up and at the capture only; the trainer sets what it needs of it after each replay.

A capture that fails (a sync inside the body, an optimizer that cannot be captured) is a
:class:`~safety_rl_common.errors.UserError` in one line naming the body, not a fall back to
eager code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import torch

from safety_rl_common.errors import UserError

#: ``graphs=``: which of the device trainer's bodies are replayed as CUDA graphs
GRAPHS = ("none", "rollout", "update", "all")
#: how a :class:`CapturedCall` replays: as a CUDA graph, or (``eager``: the CPU's stand-in,
#: for the tests) by running its body again
REPLAYS = ("graph", "eager")

T = TypeVar("T")


def check_graphs(graphs: str, device: torch.device, replay: str = "graph") -> None:
    """Refuse, in one line, a ``graphs`` setting this device cannot replay."""
    if graphs not in GRAPHS:
        raise UserError(f"graphs must be one of {', '.join(GRAPHS)}, got {graphs!r}")
    if replay not in REPLAYS:
        raise ValueError(f"replay must be one of {REPLAYS}, got {replay!r}")
    if graphs != "none" and replay == "graph" and device.type != "cuda":
        raise UserError(
            f"graphs={graphs} replays CUDA graphs, which need a CUDA device; got "
            f"device={device} (use graphs=none)"
        )


class CapturedCall(Generic[T]):
    """``body()`` replayed as one CUDA graph from its second call on (see the module
    docstring); its outputs are the capture's, rewritten by every replay.

    :param body: the body, without arguments.
    :param name: what it is, for the error of a capture that fails.
    :param replay: one of :data:`REPLAYS`.
    """

    def __init__(self, body: Callable[[], T], name: str, replay: str = "graph"):
        self.body, self.name, self.replay = body, name, replay
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: T | None = None
        self.calls = 0

    def __call__(self) -> T:
        self.calls += 1
        if self.replay == "eager":
            return self.body()
        if self.calls == 1:
            return self._warm_up()
        if self.graph is None:
            self._capture()
        assert self.graph is not None
        self.graph.replay()
        return self.outputs  # type: ignore[return-value]

    def _warm_up(self) -> T:
        """The first call, eagerly on a side stream (its lazy initialisations: cuBLAS and
        cuDNN handles and choices, the optimizer's state, outside any capture)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            outputs = self.body()
        torch.cuda.current_stream().wait_stream(stream)
        return outputs

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.outputs = self.body()
        except RuntimeError as error:
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise UserError(
                f"the {self.name} could not be captured as one CUDA graph (graphs=none runs it "
                f"eagerly): {first_line}"
            ) from error
        self.graph = graph
