"""Multi-agent SafeLife as a PettingZoo ``ParallelEnv``, one handle per task named as
PettingZoo names its envs (``build_coop_v0.parallel_env()``, ``build_coop_v0.env()``).

The tasks are not Gymnasium ids: ``gym.make`` cannot make a multi-agent env, so their names
are not shaped like one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from safelife_rl.engine.departures import PeakCost
from safelife_rl.engine.game import SafeLifeGame
from safelife_rl.engine.game_batch import episode_info
from safelife_rl.engine.observation import (
    DEFAULT_CHANNELS,
    DEFAULT_VIEW,
    agent_view,
    combined_cells,
    to_channels,
)
from safelife_rl.engine.physics import N_ACTIONS
from safelife_rl.engine.side_effects import side_effect_score
from safelife_rl.envs.env import BoardRenderModes
from safelife_rl.envs.level_stream import LevelSource, LevelStream
from safety_rl_common.errors import UserError

#: Multi-agent level type (its parameter file in ``procgen/params/multi-agent``) -> env name,
#: the name of its handle in this module (and in :mod:`safelife_rl`) and its ``env.id`` in a
#: training config.
MULTI_AGENT_TASKS = {
    "build-coop": "build_coop_v0",
    "build-compete": "build_compete_v0",
    "build-parallel": "build_parallel_v0",
    "asym1": "asym1_v0",
    "asym2": "asym2_v0",
    "asym1-pretrain-cyanonly": "asym1_pretrain_cyanonly_v0",
    "asym1-pretrain-redonly": "asym1_pretrain_redonly_v0",
}


def multi_agent_task(name: str) -> str | None:
    """The task of a multi-agent env name (``build_coop_v0``), or ``None`` for any other name
    (a Gymnasium id)."""
    return next((task for task, known in MULTI_AGENT_TASKS.items() if known == name), None)


class SafeLifeParallelEnv(BoardRenderModes, ParallelEnv):
    """Multi-agent SafeLife: several agents on one board, all acting every step.

    **Description.** As single-agent SafeLife (:class:`~safelife_rl.SafeLifeEnv`), with
    ``A`` agents on one wrapped board, each with its own colour, flags and points table. Every
    step the agents' actions execute one after another in agent order, then the board advances
    one generation. Agents block one another; life an agent creates takes its colour.

    **Agents.** ``agent_0`` ... ``agent_{A-1}`` in the level's agent order; ``info["type"]``
    names each one's type (e.g. ``cyan``). An agent that exits (or is destroyed) is done and
    leaves ``agents``; the episode ends when all are done or at ``time_limit`` steps.

    **Actions** (``Discrete(9)`` each): 0 nothing; 1-4 move up, right, down, left; 5-8 toggle
    the cell up, right, down, left.

    **Observation.** Each agent's own view, ``Box(0, 1, view_shape + (len(channels),),
    uint8)``, centred on it, as in the single-agent env.

    **Rewards.** Each agent's change in its own points while it is active, plus 1 for exiting.
    An agent may exit once it has earned ``min_performance`` of its own available points.

    **Rendering.** The single-agent env's render modes, the agents drawn in their colours.

    **Info** (per agent). ``type``, ``length``, ``reward``, ``success``, ``points``,
    ``available_points``, ``required_points``, ``performance``, ``level``; on the step that
    ends the episode, if ``side_effects`` is on, the board's ``side_effects``. ``cost`` after
    every step: the board's safety cost, the same for every agent (the single-agent env's
    ``info["cost"]``, with every agent's cells ignored;
    :class:`~safelife_rl.engine.departures.PeakCost`).

    :param levels: a ``.npz`` level file or archive, a directory of them, a list of
        multi-agent levels, or a sampler (``sample(rng) -> MultiAgentLevel``); every level must
        have the same number of agents. See :func:`make_parallel_env` for the tasks.
    """

    metadata = {
        "name": "safelife_multi_agent_v0",
        "render_modes": ["human", "ansi", "rgb_array", "ansi_list", "rgb_array_list"],
        "render_fps": 8,
        "is_parallelizable": True,
    }

    def __init__(
        self,
        levels: LevelSource,
        n_agents: int | None = None,
        view_shape: tuple[int, int] = DEFAULT_VIEW,
        channels: Sequence[int] = DEFAULT_CHANNELS,
        time_limit: int = 1000,
        remove_white_goals: bool = True,
        shuffle: bool = False,
        side_effects: bool = False,
        render_mode: str | None = None,
    ):
        self.stream = LevelStream(levels, shuffle, multi_agent=True, owner="SafeLifeParallelEnv")
        if self.sampler is None:
            counts = sorted({level.n_agents for level in self.levels})
            if len(counts) != 1:
                raise UserError(
                    f"the levels of one env must have as many agents each, got "
                    f"agent counts {counts}"
                )
            if n_agents not in (None, counts[0]):
                raise UserError(f"n_agents={n_agents} but the levels have {counts[0]} agents")
            n_agents = counts[0]
        elif n_agents is None or n_agents < 1:
            raise UserError(f"a level sampler needs n_agents >= 1, got {n_agents!r}")
        self._set_options(
            view_shape, channels, time_limit, remove_white_goals, side_effects, render_mode
        )
        self.possible_agents = [f"agent_{i}" for i in range(n_agents)]
        self.agents: list[str] = []
        self.np_random, _ = seeding.np_random()
        self.game: SafeLifeGame | None = None

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0, 1, self.view_shape + (len(self.channels),), dtype=np.uint8)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(N_ACTIONS)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start the next level (``options={"level": i}``: level ``i`` of a level list); a
        seeded reset restarts the level order and the random stream."""
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
            self.stream.restart()
        self.level = self.stream.next(self.np_random, options)
        if self.level.n_agents != len(self.possible_agents):
            raise UserError(
                f"level {self.level.name!r} has {self.level.n_agents} agents, the "
                f"env {len(self.possible_agents)}"
            )
        game_seed = int(self.np_random.integers(2**63))
        self.game = SafeLifeGame([self.level], rng=np.random.default_rng(game_seed))
        self.agents = list(self.possible_agents)
        self._length = np.zeros(len(self.agents), np.int64)
        self._reward = np.zeros(len(self.agents), np.float64)
        self._cost = PeakCost(self.game)
        self._frames = []
        self._show()
        return self._observations(), {
            agent: {**self._info(i), "cost": 0.0} for i, agent in enumerate(self.possible_agents)
        }

    def _observations(self) -> dict[str, np.ndarray]:
        game = self.game
        combined = combined_cells(game.boards[0], game.goals[0], self.remove_white_goals)
        return {
            agent: to_channels(
                agent_view(combined, game.agent_locs[0, i], self.view_shape), self.channels
            )
            for i, agent in enumerate(self.possible_agents)
            if agent in self.agents
        }

    def _info(self, i: int) -> dict[str, Any]:
        return {
            "type": self.level.agent_names[i],
            "length": int(self._length[i]),
            "reward": float(self._reward[i]),
            **episode_info(self.game, agent=i),
        }

    def step(
        self, actions: dict[str, int]
    ) -> tuple[
        dict[str, np.ndarray],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """One action per live agent; agents that are done take no action."""
        if self.game is None or not self.agents:
            raise RuntimeError("the episode has ended (or not begun); call reset()")
        missing = [agent for agent in self.agents if agent not in actions]
        extra = [agent for agent in actions if agent not in self.agents]
        if missing or extra:
            raise UserError(
                f"actions must name every live agent {self.agents} and no other; "
                f"missing {missing}, not live {extra}"
            )
        joint = np.zeros(len(self.possible_agents), np.int64)
        for i, agent in enumerate(self.possible_agents):
            if agent in actions:
                if not self.action_space(agent).contains(actions[agent]):
                    raise UserError(
                        f"invalid action {actions[agent]!r} for {agent}: actions are integers 0-8"
                    )
                joint[i] = int(actions[agent])
        rewards, dones = self.game.step(joint[None])
        live = [i for i, agent in enumerate(self.possible_agents) if agent in self.agents]
        self._length[live] += 1
        self._reward[live] += rewards[0, live]
        truncated = self.game.num_steps >= self.time_limit
        observations = self._observations()
        agents = [self.possible_agents[i] for i in live]
        terminations = {agent: bool(dones[0, i]) for agent, i in zip(agents, live)}
        truncations = {agent: truncated and not terminations[agent] for agent in agents}
        cost = self._cost.step(self.game)
        infos = {agent: {**self._info(i), "cost": cost} for agent, i in zip(agents, live)}
        self.agents = [a for a in agents if not (terminations[a] or truncations[a])]
        if self.side_effects and not self.agents:
            rng = np.random.default_rng(int(self.np_random.integers(2**63)))
            score = side_effect_score(self.game, rng=rng)
            for info in infos.values():
                info["side_effects"] = score
        self._show()
        return (
            observations,
            {agent: float(rewards[0, i]) for agent, i in zip(agents, live)},
            terminations,
            truncations,
            infos,
        )

    def close(self) -> None:
        self.stream.close()


def make_parallel_env(
    task: str, levels: Any = None, workers: int = 0, **kwargs: Any
) -> SafeLifeParallelEnv:
    """The env of a multi-agent task (a key of :data:`MULTI_AGENT_TASKS`): new procedural
    levels of the task at every reset, or ``levels`` (a file, folder or list) instead.

    :param workers: processes generating procedural levels ahead.
    :param kwargs: the options of :class:`SafeLifeParallelEnv`.
    """
    from safelife_rl.procgen import ProceduralLevels

    if task not in MULTI_AGENT_TASKS:
        raise UserError(f"unknown multi-agent task {task!r}; known: {', '.join(MULTI_AGENT_TASKS)}")
    if levels is not None:
        if workers:
            raise UserError("workers= only applies to procedural levels, not to levels=...")
        return SafeLifeParallelEnv(levels, **kwargs)
    sampler = ProceduralLevels(task, workers=workers, multi_agent=True)
    if not isinstance(sampler.params["agents"], list):
        raise UserError(f"{task}: the agents of a task's env must be a fixed list")
    return SafeLifeParallelEnv(sampler, n_agents=len(sampler.params["agents"]), **kwargs)


@dataclass(frozen=True)
class MultiAgentTask:
    """A multi-agent task's constructors, as a PettingZoo env module has them.

    ``parallel_env(**kwargs)``: its :class:`SafeLifeParallelEnv` (kwargs of
    :func:`make_parallel_env`); ``env(**kwargs)``: the same as a PettingZoo AEC env (agents act
    in turn), through PettingZoo's ``parallel_to_aec``.
    """

    task: str

    @property
    def name(self) -> str:
        return MULTI_AGENT_TASKS[self.task]

    def parallel_env(self, **kwargs: Any) -> SafeLifeParallelEnv:
        return make_parallel_env(self.task, **kwargs)

    def env(self, **kwargs: Any) -> AECEnv:
        return parallel_to_aec(self.parallel_env(**kwargs))


build_coop_v0 = MultiAgentTask("build-coop")
build_compete_v0 = MultiAgentTask("build-compete")
build_parallel_v0 = MultiAgentTask("build-parallel")
asym1_v0 = MultiAgentTask("asym1")
asym2_v0 = MultiAgentTask("asym2")
asym1_pretrain_cyanonly_v0 = MultiAgentTask("asym1-pretrain-cyanonly")
asym1_pretrain_redonly_v0 = MultiAgentTask("asym1-pretrain-redonly")
