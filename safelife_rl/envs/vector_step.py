"""The device vector env's step as pure functions, in gymnax's shape: each takes the frozen
:class:`VectorEnvParams` (what does not change during training, read once from the env and its
wrappers), the :class:`~safelife_rl.envs.vector_state.State` and the
:class:`~safelife_rl.envs.vector_state.StepParams` tensors, and gives new tensors of the same
shapes. Only :meth:`VectorEnvParams.of` reads the Gymnasium env and its wrappers, once; the step
never sees them, and nothing reads a value back to the host, so :func:`step_state` compiles to
one graph (:class:`~safelife_rl.envs.vector_env.SafeLifeVectorEnv` does the host's part around
it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import torch

from safelife_rl.engine import cells
from safelife_rl.engine.scoring import EXIT_POINTS
from safelife_rl.engine.torch_game import play
from safelife_rl.engine.torch_levels import LevelTensors, start_games
from safelife_rl.engine.torch_observation import agent_views
from safelife_rl.engine.torch_random import (
    INACTION_SPAWNS,
    LEVEL_DRAWS,
    cell_uniforms,
    integers,
    keys,
)
from safelife_rl.engine.torch_rules import N_ACTIONS, advance, agent_cells
from safelife_rl.envs.env import SafeLifeEnv
from safelife_rl.envs.torch_wrappers import RULES, BatchedRule, start_cost, step_cost
from safelife_rl.envs.vector_state import State, StepParams
from safelife_rl.procgen.bank import LevelBank
from safety_rl_common.errors import UserError

#: the step's outputs: the state after it, the observations, float32 rewards, terminations,
#: truncations, final observations (before the restarts) and episode statistics
StepOutputs = tuple[
    State,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    dict[str, torch.Tensor],
]

#: what the step keeps of each env's last measured episode to score its side effects
SCORED = ("boards", "inaction", "variant", "shift")


def _level_tensors(env: SafeLifeEnv, device: torch.device) -> tuple[LevelTensors, bool]:
    """The env's levels on ``device``, and whether restarts translate them (a level bank's
    own settings); a :class:`UserError` for a level source the device cannot hold."""
    if env.sampler is None:
        if len({level.shape for level in env.levels}) > 1:
            raise UserError(
                "the device vector env plays all boards in one tensor, but the "
                f"levels have shapes {sorted({lv.shape for lv in env.levels})}"
            )
        return LevelTensors.of(env.levels, device), False
    if not isinstance(env.sampler, LevelBank):
        raise UserError(
            "the device vector env keeps its levels on the device: give it a level list "
            "(levels=...) or a level bank (bank={'size': N}), not procedurally generated "
            f"levels drawn one by one ({type(env.sampler).__name__}); in a training run: "
            "'env.kwargs.bank={size:1000}'"
        )
    bank = env.sampler
    return LevelTensors.of(bank.levels, device, symmetries=bank.symmetries), bank.translations


@dataclass(frozen=True, eq=False)
class VectorEnvParams:
    """Everything the step needs that does not change during training: the compiled step
    specialises on these (a new value compiles it again), unlike the
    :class:`~safelife_rl.envs.vector_state.StepParams` tensors.

    :ivar drawn: whether an env that ends draws its next level at random (a shuffled list or a
        bank), else it takes its group's next one in order; ``translations`` whether a drawn
        level is also shifted (a bank's setting).
    :ivar time_limit: the single env's, where it measures side effects; ``max_episode_steps``
        the shortest outer ``TimeLimit`` (``None``: none).
    :ivar rules: the training wrappers' batched rules, innermost first.
    """

    levels: LevelTensors
    translations: bool
    drawn: bool
    time_limit: int
    max_episode_steps: int | None
    view_shape: tuple[int, int]
    channels: tuple[int, ...]
    remove_white_goals: bool
    side_effects: bool
    num_envs: int
    groups: int
    rules: tuple[BatchedRule, ...]
    device: torch.device

    @classmethod
    def of(
        cls,
        env: SafeLifeEnv,
        chain: Sequence[gym.Wrapper],
        num_envs: int,
        groups: int,
        device: torch.device,
    ) -> VectorEnvParams:
        """The settings of ``env`` under the wrappers ``chain`` (innermost first), read now."""
        levels, translations = _level_tensors(env, device)
        limits = [w._max_episode_steps for w in chain if type(w) is gym.wrappers.TimeLimit]
        return cls(
            levels=levels,
            translations=translations,
            drawn=bool(env.shuffle) or env.sampler is not None,
            time_limit=env.time_limit,
            max_episode_steps=min(limits, default=None),
            view_shape=env.view_shape,
            channels=env.channels,
            remove_white_goals=env.remove_white_goals,
            side_effects=env.side_effects,
            num_envs=num_envs,
            groups=groups,
            rules=tuple(
                RULES[type(w)].of(w, levels.shape, device) for w in chain if type(w) in RULES
            ),
            device=device,
        )

    @property
    def group_size(self) -> int:
        return self.num_envs // self.groups


def _keep(ended: torch.Tensor, fresh: torch.Tensor, going: torch.Tensor) -> torch.Tensor:
    """``fresh`` where ``ended`` (an env mask ``(N,)``), else ``going``."""
    return torch.where(ended.view(-1, *[1] * (fresh.dim() - 1)), fresh, going)


def _restarts(p: VectorEnvParams, state: State, ended: torch.Tensor, params: StepParams) -> State:
    """The fresh state of every env as if it restarted now (the caller keeps those of the
    envs ``ended``): its next level drawn, its game and counters started."""
    levels, n = p.levels, p.num_envs
    envs = state["envs"]
    key = keys(params["seed"], LEVEL_DRAWS, envs, state["episodes"])
    if p.drawn:
        pick = integers(key, 0, len(levels))
    else:
        order = ended.view(p.groups, -1).cumsum(1) - 1
        pick = (state["next_level"][:, None] + order).flatten() % len(levels)
    turns = len(levels.symmetries)
    variant = pick * turns
    if turns > 1:
        variant = variant + integers(key, 1, turns)
    shift = torch.zeros((n, 2), dtype=torch.int64, device=envs.device)
    if p.translations:
        h, w = levels.shape
        shift = torch.stack([integers(key, 2, h), integers(key, 3, w)], 1)
    fresh = start_games(levels, variant, shift if p.translations else None, params["fraction"])
    fresh.update(start_cost(fresh))
    for rule in p.rules:
        fresh.update(rule.start(fresh))
    if p.side_effects:
        fresh["inaction"] = fresh["boards"].clone()
    # No two entries of a state are one tensor: the compiled step would see other aliasing
    # after the first step and compile again (and Dynamo's recompile limit is per process).
    zeros = torch.zeros(n, dtype=torch.float64, device=envs.device)
    return {
        **fresh,
        "level": pick,
        "variant": variant,
        "shift": shift,
        "length": torch.zeros_like(envs),
        "reward": zeros,
        "return": zeros.clone(),
    }


def observe(p: VectorEnvParams, state: State) -> torch.Tensor:
    """Every env's observation, uint8 ``(N,) + view_shape + (channels,)``."""
    return agent_views(
        state["boards"],
        state["goals"],
        state["agent_locs"],
        p.view_shape,
        p.channels,
        p.remove_white_goals,
        state["exits"],
    )[:, 0]


def start_state(p: VectorEnvParams, params: StepParams) -> State:
    """Every env at the start of its first episode (the state :func:`step_state` steps)."""
    n = p.num_envs
    envs = torch.arange(n, device=p.device) % p.group_size
    zero = torch.zeros_like(envs)
    counters: State = {
        "envs": envs,
        "episodes": zero,
        "steps": zero,
        "next_level": torch.zeros(p.groups, dtype=torch.int64, device=p.device),
    }
    everyone = torch.ones(n, dtype=torch.bool, device=p.device)
    fresh = _restarts(p, counters, everyone, params)
    state: State = {
        **counters,
        **fresh,
        "episodes": zero + 1,
        "next_level": counters["next_level"] + p.group_size,
        "invalid": torch.zeros((), dtype=torch.bool, device=p.device),
    }
    if p.side_effects:  # no env has ended yet: nothing to score
        state.update(
            {
                "scored": torch.zeros_like(everyone),
                **{f"scored_{name}": torch.zeros_like(state[name]) for name in SCORED},
            }
        )
    return state


def step_state(
    p: VectorEnvParams, state: State, actions: torch.Tensor, params: StepParams
) -> StepOutputs:
    """One step of every env as a pure function of tensors of fixed shapes.

    :param actions: int64 ``(N,)``; invalid ones set ``state["invalid"]`` (and act as
        no-ops).
    :returns: the state after the step, the observations, float32 rewards, terminations,
        truncations, the final observations (before the restarts) and the episode
        statistics (valid where the env ended; their ``cost``, the step's, everywhere).
    """
    invalid = (actions < 0) | (actions >= N_ACTIONS)
    game, rewards = play(
        state,
        torch.where(invalid, 0, actions)[:, None],
        params["seed"],
        state["envs"],
        state["steps"],
        p.levels.spawning,
        p.levels.moving_goals,
    )
    length = state["length"] + 1
    reward = rewards[:, 0].to(torch.float64)
    unshaped = state["reward"] + reward
    terminated = ~game["active"][:, 0]
    at_limit = ~terminated & (length >= p.time_limit)
    truncated = at_limit
    if p.max_episode_steps is not None:
        truncated = truncated | (length >= p.max_episode_steps)
    stepped: State = {
        **state,
        **game,
        "length": length,
        "reward": unshaped,
        "steps": state["steps"] + 1,
        "invalid": state["invalid"] | invalid.any(),
    }
    cost, entries = step_cost(state, game)
    stepped.update(entries)
    for rule in p.rules:
        reward, entries = rule.step(state, game, reward, terminated, unshaped, params)
        stepped.update(entries)
    stepped["return"] = state["return"] + reward
    final_obs = observe(p, stepped)
    ended = terminated | truncated
    measured = terminated | at_limit  # where the single env reports side effects
    if p.side_effects:
        stepped.update(_inaction_step(p, state, stepped, measured, params))
    final_info = {**_statistics(stepped, measured), "cost": cost}
    fresh = _restarts(p, stepped, ended, params)
    after: State = {
        name: _keep(ended, fresh[name], value) if name in fresh else value
        for name, value in stepped.items()
    }
    after["episodes"] = stepped["episodes"] + ended
    after["next_level"] = stepped["next_level"] + ended.view(p.groups, -1).sum(1)
    observations = _keep(ended, observe(p, after), final_obs)
    return (
        after,
        observations,
        reward.to(torch.float32),
        terminated,
        truncated,
        final_obs,
        final_info,
    )


def _inaction_step(
    p: VectorEnvParams, state: State, stepped: State, measured: torch.Tensor, params: StepParams
) -> State:
    """The inaction baseline's boards advanced one step beside the games (the level's
    first board without the agent), and each env's last measured episode kept for the side
    effects' scores: its board, baseline, level variant and translation."""
    uniforms = None
    if p.levels.spawning:
        uniforms = cell_uniforms(
            keys(params["seed"], INACTION_SPAWNS, state["envs"], state["steps"]),
            p.levels.shape,
        )
    stepped = {**stepped, "inaction": advance(state["inaction"], state["spawn_prob"], uniforms)}
    kept = {
        f"scored_{name}": _keep(measured, stepped[name], state[f"scored_{name}"]) for name in SCORED
    }
    return {"inaction": stepped["inaction"], "scored": state["scored"] | measured, **kept}


def _statistics(state: State, measured: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each env's episode statistics as its single env's last ``info`` would give them."""
    exited = (
        agent_cells(state["boards"], state["agent_locs"])[:, 0] & (cells.AGENT | cells.EXIT)
    ) == cells.EXIT
    earned = state["points"][:, 0] - state["initial_points"][:, 0]
    available = state["available_points"][:, 0]
    return {
        "length": state["length"],
        "reward": state["reward"],
        "success": exited,
        "points": earned,
        "available_points": available,
        "required_points": state["required_points"][:, 0],
        "performance": (earned - exited * EXIT_POINTS) / available.clamp(min=1),
        "level": state["level"],
        "return": state["return"],
        "measured": measured,
    }
