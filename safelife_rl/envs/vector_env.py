"""SafeLife as a Gymnasium ``VectorEnv`` whose games live on a torch device.

:class:`SafeLifeVectorEnv` plays ``num_envs`` SafeLife episodes as one :class:`.TorchGame`:
boards, observations, rewards and dones stay tensors on the device, finished envs restart in
the same step, and the training wrappers (:mod:`safelife_rl.envs.wrappers`) are applied in
batch by :mod:`.torch_wrappers`. Each env plays exactly the episodes a
:class:`~safelife_rl.envs.env.SafeLifeEnv` under those wrappers plays on the same levels with the
same actions (``tests/safelife/test_vector_env.py``), apart from the spawners' random numbers,
which come from the batch's torch generator.

The registered ids make it with ``gymnasium.make_vec``::

    envs = gymnasium.make_vec("safelife_rl/PruneStill-v1", num_envs=4096,
                              vectorization_mode="vector_entry_point", device="cuda",
                              bank={"size": 1000}, training_wrappers=WRAPPERS)

``training_wrappers`` is a wrapper config as in ``safelife_rl/conf/wrappers/safelife.yaml`` (name ->
``{"_target_": ..., settings}``, innermost first, ``None`` skips one).

**Without stopping.** A step is one pure function of tensors whose shapes never change
(:func:`.vector_step.step_state` of the env's frozen params, its typed state and the scheduled
tensors): the actions, the board and goal update, exits and points
(:func:`~safelife_rl.engine.torch_game.play`), the wrappers' rules (:mod:`.torch_wrappers`),
time limits, restarts and the observation. The levels live on the
device (:class:`~safelife_rl.engine.torch_levels.LevelTensors`: a fixed list, or a level bank
in all its symmetric variants); an env that ends draws its next level, symmetry and
translation from :mod:`~safelife_rl.engine.torch_random` and replaces its game by a masked
``torch.where``. Nothing reads a value back to the host, so the step compiles with
``torch.compile(fullgraph=True)`` (``compile=True``) and runs without a sync (counted by
:mod:`safety_rl_common.torch_counts` in the tests), side effects on or off. With
``side_effects=True`` each env also advances its inaction baseline (the level's first board
without the agent) in the step and keeps its last measured episode's boards; the scores (two
1000-step samples on the device, earth mover's distances on the CPU) are computed when read,
once per rollout (:meth:`SafeLifeVectorEnv.side_effect_reports`). Action checks of device
tensors leave the device only when asked (``check_actions=True``; else invalid actions are
remembered on the device and reported by :meth:`SafeLifeVectorEnv.check_actions`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from torch.utils._pytree import tree_map

from safelife_rl.engine.symmetry import transform_level
from safelife_rl.engine.torch_levels import LevelTensors
from safelife_rl.engine.torch_rules import N_ACTIONS, check_action_dtype, invalid_actions
from safelife_rl.engine.torch_side_effects import scores_of_boards
from safelife_rl.envs.env import JsonSafeSpec, SafeLifeEnv
from safelife_rl.envs.torch_wrappers import RULES
from safelife_rl.envs.vector_conventions import check_action_batch
from safelife_rl.envs.vector_state import State, StepParams
from safelife_rl.envs.vector_step import (
    StepOutputs,
    VectorEnvParams,
    observe,
    start_state,
    step_state,
)
from safelife_rl.envs.wrappers import (
    ExitCurriculum,
    ScheduledWrapper,
    SideEffectPenalty,
    build_wrappers,
    check_penalty,
)
from safety_rl_common.errors import UserError

# Rough peak bytes a step takes per board cell (the board update's packed int64 neighbourhood
# sums, the observations' exit search, scoring) and per observed cell and channel; used only to
# refuse batches far too large for the device, with a margin for the caching allocator.
_BYTES_PER_CELL = 200
_BYTES_PER_VIEW_CELL = 48


#: what ``compile`` may be: eager, compiled, compiled and replayed as CUDA graphs
COMPILE_MODES = (False, True, "cudagraphs")


def torch_device(device: torch.device | str) -> torch.device:
    """``device`` as a torch device that can hold tensors here, or a :class:`UserError`."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:
        raise UserError(f"unknown torch device {device!r}: {error}") from error
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as error:
        raise UserError(f"torch device {str(device)!r} is not available here: {error}") from error
    return device


