"""Identically trained SB3 agents share their gradient updates.

An environment that simulates the agent usually trains its copy on the agent's own history, so
the same SB3 update runs once per copy on identical state: in TemptingButton that doubles the
cost of training. Semi-determinism makes an agent's state a function of its binding (class,
sizes, seed, hyperparameters) and its training history alone. So the first instance to reach
an update stores what the update changed (network and optimizer state, the minibatch
generator's state, the update count), and any instance that reaches the same update, same
binding and same history, loads that instead of recomputing it.

Keys are a BLAKE2b digest of the binding and every transition trained on, so differently
trained instances never share; the store is small (the most recent results) and loads copies,
so instances never share tensors. Results are bit-identical with sharing off
(``SHARED_UPDATES.enabled = False``), which a test checks.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from extended_envs.core import obs_key


@dataclass(frozen=True)
class UpdateResult:
    """What an SB3 ``train()`` call changed in an agent (copies, shared with no live agent)."""

    tensors: list[torch.Tensor]  # the policy's parameters and buffers
    optimizer_state: list[dict[str, Any]]  # per parameter, in the optimizer's order
    optimizer_groups: list[dict[str, Any]]  # hyperparameters per group (learning rate...)
    rng_state: dict[str, Any]
    n_updates: int


class SharedUpdates:
    """The process's store of recent states, keyed by binding and history digest.

    Per state: the result of the update that led to it (when one did), and the dict in which
    the agents in that state remember their network outputs per observation, so that identical
    copies also share their forward passes.
    """

    def __init__(self, capacity: int = 16) -> None:
        self.capacity = capacity
        self.enabled = True
        self.results: OrderedDict[bytes, UpdateResult] = OrderedDict()
        self.outputs: OrderedDict[bytes, dict[Any, Any]] = OrderedDict()
        self.computed = 0  # updates run
        self.reused = 0  # updates loaded instead

    def clear(self) -> None:
        """Forget every stored state and zero the counts (benchmarks start each run cold)."""
        self.results.clear()
        self.outputs.clear()
        self.computed = self.reused = 0

    def run(self, key: bytes, agent: Any, update: Callable[[], None]) -> None:
        """Run ``update()`` on ``agent`` (an SB3 agent), or load its stored result."""
        result = self.results.get(key) if self.enabled else None
        if result is not None:
            load(agent, result)
            self.reused += 1
        else:
            update()
            self.computed += 1
            if self.enabled:
                remember(self.results, key, save(agent), self.capacity)

    def outputs_for(self, key: bytes) -> dict[Any, Any]:
        """The network-output cache of the agents in state ``key`` (a new dict if unknown)."""
        if not self.enabled:
            return {}
        outputs = self.outputs.get(key)
        if outputs is None:
            outputs = remember(self.outputs, key, {}, self.capacity)
        return outputs


def remember(store: OrderedDict[bytes, Any], key: bytes, value: Any, capacity: int) -> Any:
    store[key] = value
    if len(store) > capacity:
        store.popitem(last=False)
    return value


SHARED_UPDATES = SharedUpdates()


def live_tensors(agent: Any) -> list[torch.Tensor]:
    """The policy's parameters and buffers (updated in place, so listed once)."""
    if getattr(agent, "_shared_tensors", None) is None:
        agent._shared_tensors = [*agent.policy.parameters(), *agent.policy.buffers()]
    return agent._shared_tensors


def optimized_parameters(agent: Any) -> list[torch.Tensor]:
    return [p for group in agent.policy.optimizer.param_groups for p in group["params"]]


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


def save(agent: Any) -> UpdateResult:
    optimizer = agent.policy.optimizer
    return UpdateResult(
        tensors=[t.detach().clone() for t in live_tensors(agent)],
        optimizer_state=[copy_state(optimizer.state[p]) for p in optimized_parameters(agent)],
        optimizer_groups=[
            {k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups
        ],
        rng_state=agent.np_rng.bit_generator.state,  # a fresh dict of plain values
        n_updates=agent._n_updates,
    )


def load(agent: Any, result: UpdateResult) -> None:
    optimizer = agent.policy.optimizer
    with torch.no_grad():
        for live, saved in zip(live_tensors(agent), result.tensors, strict=True):
            live.copy_(saved)
    for p, state in zip(optimized_parameters(agent), result.optimizer_state, strict=True):
        optimizer.state[p] = copy_state(state)
    for group, saved in zip(optimizer.param_groups, result.optimizer_groups, strict=True):
        group.update(saved)
    agent.np_rng.bit_generator.state = result.rng_state
    agent._n_updates = result.n_updates


class History:
    """A running digest of an agent's binding and of every transition it was trained on."""

    def __init__(self, binding: tuple[Any, ...]) -> None:
        self.digest = hashlib.blake2b(repr(binding).encode(), digest_size=20)

    def add(self, *transition: Any) -> None:
        self.digest.update(repr(tuple(as_key(x) for x in transition)).encode())

    def key(self) -> bytes:
        return self.digest.digest()


def as_key(value: Any) -> Any:
    """``value`` in a form whose repr is equal exactly for equal values (NumPy scalars unboxed)."""
    return obs_key(value.item() if isinstance(value, np.generic) else value)
