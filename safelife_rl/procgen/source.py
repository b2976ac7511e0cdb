"""Streams of procedural levels: the level source of the environments, and batches.

Every level comes from one integer seed (``generate_level(params, seed)``), so a level can be
made again from its seed, in any process. :class:`ProceduralLevels` draws the seeds from a
stream that restarts whenever the environment reseeds its generator, which keeps
``env.reset(seed=...)`` reproducible whether levels are made in this process or ahead of time
by worker processes.

Worker processes cannot start inside a daemonic process (every worker of a subprocess vector
env: SB3's ``SubprocVecEnv``, Gymnasium's ``AsyncVectorEnv``): there ``workers`` falls back to
generating the same levels in the process itself, with a one-time warning. The vector env's
processes already run the envs in parallel.
"""

from __future__ import annotations

import multiprocessing
import numbers
import os
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from safelife_rl.engine.levels import Level
from safelife_rl.engine.multi_agent_levels import MultiAgentLevel
from safelife_rl.procgen.generator import generate_level, generate_multi_agent_level
from safelife_rl.procgen.params import load_params
from safety_rl_common.errors import UserError
from safety_rl_common.workers import detach_from_signals

SEED_BOUND = 2**63
_warned_daemonic = False


def check_workers(workers: object, name: str = "workers") -> None:
    """Refuse a worker count that is not a whole number from 0 to 4 per CPU core (more only
    wait for the cores, and each holds a process); ``name`` is the setting's name."""
    most = 4 * (os.cpu_count() or 1)
    if (
        isinstance(workers, bool)
        or not isinstance(workers, numbers.Integral)
        or not 0 <= workers <= most
    ):
        raise UserError(
            f"{name} must be a whole number from 0 to {most} (4 per CPU core), got {workers!r}"
        )


def _worker_count(workers: int) -> int:
    """``workers``, or 0 in a daemonic process (which may not start processes), with a
    one-time warning."""
    global _warned_daemonic
    check_workers(workers)
    if workers and multiprocessing.current_process().daemon:
        if not _warned_daemonic:
            _warned_daemonic = True
            warnings.warn(
                f"workers={workers}: this process is a daemonic worker (e.g. of a subprocess "
                "vector env), which cannot start level-generation processes; levels are "
                "generated in this process instead (the same levels, one at a time)",
                RuntimeWarning,
                stacklevel=3,
            )
        return 0
    return workers


def _level_name(label: str, seed: int) -> str:
    return f"{label}-s{seed}"


def _label(params: str | os.PathLike | dict[str, Any]) -> str:
    """Level type or file stem, the start of the names of the levels made from ``params``."""
    return "procgen" if isinstance(params, dict) else Path(params).stem


class ProceduralLevels:
    """A source of new levels of one type for :class:`~safelife_rl.envs.env.SafeLifeEnv`.

    ``sample(rng)`` returns the next level. The first call with a generator, and every call
    with a different generator object (Gymnasium makes a new one on a seeded reset), draws a
    base seed from it; levels then follow from that base alone.

    :param params: a level type (``"append-still"``), a YAML parameter file, or parameters.
    :param multi_agent: make multi-agent levels
        (:class:`~safelife_rl.engine.multi_agent_levels.MultiAgentLevel`) of a multi-agent level
        type (``"build-coop"``) or parameter file.
    :param workers: worker processes generating levels ahead (0: generate on demand; in a
        daemonic process, such as a subprocess vector env's worker, always on demand).
    :param prefetch: levels kept in preparation per worker.
    """

    def __init__(
        self,
        params: str | os.PathLike | dict[str, Any],
        workers: int = 0,
        prefetch: int = 2,
        multi_agent: bool = False,
    ):
        check_workers(workers)
        if prefetch < 1:
            raise UserError(f"need prefetch >= 1, got {prefetch}")
        self.label = _label(params)
        self.params = params if isinstance(params, dict) else load_params(params, multi_agent)
        self.generate = generate_multi_agent_level if multi_agent else generate_level
        self.workers = workers
        self.prefetch = prefetch
        self._rng: np.random.Generator | None = None
        self._seeds: np.random.Generator | None = None
        self._pending: deque[tuple[int, Future | None]] = deque()
        self._pool: ProcessPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"ProceduralLevels({self.label!r}, workers={self.workers})"

    def _make(self, seed: int) -> Level | MultiAgentLevel:
        return self.generate(self.params, seed, _level_name(self.label, seed))

    def _submit(self, seed: int) -> tuple[int, Future | None]:
        if _worker_count(self.workers) == 0:
            return seed, None
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, initializer=detach_from_signals)
        return seed, self._pool.submit(
            self.generate, self.params, seed, _level_name(self.label, seed)
        )

    def sample(self, rng: np.random.Generator) -> Level | MultiAgentLevel:
        """The next level of the stream belonging to ``rng``."""
        if rng is not self._rng:
            self._rng = rng
            self._seeds = np.random.default_rng(int(rng.integers(SEED_BOUND)))
            self._drop_pending()
        while len(self._pending) < max(1, self.workers * self.prefetch):
            self._pending.append(self._submit(int(self._seeds.integers(SEED_BOUND))))
        seed, future = self._pending.popleft()
        return future.result() if future is not None else self._make(seed)

    def _drop_pending(self) -> None:
        for _, future in self._pending:
            if future is not None:
                future.cancel()
        self._pending.clear()

    def close(self) -> None:
        """Stop the worker processes (new ones start if more levels are asked for)."""
        self._drop_pending()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __getstate__(self) -> dict[str, Any]:
        # Pools do not pickle; levels in preparation are remade from their seeds.
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_pending"] = deque((seed, None) for seed, _ in self._pending)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.workers:
            self._pending = deque(self._submit(seed) for seed, _ in self._pending)


def generate_levels(
    params: str | os.PathLike | dict[str, Any],
    seeds: Sequence[int],
    names: Sequence[str] | None = None,
    workers: int = 0,
    progress: bool = False,
    multi_agent: bool = False,
) -> list[Level] | list[MultiAgentLevel]:
    """Levels for the given seeds, in order; ``workers`` processes share the work
    (``multi_agent``: multi-agent levels of multi-agent parameters)."""
    return list(iter_levels(params, seeds, names, workers, progress, multi_agent))


def iter_levels(
    params: str | os.PathLike | dict[str, Any],
    seeds: Sequence[int],
    names: Sequence[str] | None = None,
    workers: int = 0,
    progress: bool = False,
    multi_agent: bool = False,
) -> Iterator[Level] | Iterator[MultiAgentLevel]:
    """Like :func:`generate_levels`, yielding each level as soon as it and those before are
    ready."""
    label = _label(params)
    params = params if isinstance(params, dict) else load_params(params, multi_agent)
    generate = generate_multi_agent_level if multi_agent else generate_level
    names = list(names) if names is not None else [_level_name(label, s) for s in seeds]
    if len(names) != len(seeds):
        raise UserError(f"{len(seeds)} seeds but {len(names)} names")
    jobs: Iterable[Level | MultiAgentLevel]
    if _worker_count(workers) > 0:
        pool = ProcessPoolExecutor(workers, initializer=detach_from_signals)
        jobs = pool.map(generate, [params] * len(seeds), seeds, names)
    else:
        pool = None
        jobs = (generate(params, s, n) for s, n in zip(seeds, names))
    if progress:
        from tqdm import tqdm

        jobs = tqdm(jobs, total=len(seeds), desc=f"levels {label}", unit="level")
    try:
        yield from jobs
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
