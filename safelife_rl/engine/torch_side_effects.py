"""Side effects of torch games, simulated on the device.

The score is :mod:`safelife_rl.engine.side_effects`' (its docstring defines it): the inaction
baseline (the level's first board advanced to the current step without the agent) and the current
board are each sampled over further steps on the game's device, every board and run of a batch at
once; only the earth mover's distances are computed on the CPU, by the same solver.
:func:`side_effect_scores` simulates the baseline from the level's start;
:func:`scores_of_boards` takes it already advanced (the device vector env steps it beside each
game).
"""

from __future__ import annotations

import numpy as np
import torch

from safelife_rl.engine import cells
from safelife_rl.engine.side_effects import score_from_occupancy
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.engine.torch_random import BOARD_SPAWNS, cell_uniforms, keys
from safelife_rl.engine.torch_rules import advance

_UNAFFECTED = cells.AGENT | cells.EXIT | cells.FROZEN


def _life(boards: torch.Tensor) -> torch.Tensor:
    """Live cells the agent could affect, by colour: int64 ``(N, H, W, 8)``."""
    counted = ((boards & cells.ALIVE) != 0) & ((boards & _UNAFFECTED) == 0)
    colors = (boards & cells.COLORS) >> cells.COLOR_BIT
    # one_hot by comparison: torch's one_hot reads the values' range back to the host
    palette = torch.arange(8, device=boards.device)
    return ((colors[..., None] == palette) & counted[..., None]).long()


def simulate(
    boards: torch.Tensor,
    steps: int,
    spawn_prob: torch.Tensor,
    seed: int | torch.Tensor | None = None,
    count_life: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Advance boards ``(N, H, W)`` ``steps`` generations without agents acting.

    :param seed: seed of the spawners' random numbers (:mod:`.torch_random`, board ``k``'s
        at step ``t`` a function of the seed, ``k`` and ``t``); ``None`` if no board has one.
    :param count_life: also return how often each cell held live cells of each colour that
        the agent could affect, counted after every step, int64 ``(N, H, W, 8)``.
    :returns: the final boards and the counts (``None`` unless ``count_life``).

    Without spawners, once every board repeats itself within two steps the rest of the run
    is counted without simulating it, as the Numba engine does.
    """
    counts = torch.zeros(boards.shape + (8,), dtype=torch.int64, device=boards.device)
    current, older = boards, boards
    envs = torch.arange(len(boards), device=boards.device)
    if seed is not None:  # a tensor once, not a host value copied at every step
        seed = torch.tensor(seed, device=boards.device)
    for t in range(steps):
        uniforms = (
            None
            if seed is None
            else cell_uniforms(
                keys(seed, BOARD_SPAWNS, envs, torch.full_like(envs, t)), tuple(boards.shape[1:])
            )
        )
        following = advance(current, spawn_prob, uniforms)
        if count_life:
            counts += _life(following)
        if seed is None and t >= 1 and torch.equal(following, older):
            left = steps - t - 1  # states alternate: current, following, current, ...
            if count_life:
                counts += _life(current) * ((left + 1) // 2) + _life(following) * (left // 2)
            return (current if left % 2 else following), counts if count_life else None
        older, current = current, following
    return current, counts if count_life else None


def side_effect_scores(
    game: TorchGame, samples: int = 1000, runs: int = 1, seed: int = 0
) -> list[dict[str, list[float]]]:
    """Side effects so far in every game: ``{cell name: [side effect, inaction total]}`` each.

    :param runs: independent simulations to average on levels with spawners (deterministic
        batches always use one).
    :param seed: seed of the spawners' random numbers in the simulations.
    """
    starts = np.stack([level.board for level in game.levels])
    start = torch.as_tensor(starts, dtype=torch.int32, device=game.device)
    stochastic = bool(((start & cells.SPAWNING) != 0).any())
    runs = runs if stochastic else 1
    seed = seed if stochastic else None
    inaction, _ = simulate(
        start.repeat(runs, 1, 1), game.num_steps, game.spawn_prob.repeat(runs), seed
    )
    return scores_of_boards(starts, inaction, game.boards, game.spawn_prob, samples, seed)


def scores_of_boards(
    starts: np.ndarray,
    inaction: torch.Tensor,
    now: torch.Tensor,
    spawn_prob: torch.Tensor,
    samples: int = 1000,
    seed: int | None = None,
) -> list[dict[str, list[float]]]:
    """The side-effect report of each of ``n`` episodes from its boards: the level's start
    ``starts`` ``(n, H, W)`` (host), the inaction baseline now ``inaction`` (``(runs * n, H,
    W)``, run-major: one or more independent baselines) and the board now ``now`` ``(n, H,
    W)``. Both are sampled for ``samples`` further steps on their device, every board at
    once; the earth mover's distances are computed on the CPU.

    :param spawn_prob: float32 ``(n,)``, each episode's spawn probability.
    :param seed: seed of the spawners' random numbers; ``None`` if no board has spawners.
    """
    n = len(now)
    runs = len(inaction) // n
    prob = spawn_prob.repeat(2 * runs)
    both = torch.cat([inaction, now.repeat(runs, 1, 1)])
    _, counts = simulate(both, samples, prob, seed, count_life=True)
    # (2, runs, N, H, W, 8) -> (N, 2, H, W, 8): inaction, then action
    occupancy = counts.view((2, runs, n) + counts.shape[1:]).sum(1).transpose(0, 1)
    occupancy = occupancy.cpu().numpy().astype(np.float64) / (runs * samples)
    return [
        score_from_occupancy(start, board, occupancy[k])
        for k, (start, board) in enumerate(zip(starts, now.cpu().numpy()))
    ]