def free_memory(device: torch.device) -> int | None:
    """Bytes free on ``device`` (the host's available memory for ``cpu``), or ``None`` if
    torch cannot tell."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type == "cpu" and hasattr(os, "sysconf"):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def bytes_per_env(board_shape: tuple[int, int], view_shape: tuple[int, int], channels: int) -> int:
    """A rough upper estimate of the device memory one env takes while stepping."""
    return board_shape[0] * board_shape[1] * _BYTES_PER_CELL + view_shape[0] * view_shape[1] * (
        _BYTES_PER_VIEW_CELL + channels
    )


def _wrapper_chain(env: gym.Env, configs: Mapping[str, Any] | None) -> list[gym.Wrapper]:
    """The wrappers of ``configs`` built around ``env`` (innermost first); a
    :class:`UserError` names those the device path cannot apply."""
    chain = build_wrappers(env, configs)
    unsupported = [
        f"{name} ({type(w).__module__}.{type(w).__qualname__})"
        for name, w in chain.items()
        if type(w) not in RULES and type(w) is not gym.wrappers.TimeLimit
    ]
    if unsupported:
        supported = ", ".join(sorted(c.__name__ for c in RULES)) + ", TimeLimit"
        raise UserError(
            f"the device vector env cannot apply the wrapper(s) "
            f"{', '.join(unsupported)}; it applies {supported}"
        )
    return list(chain.values())


class PendingSideEffects:
    """``info["final_info"]["side_effects"]`` of a :class:`SafeLifeVectorEnv` with side
    effects: the episodes measured (``info["final_info"]["_side_effects"]``) are scored when
    read, not in the step that ends them."""

    def __init__(self, env: SafeLifeVectorEnv):
        self.env = env

    def read(self) -> dict[int, dict[str, list[float]]]:
        """:meth:`SafeLifeVectorEnv.side_effect_reports`: each env's last measured episode's
        report since the last read, by env index."""
        return self.env.side_effect_reports()


def _compile_options(cuda_graphs: bool) -> dict[str, bool]:
    """Inductor's options for the step: ``reduce-overhead``'s CUDA graphs if asked, and no
    fused multiply-adds, which left the float64 returns 1-4e-15 off eager's on an H100
    (docs/speed.md, "GPU figures")."""
    options = {"triton.cudagraphs": cuda_graphs}
    if hasattr(torch._inductor.config, "emulate_precision_casts"):
        options["emulate_precision_casts"] = True
    return options


class SafeLifeVectorEnv(JsonSafeSpec, VectorEnv):
    """``num_envs`` SafeLife envs stepped together on a torch device.

    :param env: the single env whose levels (a list, shuffled or not, or a level bank), view,
        channels, ``time_limit``, white goals and side-effect setting every env plays; it is
        never stepped itself.
    :param num_envs: number of envs.
    :param device: torch device of the games (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...).
    :param training_wrappers: wrapper configs (see the module docstring): movement bonus, exit
        bonus, impact penalty, exit curriculum and ``gymnasium.wrappers.TimeLimit``.
    :param compile: ``True``: step with ``torch.compile(step_state, fullgraph=True)``; the
        compiled and the eager step give the same results bit for bit (the first steps take the
        compile time: about a minute on a CPU). ``"cudagraphs"`` (CUDA only): also replay the
        compiled step as a CUDA graph (``mode="reduce-overhead"``: one launch per step); its
        outputs are copied out of the graph's memory, so they stay valid after the next step.
    :param check_actions: check every step's actions given as a tensor at once (a sync on a
        GPU); else an invalid action is remembered on the device and :meth:`check_actions`
        raises for it (the device algorithms call it once per rollout). Actions given as a list
        or an array are always checked on the host.
    :param groups: independent blocks of ``num_envs // groups`` consecutive envs, one per member
        of a population (:mod:`safelife_rl.training.population`): each block plays as a vector
        env of its size alone would, with its own seed (``reset(seed=[s, ...])``, one per
        block), level order and impact penalty (:meth:`set_group_penalties`); env ``k`` is
        env ``k % (num_envs // groups)`` of its block.

    **Spaces.** ``single_observation_space`` and ``single_action_space`` are the env's;
    observations come back as uint8 tensors ``(num_envs,) + view + (channels,)`` on ``device``,
    rewards as float32 (summed in float64 as the wrappers do), terminations and truncations as
    bool tensors; actions may be a tensor, an array or a list of ``num_envs`` integers 0-8.

    **Autoreset** (:attr:`AutoresetMode.SAME_STEP`): an env whose episode ends restarts in the
    same step; the step returns its new first observation, and ``info["final_obs"]`` holds
    every env's observation before the restarts (valid where ``info["_final_obs"]``).

    **Levels.** A level list is played in order: the first reset gives env ``i`` level ``i``,
    and envs that restart in a step take the next levels in the order of their index. With
    ``shuffle``, or from a level bank, env ``k``'s ``e``-th episode draws its level (and from a
    bank its symmetry and translation) from :mod:`~safelife_rl.engine.torch_random`'s numbers of
    the seed, ``k`` and ``e``. ``reset(seed=s)`` restarts the level order and seeds all
    randomness (the spawners' too).

    **Episode statistics**, in ``info["final_info"]`` at every step (valid where
    ``info["_final_info"]``, the envs that ended): tensors ``length``, ``reward`` (unshaped
    total), ``success``, ``points``, ``available_points``, ``required_points``,
    ``performance``, ``level`` (an index into :attr:`level_names`), ``episode`` (``{"r":
    shaped total, "l": length}``), all as the single env and its wrappers report them.

    **Side effects** (``side_effects=True``): ``info["final_info"]["_side_effects"]`` marks the
    envs whose episodes the single env would score (when it terminates or reaches its
    ``time_limit``, not at a shorter outer ``TimeLimit``), and ``["side_effects"]`` is a
    :class:`PendingSideEffects`: its ``read()`` (:meth:`side_effect_reports`) scores them, the
    last such episode of each env since the previous read. Read once per rollout: an env whose
    several episodes end between two reads has only its last one scored.

    **Cost**, ``info["cost"]`` at every step (zeros at a reset): float64 ``(num_envs,)``, each env's
    step cost as
    :class:`~safelife_rl.envs.env.SafeLifeEnv` reports it (:func:`.torch_wrappers.step_cost`).

    **Params and state.** The step (:mod:`.vector_step`, :meth:`step_state`) reads three things:
    :attr:`env_params`, a frozen :class:`~.vector_step.VectorEnvParams` read once from ``env``
    and the wrappers here (levels, limits, view, rules' settings: the compiled step specialises
    on them); :attr:`state`, the :class:`~.vector_state.State` it steps; and :attr:`params`,
    the :class:`~.vector_state.StepParams` tensors (seed, impact penalty, curriculum fraction)
    that change without a recompile. The live ``env`` and wrapper ``chain`` stay only for the
    host's work: the schedules (:meth:`set_training_steps`, :meth:`set_group_penalties`,
    :meth:`group_penalty`), the levels the side-effect reports start from, and closing.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "autoreset_mode": AutoresetMode.SAME_STEP,
        "render_modes": [],
    }

    def __init__(
        self,
        env: SafeLifeEnv,
        num_envs: int,
        device: torch.device | str = "cpu",
        training_wrappers: Mapping[str, Any] | None = None,
        compile: bool | str = False,
        check_actions: bool = False,
        groups: int = 1,
    ):
        if compile not in COMPILE_MODES:
            raise UserError(f"compile must be one of {COMPILE_MODES}, got {compile!r}")
        if not isinstance(env, SafeLifeEnv):
            raise UserError(f"SafeLifeVectorEnv plays SafeLife envs, got {env!r}")
        if (
            isinstance(num_envs, bool)
            or not isinstance(num_envs, (int, np.integer))
            or num_envs < 1
        ):
            raise UserError(f"num_envs must be a positive integer, got {num_envs!r}")
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
            raise UserError(f"groups must be a positive integer, got {groups!r}")
        if num_envs % groups:
            raise UserError(f"num_envs={num_envs} does not split into {groups} equal groups")
        if env.render_mode is not None:
            raise UserError(
                "the device vector env does not render; leave render_mode unset "
                f"(got {env.render_mode!r})"
            )
        self.env = env
        self.num_envs = int(num_envs)
        self.group_penalties: list[float] | None = None
        self.device = torch_device(device)
        if compile == "cudagraphs" and self.device.type != "cuda":
            raise UserError(
                f"compile='cudagraphs' replays CUDA graphs, which need a CUDA device; "
                f"got device={self.device} (use compile=True there)"
            )
        self.chain = _wrapper_chain(env, training_wrappers)
        self.env_params = VectorEnvParams.of(env, self.chain, self.num_envs, groups, self.device)
        self._check_memory()
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(env.observation_space, self.num_envs)
        self.action_space = batch_space(env.action_space, self.num_envs)
        self.render_mode = None
        self.check_every_step = check_actions
        self.state: State | None = None
        self.params: StepParams = {}
        self.cuda_graphs = compile == "cudagraphs"
        self.pending_side_effects = PendingSideEffects(self)
        self._group_seeds: list[int] | None = None  # of the last reset, one per group
        self._kept_state: State | None = None  # keep_state's
        self._step = self.step_state
        if compile:
            self._step = torch.compile(
                self.step_state,
                fullgraph=True,
                dynamic=False,
                options=_compile_options(self.cuda_graphs),
            )
        self._set_params()

    @property
    def levels(self) -> LevelTensors:
        """The levels every env plays, on the device."""
        return self.env_params.levels

    @property
    def groups(self) -> int:
        return self.env_params.groups

    @property
    def group_size(self) -> int:
        return self.env_params.group_size

    @property
    def episode_limit(self) -> int:
        """The most steps an episode lasts: the env's ``time_limit`` or a shorter outer
        ``TimeLimit``'s (a time limit cuts an env's episodes at least this many steps apart)."""
        p = self.env_params
        return min(p.time_limit, p.max_episode_steps or p.time_limit)

    @property
    def level_names(self) -> list[str]:
        """The name of each level index of ``info["final_info"]["level"]``."""
        return self.levels.names

    def _check_memory(self) -> None:
        p = self.env_params
        board_shape = p.levels.shape
        one = bytes_per_env(board_shape, p.view_shape, len(p.channels))
        need = self.num_envs * one
        free = free_memory(self.device)
        if free is not None and need > free:
            most = free // one
            raise UserError(
                f"num_envs={self.num_envs} envs of {board_shape[0]}x{board_shape[1]} boards need "
                f"about {need / 2**30:.1f} GiB on {self.device}, which has "
                f"{free / 2**30:.1f} GiB free; use at most about {most} envs"
            )

    def set_group_penalties(self, penalties: Sequence[float]) -> None:
        """Give each group its own impact penalty (in place of the penalty wrapper's
        ``penalty``; its ramp still applies)."""
        if not any(isinstance(w, SideEffectPenalty) for w in self.chain):
            raise UserError("group penalties need the side_effect_penalty wrapper in the chain")
        if len(penalties) != self.groups:
            raise UserError(f"need one penalty per group ({self.groups}), got {len(penalties)}")
        self.group_penalties = [check_penalty(p) for p in penalties]
        self._set_params()

    def group_penalty(self, group: int) -> float:
        """Group ``group``'s impact penalty now (its own penalty under the wrapper's ramp)."""
        wrapper = [w for w in self.chain if isinstance(w, SideEffectPenalty)][-1]
        penalty = (self.group_penalties or [wrapper.penalty] * self.groups)[group]
        return penalty * wrapper.ramp(wrapper.training_steps) if penalty else 0.0

    def _set_params(self) -> None:
        """The scheduled values as tensors of the step (copied to the device only here)."""
        penalty = [w for w in self.chain if isinstance(w, SideEffectPenalty)]
        fraction = [w.ramp(w.training_steps) for w in self.chain if isinstance(w, ExitCurriculum)]
        values: dict[str, float | list[float]] = {
            "penalty": penalty[-1].coefficient() if penalty else 0.0,
            "fraction": fraction[-1] if fraction else 1.0,
        }
        if self.group_penalties is not None:
            values["penalty"] = [
                self.group_penalty(g) for g in range(self.groups) for _ in range(self.group_size)
            ]
        for name, value in values.items():
            self._set_param(name, torch.tensor(value, dtype=torch.float64))

    def _set_param(self, name: str, value: torch.Tensor) -> None:
        """A step param: written into its tensor where it has one of that shape and type (a
        captured rollout reads it there, :meth:`keep_state`), else a new one on the device."""
        old = self.params.get(name)
        if old is not None and old.shape == value.shape and old.dtype == value.dtype:
            old.copy_(value)
        else:
            self.params = {**self.params, name: value.to(self.device)}

    def keep_state(self) -> None:
        """The state the step reads written into the tensors of the state this env had at
        its first call (each tensor that is not already one of them), which become its state
        again: a rollout captured as one CUDA graph reads the state there at every replay
        (:mod:`safelife_rl.training.device.graphs`); in the rollout's body the copies are
        part of the graph. Before the first reset, nothing to keep."""
        if self.state is None:
            return
        kept = self._kept_state
        if kept is None or kept.keys() != self.state.keys():
            self._kept_state = self.state
            return
        for name, value in self.state.items():
            if value is not kept[name]:
                kept[name].copy_(value)
        self.state = kept

    def step_state(self, state: State, actions: torch.Tensor, params: StepParams) -> StepOutputs:
        """:func:`~safelife_rl.envs.vector_step.step_state` of this env's :attr:`env_params`
        (what ``compile`` compiles)."""
        return step_state(self.env_params, state, actions, params)

    # -- the Gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Restart every env; a seed restarts the level order and seeds all randomness (with
        ``groups``, a list of one seed per group seeds each group as its own vector env's seed
        would; one seed seeds them all from one stream)."""
        if options:
            raise UserError(f"the device vector env takes no reset options, got {options!r}")
        seeds = seed if isinstance(seed, Sequence) else [seed]
        if isinstance(seed, Sequence) and len(seeds) != self.groups:
            raise UserError(f"need one seed per group ({self.groups}), got {len(seeds)}")
        for s in seeds:
            if s is not None and (isinstance(s, bool) or not isinstance(s, (int, np.integer))):
                raise UserError(f"seeds must be integers, got {s!r}")
        self._group_seeds = None
        if len(seeds) > 1:
            streams = [seeding.np_random(int(s))[0] for s in seeds]
            self._np_random, self._np_random_seed = streams[0], int(seeds[0])
            self._group_seeds = [int(s) for s in seeds]
        else:
            if seed is not None:
                self._np_random, self._np_random_seed = seeding.np_random(int(seeds[0]))
            streams = [self.np_random] * self.groups
        group_seeds = [int(stream.integers(2**31)) for stream in streams]
        self._set_param(
            "seed",
            torch.tensor(group_seeds[0])
            if self.groups == 1
            else torch.tensor([s for s in group_seeds for _ in range(self.group_size)]),
        )
        self.state = start_state(self.env_params, self.params)
        cost = torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)
        return observe(self.env_params, self.state), {"cost": cost}

    def _actions(self, actions: torch.Tensor | np.ndarray | Sequence[int]) -> torch.Tensor:
        on_host = not isinstance(actions, torch.Tensor)
        if on_host:
            actions = np.asarray(actions)
        check_action_batch(tuple(actions.shape), self.num_envs)
        if on_host:
            if actions.dtype.kind not in "iu":
                raise ValueError(f"actions must be integers 0-8, got dtype {actions.dtype}")
            bad = (actions < 0) | (actions >= N_ACTIONS)
            if bad.any():
                raise ValueError(f"invalid action {actions[bad][0]}: actions are integers 0-8")
        actions = torch.as_tensor(actions, device=self.device)
        check_action_dtype(actions)
        if self.check_every_step and not on_host and bool(invalid_actions(actions)):
            self.check_actions(actions)
        return actions.to(torch.int64)

    def check_actions(self, actions: torch.Tensor | None = None) -> None:
        """Raise ``ValueError`` if an invalid action was given since the last reset (a read
        of one device value)."""
        if actions is not None:
            bad = (actions < 0) | (actions >= N_ACTIONS)
            raise ValueError(f"invalid action {int(actions[bad][0])}: actions are integers 0-8")
        if self.state is not None and bool(self.state["invalid"]):
            raise ValueError(
                "an invalid action was given since the last reset: actions are "
                "integers 0-8 (check_actions=True finds the step)"
            )

    def step(
        self, actions: torch.Tensor | np.ndarray | Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        actions = self._actions(actions)
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        outputs = self._step(self.state, actions, self.params)
        if self.cuda_graphs:  # the next replay writes over the graph's outputs
            outputs = tree_map(torch.clone, outputs)
        self.state, observations, rewards, terminated, truncated, final_obs, stats = outputs
        ended = terminated | truncated
        final_info = {
            key: stats[key]
            for key in (
                "length",
                "reward",
                "success",
                "points",
                "available_points",
                "required_points",
                "performance",
                "level",
                "cost",
            )
        }
        final_info["episode"] = {
            "r": stats["return"],
            "l": stats["length"],
            "_r": ended,
            "_l": ended,
        }
        for key in list(final_info):
            final_info[f"_{key}"] = ended
        if self.env_params.side_effects:
            final_info["side_effects"] = self.pending_side_effects
            final_info["_side_effects"] = stats["measured"]
        infos = {
            "final_obs": final_obs,
            "_final_obs": ended,
            "cost": stats["cost"],
            "final_info": final_info,
            "_final_info": ended,
        }
        return observations, rewards, terminated, truncated, infos

    def side_effect_reports(self, samples: int = 1000) -> dict[int, dict[str, list[float]]]:
        """The side-effect reports of the episodes measured since the last call (the last one of
        each env, if several ended), by env index, and forget them: the single env's
        ``info["side_effects"]`` (``{cell name: [side effect, inaction total]}``), bit for bit on
        levels without spawners. Host work, for all envs at once: read it once per rollout (the
        device algorithms do, through :class:`PendingSideEffects`), not at every step.
        """
        if not self.env_params.side_effects:
            raise UserError("side-effect reports need side_effects=True in the env")
        if self.state is None:
            return {}
        state = self.state
        index = state["scored"].nonzero()[:, 0]
        self.state = {**state, "scored": torch.zeros_like(state["scored"])}
        if not len(index):
            return {}
        variant = state["scored_variant"][index]
        source = self.env.levels if self.env.sampler is None else self.env.sampler.levels
        turns = self.levels.symmetries
        starts = np.stack(
            [
                transform_level(source[v // len(turns)], turns[v % len(turns)], tuple(shift)).board
                for v, shift in zip(variant.tolist(), state["scored_shift"][index].tolist())
            ]
        )
        seed = int(self.np_random.integers(2**63)) if self.levels.spawning else None
        reports = scores_of_boards(
            starts,
            state["scored_inaction"][index],
            state["scored_boards"][index],
            self.levels.spawn_prob[variant],
            samples,
            seed,
        )
        return dict(zip(index.tolist(), reports))

    # -- the training schedule ----------------------------------------------------------------

    def set_training_steps(self, steps: float) -> dict[str, float]:
        """Tell the scheduled wrappers (impact penalty, exit curriculum) the training step count,
        as :meth:`ScheduledWrapper.set_training_steps
        <safelife_rl.envs.wrappers.ScheduledWrapper.set_training_steps>` does for one env, and
        move the step's scheduled values to the device.

        :returns: the scheduled values now in force, by name (empty without such wrappers).
        """
        for wrapper in reversed(self.chain):
            if isinstance(wrapper, ScheduledWrapper):
                values = wrapper.set_training_steps(steps)
                self._set_params()
                return values
        return {}

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """One seed per env, as Gymnasium's vector envs give them: the seed its group was
        reset with (a group's envs draw from one stream, env ``k`` by ``k`` and its episode;
        one seed for all groups seeds them all)."""
        seeds = self._group_seeds or [VectorEnv.np_random_seed.fget(self)] * self.groups
        return tuple(seed for seed in seeds for _ in range(self.group_size))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """One result per env, as ``SyncVectorEnv.call`` gives (all envs share one wrapper
        chain)."""
        attribute = getattr(self, name)
        result = attribute(*args, **kwargs) if callable(attribute) else attribute
        return (result,) * self.num_envs

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """One value per env, as ``SyncVectorEnv.get_attr`` gives (:meth:`call`)."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` for every env: the envs are one batch, so ``values`` is one value, or
        one per env all equal."""
        if isinstance(values, (list, tuple)):
            if len(values) != self.num_envs or any(v != values[0] for v in values):
                raise UserError(
                    f"the device vector env's {self.num_envs} envs are one batch: set_attr "
                    f"takes one value for all, got {values!r}"
                )
            values = values[0]
        setattr(self, name, values)

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()


def make_task_vector_env(
    num_envs: int,
    task: str,
    device: torch.device | str,
    training_wrappers: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    compile: bool | str = False,
    check_actions: bool = False,
    groups: int = 1,
    **kwargs: Any,
) -> VectorEnv:
    """A :class:`SafeLifeVectorEnv` of ``num_envs`` envs of
    :func:`~safelife_rl.envs.registration.make_task_env` ``(task, **kwargs)`` (procedural levels,
    ``levels=``, ``bank=``, ``time_limit=``, ...) on ``device`` in ``groups`` (a population's
    members'); ``max_episode_steps`` adds a ``TimeLimit``. The registered ids' vector entry point
    (:func:`safelife_rl.envs.batched_vector_env.make_task_vector_env`) hands over here when a
    device is given."""
    from safelife_rl.envs.registration import make_task_env

    if max_episode_steps is not None:
        training_wrappers = {
            **(training_wrappers or {}),
            "max_episode_steps": {
                "_target_": "gymnasium.wrappers.TimeLimit",
                "max_episode_steps": max_episode_steps,
            },
        }
    return SafeLifeVectorEnv(
        make_task_env(task, **kwargs),
        num_envs,
        device,
        training_wrappers,
        compile=compile,
        check_actions=check_actions,
        groups=groups,
    )
