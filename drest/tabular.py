"""A gridworld compiled to tables: every reachable state, its successor and coin under each
action, and its observation id. Exact search (m per trajectory length) and exact policy
evaluation run on these tables; tabular REINFORCE samples from them.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from drest.dynamics import State, initial_state, is_terminal, step
from drest.spec import GridSpec
from safety_rl_common.errors import UserError

#: Default limit on the reachable states of a world that :func:`compile_world` builds: about
#: 3.5 s and 0.1 GB (states grow exponentially with the buttons and coins in reach).
MAX_STATES = 250_000


@dataclass(frozen=True, eq=False)
class TabularWorld:
    """States are numbered in order of ``t`` (state 0 is the start).

    ``next[s, a]`` / ``coin[s, a]``: successor and coin value (-1 / 0 for terminal states);
    ``obs[s]``: observation id; ``obs_vectors[o]``: the paper's observation
    ``[x, y, coin flags..., button flags...]`` of id ``o``; ``lengths``: the trajectory lengths
    that some policy can reach, ascending.
    """

    spec: GridSpec
    states: tuple[State, ...]
    next: np.ndarray
    coin: np.ndarray
    t: np.ndarray
    terminal: np.ndarray
    obs: np.ndarray
    obs_vectors: np.ndarray
    lengths: tuple[int, ...]

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_obs(self) -> int:
        return len(self.obs_vectors)


def obs_vector(spec: GridSpec, state: State) -> np.ndarray:
    """The paper's observation ``[x, y, coin flags..., button flags...]`` of a state."""
    flags = [state.coin_mask >> i & 1 for i in range(len(spec.coins))]
    flags += [state.button_mask >> j & 1 for j in range(len(spec.buttons))]
    return np.array([state.col, state.row, *flags], dtype=np.int64)


_CACHE_SIZE = 256
_compiled: OrderedDict[GridSpec, TabularWorld] = OrderedDict()


def _too_many_states(spec: GridSpec, count: str, max_states: int) -> UserError:
    return UserError(
        f"gridworld {spec.name!r} has {count} reachable states (limit max_states="
        f"{max_states:,}): its exact metrics need every state; raise max_states if memory "
        "allows (about 0.4 kB and 15 us a state), or measure by sampling "
        "(drest.metrics.monte_carlo_metrics with m given)"
    )


def compile_world(spec: GridSpec, max_states: int = MAX_STATES) -> TabularWorld:
    """Enumerate the states reachable from the start under any actions; a world with more than
    ``max_states`` is refused before its tables are built. Worlds are cached, so once built a
    world is returned whatever the limit of later calls."""
    world = _compiled.get(spec)
    if world is None:
        world = _compile(spec, max_states)
        _compiled[spec] = world
        if len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    _compiled.move_to_end(spec)
    return world


def _compile(spec: GridSpec, max_states: int) -> TabularWorld:
    if spec.length + 1 > max_states:  # each move 0..length reaches a new state
        raise _too_many_states(spec, f"at least {spec.length + 1:,}", max_states)
    start = initial_state(spec)
    index = {start: 0}
    order = [start]
    frontier = [start]
    while frontier:  # breadth-first by t, so states come out sorted by t
        nxt_frontier = []
        for s in frontier:
            if is_terminal(spec, s):
                continue
            for a in range(4):
                s2, _ = step(spec, s, a)
                if s2 not in index:
                    index[s2] = len(order)
                    order.append(s2)
                    nxt_frontier.append(s2)
                    if len(order) > max_states:
                        raise _too_many_states(spec, f"more than {max_states:,}", max_states)
        frontier = nxt_frontier
    n = len(order)
    nxt = np.full((n, 4), -1, dtype=np.int64)
    coin = np.zeros((n, 4), dtype=np.float64)
    terminal = np.zeros(n, dtype=bool)
    obs_ids: dict[tuple[int, int, int, int], int] = {}
    obs = np.zeros(n, dtype=np.int64)
    for i, s in enumerate(order):
        key = (s.row, s.col, s.coin_mask, s.button_mask)
        obs[i] = obs_ids.setdefault(key, len(obs_ids))
        if is_terminal(spec, s):
            terminal[i] = True
            continue
        for a in range(4):
            s2, value = step(spec, s, a)
            nxt[i, a] = index[s2]
            coin[i, a] = value
    world = TabularWorld(
        spec=spec,
        states=tuple(order),
        next=nxt,
        coin=coin,
        t=np.array([s.t for s in order], dtype=np.int64),
        terminal=terminal,
        obs=obs,
        obs_vectors=np.zeros((0, 0), dtype=np.int64),
        lengths=(),
    )
    vectors = np.zeros((len(obs_ids), 2 + len(spec.coins) + len(spec.buttons)), dtype=np.int64)
    for i, s in enumerate(order):
        vectors[obs[i]] = obs_vector(spec, s)
    lengths = tuple(sorted({int(order[i].t) for i in np.flatnonzero(terminal)}))
    object.__setattr__(world, "obs_vectors", vectors)
    object.__setattr__(world, "lengths", lengths)
    return world


@lru_cache(maxsize=256)
def max_coins_by_length(spec: GridSpec) -> dict[int, float]:
    """m(l): the most gamma-discounted coin value any policy can collect in a trajectory of
    length l, for every reachable l (exact, by dynamic programming over all states).

    A coin collected on move t (t = 0 for the first move) counts gamma**t times its value;
    a gamma so small that gamma**t underflows for some move of a trajectory is refused.
    """
    world = compile_world(spec)
    gamma = spec.gamma
    last_move = max(world.lengths) - 1
    if gamma**last_move < sys.float_info.min:
        raise UserError(
            f"gridworld {spec.name!r}: gamma {gamma!r} ** {last_move} (the discount "
            f"of the last move of its longest trajectory) underflows below "
            f"{sys.float_info.min:.3g}; use a larger gamma"
        )
    best: list[dict[int, float]] = [{} for _ in range(world.n_states)]
    for s in range(world.n_states - 1, -1, -1):  # successors have larger t, larger index
        if world.terminal[s]:
            best[s] = {int(world.t[s]): 0.0}
            continue
        out: dict[int, float] = {}
        discount = gamma ** int(world.t[s])
        for a in range(4):
            gain = discount * world.coin[s, a]
            for length, value in best[world.next[s, a]].items():
                if gain + value > out.get(length, -1.0):
                    out[length] = gain + value
        best[s] = out
    return {int(k): float(v) for k, v in sorted(best[0].items())}
