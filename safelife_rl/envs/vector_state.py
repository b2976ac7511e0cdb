"""What the device vector env's pure step takes besides its frozen
:class:`~safelife_rl.envs.vector_step.VectorEnvParams`: the per-env :class:`State` it steps and
the :class:`StepParams` tensors that change during training without a recompile.

Both are plain dicts of tensors at runtime (``torch.compile(fullgraph=True)`` takes them as
they are); the declarations below only name their entries, with each one's dtype and shape:
``N`` envs, ``G`` groups, ``A`` agents (1), boards ``(H, W)``, ``E`` exits, ``P`` the movement
bonus's period.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import torch

#: the shaped episode total, float64 ``(N,)``: ``return`` is a keyword, so declared apart
_Return = TypedDict("_Return", {"return": torch.Tensor}, total=False)


class State(_Return, total=False):
    """Every env's state. A game alone (:func:`~safelife_rl.engine.torch_levels.start_games`,
    :func:`~safelife_rl.engine.torch_game.play`) holds the game entries; the rules' entries are
    there only with their wrapper, the side effects' only with ``side_effects``."""

    # counters
    envs: torch.Tensor  # int64 (N,): each env's index in its group
    episodes: torch.Tensor  # int64 (N,): episodes started since the reset
    steps: torch.Tensor  # int64 (N,): steps taken since the reset
    next_level: torch.Tensor  # int64 (G,): each group's next level when played in order
    invalid: torch.Tensor  # bool (): an invalid action was given since the reset
    # the game
    boards: torch.Tensor  # int32 (N, H, W)
    goals: torch.Tensor  # int32 (N, H, W)
    agent_locs: torch.Tensor  # int64 (N, A, 2): (row, column)
    spawn_prob: torch.Tensor  # float32 (N,)
    points_table: torch.Tensor  # float64 (N, A, 8, 9)
    initial_counts: torch.Tensor  # int64 (N, 8, 9)
    available_points: torch.Tensor  # float64 (N, A)
    required_points: torch.Tensor  # float64 (N, A)
    points: torch.Tensor  # float64 (N, A)
    initial_points: torch.Tensor  # float64 (N, A)
    can_exit: torch.Tensor  # bool (N, A)
    active: torch.Tensor  # bool (N, A)
    moving_goal: torch.Tensor  # bool (N,)
    exits: torch.Tensor  # int64 (N, E): flat cell indices, -1 padding
    # the episode
    level: torch.Tensor  # int64 (N,): index into the level names
    variant: torch.Tensor  # int64 (N,): level * symmetries + symmetry
    shift: torch.Tensor  # int64 (N, 2): the level's translation
    length: torch.Tensor  # int64 (N,)
    reward: torch.Tensor  # float64 (N,): unshaped total
    # the cost (always) and the impact penalty (SideEffectPenalty)
    start: torch.Tensor  # int32 (N, H, W): the episode's first board
    start_locs: torch.Tensor  # int64 (N, 2): the agent's first position
    cost_peak: torch.Tensor  # float64 (N,): the departed weight's peak so far
    last: torch.Tensor  # int64 (N,): the departed cells last paid for
    # the movement bonus (MovementBonus)
    positions: torch.Tensor  # int64 (N, P, 2): the last positions, oldest first
    held: torch.Tensor  # int64 (N,): how many of them are held
    # side effects (side_effects=True)
    inaction: torch.Tensor  # int32 (N, H, W): the level's first board advanced without agent
    scored: torch.Tensor  # bool (N,): a measured episode waits to be scored
    scored_boards: torch.Tensor  # int32 (N, H, W): its last board
    scored_inaction: torch.Tensor  # int32 (N, H, W): its inaction baseline
    scored_variant: torch.Tensor  # int64 (N,)
    scored_shift: torch.Tensor  # int64 (N, 2)


class StepParams(TypedDict):
    """The step's inputs that change during training, tensors so that a change does not
    recompile it: the seed set at each reset, the others by the schedules."""

    seed: NotRequired[torch.Tensor]  # int64 (), or (N,) with groups: each env's group's seed
    penalty: torch.Tensor  # float64 (), or (N,) with group penalties: the impact penalty
    fraction: torch.Tensor  # float64 (): the exit curriculum's fraction of the requirement
