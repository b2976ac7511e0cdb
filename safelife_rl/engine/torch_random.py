"""Counter-based random numbers for the torch engine: a hash of (seed, stream, env, counter).

A generator object holds state that a compiled graph or a CUDA graph must thread through, and
compiled code draws other numbers than eager code from it. A hash of integers has no state:
the numbers of env ``e`` at its counter ``t`` are the same in eager and compiled code, on every
device, at every batch size and whichever other envs restart. The hash is a 32-bit mixer
(xor-shift and multiply rounds, as in Wang's and Murmur's finalizers) computed in int64 with
factors below 2**31, so no product leaves int64.
"""

from __future__ import annotations

import torch

_MASK = 0xFFFFFFFF
_GOLDEN = 0x9E3779B1  # spreads consecutive cells apart before mixing

#: Streams: independent sequences of one env (spawners on boards, on goals, level draws, on
#: the inaction baseline's board that the device vector env advances beside the game's, the
#: actions a device run draws: :mod:`safelife_rl.training.device.sampler`).
BOARD_SPAWNS, GOAL_SPAWNS, LEVEL_DRAWS, INACTION_SPAWNS, ACTION_DRAWS = 1, 2, 3, 4, 5


def mix(x: torch.Tensor) -> torch.Tensor:
    """A bijective scramble of 32-bit values held in int64."""
    x = x & _MASK
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK
    x = x ^ (x >> 15)
    x = (x * 0x5BD1E995) & _MASK
    return x ^ (x >> 16)


def keys(
    seed: torch.Tensor | int, stream: int, envs: torch.Tensor, counter: torch.Tensor
) -> torch.Tensor:
    """One 32-bit key per env for its ``counter``-th draw of ``stream``, int64 ``(N,)``.

    :param seed: the batch's seed (an int64 tensor, or an int).
    :param envs: each env's index (its identity across restarts), int64 ``(N,)``.
    :param counter: each env's counter (e.g. its steps so far), int64 ``(N,)``.
    """
    return mix(env_keys(seed, stream, envs) + counter)


def env_keys(seed: torch.Tensor | int, stream: int, envs: torch.Tensor) -> torch.Tensor:
    """What :func:`keys` adds each env's counter to (it changes with the seed and the env
    only: a caller that draws often keeps it), int64, ``envs``' shape broadcast with
    ``seed``'s."""
    return mix(mix(torch.as_tensor(seed, device=envs.device) + stream * _GOLDEN) + envs)


def cell_uniforms(key: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """float32 uniforms in [0, 1), one per cell of each env's board, ``(N,) + shape``; each is
    a multiple of 2**-24, exact in float32."""
    cells = torch.arange(shape[0] * shape[1], device=key.device) * _GOLDEN
    bits = mix(key[:, None] + cells) >> 8
    return (bits.to(torch.float32) * 2.0**-24).view(len(key), *shape)


def integers(key: torch.Tensor, draw: int, high: torch.Tensor | int) -> torch.Tensor:
    """The ``draw``-th integer of each key, in ``[0, high)`` (``high`` below 2**16 keeps the
    modulo bias under 2**-16), int64 ``(N,)``."""
    return bits(key, draw) % high


def bits(key: torch.Tensor, draw: torch.Tensor | int) -> torch.Tensor:
    """The ``draw``-th 32-bit value of each key, int64 (``key`` and ``draw`` broadcast)."""
    return mix(key + draw * _GOLDEN)
