"""The inner loop of tabular REINFORCE, compiled with Numba: whole meta-episodes of sampling and
updates on the tables of a :class:`drest.tabular.TabularWorld`, so the paper's main run takes a
fraction of a second instead of Python's tens of seconds.

Randomness comes in as an array of uniforms shaped ``(meta-episodes, mini-episodes, steps, 2)``:
time step ``t`` of mini-episode ``q`` of meta-episode ``j`` reads ``uniforms[j, q, t]`` (first
the epsilon draw, then the action draw), whatever happened before, so a run is a pure function of
its seed.
"""

from __future__ import annotations

import numba
import numpy as np

# Reward modes of the kernel, one per name in drest.reward.REWARDS.
REWARD_MODES = {"default": 0, "drest": 1, "drest_lopsided": 2}


@numba.njit(cache=True, inline="always")
def _sample(probs_row: np.ndarray, eps: float, u: float, r: float) -> int:
    if u < eps:
        return min(int(r * 4), 3)
    acc = 0.0
    for a in range(3):
        acc += probs_row[a]
        if r < acc:
            return a
    return 3


@numba.njit(cache=True, inline="always")
def _softmax_row(theta: np.ndarray, probs: np.ndarray, o: int) -> None:
    top = theta[o].max()
    total = 0.0
    for a in range(4):
        probs[o, a] = np.exp(theta[o, a] - top)
        total += probs[o, a]
    for a in range(4):
        probs[o, a] /= total


@numba.njit(cache=True)
def run_meta_episodes(
    theta: np.ndarray,
    probs: np.ndarray,
    nxt: np.ndarray,
    coin: np.ndarray,
    obs_of: np.ndarray,
    length_index: np.ndarray,
    m: np.ndarray,
    mode: int,
    lam: float,
    gamma: float,
    lrs: np.ndarray,
    epss: np.ndarray,
    uniforms: np.ndarray,
) -> None:
    """Train ``theta`` (and keep ``probs`` its row-wise softmax) in place.

    ``length_index[s]``: index into ``m`` of the trajectory length ending at state ``s`` (-1 if
    ``s`` is not terminal); ``m``: the most discounted coin value per length; ``lrs``/``epss``:
    learning rate and epsilon per meta-episode. A mini-episode still running after
    ``uniforms.shape[2]`` steps (an agent bumping into walls) is dropped: it chooses no length and
    teaches nothing.
    """
    n_meta, size, max_steps, _ = uniforms.shape
    k = m.shape[0]
    counts = np.zeros(k, dtype=np.int64)
    seen = np.empty(max_steps, dtype=np.int64)
    actions = np.empty(max_steps, dtype=np.int64)
    coins = np.empty(max_steps, dtype=np.float64)
    returns = np.empty(max_steps, dtype=np.float64)
    for j in range(n_meta):
        counts[:] = 0
        index = 1  # i, the 1-based number of the mini-episode choosing a length
        for q in range(size):
            s, steps = 0, 0
            while length_index[s] < 0 and steps < max_steps:
                o = obs_of[s]
                a = _sample(probs[o], epss[j], uniforms[j, q, steps, 0], uniforms[j, q, steps, 1])
                seen[steps], actions[steps], coins[steps] = o, a, coin[s, a]
                s = nxt[s, a]
                steps += 1
            li = length_index[s]
            if li < 0:
                continue
            scale = 1.0
            if mode != 0:
                scale = lam ** (counts[li] - (index - 1) / k)
                if mode == 1:
                    scale = scale / m[li] if m[li] > 0 else 0.0
            counts[li] += 1
            index += 1
            if scale == 0.0 or coins[:steps].max() == 0.0:
                continue  # every return is 0: nothing to learn
            g = 0.0
            for t in range(steps - 1, -1, -1):
                g = scale * coins[t] + gamma * g
                returns[t] = g
            for t in range(steps):  # every gradient uses the policy the episode was drawn from
                o, step_size = seen[t], lrs[j] * returns[t]
                for b in range(4):
                    theta[o, b] += step_size * ((b == actions[t]) - probs[o, b])
            for t in range(steps):
                _softmax_row(theta, probs, seen[t])
